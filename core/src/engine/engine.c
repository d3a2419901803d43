/* The engine: requests in and out, and the step -- schedule (and propose
 * drafts), run one batched forward, post-process (postprocess.c). */
#include "plume/clock.h"
#include "plume/engine.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine_internal.h"
#include "runtime/builtin.h"

plume_engine_params plume_engine_defaults(void)
{
    plume_engine_params p = {
        .block_size = 16, .kv_max_tokens = 16384, .kv_dtype = PLUME_KV_F16, .max_num_seqs = 64,
        .max_batched_tokens = 512, .prefix_caching = true, .mixed_batches = true,
    };
    return p;
}

plume_request_params plume_request_defaults(void)
{
    plume_request_params p;
    memset(&p, 0, sizeof p);
    p.sampling = plume_sampling_defaults();
    p.sampling.temperature = 0.0f;
    p.max_tokens = 256;
    p.logprobs = -1;
    p.num_speculative_tokens = -1;
    return p;
}

const char *plume_finish_reason_name(plume_finish_reason r)
{
    switch (r) {
    case PLUME_FINISH_NONE: return "";
    case PLUME_FINISH_STOP: return "stop";
    case PLUME_FINISH_LENGTH: return "length";
    case PLUME_FINISH_ABORT: return "abort";
    case PLUME_FINISH_ERROR: return "error";
    }
    return "";
}

static int validate(const plume_engine_params *p, plume_error *err)
{
    if (p->block_size < 1 || p->block_size > 1024)
        return plume_err(err, PLUME_ERR_INVALID, "kv_cache.block_size must be in [1, 1024], got %d",
                         p->block_size);
    if (p->kv_max_tokens < p->block_size || p->kv_max_tokens > INT32_MAX - p->block_size)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_cache.max_tokens must be in [block_size, 2^31 - block_size], got %lld",
                         (long long)p->kv_max_tokens);
    if (p->kv_dtype != PLUME_KV_F32 && p->kv_dtype != PLUME_KV_F16 && p->kv_dtype != PLUME_KV_INT8)
        return plume_err(err, PLUME_ERR_INVALID, "kv_cache.dtype must be f32, f16 or int8");
    if (p->max_num_seqs < 1 || p->max_num_seqs > 65536)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler.max_num_seqs must be in [1, 65536], got %d", p->max_num_seqs);
    if (p->max_batched_tokens < 1 || p->max_batched_tokens > 1 << 20)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler.max_batched_tokens must be in [1, 2^20], got %d",
                         p->max_batched_tokens);
    if (p->spec_disable_above_batch < -1)
        return plume_err(err, PLUME_ERR_INVALID,
                         "speculative.disable_above_batch must be auto (-1), 0 (never) or a "
                         "batch size N > 0, got %d",
                         p->spec_disable_above_batch);
    return 0;
}

