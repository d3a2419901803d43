/* The engine's side of a KV connector (plume/kv_connector.h): the
 * waiting-for-remote-KV state of a decode worker's requests, the load point
 * before the forward and the save point after it, and the blocks of a
 * prefill worker's finished requests kept until their send is done
 * (deferred freeing).  engine.c calls in at create/free/add/step,
 * postprocess.c at finish; nothing here runs without a connector. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_internal.h"
#include "plume/struct_size.h"

/* A finished request's blocks, kept while its KV is being sent. */
typedef struct plume_kv_deferred {
    int64_t req_id;
    plume_block_table bt;
    int32_t n_tokens;
    int32_t *prompt;           /* a copy: the sequence may be released first */
    plume_kv_transfer_params xp;
    bool saved;                /* handed to the connector's save */
    bool saving;               /* in the save call of this step */
} plume_kv_deferred;

/* FNV-1a, for the model identity. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* What two workers must share to exchange KV: the architecture, sizes,
 * parameter count, weight bytes, quantization, the KV pool's shape and
 * every token's bytes (a different tokenizer means different prompts). */
static uint64_t model_id(const plume_model *m, const plume_kv_pool *pool)
{
    uint64_t h = 1469598103934665603ull;
    const char *arch = plume_model_arch(m), *q = plume_model_quant_method(m);
    h = fnv(h, arch ? arch : "", arch ? strlen(arch) + 1 : 1);
    h = fnv(h, q ? q : "", q ? strlen(q) + 1 : 1);
    int64_t v[] = {plume_model_n_vocab(m), plume_model_n_ctx_train(m), plume_model_n_params(m),
                   plume_model_weight_bytes(m), pool->n_layer, pool->n_head_kv, pool->head_dim};
    h = fnv(h, v, sizeof v);
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    char buf[256];
    for (int32_t id = 0; id < plume_model_n_vocab(m); id++) {
        int len = plume_token_bytes(tok, id, true, buf, sizeof buf);
        h = fnv(h, &len, sizeof len);
        if (len > 0 && (size_t)len <= sizeof buf)
            h = fnv(h, buf, (size_t)len);
    }
    return h;
}

int plume_kv_glue_create(plume_engine *e, plume_error *err)
{
    const plume_kv_connector_vtable *vt = e->p.kv_connector;
    if (!vt)
        return 0;
    const char *name = vt->name ? vt->name : "?";
    if (vt->interface_version != PLUME_KV_CONNECTOR_INTERFACE_VERSION ||
        !PLUME_HAS_MEMBER(plume_kv_connector_vtable, vt, request_finished) ||
        !vt->create || !vt->destroy || !vt->register_kv || !vt->start_load || !vt->save ||
        !vt->get_finished || !vt->n_remote_tokens || !vt->update_after_alloc ||
        !vt->request_finished)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv connector '%s' has interface version %u; plume expects version %d "
                         "with every required slot set: rebuild it against this plume's headers",
                         name, vt->interface_version, PLUME_KV_CONNECTOR_INTERFACE_VERSION);
    if (e->p.kv_role != PLUME_KV_PRODUCER && e->p.kv_role != PLUME_KV_CONSUMER)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv connector '%s' needs a role: prefill (producer) or decode (consumer)",
                         name);
    plume_struct_copy(&e->kvc_vt, sizeof e->kvc_vt, vt);
    if (vt->validate && e->p.kv_connector_settings &&
        vt->validate(e->p.kv_connector_settings, err))
        return plume_err_prefix(err, "kv_connector '%s'", name);
    if (vt->create(e->p.kv_connector_settings, e->p.kv_role, &e->kvc, err)) {
        e->kvc = NULL;
        return plume_err_prefix(err, "kv_connector '%s'", name);
    }
    plume_kv_layout lay = {&e->kv->pool, e->kv->bvt, e->kv->b, model_id(e->m, &e->kv->pool)};
    if (e->kvc_vt.register_kv(e->kvc, &lay, err))
        return plume_err_prefix(err, "kv_connector '%s'", name);
    return 0;
}

void plume_kv_glue_free(plume_engine *e)
{
    for (int32_t i = 0; i < e->n_deferred; i++) {
        plume_bm_release(e->sched.bm, &e->deferred[i].bt);
        plume_block_table_free(&e->deferred[i].bt);
        free(e->deferred[i].prompt);
    }
    free(e->deferred);
    e->deferred = NULL;
    e->n_deferred = 0;
    if (e->kvc)
        e->kvc_vt.destroy(e->kvc);
    e->kvc = NULL;
    plume_queue_free(&e->remote);
    free(e->kv_meta);
    e->kv_meta = NULL;
}

