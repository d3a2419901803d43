/* The draft-model proposer: a small model with the target's vocabulary
 * drafts k tokens for every speculating sequence of a step.
 *
 * It loads the draft through the host (plume_proposer_host_load_model: the
 * same registry and backend instance as the target, so GGUF, HF float and
 * quantized HF checkpoints through their plugins all load), checks the
 * vocabularies (vocab_check.c) and runs the draft with a plume_seq_runner:
 * its own paged KV cache, one sequence per engine sequence.
 *
 * propose(): each sequence's draft KV is first brought to its committed
 * tokens (what the cache holds is compared with them: the common prefix is
 * kept, the rest truncated, the missing tokens fed; all sequences in one
 * batched run, split at max_batch_tokens), then one batched run per draft
 * position over all sequences still drafting.  Each draft token comes from
 * the draft's distribution under the request's own sampling parameters
 * (plume_sampler_probs: penalties over the history, temperature, top-k/p,
 * min-p), drawn with a per-sequence RNG seeded from the request's seed, and
 * its row goes to plume_draft.probs (has_probs 1), which makes the
 * verifier's rejection sampling exact at any temperature.  A greedy request
 * drafts the argmax (after penalties) and passes no rows (a point mass).
 *
 * accepted() truncates the draft KV to the committed tokens; release()
 * frees the sequence.  When the draft's KV cache cannot hold a sequence's
 * tokens this step, that sequence drafts nothing (the target decodes it
 * normally) and its cache is released to make room later. */
#include "draft_proposer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plume/sampler.h"
#include "plume/seq_runner.h"
#include "plume/settings.h"

#define DRAFT_RNG_SALT 0x6472616674000000ull /* "draft": not the verifier's stream */

typedef struct dslot {
    int64_t id;          /* the engine's seq_id; -1: free */
    int32_t *hist;       /* [0, n_cached): the tokens in the draft's KV; then scratch */
    int32_t cap;
    plume_sampler *smp;  /* the request's sampling law over the draft's logits */
    int64_t stamp;       /* the propose call that last used it */
    int32_t base;        /* committed tokens at the last propose */
} dslot;

struct plume_proposer {
    plume_model *draft;
    char *path;
    plume_seq_runner *runner;
    int32_t nv_target, nv_draft, nv; /* nv: the ids both share (what drafts come from) */
    int32_t max_seqs, max_batch;
    int32_t max_call;                /* sequences in one propose call (the engine's step) */
    int32_t block_size;
    dslot *slot;                     /* max_seqs */
    int64_t calls;
    /* per propose call, indexed like seqs[]: max_call entries */
    dslot **cur;
    int32_t *fed;                    /* tokens of seqs[i] already in the draft KV */
    bool *active;
    float *lg;                       /* max_call rows of nv_draft: each sequence's last logits */
    float *out;                      /* max_call rows of nv_draft: a run's logits */
    plume_seq_run *runs;
    int32_t *run_seq;                /* runs[j] belongs to seqs[run_seq[j]] */
};

static const char *const keys[] = {"method",        "num_speculative_tokens", "model",
                                   "kv_max_tokens", "kv_dtype",               "block_size",
                                   "max_batch_tokens"};
static const char *const dtypes[] = {"f32", "f16"}; /* default f16, as the engine's cache */

typedef struct draft_settings {
    int64_t kv_max_tokens, block_size, max_batch_tokens;
    size_t kv_dtype;
} draft_settings;

