/* plume_seq_runner: several sequences of one model over a private paged KV
 * cache with a free list of blocks — the runner and KV cache of the engine
 * (model/runner.h) without its scheduler or prefix cache.  Every run is
 * checked in full before anything changes, so a failed run leaves every
 * sequence as it was. */
#include "plume/seq_runner.h"

#include <stdlib.h>
#include <string.h>

#include "model/runner.h"

typedef struct sr_seq {
    int64_t id;        /* -1: slot free */
    int32_t len;       /* tokens cached */
    int32_t n_table;   /* blocks held: ceil(len / block_size) after a run */
    int32_t cap_table; /* entries allocated in table */
    int32_t *table;
} sr_seq;

struct plume_seq_runner {
    const plume_model *m;
    plume_seq_runner_params p;
    int32_t n_vocab, n_blocks;
    plume_kv_cache *kv;
    plume_runner *runner;
    int32_t *free_blocks; /* stack; the top is free_blocks[n_free - 1] */
    int32_t n_free;
    sr_seq *seqs;         /* [max_seqs] */
    int32_t n_alive;
    /* per run scratch, [max_seqs] */
    int32_t *slot_of;     /* slot of each run entry */
    int32_t *old_table;   /* n_table of each entry's slot before the run */
    plume_batch_seq *batch;
};

plume_seq_runner_params plume_seq_runner_defaults(void)
{
    return (plume_seq_runner_params){.kv_max_tokens = 4096, .block_size = 16,
                                     .max_batch_tokens = 512, .max_seqs = 64,
                                     .kv_dtype = PLUME_KV_F16};
}

static int check_params(const plume_seq_runner_params *p, plume_error *err)
{
    if (p->block_size < 1 || p->block_size > 4096)
        return plume_err(err, PLUME_ERR_INVALID,
                         "seq runner: block_size must be in [1, 4096] tokens, got %d",
                         p->block_size);
    if (p->kv_max_tokens < 1 || p->kv_max_tokens / p->block_size >= INT32_MAX)
        return plume_err(err, PLUME_ERR_INVALID,
                         "seq runner: kv_max_tokens must be in [1, %lld], got %lld",
                         (long long)(INT32_MAX - 1) * p->block_size, (long long)p->kv_max_tokens);
    if (p->max_batch_tokens < 1 || p->max_batch_tokens > (1 << 20))
        return plume_err(err, PLUME_ERR_INVALID,
                         "seq runner: max_batch_tokens must be in [1, 1048576], got %d",
                         p->max_batch_tokens);
    if (p->max_seqs < 1 || p->max_seqs > (1 << 20))
        return plume_err(err, PLUME_ERR_INVALID,
                         "seq runner: max_seqs must be in [1, 1048576], got %d", p->max_seqs);
    if (p->kv_dtype != PLUME_KV_F32 && p->kv_dtype != PLUME_KV_F16 && p->kv_dtype != PLUME_KV_INT8)
        return plume_err(err, PLUME_ERR_INVALID,
                         "seq runner: kv_dtype %d is not a plume_kv_dtype (PLUME_KV_F32, "
                         "PLUME_KV_F16 or PLUME_KV_INT8)", (int)p->kv_dtype);
    return 0;
}