int plume_kv_glue_check_request(const plume_engine *e, const plume_request_params *p,
                                plume_error *err)
{
    const plume_kv_transfer_params *x = p->kv_transfer;
    if (!x || (!x->do_remote_decode && !x->do_remote_prefill))
        return 0;
    if (x->do_remote_decode && x->do_remote_prefill)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_transfer_params sets both do_remote_decode and do_remote_prefill; "
                         "a request is sent to a prefill worker with do_remote_decode, then to a "
                         "decode worker with what the prefill worker returned");
    plume_kv_role want = x->do_remote_decode ? PLUME_KV_PRODUCER : PLUME_KV_CONSUMER;
    if (!e->kvc || e->p.kv_role != want)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_transfer_params.%s needs a %s worker, but this worker has %s; "
                         "start it with a pipeline such as configs/pd-%s.yaml, or leave "
                         "kv_transfer_params out",
                         x->do_remote_decode ? "do_remote_decode" : "do_remote_prefill",
                         x->do_remote_decode ? "prefill" : "decode",
                         !e->kvc ? "no kv_connector"
                         : e->p.kv_role == PLUME_KV_PRODUCER ? "kv_connector role prefill"
                                                              : "kv_connector role decode",
                         x->do_remote_decode ? "prefill" : "decode");
    if (x->do_remote_prefill && (!x->transfer_id[0] || !x->remote_addr[0]))
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_transfer_params.do_remote_prefill needs transfer_id and "
                         "remote_addr: pass on the kv_transfer_params the prefill worker "
                         "returned");
    return 0;
}

bool plume_kv_glue_park(plume_engine *e, plume_seq *s)
{
    if (!e->kvc || e->p.kv_role != PLUME_KV_CONSUMER || !s->has_kv_xfer ||
        !s->kv_xfer.do_remote_prefill)
        return false;
    /* room was reserved by the caller */
    if (plume_queue_push_back(&e->remote, s))
        return false;
    s->status = PLUME_SEQ_WAITING_REMOTE_KV;
    return true;
}

/* The parked s goes to the waiting queue (loaded, or to compute locally). */
static void unpark(plume_engine *e, plume_seq *s)
{
    plume_queue_remove(&e->remote, s);
    s->status = PLUME_SEQ_WAITING;
    plume_queue_push_back(&e->sched.waiting, s); /* cannot fail: add reserves room for every
                                                    live request in waiting */
}

/* A load failed: fail the request loudly (default) or compute locally. */
static void load_failed(plume_engine *e, plume_seq *s, const char *why)
{
    plume_bm_release(e->sched.bm, &s->bt);
    s->n_computed = 0;
    s->kv_n_remote = 0;
    if (e->p.kv_recompute_on_failure) {
        fprintf(stderr,
                "plume: request %lld: loading its prompt KV failed (%s); computing the prompt "
                "here instead (kv_connector.on_failure: recompute)\n",
                (long long)s->id, why);
        s->has_kv_xfer = false;
        unpark(e, s);
        return;
    }
    char msg[600];
    snprintf(msg, sizeof msg,
             "loading the prompt's KV from the prefill worker failed: %s "
             "(kv_connector.on_failure: fail; set on_failure: recompute to compute it here "
             "instead)",
             why);
    free(s->error);
    s->error = strdup(msg);
    plume_seq_finish(s, PLUME_FINISH_ERROR);
    plume_engine_finish_drop(e, s);
}

static plume_seq *seq_of(plume_engine *e, int64_t id)
{
    return id >= 0 && id < e->n_ids ? e->by_id[id] : NULL;
}