static int read_settings(const plume_settings *s, draft_settings *d, plume_error *err)
{
    if (!s)
        return plume_err(err, PLUME_ERR_INVALID,
                         "draft: needs a draft model: set speculative.model to its path (a GGUF "
                         "file or an HF directory with the target's vocabulary)");
    if (plume_settings_check_keys(s, keys, sizeof keys / sizeof *keys, err))
        return -1;
    if (!plume_settings_has(s, "model"))
        return plume_settings_error(s, NULL, err,
                                    "method draft needs `model: PATH`, the draft model (a GGUF "
                                    "file or an HF directory with the target's vocabulary)");
    const char *m;
    if (plume_settings_string(s, "model", NULL, &m, err))
        return -1;
    if (!m[0])
        return plume_settings_error(s, "model", err, "must be a path to the draft model, got ''");
    return plume_settings_int(s, "kv_max_tokens", 16384, 64, (int64_t)1 << 32,
                              &d->kv_max_tokens, err) ||
           plume_settings_choice(s, "kv_dtype", dtypes, 2, 1, &d->kv_dtype, err) ||
           plume_settings_int(s, "block_size", 16, 1, 1024, &d->block_size, err) ||
           plume_settings_int(s, "max_batch_tokens", 512, 1, 1 << 20, &d->max_batch_tokens, err);
}

static int draft_validate(const plume_settings *s, plume_error *err)
{
    draft_settings d;
    return read_settings(s, &d, err);
}

static void draft_destroy(plume_proposer *p)
{
    if (!p)
        return;
    if (p->slot)
        for (int32_t i = 0; i < p->max_seqs; i++) {
            free(p->slot[i].hist);
            plume_sampler_free(p->slot[i].smp);
        }
    plume_seq_runner_free(p->runner);
    plume_model_free(p->draft); /* before the target: it borrows the target's backend */
    free(p->path);
    free(p->slot);
    free(p->cur);
    free(p->fed);
    free(p->active);
    free(p->lg);
    free(p->out);
    free(p->runs);
    free(p->run_seq);
    free(p);
}

static int draft_create(const plume_proposer_host *host, const plume_settings *s,
                        plume_proposer **out, plume_error *err)
{
    draft_settings d;
    if (read_settings(s, &d, err))
        return -1;
    plume_proposer *p = calloc(1, sizeof *p);
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "draft: out of memory");
    if (plume_settings_path_value(s, "model", &p->path, err))
        goto fail;
    if (plume_proposer_host_load_model(host, p->path, &p->draft, err)) {
        plume_err_prefix(err, "draft model %s", p->path);
        goto fail;
    }
    if (spec_draft_vocab_check(host->target, p->draft, p->path, err))
        goto fail;
    p->nv_target = host->n_vocab;
    p->nv_draft = plume_model_n_vocab(p->draft);
    p->nv = p->nv_draft < p->nv_target ? p->nv_draft : p->nv_target;
    /* every sequence of a step has a slot, plus as many again for sequences
     * that pause (not speculating this step) without being released */
    p->max_call = host->max_seqs > 0 ? host->max_seqs : 64;
    p->max_seqs = 2 * p->max_call;
    p->block_size = (int32_t)d.block_size;
    /* a draft position's run has one token per sequence of the step */
    p->max_batch = (int32_t)d.max_batch_tokens < host->max_seqs ? host->max_seqs
                                                                 : (int32_t)d.max_batch_tokens;
    plume_seq_runner_params rp = plume_seq_runner_defaults();
    rp.kv_max_tokens = d.kv_max_tokens;
    rp.block_size = p->block_size;
    rp.max_batch_tokens = p->max_batch;
    rp.max_seqs = p->max_seqs;
    rp.kv_dtype = d.kv_dtype == 1 ? PLUME_KV_F16 : PLUME_KV_F32;
    if (plume_seq_runner_create(p->draft, &rp, &p->runner, err)) {
        plume_err_prefix(err, "draft model %s", p->path);
        goto fail;
    }
    size_t ns = (size_t)p->max_seqs, nc = (size_t)p->max_call, row = (size_t)p->nv_draft;
    p->slot = calloc(ns, sizeof *p->slot);
    p->cur = calloc(nc, sizeof *p->cur);
    p->fed = calloc(nc, sizeof *p->fed);
    p->active = calloc(nc, sizeof *p->active);
    p->lg = malloc(sizeof(float) * nc * row);
    p->out = malloc(sizeof(float) * nc * row);
    p->runs = calloc(nc, sizeof *p->runs);
    p->run_seq = calloc(nc, sizeof *p->run_seq);
    if (!p->slot || !p->cur || !p->fed || !p->active || !p->lg || !p->out || !p->runs ||
        !p->run_seq) {
        plume_err(err, PLUME_ERR_NOMEM, "draft: out of memory for %d sequences", p->max_seqs);
        goto fail;
    }
    for (size_t i = 0; i < ns; i++)
        p->slot[i].id = -1;
    *out = p;
    return 0;
