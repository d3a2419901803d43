/* The engine's KV connector glue (core/src/engine/kv_glue.c) with an
 * in-process test connector, on the tiny model (argv[1]):
 *   - a prompt computed by a producer engine and loaded by a consumer
 *     engine gives the consumer bit-identical first logits and the same
 *     greedy tokens as a colocated engine, for the default KV cache (f16,
 *     which the engines must report), f32 and int8, and prompts of 2 to 70
 *     tokens (one block, several, exact multiples), while local requests
 *     decode in the same steps;
 *   - the consumer's request waits (kv_waiting_remote) until its KV
 *     arrives; the producer keeps the finished request's blocks
 *     (kv_blocks_deferred) until the send is reported, then frees them;
 *   - an abort while waiting, a failed load (fail: an error naming
 *     on_failure; recompute: the colocated tokens) leave no block held
 *     (default cache).
 * The test connector copies blocks through host memory with the backend's
 * download/upload, as pd-ipc does through shared memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/engine.h"

#include "../support/engine_fixture.h"

static const char *g_model_path;

/* ---- the test connector: one store shared by a producer and a consumer */

#define MAX_XFER 64
typedef struct mem_xfer {
    char id[PLUME_KV_XFER_ID_MAX];
    unsigned char *data;
    int32_t n_blocks, n_tokens;
} mem_xfer;

typedef struct mem_store {
    mem_xfer x[MAX_XFER];
    int n;
} mem_store;

static mem_store g_store; /* test-local: the two engines' "network" */
static int g_send_delay;  /* get_finished calls before a save is reported sent */
static int g_arrive_after;/* start_load calls before a load's data "arrives" */

struct plume_kv_connector {
    plume_kv_role role;
    plume_kv_layout kv;
    int64_t pending[MAX_XFER];        /* producer: saved, not yet reported; consumer: loads */
    int wait[MAX_XFER];
    int n_pending;
    int64_t done[MAX_XFER], bad[MAX_XFER];
    const char *bad_msg[MAX_XFER];
    int n_done, n_bad;
    int64_t out_done[MAX_XFER], out_bad[MAX_XFER];
    const char *out_bad_msg[MAX_XFER];
};

static int mem_create(const plume_settings *s, plume_kv_role role, plume_kv_connector **out,
                      plume_error *err)
{
    (void)s, (void)err;
    *out = calloc(1, sizeof **out);
    (*out)->role = role;
    return 0;
}
static void mem_destroy(plume_kv_connector *c) { free(c); }
static int mem_register(plume_kv_connector *c, const plume_kv_layout *kv, plume_error *err)
{
    (void)err;
    c->kv = *kv;
    return 0;
}

static size_t block_bytes(const plume_kv_pool *p) { return (size_t)p->block_size * p->slot_stride; }

static size_t off_of(const plume_kv_pool *p, int32_t l, int32_t block)
{
    return (size_t)l * p->layer_stride + (size_t)block * (size_t)p->block_size * p->slot_stride;
}

static int mem_save(plume_kv_connector *c, const plume_kv_step_meta *m, plume_error *err)
{
    const plume_kv_pool *p = c->kv.pool;
    size_t bb = block_bytes(p);
    for (int32_t i = 0; i < m->n_saves; i++) {
        const plume_kv_req_blocks *r = &m->saves[i];
        mem_xfer *x = &g_store.x[g_store.n++];
        snprintf(x->id, sizeof x->id, "t%lld", (long long)r->req_id);
        x->n_blocks = r->n_blocks;
        x->n_tokens = r->n_tokens;
        x->data = malloc((size_t)p->n_layer * 2 * (size_t)r->n_blocks * bb);
        for (int32_t l = 0; l < p->n_layer; l++)
            for (int kv = 0; kv < 2; kv++)
                for (int32_t b = 0; b < r->n_blocks; b++)
                    if (c->kv.bvt->download(c->kv.b,
                                            x->data + (((size_t)l * 2 + (size_t)kv) *
                                                           (size_t)r->n_blocks + (size_t)b) * bb,
                                            kv ? p->v : p->k, off_of(p, l, r->block_ids[b]), bb,
                                            err))
                        return -1;
        c->pending[c->n_pending] = r->req_id;
        c->wait[c->n_pending++] = g_send_delay;
    }
    return 0;
}