int plume_engine_create(const plume_model *m, const plume_engine_params *p, plume_engine **out,
                        plume_error *err)
{
    if (validate(p, err))
        return -1;
    plume_engine *e = calloc(1, sizeof *e);
    if (!e)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the engine");
    e->m = m;
    e->p = *p;
    int32_t n_blocks = (int32_t)((p->kv_max_tokens + p->block_size - 1) / p->block_size);
    int64_t cap = (int64_t)n_blocks * p->block_size;
    int32_t train = plume_model_n_ctx_train(m);
    e->n_ctx = train > 0 && train < cap ? train : (int32_t)cap;
    int32_t nv = plume_model_n_vocab(m);
    e->items = calloc((size_t)p->max_num_seqs, sizeof *e->items);
    e->batch = calloc((size_t)p->max_num_seqs, sizeof *e->batch);
    e->logits_rows = p->max_num_seqs;
    e->logits = malloc(sizeof(float) * (size_t)p->max_num_seqs * (size_t)nv);
    e->fw_cap = p->max_batched_tokens < 4096 ? p->max_batched_tokens : 4096;
    e->fw_time = calloc((size_t)e->fw_cap + 1, sizeof *e->fw_time);
    if (!e->items || !e->batch || !e->logits || !e->fw_time) {
        plume_engine_free(e);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the engine");
    }
    e->sched.max_num_seqs = p->max_num_seqs;
    e->sched.max_batched_tokens = p->max_batched_tokens;
    e->sched.prefix_caching = p->prefix_caching;
    e->sched.spec_adaptive = p->spec_adaptive;
    e->sched.on_preempt = plume_engine_proposer_forget;
    e->sched.hook_ctx = e;
    if (plume_queue_reserve(&e->sched.running, p->max_num_seqs)) {
        plume_engine_free(e);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the engine");
    }
    if (plume_sched_init(&e->sched, p->scheduler, p->scheduler_settings, p->mixed_batches,
                         err) ||
        plume_bm_create(n_blocks, p->block_size, p->prefix_caching, &e->sched.bm, err) ||
        plume_kv_cache_create(m, n_blocks, p->block_size, p->kv_dtype, &e->kv, err) ||
        plume_runner_create(m, e->kv, p->max_batched_tokens, &e->runner, err) ||
        plume_kv_glue_create(e, err)) {
        plume_engine_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

void plume_engine_free(plume_engine *e)
{
    if (!e)
        return;
    for (int64_t i = 0; i < e->n_ids; i++)
        if (e->by_id[i]) {
            plume_sched_drop(&e->sched, e->by_id[i]);
            plume_seq_free(e->by_id[i]);
        }
    free(e->by_id);
    for (int32_t i = 0; i < e->n_sampler_shared; i++)
        if (PLUME_SAMPLER_HAS(e->sampler_shared[i].vt, shared_free))
            e->sampler_shared[i].vt->shared_free(e->sampler_shared[i].obj);
    free(e->sampler_shared);
    plume_kv_glue_free(e); /* deferred blocks back, connector gone before the pool */
    plume_engine_free_spec(e);
    plume_sched_fini(&e->sched);
    plume_bm_free(e->sched.bm);
    plume_runner_free(e->runner);
    plume_kv_cache_free(e->kv);
    free(e->items);
    free(e->batch);
    free(e->logits);
    free(e->fw_time);
    free(e);
}

static int sampler_shared(plume_engine *e, const plume_sampler_vtable *vt, void **out,
                          plume_error *err);

int64_t plume_engine_add_tokens(plume_engine *e, const int32_t *ids, size_t n,
                                const plume_request_params *p, plume_error *err)
{
    const int32_t nv = plume_model_n_vocab(e->m);
    if (n == 0)
        return plume_err(err, PLUME_ERR_INVALID, "a request needs at least one prompt token");
    if (n >= (size_t)e->n_ctx) {
        int32_t train = plume_model_n_ctx_train(e->m);
        bool by_model = train > 0 && train == e->n_ctx;
        return plume_err(err, PLUME_ERR_RANGE,
                         "the prompt has %zu tokens but at most %d fit: the context is %d "
                         "tokens (%s), leaving room for one generated token; %s",
                         n, e->n_ctx - 1, e->n_ctx,
                         by_model ? "the model's trained length" : "the KV cache's capacity",
                         by_model ? "shorten the prompt"
                                  : "shorten the prompt or raise kv_cache.max_tokens (--ctx-size)");
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= nv)
            return plume_err(err, PLUME_ERR_INVALID,
                             "token id %d at index %zu is outside the vocabulary [0, %d)", ids[i],
                             i, nv);
    if (p->max_tokens < 1)
        return plume_err(err, PLUME_ERR_INVALID, "max_tokens must be at least 1, got %d",
                         p->max_tokens);
    if (p->logprobs < -1 || p->logprobs > PLUME_MAX_TOP_LOGPROBS)
        return plume_err(err, PLUME_ERR_INVALID,
                         "logprobs must be -1 (none) or 0..%d (the top alternatives to return "
                         "with each token's log-probability), got %d",
                         PLUME_MAX_TOP_LOGPROBS, p->logprobs);
    if (p->num_speculative_tokens < -1 || (e->spec_k > 0 && p->num_speculative_tokens > e->spec_k))
        return e->spec_k > 0
                   ? plume_err(err, PLUME_ERR_INVALID,
                               "num_speculative_tokens must be -1 (the engine's k), 0 (no "
                               "speculation) or 1..%d (the engine's num_speculative_tokens), "
                               "got %d",
                               e->spec_k, p->num_speculative_tokens)
                   : plume_err(err, PLUME_ERR_INVALID,
                               "num_speculative_tokens must be -1 (the engine's k), 0 (no "
                               "speculation) or a positive cap, got %d",
                               p->num_speculative_tokens);
    if (plume_kv_glue_check_request(e, p, err))
        return -1;
    int64_t total = (int64_t)n + p->max_tokens;
    if (total > e->n_ctx)
        total = e->n_ctx;
    if (e->n_ids == e->cap_ids) {
        int64_t cap = e->cap_ids ? 2 * e->cap_ids : 64;
        plume_seq **b = realloc(e->by_id, sizeof *b * (size_t)cap);
        if (!b)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a request");
        e->by_id = b;
        e->cap_ids = cap;
    }
    plume_request_params rp = *p;
    if (!rp.sampler && e->sampler_vt) {
        rp.sampler = e->sampler_vt;
        rp.sampler_settings = e->sampler_settings;
    }
    void *shared = NULL;
    if (rp.sampler && sampler_shared(e, rp.sampler, &shared, err))
        return -1;
    plume_seq *s;
    if (plume_seq_create(e->n_ids, ids, (int32_t)n, (int32_t)total, &rp,
                         plume_model_tokenizer(e->m), nv, shared, &s, err))
        return -1;
    /* room for every live request in waiting (preemption pushes back there,
     * and so does a finished load) and in the remote-KV queue */
    int32_t live = e->sched.waiting.n + e->sched.running.n + e->remote.n + 1;
    if (plume_queue_reserve(&e->sched.waiting, live) ||
        (e->kvc && plume_queue_reserve(&e->remote, live)) ||
        (!plume_kv_glue_park(e, s) && plume_queue_push_back(&e->sched.waiting, s))) {
        plume_seq_free(s);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a request");
    }
    e->by_id[e->n_ids] = s;
    return e->n_ids++;
}

/* The object provider vt shares among this engine's sequences: made on
 * first use when the provider has shared_create, else NULL. */
static int sampler_shared(plume_engine *e, const plume_sampler_vtable *vt, void **out,
                          plume_error *err)
{
    *out = NULL;
    if (!PLUME_SAMPLER_HAS(vt, shared_create))
        return 0;
    for (int32_t i = 0; i < e->n_sampler_shared; i++)
        if (e->sampler_shared[i].vt == vt) {
            *out = e->sampler_shared[i].obj;
            return 0;
        }
    struct plume_sampler_shared *t =
        realloc(e->sampler_shared, sizeof *t * (size_t)(e->n_sampler_shared + 1));
    if (!t)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a request");
    e->sampler_shared = t;
    void *obj = NULL;
    if (vt->shared_create(plume_model_tokenizer(e->m), plume_model_n_vocab(e->m), &obj, err))
        return -1;
    t[e->n_sampler_shared++] = (struct plume_sampler_shared){vt, obj};
    *out = obj;
    return 0;
}

int64_t plume_engine_add_text(plume_engine *e, const char *text, const plume_request_params *p,
                              plume_error *err)
{
    const plume_tokenizer *tok = plume_model_tokenizer(e->m);
    int32_t *ids;
    size_t n;
    bool add_bos = plume_tokenizer_add_bos(tok);
    int32_t bos = plume_tokenizer_bos(tok);
    if (add_bos && bos >= 0) { /* no second BOS when the text already starts with it */
        char buf[256];
        int len = plume_token_bytes(tok, bos, true, buf, sizeof buf);
        if (len > 0 && (size_t)len < sizeof buf && strncmp(text, buf, (size_t)len) == 0)
            add_bos = false;
    }
    if (plume_tokenize(tok, text, strlen(text), add_bos, true, &ids, &n, err))
        return -1;
    int64_t id = plume_engine_add_tokens(e, ids, n, p, err);
    free(ids);
    return id;
}

bool plume_engine_has_work(const plume_engine *e)
{
    return e->sched.waiting.n > 0 || e->sched.running.n > 0 || plume_kv_glue_pending(e) > 0;
}

int plume_engine_set_sampler(plume_engine *e, const plume_sampler_vtable *vt,
                             const plume_settings *settings, plume_error *err)
{
    if (e->sched.running.n > 0 || e->sched.waiting.n > 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the sampler can only be changed between runs; %d requests are still "
                         "running or waiting",
                         e->sched.running.n + e->sched.waiting.n);
    if (vt && (vt->interface_version != PLUME_SAMPLER_INTERFACE_VERSION || !vt->create ||
               !vt->destroy || !vt->sample))
        return plume_err(err, PLUME_ERR_INVALID,
                         "sampler '%s' has interface version %u; plume expects version %d with "
                         "create, destroy and sample set",
                         vt->name ? vt->name : "?", vt->interface_version,
                         PLUME_SAMPLER_INTERFACE_VERSION);
    if (vt && vt->validate && settings && vt->validate(settings, err))
        return -1;
    e->sampler_vt = vt;
    e->sampler_settings = vt ? settings : NULL;
    return 0;
}

const char *plume_engine_sampler_name(const plume_engine *e)
{
    return e->sampler_vt ? e->sampler_vt->name : "standard";
}

const char *plume_engine_scheduler_name(const plume_engine *e)
{
    return plume_sched_name(&e->sched);
}

int32_t plume_engine_n_ctx(const plume_engine *e) { return e->n_ctx; }

plume_kv_dtype plume_engine_kv_dtype(const plume_engine *e) { return e->kv->pool.dtype; }

int64_t plume_engine_kv_bytes_per_token(const plume_engine *e)
{
    return plume_kv_pool_bytes_per_token(&e->kv->pool);
}

const char *plume_engine_proposer_name(const plume_engine *e)
{
    return e->prop_vt ? e->prop_vt->name : NULL;
}

/* Schedule: the provider's plan carried out into e->items, then drafts for
 * the items with room for them.  Returns the item count, or -1. */
static int32_t schedule(plume_engine *e, plume_error *err)
{
    if (e->prop)
        plume_engine_spec_policy(e);
    int32_t n = plume_schedule(&e->sched, e->items, err);
    if (e->prop)
        plume_engine_spec_restore(e);
    e->stats.preemptions = e->sched.preemptions;
    e->stats.cached_prompt_tokens = e->sched.cached_prompt_tokens;
    if (n > 0 && e->prop && plume_engine_propose(e, n, err))
        return -1;
    return n;
}

/* Run: the n items as one batched forward into e->logits. */
static int run(plume_engine *e, int32_t n, plume_error *err)
{
    int32_t positions = 0;
    for (int32_t i = 0; i < n; i++) {
        plume_seq *s = e->items[i].seq;
        const plume_sched_item *it = &e->items[i];
        e->batch[i] = (plume_batch_seq){s->tokens + s->n_computed, it->n, s->n_computed,
                                        s->bt.ids, it->spec ? it->n : it->sample ? 1 : 0};
        positions += it->n;
        int32_t end = s->n_computed + it->n;
        int32_t in_prompt = (end < s->n_prompt ? end : s->n_prompt) - s->n_computed;
        if (in_prompt < 0)
            in_prompt = 0;
        e->stats.prefill_tokens += in_prompt;
        e->stats.decode_tokens += it->n - in_prompt;
    }
    if (positions > e->stats.max_step_positions)
        e->stats.max_step_positions = positions;
    if (n > e->stats.max_step_seqs)
        e->stats.max_step_seqs = n;
    double t0 = plume_clock_seconds();
    if (plume_runner_forward(e->runner, e->batch, n, e->logits, err))
        return -1;
    double dt = plume_clock_seconds() - t0;
    e->stats.forward_seconds += dt;
    plume_engine_spec_time_forward(e, positions, dt);
    e->stats.steps++;
    return 0;
}

int plume_engine_step(plume_engine *e, plume_error *err)
{
    /* the KV connector's load point (kv_glue.c): remote KV that arrived
     * goes into its blocks and its requests join the waiting queue */
    if (plume_kv_glue_before_step(e, err))
        return -1;
    int32_t n = schedule(e, err);
    if (n < 0 || (n > 0 && run(e, n, err)))
        return -1;
    if (n > 0)
        plume_engine_postprocess(e, n);
    /* its save point: finished prefills' KV leaves their (deferred) blocks */
    if (plume_kv_glue_after_step(e, n == 0, err))
        return -1;
    return e->sched.waiting.n + e->sched.running.n + plume_kv_glue_pending(e);
}

int plume_engine_abort(plume_engine *e, int64_t id)
{
    if (id < 0 || id >= e->n_ids || !e->by_id[id] || e->by_id[id]->status == PLUME_SEQ_FINISHED)
        return -1;
    plume_seq_finish(e->by_id[id], PLUME_FINISH_ABORT);
    plume_engine_finish_drop(e, e->by_id[id]);
    return 0;
}

int plume_engine_result(const plume_engine *e, int64_t id, plume_request_result *out)
{
    if (id < 0 || id >= e->n_ids || !e->by_id[id])
        return -1;
    const plume_seq *s = e->by_id[id];
    *out = (plume_request_result){
        .finish = s->status == PLUME_SEQ_FINISHED ? s->finish : PLUME_FINISH_NONE,
        .prompt_ids = s->tokens,
        .n_prompt = (size_t)s->n_prompt,
        .output_ids = s->tokens + s->n_prompt,
        .n_output = (size_t)(s->n_tokens - s->n_prompt),
        .text = s->text,
        .text_len = s->text_len,
        .error = s->error,
        .n_cached_prompt = s->n_cached_prompt,
        .n_preemptions = s->n_preemptions,
        .n_drafted = s->n_drafted,
        .n_accepted = s->n_accepted,
        .n_forwards = s->n_forwards,
        .kv_transfer = s->has_kv_out ? &s->kv_out : NULL,
    };
    return 0;
}

void plume_engine_release(plume_engine *e, int64_t id)
{
    if (id < 0 || id >= e->n_ids || !e->by_id[id])
        return;
    plume_engine_finish_drop(e, e->by_id[id]);
    plume_seq_free(e->by_id[id]);
    e->by_id[id] = NULL;
}

plume_engine_stats plume_engine_get_stats(const plume_engine *e) { return e->stats; }

plume_engine_load plume_engine_get_load(const plume_engine *e)
{
    plume_block_stats bs = plume_bm_stats(e->sched.bm);
    plume_engine_load l = {
        .running = e->sched.running.n,
        .waiting = e->sched.waiting.n,
        .kv_blocks_total = bs.n_blocks,
        /* free counts the blocks only the prefix cache still holds */
        .kv_blocks_used = bs.n_blocks - bs.n_free,
        .prefix_queries = e->sched.prefix_query_tokens,
        .prefix_hits = e->sched.prefix_hit_tokens,
    };
    plume_kv_glue_load(e, &l);
    return l;
}
