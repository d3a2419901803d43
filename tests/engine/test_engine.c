/* Engine tests on a tiny model the test suite generates (argv[1]), with the
 * KV cache of argv[2] (f32, f16 or int8; meson runs each): random workloads
 * under several scheduler settings give, token for token, the greedy
 * outputs each request gets when served alone; budgets hold; every request
 * finishes; prefix caching and preemption change nothing but the work done;
 * aborts and finishes in random order leak nothing (ASan).  A rounded cache
 * (f16, int8) leaves most greedy tokens as f32 gives them, and the default
 * cache is f16. */
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
static plume_kv_dtype g_kv; /* the cache every test below runs with */

typedef struct req {
    int32_t prompt[96];
    int32_t n_prompt;
    int32_t max_tokens;
    int32_t out[64];
    int32_t n_out;
} req;

#define N_REQ 20

typedef struct fixture {
    plume_model *m;
    req reqs[N_REQ];
} fixture;
_Static_assert(offsetof(fixture, m) == 0, "test_free_model_fixture frees the first member");

static uint64_t rng_state = 0x1234567;
static uint32_t rnd(uint32_t n) /* test-local LCG: deterministic workloads */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (test_load_model(g_model_path, &f->m)) {
        free(f);
        return -1;
    }
    /* a shared 40-token prefix for half the requests exercises prefix caching */
    int32_t shared[40];
    for (int j = 0; j < 40; j++)
        shared[j] = (int32_t)(32 + rnd(200));
    for (int i = 0; i < N_REQ; i++) {
        req *r = &f->reqs[i];
        r->n_prompt = 1 + (int32_t)rnd(70);
        r->max_tokens = 1 + (int32_t)rnd(40);
        for (int j = 0; j < r->n_prompt; j++)
            r->prompt[j] = (i % 2 == 0 && j < 40) ? shared[j] : (int32_t)(32 + rnd(200));
    }
    *state = f;
    return 0;
}

/* The engine's defaults with this run's KV cache. */
static plume_engine_params params(void)
{
    plume_engine_params p = plume_engine_defaults();
    p.kv_dtype = g_kv;
    return p;
}

/* Reference: each request alone on a fresh engine. */
static void test_reference_solo(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < N_REQ; i++) {
        plume_engine_params ep = params();
        ep.kv_max_tokens = 256;
        plume_engine *e = test_engine_new(f->m, ep);
        plume_request_params rp = test_request(f->reqs[i].max_tokens);
        int64_t id = test_add_tokens(e, f->reqs[i].prompt, (size_t)f->reqs[i].n_prompt, &rp);
        test_run_all(e);
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, id, &r), 0);
        assert_int_equal(r.finish, PLUME_FINISH_LENGTH);
        assert_int_equal((int)r.n_output, f->reqs[i].max_tokens);
        memcpy(f->reqs[i].out, r.output_ids, sizeof(int32_t) * r.n_output);
        f->reqs[i].n_out = (int32_t)r.n_output;
        plume_engine_free(e);
    }
}

/* All requests together under params; outputs must equal the solo ones. */
static plume_engine_stats serve_together(fixture *f, plume_engine_params ep)
{
    plume_error err = {0};
    plume_engine *e = test_engine_new(f->m, ep);
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        plume_request_params rp = test_request(f->reqs[i].max_tokens);
        ids[i] = plume_engine_add_tokens(e, f->reqs[i].prompt, (size_t)f->reqs[i].n_prompt, &rp,
                                         &err);
        assert_true(ids[i] >= 0);
        /* stagger arrivals: a few steps between some additions */
        if (i % 3 == 2)
            for (int k = 0; k < 2 && plume_engine_has_work(e); k++)
                assert_true(plume_engine_step(e, &err) >= 0);
    }
    test_run_all(e);
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, ids[i], &r), 0);
        assert_int_equal(r.finish, PLUME_FINISH_LENGTH);
        assert_int_equal((int)r.n_output, f->reqs[i].n_out);
        assert_memory_equal(r.output_ids, f->reqs[i].out, sizeof(int32_t) * r.n_output);
    }
    plume_engine_stats st = test_stats_within(e, &ep);
    plume_engine_free(e);
    return st;
}