int plume_seq_runner_create(const plume_model *m, const plume_seq_runner_params *p,
                            plume_seq_runner **out, plume_error *err)
{
    plume_seq_runner_params d = plume_seq_runner_defaults();
    if (!p)
        p = &d;
    if (!m)
        return plume_err(err, PLUME_ERR_INVALID, "seq runner: no model given; load one first");
    if (check_params(p, err))
        return -1;
    plume_seq_runner *r = calloc(1, sizeof *r);
    if (!r)
        return plume_err(err, PLUME_ERR_NOMEM, "seq runner: out of memory");
    r->m = m;
    r->p = *p;
    r->n_vocab = plume_model_n_vocab(m);
    r->n_blocks = (int32_t)((p->kv_max_tokens + p->block_size - 1) / p->block_size);
    const size_t ns = (size_t)p->max_seqs;
    r->free_blocks = malloc(sizeof(int32_t) * (size_t)r->n_blocks);
    r->seqs = calloc(ns, sizeof *r->seqs);
    r->slot_of = malloc(sizeof(int32_t) * ns);
    r->old_table = malloc(sizeof(int32_t) * ns);
    r->batch = malloc(sizeof *r->batch * ns);
    if (!r->free_blocks || !r->seqs || !r->slot_of || !r->old_table || !r->batch) {
        plume_seq_runner_free(r);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "seq runner: out of memory for %d blocks and %d sequences", r->n_blocks,
                         p->max_seqs);
    }
    for (int32_t i = 0; i < r->n_blocks; i++)
        r->free_blocks[i] = r->n_blocks - 1 - i; /* block 0 is taken first */
    r->n_free = r->n_blocks;
    for (size_t i = 0; i < ns; i++)
        r->seqs[i].id = -1;
    if (plume_kv_cache_create(m, r->n_blocks, p->block_size, p->kv_dtype, &r->kv, err) ||
        plume_runner_create(m, r->kv, p->max_batch_tokens, &r->runner, err)) {
        plume_seq_runner_free(r);
        return plume_err_prefix(err, "seq runner (%d blocks of %d tokens, %d batched tokens)",
                                r->n_blocks, p->block_size, p->max_batch_tokens);
    }
    *out = r;
    return 0;
}

void plume_seq_runner_free(plume_seq_runner *r)
{
    if (!r)
        return;
    plume_runner_free(r->runner);
    plume_kv_cache_free(r->kv);
    if (r->seqs)
        for (int32_t i = 0; i < r->p.max_seqs; i++)
            free(r->seqs[i].table);
    free(r->seqs);
    free(r->free_blocks);
    free(r->slot_of);
    free(r->old_table);
    free(r->batch);
    free(r);
}

static int32_t find_slot(const plume_seq_runner *r, int64_t id)
{
    if (id < 0)
        return -1;
    for (int32_t i = 0; i < r->p.max_seqs; i++)
        if (r->seqs[i].id == id)
            return i;
    return -1;
}

static int32_t blocks_for(const plume_seq_runner *r, int64_t tokens)
{
    return (int32_t)((tokens + r->p.block_size - 1) / r->p.block_size);
}

/* Gives back s's blocks past the first keep. */
static void give_back(plume_seq_runner *r, sr_seq *s, int32_t keep)
{
    for (int32_t b = s->n_table; b-- > keep;)
        r->free_blocks[r->n_free++] = s->table[b];
    s->n_table = keep;
}

/* Checks the whole run; fills slot_of (-1: new) and the number of blocks
 * it takes. */