static mem_xfer *find(const char *id)
{
    for (int i = 0; i < g_store.n; i++)
        if (strcmp(g_store.x[i].id, id) == 0)
            return &g_store.x[i];
    return NULL;
}

static int mem_start_load(plume_kv_connector *c, const plume_kv_step_meta *m, plume_error *err)
{
    const plume_kv_pool *p = c->kv.pool;
    size_t bb = block_bytes(p);
    for (int32_t i = 0; i < m->n_loads; i++) {
        const plume_kv_req_blocks *r = &m->loads[i];
        int k = 0;
        while (k < c->n_pending && c->pending[k] != r->req_id)
            k++;
        assert_true(k < c->n_pending); /* update_after_alloc came first */
        if (c->wait[k]-- > 0)
            continue; /* not yet arrived: the request keeps waiting */
        mem_xfer *x = find(r->xp->transfer_id);
        c->pending[k] = c->pending[--c->n_pending];
        c->wait[k] = c->wait[c->n_pending];
        if (!x) {
            c->bad_msg[c->n_bad] = "no such transfer";
            c->bad[c->n_bad++] = r->req_id;
            continue;
        }
        assert_true(x->n_tokens >= r->n_tokens && x->n_blocks >= r->n_blocks);
        for (int32_t l = 0; l < p->n_layer; l++)
            for (int kv = 0; kv < 2; kv++)
                for (int32_t b = 0; b < r->n_blocks; b++)
                    if (c->kv.bvt->upload(c->kv.b, kv ? p->v : p->k,
                                          off_of(p, l, r->block_ids[b]),
                                          x->data + (((size_t)l * 2 + (size_t)kv) *
                                                         (size_t)x->n_blocks + (size_t)b) * bb,
                                          bb, err))
                        return -1;
        c->done[c->n_done++] = r->req_id;
    }
    return 0;
}

static void mem_get_finished(plume_kv_connector *c, plume_kv_finished *out)
{
    memset(out, 0, sizeof *out);
    if (c->role == PLUME_KV_PRODUCER) {
        int n = 0;
        for (int k = 0; k < c->n_pending;)
            if (c->wait[k]-- <= 0) {
                c->out_done[n++] = c->pending[k];
                c->pending[k] = c->pending[--c->n_pending];
                c->wait[k] = c->wait[c->n_pending];
            } else {
                k++;
            }
        out->sent = c->out_done;
        out->n_sent = n;
        return;
    }
    memcpy(c->out_done, c->done, sizeof *c->done * (size_t)c->n_done);
    memcpy(c->out_bad, c->bad, sizeof *c->bad * (size_t)c->n_bad);
    memcpy(c->out_bad_msg, c->bad_msg, sizeof *c->bad_msg * (size_t)c->n_bad);
    out->received = c->out_done;
    out->n_received = c->n_done;
    out->failed = c->out_bad;
    out->failed_msg = c->out_bad_msg;
    out->n_failed = c->n_bad;
    c->n_done = c->n_bad = 0;
}

static int32_t mem_n_remote(plume_kv_connector *c, int64_t id, const plume_kv_transfer_params *xp,
                            int32_t n_prompt)
{
    (void)c, (void)id, (void)xp;
    return n_prompt;
}

static int mem_after_alloc(plume_kv_connector *c, int64_t id, const plume_kv_transfer_params *xp,
                           int32_t n, plume_error *err)
{
    (void)xp, (void)n, (void)err;
    c->pending[c->n_pending] = id;
    c->wait[c->n_pending++] = g_arrive_after;
    return 0;
}

