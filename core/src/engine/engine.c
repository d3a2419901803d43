/* The engine loop: schedule, one batched forward, sample, append, finish. */
#include "plume/engine.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/runner.h"
#include "plume/proposer.h"
#include "plume/sampler_provider.h"

struct plume_engine {
    const plume_model *m;
    plume_engine_params p;
    plume_kv_cache *kv;
    plume_runner *runner;
    plume_scheduler sched;
    int32_t n_ctx;              /* longest sequence served */
    plume_seq **by_id;          /* index = request id; NULL once released */
    int64_t n_ids, cap_ids;
    plume_sched_item *items;    /* max_num_seqs */
    plume_batch_seq *batch;     /* max_num_seqs */
    float *logits;              /* rows of n_vocab, one per sampled position */
    int32_t logits_rows;
    plume_engine_stats stats;
    /* speculative decoding (optional) */
    const plume_proposer_vtable *prop_vt; /* == &prop_copy while speculation is on */
    plume_proposer_vtable prop_copy;      /* the provider's vtable in this build's layout */
    plume_proposer *prop;
    int32_t spec_k;
    plume_propose_seq *pseqs;   /* max_num_seqs */
    plume_draft *drafts;        /* max_num_seqs */
    int32_t *draft_tokens;      /* max_num_seqs x spec_k */
    float *draft_probs;         /* max_num_seqs x spec_k x n_vocab */
    float *verify_work;         /* 2 x n_vocab */
    int32_t *verify_out;        /* spec_k + 1 */
    /* default sampler provider (NULL: the built-in) */
    const plume_sampler_vtable *sampler_vt;
    const plume_settings *sampler_settings;
};

plume_engine_params plume_engine_defaults(void)
{
    plume_engine_params p = {
        .block_size = 16, .kv_max_tokens = 16384, .kv_dtype = PLUME_KV_F32, .max_num_seqs = 64,
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
    if (p->kv_dtype != PLUME_KV_F32 && p->kv_dtype != PLUME_KV_F16)
        return plume_err(err, PLUME_ERR_INVALID, "kv_cache.dtype must be f32 or f16");
    if (p->max_num_seqs < 1 || p->max_num_seqs > 65536)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler.max_num_seqs must be in [1, 65536], got %d", p->max_num_seqs);
    if (p->max_batched_tokens < 1 || p->max_batched_tokens > 1 << 20)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler.max_batched_tokens must be in [1, 2^20], got %d",
                         p->max_batched_tokens);
    return 0;
}

/* The proposer forgets a sequence that finished or was preempted. */
static void on_preempt(void *ctx, plume_seq *seq)
{
    plume_engine *e = ctx;
    if (e->prop && e->prop_vt->release)
        e->prop_vt->release(e->prop, seq->id);
}

/* Takes a finished request out of the scheduler, once: its computed prompt
 * and output go into the prefix cache, the proposer forgets it, its blocks
 * are released. */
static void finish_drop(plume_engine *e, plume_seq *s)
{
    if (s->dropped)
        return;
    s->dropped = true;
    int32_t committed = s->n_computed < s->n_tokens ? s->n_computed : s->n_tokens;
    if (s->bt.n > 0)
        plume_bm_commit(e->sched.bm, &s->bt, s->tokens, committed);
    on_preempt(e, s);
    plume_sched_drop(&e->sched, s);
}