static int check_run(plume_seq_runner *r, const plume_seq_run *seqs, size_t n, const float *logits,
                     int64_t *blocks_needed, plume_error *err)
{
    if (n > (size_t)r->p.max_seqs)
        return plume_err(err, PLUME_ERR_RANGE,
                         "seq runner: a run of %zu sequences is more than max_seqs (%d); split "
                         "the run or raise max_seqs", n, r->p.max_seqs);
    int64_t total = 0, n_logits = 0, blocks = 0;
    int32_t n_new = 0;
    for (size_t i = 0; i < n; i++) {
        const plume_seq_run *q = &seqs[i];
        if (q->seq_id < 0)
            return plume_err(err, PLUME_ERR_INVALID,
                             "seq runner: run entry %zu has seq_id %lld; ids must be >= 0", i,
                             (long long)q->seq_id);
        for (size_t j = 0; j < i; j++)
            if (seqs[j].seq_id == q->seq_id)
                return plume_err(err, PLUME_ERR_INVALID,
                                 "seq runner: sequence %lld appears twice in one run (entries %zu "
                                 "and %zu); give each sequence's new tokens in one entry",
                                 (long long)q->seq_id, j, i);
        if (q->n_tokens < 1 || !q->tokens)
            return plume_err(err, PLUME_ERR_INVALID,
                             "seq runner: run entry %zu (sequence %lld) has %d tokens%s; give at "
                             "least one", i, (long long)q->seq_id, q->n_tokens,
                             q->tokens ? "" : " and no token array");
        if (q->n_logits < 0 || q->n_logits > q->n_tokens)
            return plume_err(err, PLUME_ERR_INVALID,
                             "seq runner: run entry %zu (sequence %lld) asks for %d logits rows "
                             "of %d new tokens; n_logits must be in [0, n_tokens]",
                             i, (long long)q->seq_id, q->n_logits, q->n_tokens);
        for (int32_t t = 0; t < q->n_tokens; t++)
            if (q->tokens[t] < 0 || q->tokens[t] >= r->n_vocab)
                return plume_err(err, PLUME_ERR_INVALID,
                                 "seq runner: sequence %lld: token id %d at index %d is outside "
                                 "the vocabulary [0, %d) of the model",
                                 (long long)q->seq_id, q->tokens[t], t, r->n_vocab);
        total += q->n_tokens;
        n_logits += q->n_logits;
        int32_t slot = find_slot(r, q->seq_id);
        r->slot_of[i] = slot;
        int64_t len = slot >= 0 ? r->seqs[slot].len : 0;
        n_new += slot < 0;
        blocks += blocks_for(r, len + q->n_tokens) - (slot >= 0 ? r->seqs[slot].n_table : 0);
    }
    if (total > r->p.max_batch_tokens)
        return plume_err(err, PLUME_ERR_RANGE,
                         "seq runner: the run has %lld new tokens, more than max_batch_tokens "
                         "(%d); split it into several runs or raise max_batch_tokens",
                         (long long)total, r->p.max_batch_tokens);
    if (n_logits > 0 && !logits)
        return plume_err(err, PLUME_ERR_INVALID,
                         "seq runner: the run asks for %lld logits rows but logits is NULL",
                         (long long)n_logits);
    if (n_new > r->p.max_seqs - r->n_alive)
        return plume_err(err, PLUME_ERR_RANGE,
                         "seq runner: the run starts %d new sequences but only %d of max_seqs "
                         "(%d) are free; release finished sequences or raise max_seqs",
                         n_new, r->p.max_seqs - r->n_alive, r->p.max_seqs);
    if (blocks > r->n_free) {
        const int64_t bs = r->p.block_size;
        return plume_err(err, PLUME_ERR_RANGE,
                         "seq runner: the KV cache is full: the run needs %lld more blocks "
                         "(%lld tokens) but only %d blocks (%lld tokens) are free of %d blocks of "
                         "%lld tokens (kv_max_tokens %lld); raise kv_max_tokens, or truncate or "
                         "release sequences first",
                         (long long)blocks, (long long)(blocks * bs), r->n_free,
                         (long long)(r->n_free * bs), r->n_blocks, (long long)bs,
                         (long long)r->p.kv_max_tokens);
    }
    *blocks_needed = blocks;
    return 0;
}

/* Grows each touched sequence's table to hold its blocks after the run and
 * reserves table space for new ones (nothing visible changes). */
static int reserve_tables(plume_seq_runner *r, const plume_seq_run *seqs, size_t n,
                          plume_error *err)
{
    int32_t next_free = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t slot = r->slot_of[i];
        if (slot < 0) { /* the free slots, in order, go to the new sequences */
            while (r->seqs[next_free].id >= 0)
                next_free++;
            slot = next_free++;
        }
        sr_seq *s = &r->seqs[slot];
        int64_t len = r->slot_of[i] >= 0 ? s->len : 0;
        int32_t need = blocks_for(r, len + seqs[i].n_tokens);
        if (need > s->cap_table) {
            int32_t *t = realloc(s->table, sizeof(int32_t) * (size_t)need);
            if (!t)
                return plume_err(err, PLUME_ERR_NOMEM,
                                 "seq runner: out of memory for a block table of %d entries",
                                 need);
            s->table = t;
            s->cap_table = need;
        }
    }
    return 0;
}