/* Applies what the connector reports finished. */
static void take_finished(plume_engine *e)
{
    plume_kv_finished f = {0};
    e->kvc_vt.get_finished(e->kvc, &f);
    for (int32_t i = 0; i < f.n_sent; i++)
        for (int32_t j = 0; j < e->n_deferred; j++)
            if (e->deferred[j].req_id == f.sent[i]) {
                plume_bm_release(e->sched.bm, &e->deferred[j].bt);
                plume_block_table_free(&e->deferred[j].bt);
                free(e->deferred[j].prompt);
                e->deferred[j] = e->deferred[--e->n_deferred];
                break;
            }
    for (int32_t i = 0; i < f.n_received; i++) {
        plume_seq *s = seq_of(e, f.received[i]);
        if (!s || s->status != PLUME_SEQ_WAITING_REMOTE_KV)
            continue; /* aborted meanwhile */
        /* positions 0 .. kv_n_remote-1 hold the prefill worker's KV; the
         * scheduler admits it with them computed (its bt is not empty, so
         * no prefix match replaces them) and computes the rest */
        s->n_computed = s->kv_n_remote;
        unpark(e, s);
    }
    for (int32_t i = 0; i < f.n_failed; i++) {
        plume_seq *s = seq_of(e, f.failed[i]);
        if (s && s->status == PLUME_SEQ_WAITING_REMOTE_KV)
            load_failed(e, s, f.failed_msg && f.failed_msg[i] ? f.failed_msg[i] : "no reason");
    }
}

static int meta_reserve(plume_engine *e, int32_t n, plume_error *err)
{
    if (n <= e->kv_meta_cap)
        return 0;
    plume_kv_req_blocks *m = realloc(e->kv_meta, sizeof *m * (size_t)n);
    if (!m)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory building KV transfer metadata");
    e->kv_meta = m;
    e->kv_meta_cap = n;
    return 0;
}

int plume_kv_glue_before_step(plume_engine *e, plume_error *err)
{
    if (!e->kvc || e->p.kv_role != PLUME_KV_CONSUMER)
        return 0;
    /* blocks for newly parked requests, oldest first (no overtaking) */
    for (int32_t i = 0; i < e->remote.n; i++) {
        plume_seq *s = e->remote.items[i];
        if (s->kv_n_remote > 0)
            continue;
        int32_t n = e->kvc_vt.n_remote_tokens(e->kvc, s->id, &s->kv_xfer, s->n_prompt);
        if (n > s->n_prompt - 1) /* the last prompt position is computed here: its logits */
            n = s->n_prompt - 1;
        if (n <= 0) {
            unpark(e, s);
            i--;
            continue;
        }
        /* keep a block per queued or running sequence free, so that loads
         * parked here can never take the blocks the scheduler needs to
         * make progress (a step that can schedule nothing is an error) */
        int32_t reserve = e->sched.waiting.n + e->sched.running.n + 1;
        if (plume_bm_n_free(e->sched.bm) - plume_bm_blocks_for(e->sched.bm, n) < reserve ||
            plume_bm_ensure(e->sched.bm, &s->bt, n) != 0)
            break; /* no room yet: running requests free blocks as they finish */
        s->kv_n_remote = n;
        plume_error e2 = {0};
        if (e->kvc_vt.update_after_alloc(e->kvc, s->id, &s->kv_xfer, n, &e2)) {
            load_failed(e, s, e2.msg);
            i = -1; /* the queue changed: rescan */
        }
    }
    /* the load point: what arrived goes into its blocks */
    if (meta_reserve(e, e->remote.n, err))
        return -1;
    int32_t nl = 0;
    for (int32_t i = 0; i < e->remote.n; i++) {
        plume_seq *s = e->remote.items[i];
        if (s->kv_n_remote > 0)
            e->kv_meta[nl++] = (plume_kv_req_blocks){
                s->id,          &s->kv_xfer, s->bt.ids,
                plume_bm_blocks_for(e->sched.bm, s->kv_n_remote), s->kv_n_remote,
                s->tokens,      s->n_prompt};
    }
    if (nl > 0) {
        plume_kv_step_meta meta = {e->kv_meta, nl, NULL, 0};
        if (e->kvc_vt.start_load(e->kvc, &meta, err))
            return plume_err_prefix(err, "kv_connector '%s' start_load", e->kvc_vt.name);
    }
    take_finished(e);
    return 0;
}