static void free_spec(plume_engine *e)
{
    if (e->prop)
        e->prop_vt->destroy(e->prop);
    e->prop = NULL;
    e->prop_vt = NULL;
    e->spec_k = 0;
    e->sched.spec_k = 0;
    free(e->pseqs);
    free(e->drafts);
    free(e->draft_tokens);
    free(e->draft_probs);
    free(e->verify_work);
    free(e->verify_out);
    e->pseqs = NULL;
    e->drafts = NULL;
    e->draft_tokens = NULL;
    e->draft_probs = NULL;
    e->verify_work = NULL;
    e->verify_out = NULL;
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
    if (!e->items || !e->batch || !e->logits) {
        plume_engine_free(e);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the engine");
    }
    e->sched.max_num_seqs = p->max_num_seqs;
    e->sched.max_batched_tokens = p->max_batched_tokens;
    e->sched.mixed = p->mixed_batches;
    e->sched.on_preempt = on_preempt;
    e->sched.hook_ctx = e;
    if (plume_queue_reserve(&e->sched.running, p->max_num_seqs)) {
        plume_engine_free(e);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the engine");
    }
    if (plume_bm_create(n_blocks, p->block_size, p->prefix_caching, &e->sched.bm, err) ||
        plume_kv_cache_create(m, n_blocks, p->block_size, p->kv_dtype, &e->kv, err) ||
        plume_runner_create(m, e->kv, p->max_batched_tokens, &e->runner, err)) {
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
    free_spec(e);
    plume_queue_free(&e->sched.waiting);
    plume_queue_free(&e->sched.running);
    plume_bm_free(e->sched.bm);
    plume_runner_free(e->runner);
    plume_kv_cache_free(e->kv);
    free(e->items);
    free(e->batch);
    free(e->logits);
    free(e);
}

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
    plume_seq *s;
    if (plume_seq_create(e->n_ids, ids, (int32_t)n, (int32_t)total, &rp,
                         plume_model_tokenizer(e->m), nv, &s, err))
        return -1;
    /* room for every live request in waiting (preemption pushes back there) */
    if (plume_queue_reserve(&e->sched.waiting,
                            e->sched.waiting.n + e->sched.running.n + 1) ||
        plume_queue_push_back(&e->sched.waiting, s)) {
        plume_seq_free(s);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a request");
    }
    e->by_id[e->n_ids] = s;
    return e->n_ids++;
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
    return e->sched.waiting.n > 0 || e->sched.running.n > 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int plume_engine_set_proposer(plume_engine *e, const plume_proposer_vtable *vt,
                              const plume_settings *settings, int32_t k, plume_error *err)
{
    if (e->sched.running.n > 0 || e->sched.waiting.n > 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the proposer can only be changed between runs; %d requests are still "
                         "running or waiting",
                         e->sched.running.n + e->sched.waiting.n);
    free_spec(e);
    if (!vt)
        return 0; /* speculation off */
    if (vt->struct_size < offsetof(plume_proposer_vtable, accepted) ||
        vt->interface_version != PLUME_PROPOSER_INTERFACE_VERSION || !vt->create ||
        !vt->destroy || !vt->propose)
        return plume_err(err, PLUME_ERR_INVALID,
                         "proposer '%s' has interface version %u (size %u); plume expects "
                         "version %d with create, destroy and propose set",
                         vt->name ? vt->name : "?", vt->interface_version, vt->struct_size,
                         PLUME_PROPOSER_INTERFACE_VERSION);
    if (k < 1 || k > 64)
        return plume_err(err, PLUME_ERR_INVALID,
                         "num_speculative_tokens must be in [1, 64], got %d", k);
    const int32_t nv = plume_model_n_vocab(e->m), ns = e->p.max_num_seqs;
    /* logits for up to k+1 positions of every sequence of a step */
    float *lg = realloc(e->logits, sizeof(float) * (size_t)ns * (size_t)(k + 1) * (size_t)nv);
    if (!lg)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for speculative logits");
    e->logits = lg;
    e->logits_rows = ns * (k + 1);
    e->pseqs = calloc((size_t)ns, sizeof *e->pseqs);
    e->drafts = calloc((size_t)ns, sizeof *e->drafts);
    e->draft_tokens = malloc(sizeof(int32_t) * (size_t)ns * (size_t)k);
    e->draft_probs = malloc(sizeof(float) * (size_t)ns * (size_t)k * (size_t)nv);
    e->verify_work = malloc(sizeof(float) * 2 * (size_t)nv);
    e->verify_out = malloc(sizeof(int32_t) * (size_t)(k + 1));
    if (!e->pseqs || !e->drafts || !e->draft_tokens || !e->draft_probs || !e->verify_work ||
        !e->verify_out) {
        free_spec(e);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory for %d speculative tokens x %d sequences", k, ns);
    }
    /* slots a smaller (older) vtable lacks read as NULL */
    memset(&e->prop_copy, 0, sizeof e->prop_copy);
    memcpy(&e->prop_copy, vt,
           vt->struct_size < sizeof e->prop_copy ? vt->struct_size : sizeof e->prop_copy);
    if ((e->prop_copy.validate && settings && e->prop_copy.validate(settings, err)) ||
        e->prop_copy.create(settings, nv, &e->prop, err)) {
        e->prop = NULL;
        free_spec(e);
        return -1;
    }
    e->prop_vt = &e->prop_copy;
    e->spec_k = k;
    e->sched.spec_k = k;
    return 0;
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

const char *plume_engine_proposer_name(const plume_engine *e)
{
    return e->prop_vt ? e->prop_vt->name : NULL;
}

/* Asks the proposer for drafts for the step's spec items, writes them after
 * each sequence's tokens and shrinks each item to 1 + drafted positions. */
static int propose(plume_engine *e, int32_t n_items, plume_error *err)
{
    int32_t n = 0;
    for (int32_t i = 0; i < n_items; i++) {
        plume_sched_item *it = &e->items[i];
        if (!it->spec)
            continue;
        it->draft = n;
        plume_seq *s = it->seq;
        e->pseqs[n] = (plume_propose_seq){s->id, s->tokens, s->n_tokens, it->n - 1};
        e->drafts[n] = (plume_draft){e->draft_tokens + (size_t)n * e->spec_k, 0,
                                     e->draft_probs + (size_t)n * e->spec_k *
                                                          (size_t)plume_model_n_vocab(e->m),
                                     0};
        n++;
    }
    if (n == 0)
        return 0;
    if (e->prop_vt->propose(e->prop, e->pseqs, (size_t)n, e->drafts, err))
        return plume_err_prefix(err, "proposer '%s'", e->prop_vt->name);
    const int32_t nv = plume_model_n_vocab(e->m);
    for (int32_t i = 0; i < n_items; i++) {
        plume_sched_item *it = &e->items[i];
        if (!it->spec)
            continue;
        plume_draft *d = &e->drafts[it->draft];
        int32_t nd = d->n < 0 ? 0 : d->n > it->n - 1 ? it->n - 1 : d->n;
        for (int32_t t = 0; t < nd; t++)
            if (d->tokens[t] < 0 || d->tokens[t] >= nv)
                nd = t; /* an id outside the vocabulary ends the draft */
        plume_seq *s = it->seq;
        memcpy(s->tokens + s->n_tokens, d->tokens, sizeof(int32_t) * (size_t)nd);
        d->n = nd;
        it->n = 1 + nd;
        if (nd == 0)
            it->spec = false;
    }
    return 0;
}

/* Verifies one sequence's drafts against its logits rows, appends the
 * accepted tokens plus one target token, rolls back the rest. */
static void verify(plume_engine *e, plume_sched_item *it, const plume_draft *d, const float *lg)
{
    plume_seq *s = it->seq;
    const plume_tokenizer *tok = plume_model_tokenizer(e->m);
    int32_t n_acc;
    int32_t n_out = plume_seq_verify(s, lg, d->tokens, d->n, d->has_probs ? d->probs : NULL,
                                     plume_model_n_vocab(e->m), e->verify_out, &n_acc,
                                     e->verify_work);
    e->stats.spec_drafted += d->n;
    e->stats.spec_forwards++;
    s->n_drafted += d->n;
    if (e->prop_vt->accepted)
        e->prop_vt->accepted(e->prop, s->id, d->n, n_acc);
    /* the last token and the accepted drafts now have valid KV */
    s->n_computed += 1 + n_acc;
    for (int32_t i = 0; i < n_out; i++) {
        e->stats.generated_tokens++;
        e->stats.spec_emitted++;
        if (i < n_acc) { /* only drafts that made it into the output count */
            e->stats.spec_accepted++;
            s->n_accepted++;
        }
        plume_seq_append(s, e->verify_out[i], tok);
        if (s->status == PLUME_SEQ_FINISHED)
            return; /* by a stop condition or an abort from on_token: the caller drops it */
    }
    plume_bm_truncate(e->sched.bm, &s->bt, s->n_tokens);
}

int plume_engine_step(plume_engine *e, plume_error *err)
{
    int32_t n = plume_schedule(&e->sched, e->items);
    e->stats.preemptions = e->sched.preemptions;
    e->stats.cached_prompt_tokens = e->sched.cached_prompt_tokens;
    if (n == 0)
        return e->sched.waiting.n + e->sched.running.n;
    if (e->prop && propose(e, n, err))
        return -1;
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
    double t0 = now();
    if (plume_runner_forward(e->runner, e->batch, n, e->logits, err))
        return -1;
    e->stats.forward_seconds += now() - t0;
    e->stats.steps++;
    const plume_tokenizer *tok = plume_model_tokenizer(e->m);
    const int32_t nv = plume_model_n_vocab(e->m);
    int32_t row = 0;
    for (int32_t i = 0; i < n; i++) {
        plume_sched_item *it = &e->items[i];
        plume_seq *s = it->seq;
        if (s->status == PLUME_SEQ_FINISHED) {
            /* aborted by an on_token callback earlier in this step: already dropped */
            if (it->sample)
                row += e->batch[i].n_logits;
            continue;
        }
        if (!it->sample) {
            s->n_computed += it->n;
            plume_bm_commit(e->sched.bm, &s->bt, s->tokens, s->n_computed);
            continue;
        }
        const float *lg = e->logits + (size_t)row * nv;
        row += e->batch[i].n_logits;
        s->n_forwards++;
        if (s->params.first_logits && s->n_tokens == s->n_prompt)
            memcpy(s->params.first_logits, lg, sizeof(float) * (size_t)nv);
        if (it->spec) {
            verify(e, it, &e->drafts[it->draft], lg);
        } else {
            s->n_computed += it->n;
            int32_t tok_id = plume_seq_sample(s, lg);
            e->stats.generated_tokens++;
            plume_seq_append(s, tok_id, tok);
        }
        if (s->status == PLUME_SEQ_FINISHED) {
            finish_drop(e, s);
        } else {
            plume_bm_commit(e->sched.bm, &s->bt, s->tokens, s->n_computed);
        }
    }
    return e->sched.waiting.n + e->sched.running.n;
}

int plume_engine_abort(plume_engine *e, int64_t id)
{
    if (id < 0 || id >= e->n_ids || !e->by_id[id] || e->by_id[id]->status == PLUME_SEQ_FINISHED)
        return -1;
    plume_seq_finish(e->by_id[id], PLUME_FINISH_ABORT);
    finish_drop(e, e->by_id[id]);
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
    };
    return 0;
}

void plume_engine_release(plume_engine *e, int64_t id)
{
    if (id < 0 || id >= e->n_ids || !e->by_id[id])
        return;
    finish_drop(e, e->by_id[id]);
    plume_seq_free(e->by_id[id]);
    e->by_id[id] = NULL;
}

plume_engine_stats plume_engine_get_stats(const plume_engine *e) { return e->stats; }