int plume_seq_runner_run(plume_seq_runner *r, const plume_seq_run *seqs, size_t n, float *logits,
                         plume_error *err)
{
    if (n == 0)
        return 0;
    if (!seqs)
        return plume_err(err, PLUME_ERR_INVALID, "seq runner: %zu run entries but seqs is NULL",
                         n);
    int64_t blocks;
    if (check_run(r, seqs, n, logits, &blocks, err) || reserve_tables(r, seqs, n, err))
        return -1;
    /* commit: slots for new sequences, blocks from the free list */
    int32_t next_free = 0;
    for (size_t i = 0; i < n; i++) {
        if (r->slot_of[i] < 0) {
            while (r->seqs[next_free].id >= 0)
                next_free++;
            r->slot_of[i] = -2 - next_free; /* new: slot -2 - v */
            r->seqs[next_free].id = seqs[i].seq_id;
            r->seqs[next_free].len = 0;
            r->seqs[next_free].n_table = 0;
            next_free++;
        }
        int32_t slot = r->slot_of[i] >= 0 ? r->slot_of[i] : -2 - r->slot_of[i];
        sr_seq *s = &r->seqs[slot];
        r->old_table[i] = s->n_table;
        int32_t need = blocks_for(r, (int64_t)s->len + seqs[i].n_tokens);
        while (s->n_table < need)
            s->table[s->n_table++] = r->free_blocks[--r->n_free];
        r->batch[i] = (plume_batch_seq){seqs[i].tokens, seqs[i].n_tokens, s->len, s->table,
                                        seqs[i].n_logits};
    }
    int rc = plume_runner_forward(r->runner, r->batch, (int32_t)n, logits, err);
    for (size_t i = 0; i < n; i++) {
        bool is_new = r->slot_of[i] < 0;
        sr_seq *s = &r->seqs[is_new ? -2 - r->slot_of[i] : r->slot_of[i]];
        if (rc == 0) {
            s->len += seqs[i].n_tokens;
            r->n_alive += is_new;
            continue;
        }
        give_back(r, s, r->old_table[i]); /* roll back */
        if (is_new)
            s->id = -1;
    }
    if (rc)
        return plume_err_prefix(err, "seq runner");
    return 0;
}

/* The live sequence seq_id, or NULL with err naming the operation op. */
static sr_seq *known(plume_seq_runner *r, int64_t seq_id, const char *op, plume_error *err)
{
    int32_t slot = find_slot(r, seq_id);
    if (slot >= 0)
        return &r->seqs[slot];
    plume_err(err, PLUME_ERR_INVALID, "seq runner: %s: no sequence %lld (never run, or released)",
              op, (long long)seq_id);
    return NULL;
}

int plume_seq_runner_truncate(plume_seq_runner *r, int64_t seq_id, int32_t n_keep,
                              plume_error *err)
{
    sr_seq *s = known(r, seq_id, "truncate", err);
    if (!s)
        return -1;
    if (n_keep < 0 || n_keep > s->len)
        return plume_err(err, PLUME_ERR_RANGE,
                         "seq runner: truncate: sequence %lld has %d tokens; n_keep must be in "
                         "[0, %d], got %d", (long long)seq_id, s->len, s->len, n_keep);
    give_back(r, s, blocks_for(r, n_keep));
    s->len = n_keep;
    return 0;
}

int plume_seq_runner_release(plume_seq_runner *r, int64_t seq_id, plume_error *err)
{
    sr_seq *s = known(r, seq_id, "release", err);
    if (!s)
        return -1;
    give_back(r, s, 0);
    s->id = -1;
    s->len = 0;
    r->n_alive--;
    return 0;
}

int32_t plume_seq_runner_length(const plume_seq_runner *r, int64_t seq_id)
{
    int32_t slot = find_slot(r, seq_id);
    return slot < 0 ? -1 : r->seqs[slot].len;
}

int32_t plume_seq_runner_n_seqs(const plume_seq_runner *r) { return r->n_alive; }

int64_t plume_seq_runner_free_tokens(const plume_seq_runner *r)
{
    return (int64_t)r->n_free * r->p.block_size;
}

int64_t plume_seq_runner_kv_bytes_per_token(const plume_seq_runner *r)
{
    return plume_kv_pool_bytes_per_token(&r->kv->pool);
}

const plume_model *plume_seq_runner_model(const plume_seq_runner *r) { return r->m; }

void plume_seq_runner_memory(const plume_seq_runner *r, int64_t *kv_bytes, int64_t *scratch_bytes)
{
    if (kv_bytes) /* K and V of every layer (backend.h: layer_stride covers all blocks) */
        *kv_bytes = 2 * (int64_t)r->kv->pool.layer_stride * r->kv->pool.n_layer;
    if (scratch_bytes)
        *scratch_bytes = plume_runner_scratch_bytes(r->runner);
}