fail:
    draft_destroy(p);
    return -1;
}

static void slot_clear(plume_proposer *p, dslot *sl)
{
    if (sl->id >= 0 && plume_seq_runner_length(p->runner, sl->id) >= 0)
        plume_seq_runner_release(p->runner, sl->id, NULL);
    plume_sampler_free(sl->smp);
    sl->smp = NULL;
    sl->id = -1;
}

static dslot *slot_find(plume_proposer *p, int64_t id)
{
    for (int32_t i = 0; i < p->max_seqs; i++)
        if (p->slot[i].id == id)
            return &p->slot[i];
    return NULL;
}

/* The sequence's slot, made (with its sampler) when new; when every slot
 * is taken, the one used longest ago outside this call is given up. */
static dslot *slot_get(plume_proposer *p, const plume_propose_seq *q, plume_error *err)
{
    dslot *sl = slot_find(p, q->seq_id), *lru = NULL;
    if (!sl) {
        for (int32_t i = 0; i < p->max_seqs && !sl; i++) {
            dslot *c = &p->slot[i];
            if (c->id < 0)
                sl = c;
            else if (c->stamp != p->calls && (!lru || c->stamp < lru->stamp))
                lru = c;
        }
        if (!sl && !lru) {
            plume_err(err, PLUME_ERR_INTERNAL, "draft: more sequences in one step than %d",
                      p->max_seqs);
            return NULL;
        }
        if (!sl) {
            slot_clear(p, lru);
            sl = lru;
        }
        plume_sampling_params sp = *q->sampling;
        if (plume_sampler_create(&sp, p->nv, &sl->smp, err))
            return NULL;
        plume_rng_seed(plume_sampler_rng(sl->smp), sp.seed ^ DRAFT_RNG_SALT);
        /* the engine sets the prompt length for the target's sampler; the
         * proposer first sees a sequence after its first sampled token.
         * (Were this guess off, q would still be the law the draft was
         * drawn from: acceptance, not exactness, would suffer.) */
        plume_sampler_set_prompt_len(sl->smp, q->n_tokens > 0 ? (size_t)q->n_tokens - 1 : 0);
        sl->id = q->seq_id;
    }
    sl->stamp = p->calls;
    int32_t need = q->n_tokens + q->k + 1;
    if (need > sl->cap) {
        int32_t cap = need + need / 2 + 64;
        int32_t *h = realloc(sl->hist, sizeof(int32_t) * (size_t)cap);
        if (!h) {
            plume_err(err, PLUME_ERR_NOMEM, "draft: out of memory for a history of %d tokens",
                      cap);
            return NULL;
        }
        sl->hist = h;
        sl->cap = cap;
    }
    return sl;
}

/* Draws draft token t of sequence i from the logits row lg. */
static int32_t draw(plume_proposer *p, dslot *sl, plume_draft *d, int32_t t, const float *lg,
                    int32_t n_hist)
{
    if (plume_sampler_is_greedy(sl->smp))
        return plume_sampler_sample(sl->smp, lg, sl->hist, (size_t)n_hist);
    float *row = d->probs + (size_t)t * (size_t)p->nv_target;
    plume_sampler_probs(sl->smp, lg, sl->hist, (size_t)n_hist, row);
    for (int32_t v = p->nv; v < p->nv_target; v++)
        row[v] = 0.0f;
    d->has_probs = 1;
    return plume_sampler_draw(sl->smp, row);
}