static void test_batched_equals_solo(void **state)
{
    serve_together(*state, params());
}

static void test_small_budgets_chunked_prefill(void **state)
{
    plume_engine_params ep = params();
    ep.max_batched_tokens = 7;
    ep.max_num_seqs = 3;
    plume_engine_stats st = serve_together(*state, ep);
    assert_true(st.max_step_positions <= 7);
}

static void test_preemption(void **state)
{
    plume_engine_params ep = params();
    ep.block_size = 8;
    ep.kv_max_tokens = 120; /* 15 blocks: the largest request needs 14 */
    plume_engine_stats st = serve_together(*state, ep);
    assert_true(st.preemptions > 0);
}

static void test_preemption_without_prefix_cache(void **state)
{
    plume_engine_params ep = params();
    ep.block_size = 8;
    ep.kv_max_tokens = 120;
    ep.prefix_caching = false;
    plume_engine_stats st = serve_together(*state, ep);
    assert_true(st.preemptions > 0);
    assert_int_equal(st.cached_prompt_tokens, 0);
}

static void test_separate_batches(void **state)
{
    plume_engine_params ep = params();
    ep.mixed_batches = false;
    ep.max_batched_tokens = 32;
    serve_together(*state, ep);
}

static void test_prefix_cache_saves_prefill(void **state)
{
    fixture *f = *state;
    plume_engine_params ep = params();
    ep.max_num_seqs = 1; /* serial admission: later prompts find earlier prefixes */
    plume_engine_stats on = serve_together(f, ep);
    ep.prefix_caching = false;
    plume_engine_stats off = serve_together(f, ep);
    assert_true(on.cached_prompt_tokens >= 32); /* at least two 16-token blocks hit */
    assert_int_equal(off.cached_prompt_tokens, 0);
    assert_int_equal(on.prefill_tokens + on.cached_prompt_tokens, off.prefill_tokens);
}

/* A rounded cache (f16, int8) flips few greedy choices of the exact f32 one:
 * the solo outputs under g_kv against fresh f32 solo runs.  (That the
 * rounded cache's batched, chunked and preempted runs equal its solo runs
 * is what the tests above check, for each cache.)  Not run for f32. */
static void test_rounded_close_to_f32(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    int same = 0, total = 0;
    for (int i = 0; i < N_REQ; i++) {
        plume_engine_params ep = plume_engine_defaults();
        ep.kv_max_tokens = 256;
        ep.kv_dtype = PLUME_KV_F32;
        plume_engine *e = test_engine_new(f->m, ep);
        plume_request_params rp = test_request(f->reqs[i].max_tokens);
        int64_t id = plume_engine_add_tokens(e, f->reqs[i].prompt, (size_t)f->reqs[i].n_prompt,
                                             &rp, &err);
        test_run_all(e);
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, id, &r), 0);
        for (size_t t = 0; t < r.n_output; t++, total++)
            same += r.output_ids[t] == f->reqs[i].out[t];
        plume_engine_free(e);
    }
    print_message("%s cache: %d of %d greedy tokens as with f32\n", plume_kv_dtype_name(g_kv),
                  same, total);
    assert_true(same * 10 >= total * 8); /* the rounding flips few greedy choices */
}

/* The default cache is f16: the engine reports it, at half the bytes per
 * token of an f32 cache; int8 takes fewer still. */
static void test_default_kv_is_f16(void **state)
{
    fixture *f = *state;
    assert_int_equal(plume_engine_defaults().kv_dtype, PLUME_KV_F16);
    int64_t bytes[3];
    for (int dt = PLUME_KV_F32; dt <= PLUME_KV_INT8; dt++) {
        plume_engine_params ep = plume_engine_defaults();
        ep.kv_max_tokens = 64;
        if (dt != PLUME_KV_F16)
            ep.kv_dtype = (plume_kv_dtype)dt;
        plume_engine *e = test_engine_new(f->m, ep);
        assert_int_equal(plume_engine_kv_dtype(e), dt);
        bytes[dt] = plume_engine_kv_bytes_per_token(e);
        plume_engine_free(e);
    }
    assert_true(bytes[PLUME_KV_F16] > 0);
    assert_int_equal(bytes[PLUME_KV_F32], 2 * bytes[PLUME_KV_F16]);
    assert_true(bytes[PLUME_KV_INT8] < bytes[PLUME_KV_F16]);
}