int plume_kv_glue_after_step(plume_engine *e, bool idle, plume_error *err)
{
    if (!e->kvc)
        return 0;
    if (e->p.kv_role == PLUME_KV_PRODUCER && e->n_deferred > 0) {
        /* the save point: finished requests' KV leaves their blocks */
        if (meta_reserve(e, e->n_deferred, err))
            return -1;
        int32_t ns = 0;
        for (int32_t i = 0; i < e->n_deferred; i++) {
            plume_kv_deferred *d = &e->deferred[i];
            if (d->saved)
                continue;
            d->saved = d->saving = true;
            e->kv_meta[ns++] = (plume_kv_req_blocks){d->req_id, &d->xp, d->bt.ids,
                                                     plume_bm_blocks_for(e->sched.bm, d->n_tokens),
                                                     d->n_tokens, d->prompt, d->n_tokens};
        }
        if (ns > 0) {
            plume_kv_step_meta meta = {NULL, 0, e->kv_meta, ns};
            plume_error e2 = {0};
            if (e->kvc_vt.save(e->kvc, &meta, &e2)) {
                /* nothing of this call was saved: free those requests' blocks
                 * now (the decode worker's load of them fails loudly: unknown
                 * transfer); blocks saved in earlier steps may still be read
                 * in place by a decode worker and stay until reported sent */
                fprintf(stderr, "plume: kv_connector '%s' could not save %d requests' KV: %s\n",
                        e->kvc_vt.name, ns, e2.msg);
                for (int32_t i = e->n_deferred - 1; i >= 0; i--)
                    if (e->deferred[i].saving) {
                        plume_bm_release(e->sched.bm, &e->deferred[i].bt);
                        plume_block_table_free(&e->deferred[i].bt);
                        free(e->deferred[i].prompt);
                        e->deferred[i] = e->deferred[--e->n_deferred];
                    }
            }
            for (int32_t i = 0; i < e->n_deferred; i++)
                e->deferred[i].saving = false;
        }
    }
    take_finished(e);
    if (idle && plume_kv_glue_pending(e) > 0) { /* only transfers in flight (loads, or
                                                    sends a connector reports later): poll,
                                                    don't spin */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

void plume_kv_glue_on_finish(plume_engine *e, plume_seq *s)
{
    if (!e->kvc || !s->has_kv_xfer)
        return;
    plume_queue_remove(&e->remote, s); /* aborted or failed while waiting for its KV */
    /* a one-token prompt has no KV worth shipping (the decode worker
     * computes its last prompt position anyway): it goes out with
     * do_remote_prefill false */
    bool done = s->n_computed >= s->n_prompt && s->n_prompt > 1 &&
                (s->finish == PLUME_FINISH_STOP || s->finish == PLUME_FINISH_LENGTH);
    plume_kv_transfer_params out;
    memset(&out, 0, sizeof out);
    int keep = e->kvc_vt.request_finished(e->kvc, s->id, &s->kv_xfer, done, &out);
    bool producer = e->p.kv_role == PLUME_KV_PRODUCER && s->kv_xfer.do_remote_decode;
    if (producer && (keep != 1 || !done))
        memset(&out, 0, sizeof out); /* nothing kept: nothing to load */
    if (producer) {
        s->has_kv_out = true;
        s->kv_out = out;
    }
    if (keep != 1 || !producer || !done)
        return;
    int32_t *prompt = malloc(sizeof *prompt * (size_t)s->n_prompt);
    if (prompt)
        memcpy(prompt, s->tokens, sizeof *prompt * (size_t)s->n_prompt);
    if (prompt && e->n_deferred == e->cap_deferred) {
        int32_t cap = e->cap_deferred ? 2 * e->cap_deferred : 16;
        plume_kv_deferred *d = realloc(e->deferred, sizeof *d * (size_t)cap);
        if (d) {
            e->deferred = d;
            e->cap_deferred = cap;
        }
    }
    if (!prompt || e->n_deferred == e->cap_deferred) {
        fprintf(stderr, "plume: out of memory keeping request %lld's KV for its decode "
                        "worker; its blocks are freed and the decode worker's load fails\n",
                (long long)s->id);
        e->kvc_vt.request_finished(e->kvc, s->id, &s->kv_xfer, false, &out);
        free(prompt);
        return;
    }
    /* the blocks move out of the sequence (which may be released at once):
     * they are freed when get_finished reports the send */
    e->deferred[e->n_deferred++] = (plume_kv_deferred){s->id, s->bt, s->n_prompt, prompt,
                                                       s->kv_xfer, false, false};
    memset(&s->bt, 0, sizeof s->bt);
}

int32_t plume_kv_glue_pending(const plume_engine *e)
{
    return e->remote.n + e->n_deferred;
}

void plume_kv_glue_load(const plume_engine *e, plume_engine_load *out)
{
    out->kv_waiting_remote = e->remote.n;
    int32_t nb = 0;
    for (int32_t i = 0; i < e->n_deferred; i++)
        nb += e->deferred[i].bt.n;
    out->kv_blocks_deferred = nb;
    memset(&out->kv, 0, sizeof out->kv);
    if (e->kvc && e->kvc_vt.stats)
        e->kvc_vt.stats(e->kvc, &out->kv);
}