/* Runs runs[0..n) (run_seq maps them to sequences) and copies each logits
 * row to its sequence's lg row.  A full draft KV cache is not an error of
 * the step: those sequences stop drafting (the caller sees -2). */
static int run(plume_proposer *p, size_t n, plume_error *err)
{
    plume_error rerr = {0};
    if (plume_seq_runner_run(p->runner, p->runs, n, p->out, &rerr)) {
        if (rerr.code == PLUME_ERR_RANGE)
            return -2;
        *err = rerr;
        return -1;
    }
    size_t row = 0;
    for (size_t j = 0; j < n; j++)
        if (p->runs[j].n_logits > 0)
            memcpy(p->lg + (size_t)p->run_seq[j] * (size_t)p->nv_draft,
                   p->out + row++ * (size_t)p->nv_draft, sizeof(float) * (size_t)p->nv_draft);
    return 0;
}

static int draft_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                         plume_draft *drafts, plume_error *err)
{
    if (n > (size_t)p->max_call)
        return plume_err(err, PLUME_ERR_INVALID,
                         "draft: %zu sequences in one propose call, more than the host's "
                         "max_seqs (%d) it was created for",
                         n, p->max_call);
    p->calls++;
    /* 1. each sequence's draft KV: keep the prefix it shares with the
     * committed tokens (capped so the last token is fed: its logits draft
     * the first token), feed the rest */
    int64_t budget = plume_seq_runner_free_tokens(p->runner);
    for (size_t i = 0; i < n; i++) {
        const plume_propose_seq *q = &seqs[i];
        drafts[i].n = 0;
        drafts[i].has_probs = 0;
        p->active[i] = false;
        if (q->k < 1 || q->n_tokens < 1)
            continue;
        dslot *sl = slot_get(p, q, err);
        if (!sl)
            return -1;
        p->cur[i] = sl;
        int32_t len = plume_seq_runner_length(p->runner, q->seq_id), keep = 0;
        if (len < 0)
            len = 0;
        while (keep < len && keep < q->n_tokens - 1 && sl->hist[keep] == q->tokens[keep])
            keep++;
        if (keep < len && plume_seq_runner_truncate(p->runner, q->seq_id, keep, err))
            return -1;
        if (keep < len)
            budget = plume_seq_runner_free_tokens(p->runner);
        /* tokens to feed plus the k - 1 drafts, rounded up by a block */
        int64_t need = (int64_t)(q->n_tokens - keep) + q->k - 1 + p->block_size;
        if (need > budget) { /* no room this step: give the cache back */
            slot_clear(p, sl);
            p->cur[i] = NULL;
            budget = plume_seq_runner_free_tokens(p->runner);
            continue;
        }
        budget -= need;
        memcpy(sl->hist + keep, q->tokens + keep, sizeof(int32_t) * (size_t)(q->n_tokens - keep));
        p->fed[i] = keep;
        p->active[i] = true;
        sl->base = q->n_tokens;
    }
    /* catch-up runs, at most max_batch_tokens each; a long prompt is split
     * over several, only its last piece asks for logits */
    for (;;) {
        size_t nr = 0;
        int32_t room = p->max_batch;
        for (size_t i = 0; i < n && room > 0; i++) {
            if (!p->active[i] || p->fed[i] >= seqs[i].n_tokens)
                continue;
            int32_t left = seqs[i].n_tokens - p->fed[i];
            int32_t take = left < room ? left : room;
            p->runs[nr] = (plume_seq_run){seqs[i].seq_id, seqs[i].tokens + p->fed[i], take,
                                          take == left ? 1 : 0};
            p->run_seq[nr++] = (int32_t)i;
            room -= take;
        }
        if (nr == 0)
            break;
        int rc = run(p, nr, err);
        if (rc == -1)
            return -1;
        for (size_t j = 0; j < nr; j++) {
            size_t i = (size_t)p->run_seq[j];
            if (rc == -2) { /* the cache is full after all: these draft nothing */
                p->active[i] = false;
                slot_clear(p, p->cur[i]);
            } else {
                p->fed[i] += p->runs[j].n_tokens;
            }
        }
    }
    /* 2. one batched run per draft position over every sequence still
     * drafting; the last draft of a sequence is not fed */
    for (int32_t t = 0;; t++) {
        size_t nr = 0;
        for (size_t i = 0; i < n; i++) {
            if (!p->active[i] || t >= seqs[i].k)
                continue;
            dslot *sl = p->cur[i];
            int32_t n_hist = seqs[i].n_tokens + t;
            int32_t tok = draw(p, sl, &drafts[i], t, p->lg + i * (size_t)p->nv_draft, n_hist);
            drafts[i].tokens[t] = tok;
            drafts[i].n = t + 1;
            sl->hist[n_hist] = tok;
            if (t + 1 < seqs[i].k) {
                p->runs[nr] = (plume_seq_run){seqs[i].seq_id, &sl->hist[n_hist], 1, 1};
                p->run_seq[nr++] = (int32_t)i;
            }
        }
        if (nr == 0)
            break;
        int rc = run(p, nr, err);
        if (rc == -1)
            return -1;
        if (rc == -2) /* no room for the next position: keep the drafts so far */
            break;
    }
    return 0;
}