static void test_abort_random_order(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine_params ep = params();
    ep.kv_max_tokens = 160;
    ep.block_size = 8;
    plume_engine *e = test_engine_new(f->m, ep);
    int64_t ids[N_REQ];
    bool aborted[N_REQ] = {0};
    for (int i = 0; i < N_REQ; i++) {
        plume_request_params rp = test_request(f->reqs[i].max_tokens);
        ids[i] = plume_engine_add_tokens(e, f->reqs[i].prompt, (size_t)f->reqs[i].n_prompt, &rp,
                                         &err);
        assert_true(ids[i] >= 0);
    }
    for (int step = 0; plume_engine_has_work(e); step++) {
        if (step % 3 == 1) {
            int i = (int)rnd(N_REQ);
            plume_request_result r;
            if (plume_engine_result(e, ids[i], &r) != 0) { /* already released */
                assert_int_equal(plume_engine_abort(e, ids[i]), -1);
                continue;
            }
            int rc = plume_engine_abort(e, ids[i]);
            assert_int_equal(rc, r.finish == PLUME_FINISH_NONE ? 0 : -1);
            if (rc == 0)
                aborted[i] = true;
        }
        if (step % 5 == 4) { /* release a finished request early */
            int i = (int)rnd(N_REQ);
            plume_request_result r;
            if (plume_engine_result(e, ids[i], &r) == 0 && r.finish != PLUME_FINISH_NONE &&
                !aborted[i]) {
                assert_memory_equal(r.output_ids, f->reqs[i].out, sizeof(int32_t) * r.n_output);
                plume_engine_release(e, ids[i]);
            }
        }
        if (plume_engine_has_work(e))
            assert_true(plume_engine_step(e, &err) >= 0);
    }
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r;
        if (plume_engine_result(e, ids[i], &r) != 0)
            continue; /* released above */
        if (aborted[i]) {
            assert_int_equal(r.finish, PLUME_FINISH_ABORT);
            /* what it produced before the abort is a prefix of the solo output */
            assert_memory_equal(r.output_ids, f->reqs[i].out, sizeof(int32_t) * r.n_output);
        } else {
            assert_int_equal(r.finish, PLUME_FINISH_LENGTH);
            assert_memory_equal(r.output_ids, f->reqs[i].out, sizeof(int32_t) * r.n_output);
        }
    }
    plume_engine_free(e); /* frees unreleased requests; ASan checks for leaks */
}

/* A request that finishes in the step its prompt completes still leaves its
 * prompt in the prefix cache. */
static void test_prefix_cached_when_finishing_at_once(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine_params ep = params();
    plume_engine *e = test_engine_new(f->m, ep);
    int32_t prompt[64];
    for (int i = 0; i < 64; i++)
        prompt[i] = 40 + i % 90;
    plume_request_params rp = test_request(1);
    for (int run = 0; run < 2; run++) {
        int64_t id = plume_engine_add_tokens(e, prompt, 64, &rp, &err);
        test_run_all(e);
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, id, &r), 0);
        assert_int_equal(r.n_cached_prompt, run == 0 ? 0 : 48); /* 3 full blocks; the last
                                                                   position is recomputed */
    }
    plume_engine_free(e);
}