static int mem_finished(plume_kv_connector *c, int64_t id, const plume_kv_transfer_params *xp,
                        bool done, plume_kv_transfer_params *out)
{
    if (c->role == PLUME_KV_CONSUMER) { /* forget a load in flight */
        for (int k = 0; k < c->n_pending; k++)
            if (c->pending[k] == id) {
                c->pending[k] = c->pending[--c->n_pending];
                c->wait[k] = c->wait[c->n_pending];
            }
        return 0;
    }
    if (!xp->do_remote_decode || !done)
        return 0;
    out->do_remote_prefill = true;
    snprintf(out->transfer_id, sizeof out->transfer_id, "t%lld", (long long)id);
    snprintf(out->remote_addr, sizeof out->remote_addr, "mem");
    return 1;
}

static const plume_kv_connector_vtable mem_vt = {
    .struct_size = sizeof(plume_kv_connector_vtable),
    .interface_version = PLUME_KV_CONNECTOR_INTERFACE_VERSION,
    .name = "mem",
    .create = mem_create,
    .destroy = mem_destroy,
    .register_kv = mem_register,
    .start_load = mem_start_load,
    .save = mem_save,
    .get_finished = mem_get_finished,
    .n_remote_tokens = mem_n_remote,
    .update_after_alloc = mem_after_alloc,
    .request_finished = mem_finished,
};

/* ---- helpers */