/* The verifier kept n_accepted of the drafts: the committed tokens the
 * draft KV may keep are those of the last propose plus the accepted drafts
 * (the target's own next token it has not seen yet).  propose() compares
 * the cache with the committed tokens anyway; this gives blocks back now. */
static void draft_accepted(plume_proposer *p, int64_t seq_id, int32_t n_drafted,
                           int32_t n_accepted)
{
    (void)n_drafted;
    dslot *sl = slot_find(p, seq_id);
    int32_t len = plume_seq_runner_length(p->runner, seq_id);
    if (!sl || len < 0)
        return;
    int32_t keep = sl->base + n_accepted;
    if (keep >= 0 && keep < len)
        plume_seq_runner_truncate(p->runner, seq_id, keep, NULL);
}

static void draft_release(plume_proposer *p, int64_t seq_id)
{
    dslot *sl = slot_find(p, seq_id);
    if (sl)
        slot_clear(p, sl);
    else if (plume_seq_runner_length(p->runner, seq_id) >= 0)
        plume_seq_runner_release(p->runner, seq_id, NULL);
}

/* The draft's weights (as stored), its KV pool, and the runner's
 * activations and logits plus this proposer's own rows and tables. */
static void draft_memory(const plume_proposer *p, plume_proposer_memory *out)
{
    int64_t kv = 0, scratch = 0;
    plume_seq_runner_memory(p->runner, &kv, &scratch);
    const int64_t nc = p->max_call;
    scratch += 2 * nc * p->nv_draft * (int64_t)sizeof(float) /* lg, out */ +
               p->max_seqs * (int64_t)sizeof *p->slot +
               nc * (int64_t)(sizeof *p->cur + sizeof *p->fed + sizeof *p->active +
                              sizeof *p->runs + sizeof *p->run_seq);
    for (int32_t i = 0; i < p->max_seqs; i++)
        scratch += (int64_t)p->slot[i].cap * (int64_t)sizeof(int32_t);
    out->weight_bytes = plume_model_weight_bytes(p->draft);
    out->kv_bytes = kv;
    out->scratch_bytes = scratch;
}

static const plume_proposer_vtable vtable = {
    .struct_size = sizeof(plume_proposer_vtable),
    .interface_version = PLUME_PROPOSER_INTERFACE_VERSION,
    .name = "draft",
    .validate = draft_validate,
    .create = draft_create,
    .destroy = draft_destroy,
    .propose = draft_propose,
    .accepted = draft_accepted,
    .release = draft_release,
    .memory = draft_memory,
};

const plume_proposer_vtable *plume_draft_proposer(void) { return &vtable; }