static void test_rejects_what_cannot_fit(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine_params ep = params();
    ep.kv_max_tokens = 32;
    plume_engine *e = test_engine_new(f->m, ep);
    int32_t prompt[40] = {0};
    plume_request_params rp = test_request(4);
    assert_int_equal(plume_engine_add_tokens(e, prompt, 40, &rp, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_RANGE);
    assert_non_null(strstr(err.msg, "prompt has 40 tokens"));
    int32_t bad = 100000;
    assert_int_equal(plume_engine_add_tokens(e, &bad, 1, &rp, &err), -1);
    assert_non_null(strstr(err.msg, "vocabulary"));
    /* a request whose output would overflow the cache stops at the limit */
    int64_t id = plume_engine_add_tokens(e, prompt, 20, &rp, &err);
    rp.max_tokens = 100;
    int64_t id2 = plume_engine_add_tokens(e, prompt, 20, &rp, &err);
    assert_true(id >= 0 && id2 >= 0);
    test_run_all(e);
    plume_request_result r;
    plume_engine_result(e, id2, &r);
    assert_int_equal(r.finish, PLUME_FINISH_LENGTH);
    assert_int_equal((int)(r.n_prompt + r.n_output), 32);
    plume_engine_free(e);
}

static void test_stop_strings(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine_params ep = params();
    ep.kv_max_tokens = 256;
    plume_engine *e = test_engine_new(f->m, ep);
    plume_request_params rp = test_request(30);
    int64_t id = plume_engine_add_tokens(e, f->reqs[1].prompt, (size_t)f->reqs[1].n_prompt, &rp,
                                         &err);
    test_run_all(e);
    plume_request_result r;
    plume_engine_result(e, id, &r);
    char full[4096];
    size_t len = r.text_len < sizeof full - 1 ? r.text_len : sizeof full - 1;
    memcpy(full, r.text, len);
    full[len] = '\0';
    /* The tiny model and the prompt are fixed, so this is known text: a
     * shorter one means the engine stopped early, which is a failure. */
    if (len < 8)
        fail_msg("30 greedy tokens gave only %zu bytes of text", len);
    char stop[4];
    memcpy(stop, full + len / 2, 3);
    stop[3] = '\0';
    const char *stops[] = {stop};
    rp.stop = stops;
    rp.n_stop = 1;
    id = plume_engine_add_tokens(e, f->reqs[1].prompt, (size_t)f->reqs[1].n_prompt, &rp, &err);
    test_run_all(e);
    plume_engine_result(e, id, &r);
    assert_int_equal(r.finish, PLUME_FINISH_STOP);
    size_t at = (size_t)(strstr(full, stop) - full);
    assert_int_equal(r.text_len, at);
    assert_memory_equal(r.text, full, at);
    plume_engine_free(e);
}

int main(int argc, char **argv)
{
    int kv = -1;
    for (int i = PLUME_KV_F32; argc == 3 && i <= PLUME_KV_INT8; i++)
        if (strcmp(argv[2], plume_kv_dtype_name((plume_kv_dtype)i)) == 0)
            kv = i;
    if (kv < 0) {
        fprintf(stderr, "usage: test_engine TINY_MODEL.gguf f32|f16|int8\n");
        return 2;
    }
    g_model_path = argv[1];
    g_kv = (plume_kv_dtype)kv;
    struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_solo),
        cmocka_unit_test(test_batched_equals_solo),
        cmocka_unit_test(test_small_budgets_chunked_prefill),
        cmocka_unit_test(test_preemption),
        cmocka_unit_test(test_preemption_without_prefix_cache),
        cmocka_unit_test(test_separate_batches),
        cmocka_unit_test(test_prefix_cache_saves_prefill),
        cmocka_unit_test(test_default_kv_is_f16),
        cmocka_unit_test(test_abort_random_order),
        cmocka_unit_test(test_prefix_cached_when_finishing_at_once),
        cmocka_unit_test(test_rejects_what_cannot_fit),
        cmocka_unit_test(test_stop_strings),
        cmocka_unit_test(test_rounded_close_to_f32), /* last: not for f32 itself */
    };
    size_t n = sizeof tests / sizeof *tests - (g_kv == PLUME_KV_F32);
    return _cmocka_run_group_tests(argv[2], tests, n, setup, test_free_model_fixture);
}