typedef struct fixture {
    plume_model *m;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (test_load_model(g_model_path, &f->m)) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static void store_reset(void)
{
    for (int i = 0; i < g_store.n; i++)
        free(g_store.x[i].data);
    memset(&g_store, 0, sizeof g_store);
}

static int teardown(void **state)
{
    fixture *f = *state;
    plume_model_free(f->m);
    free(f);
    store_reset();
    return 0;
}

/* KV_DEFAULT: the engine's default cache (f16), the dtype left as it is. */
#define KV_DEFAULT (-1)

static plume_engine *engine(fixture *f, int dt, int role, bool recompute)
{
    plume_engine_params p = plume_engine_defaults();
    if (dt != KV_DEFAULT)
        p.kv_dtype = (plume_kv_dtype)dt;
    p.kv_max_tokens = 2048;
    p.max_batched_tokens = 24; /* prompts run in several chunks */
    if (role) {
        p.kv_connector = &mem_vt;
        p.kv_role = (plume_kv_role)role;
        p.kv_recompute_on_failure = recompute;
    }
    plume_engine *e = test_engine_new(f->m, p);
    assert_int_equal(plume_engine_kv_dtype(e), dt == KV_DEFAULT ? PLUME_KV_F16 : dt);
    return e;
}

/* Steps e until it has no work (at most 10000 steps); returns the most
 * blocks any step left deferred (kept for a send) and the most requests any
 * step left waiting for remote KV. */
static plume_engine_load run(plume_engine *e)
{
    plume_error err = {0};
    plume_engine_load peak = {0};
    for (int i = 0; i < 10000 && plume_engine_has_work(e); i++) {
        if (plume_engine_step(e, &err) < 0)
            fail_msg("step: %s", err.msg);
        plume_engine_load l = plume_engine_get_load(e);
        if (l.kv_blocks_deferred > peak.kv_blocks_deferred)
            peak.kv_blocks_deferred = l.kv_blocks_deferred;
        if (l.kv_waiting_remote > peak.kv_waiting_remote)
            peak.kv_waiting_remote = l.kv_waiting_remote;
    }
    assert_false(plume_engine_has_work(e));
    return peak;
}

static void prompt_of(int32_t *ids, int32_t n, int seed)
{
    for (int32_t i = 0; i < n; i++)
        ids[i] = 32 + (int32_t)((i * 37 + seed * 11) % 200);
}

static void assert_clean(plume_engine *e)
{
    plume_engine_load l = plume_engine_get_load(e);
    assert_int_equal(l.kv_blocks_used, 0);
    assert_int_equal(l.kv_blocks_deferred, 0);
    assert_int_equal(l.kv_waiting_remote, 0);
}

/* One prompt through producer then consumer (with a local request decoding
 * alongside), against the colocated engine: same first logits, bit for
 * bit, and the same tokens. */
static void one_prompt(fixture *f, int dt, int32_t n)
{
    const int32_t nv = plume_model_n_vocab(f->m);
    store_reset(); /* transfer ids restart with each engine */
    int32_t ids[80], other[12];
    prompt_of(ids, n, n);
    prompt_of(other, 12, 99);
    float *want = malloc(sizeof(float) * (size_t)nv), *got = malloc(sizeof(float) * (size_t)nv);
    plume_request_params rp = plume_request_defaults();
    rp.max_tokens = 6;
    plume_error err = {0};
    /* colocated */
    plume_engine *c = engine(f, dt, 0, false);
    rp.first_logits = want;
    int64_t rc = plume_engine_add_tokens(c, ids, (size_t)n, &rp, &err);
    rp.first_logits = NULL;
    int64_t rc2 = plume_engine_add_tokens(c, other, 12, &rp, &err);
    run(c);
    plume_request_result want_r, want_o;
    assert_int_equal(plume_engine_result(c, rc, &want_r), 0);
    assert_int_equal(plume_engine_result(c, rc2, &want_o), 0);
    /* producer: the prompt with max_tokens 1, its blocks kept for the send */
    g_send_delay = 2;
    plume_engine *p = engine(f, dt, PLUME_KV_PRODUCER, false);
    plume_kv_transfer_params x = {.do_remote_decode = true};
    plume_request_params pp = rp;
    pp.max_tokens = 1;
    pp.kv_transfer = &x;
    int64_t rp_id = plume_engine_add_tokens(p, ids, (size_t)n, &pp, &err);
    assert_true(rp_id >= 0);
    assert_true(run(p).kv_blocks_deferred > 0);
    assert_clean(p);
    plume_request_result pr;
    assert_int_equal(plume_engine_result(p, rp_id, &pr), 0);
    assert_non_null(pr.kv_transfer);
    assert_true(pr.kv_transfer->do_remote_prefill);
    plume_kv_transfer_params got_x = *pr.kv_transfer;
    /* consumer: waits for the KV, then decodes; a local request alongside */
    g_arrive_after = 3;
    plume_engine *d = engine(f, dt, PLUME_KV_CONSUMER, false);
    plume_request_params dp = rp;
    dp.kv_transfer = &got_x;
    dp.first_logits = got;
    int64_t rd = plume_engine_add_tokens(d, ids, (size_t)n, &dp, &err);
    int64_t rd2 = plume_engine_add_tokens(d, other, 12, &rp, &err);
    assert_true(rd >= 0 && rd2 >= 0);
    assert_true(run(d).kv_waiting_remote > 0);
    assert_clean(d);
    plume_request_result dr, dr2;
    assert_int_equal(plume_engine_result(d, rd, &dr), 0);
    assert_int_equal(plume_engine_result(d, rd2, &dr2), 0);
    if (memcmp(want, got, sizeof(float) * (size_t)nv) != 0)
        fail_msg("prompt of %d tokens (%s KV): first logits differ from colocated", n,
                 dt == KV_DEFAULT ? "default" : plume_kv_dtype_name((plume_kv_dtype)dt));
    assert_int_equal(dr.n_output, want_r.n_output);
    assert_memory_equal(dr.output_ids, want_r.output_ids, sizeof(int32_t) * dr.n_output);
    assert_int_equal(dr2.n_output, want_o.n_output);
    assert_memory_equal(dr2.output_ids, want_o.output_ids, sizeof(int32_t) * dr2.n_output);
    assert_int_equal(dr.n_cached_prompt, 0); /* remote KV is not a prefix-cache hit */
    plume_engine_free(c);
    plume_engine_free(p);
    plume_engine_free(d);
    free(want);
    free(got);
}

static void test_identity(void **state)
{
    static const int32_t lens[] = {2, 15, 16, 17, 33, 48, 70};
    static const int dts[] = {KV_DEFAULT, PLUME_KV_F32, PLUME_KV_INT8};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
        for (size_t j = 0; j < sizeof dts / sizeof *dts; j++)
            one_prompt(*state, dts[j], lens[i]);
}

static void test_abort_and_failures(void **state)
{
    fixture *f = *state;
    int32_t ids[40];
    prompt_of(ids, 40, 3);
    plume_request_params rp = plume_request_defaults();
    rp.max_tokens = 4;
    plume_error err = {0};
    plume_kv_transfer_params x = {.do_remote_prefill = true, .transfer_id = "missing",
                                  .remote_addr = "mem"};
    rp.kv_transfer = &x;
    /* abort while waiting for the KV: its blocks come back */
    g_arrive_after = 1000;
    plume_engine *d = engine(f, KV_DEFAULT, PLUME_KV_CONSUMER, false);
    int64_t id = plume_engine_add_tokens(d, ids, 40, &rp, &err);
    assert_true(plume_engine_step(d, &err) >= 0);
    assert_int_equal(plume_engine_get_load(d).kv_waiting_remote, 1);
    assert_true(plume_engine_get_load(d).kv_blocks_used > 0);
    assert_int_equal(plume_engine_abort(d, id), 0);
    assert_clean(d);
    /* a failed load fails the request, loudly */
    g_arrive_after = 0;
    id = plume_engine_add_tokens(d, ids, 40, &rp, &err);
    run(d);
    plume_request_result r;
    assert_int_equal(plume_engine_result(d, id, &r), 0);
    assert_int_equal(r.finish, PLUME_FINISH_ERROR);
    assert_non_null(strstr(r.error, "no such transfer"));
    assert_non_null(strstr(r.error, "on_failure"));
    assert_clean(d);
    plume_engine_free(d);
    /* on_failure: recompute computes it here: the colocated tokens */
    plume_engine *c = engine(f, KV_DEFAULT, 0, false);
    plume_request_params cp = rp;
    cp.kv_transfer = NULL;
    int64_t cid = plume_engine_add_tokens(c, ids, 40, &cp, &err);
    run(c);
    plume_request_result want;
    assert_int_equal(plume_engine_result(c, cid, &want), 0);
    d = engine(f, KV_DEFAULT, PLUME_KV_CONSUMER, true);
    id = plume_engine_add_tokens(d, ids, 40, &rp, &err);
    run(d);
    assert_int_equal(plume_engine_result(d, id, &r), 0);
    assert_int_equal(r.finish, want.finish);
    assert_int_equal(r.n_output, want.n_output);
    assert_memory_equal(r.output_ids, want.output_ids, sizeof(int32_t) * r.n_output);
    assert_clean(d);
    /* transfer parameters the worker's role cannot serve are refused */
    plume_kv_transfer_params y = {.do_remote_decode = true};
    rp.kv_transfer = &y;
    assert_true(plume_engine_add_tokens(d, ids, 40, &rp, &err) < 0);
    assert_non_null(strstr(err.msg, "needs a prefill worker"));
    assert_true(plume_engine_add_tokens(c, ids, 40, &rp, &err) < 0);
    assert_non_null(strstr(err.msg, "no kv_connector"));
    plume_engine_free(c);
    plume_engine_free(d);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_and_failures, setup, teardown),
    };
    return test_main_on_model(argc, argv, "test_kv_glue TINY.gguf", &g_model_path, tests,
                              sizeof tests / sizeof *tests, NULL, NULL);
}
