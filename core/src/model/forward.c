/* The Llama-family forward pass on the CPU (llama2.c's shape: one straight
 * loop over layers) over a batch of sequences with a paged f32 KV cache.
 * Linear layers run as one matrix product over all positions of the batch;
 * attention reads each sequence's K/V through its block table. */
#include <stdlib.h>
#include <string.h>

#include "plume/fp16.h"
#include "backend/cpu/ops.h"
#include "model/activations.h"
#include "model/model_internal.h"
#include "model/paged_attention.h"
#include "model/runner.h"
#include "runtime/builtin.h"

struct plume_runner {
    const plume_model *m;
    plume_kv_cache *kv;
    plume_pool *pool;
    int32_t max_tokens;
    plume_acts a;            /* activations, [max_tokens][...] */
    plume_attn_row *rows;    /* per position */
    int32_t *slots;          /* per position: cache slot */
    int32_t *tokens;         /* per position: token id */
    int32_t *logit_rows;     /* positions whose logits are wanted */
    plume_backend *backend;  /* the cpu backend over pool, for plugin linears */
};

int plume_kv_cache_create(const plume_model *m, int32_t n_blocks, int32_t block_size,
                          plume_kv_dtype dtype, plume_kv_cache **out, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    if (c->head_dim > 512) /* the attention kernels' row buffers */
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "plume's attention supports head_dim up to 512, the model has %d",
                         c->head_dim);
    if (n_blocks <= 0 || block_size <= 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "KV cache needs a positive number of blocks and block size (got %d x %d)",
                         n_blocks, block_size);
    plume_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    kv->n_layer = c->n_layer;
    kv->n_blocks = n_blocks;
    kv->block_size = block_size;
    kv->kv_dim = c->n_head_kv * c->head_dim;
    kv->dtype = dtype;
    kv->elem = dtype == PLUME_KV_F16 ? 2 : sizeof(float);
    size_t n = (size_t)c->n_layer * (size_t)n_blocks * (size_t)block_size * (size_t)kv->kv_dim;
    kv->k = calloc(n, kv->elem);
    kv->v = calloc(n, kv->elem);
    if (!kv->k || !kv->v) {
        double mib = 2.0 * (double)n * (double)kv->elem / (1 << 20);
        plume_kv_cache_free(kv);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory allocating a KV cache of %d blocks x %d tokens (%.1f MiB); "
                         "lower kv_cache.max_tokens",
                         n_blocks, block_size, mib);
    }
    *out = kv;
    return 0;
}

void plume_kv_cache_free(plume_kv_cache *kv)
{
    if (!kv)
        return;
    free(kv->k);
    free(kv->v);
    free(kv);
}

int plume_runner_create(const plume_model *m, plume_kv_cache *kv, int32_t max_tokens,
                        int n_threads, plume_runner **out, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    if (max_tokens <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "max batched tokens must be positive, got %d",
                         max_tokens);
    if (n_threads <= 0)
        n_threads = plume_cpu_count();
    plume_runner *r = calloc(1, sizeof *r);
    if (!r)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    r->m = m;
    r->kv = kv;
    r->max_tokens = max_tokens;
    const size_t T = (size_t)max_tokens;
    int acts = plume_acts_alloc(c, T, &r->a);
    r->rows = malloc(sizeof *r->rows * T);
    r->slots = malloc(sizeof *r->slots * T);
    r->tokens = malloc(sizeof *r->tokens * T);
    r->logit_rows = malloc(sizeof *r->logit_rows * T);
    if (acts || !r->rows || !r->slots || !r->tokens || !r->logit_rows) {
        plume_runner_free(r);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory allocating activations for %d batched tokens", max_tokens);
    }
    if (plume_pool_create(n_threads, &r->pool, err) ||
        !(r->backend = plume_cpu_backend_wrap(r->pool, err))) {
        plume_runner_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

void plume_runner_free(plume_runner *r)
{
    if (!r)
        return;
    plume_builtin_cpu.destroy(r->backend);
    plume_pool_free(r->pool);
    plume_acts_free(&r->a);
    free(r->rows);
    free(r->slots);
    free(r->tokens);
    free(r->logit_rows);
    free(r);
}

int32_t plume_runner_max_tokens(const plume_runner *r) { return r->max_tokens; }
int plume_runner_threads(const plume_runner *r) { return plume_pool_threads(r->pool); }

/* Writes one position's kv_dim values into its cache slot. */
static void store_kv(const plume_kv_cache *kv, uint8_t *layer, int32_t slot, const float *src,
                     int kv_dim)
{
    if (kv->dtype == PLUME_KV_F32) {
        memcpy(layer + (size_t)slot * kv_dim * sizeof(float), src, sizeof(float) * (size_t)kv_dim);
        return;
    }
    uint16_t *dst = (uint16_t *)(layer + (size_t)slot * kv_dim * 2);
    for (int i = 0; i < kv_dim; i++)
        dst[i] = plume_fp32_to_fp16(src[i]);
}

static void add_bias(float *y, const float *b, int n_tok, int n)
{
    if (!b)
        return;
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < n; i++)
            y[(size_t)t * n + i] += b[i];
}

/* y = x·Wᵀ for n rows through the layer's method. */
static int lin_forward(plume_runner *r, const plume_lin *L, const float *x, int n, float *y,
                       plume_error *err)
{
    if (!L->vt) {
        plume_cpu_matmul_w(r->pool, &L->cw, x, n, y);
        return 0;
    }
    return L->vt->forward(L->pl, &plume_builtin_cpu, r->backend, x, n, y, err);
}

/* Several layers on the same input: one shared activation quantization and
 * pool pass when all are native, else one after another. */
static int lin_forward_multi(plume_runner *r, const plume_lin *const *L, int n_lin,
                             const float *x, int n, float *const *y, plume_error *err)
{
    bool native = true;
    for (int i = 0; i < n_lin; i++)
        native = native && !L[i]->vt;
    if (native) {
        const plume_cpu_weight *w[4];
        for (int i = 0; i < n_lin; i++)
            w[i] = &L[i]->cw;
        plume_cpu_matmul_multi(r->pool, w, n_lin, x, n, y);
        return 0;
    }
    for (int i = 0; i < n_lin; i++)
        if (lin_forward(r, L[i], x, n, y[i], err))
            return -1;
    return 0;
}

/* Flattens the batch into per-position token, slot and attention context,
 * checking ids, positions and block tables. Returns the position count. */
static int32_t plan(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs,
                    int32_t *n_logits, plume_error *err)
{
    const int32_t nv = r->m->cfg.n_vocab, bs = r->kv->block_size;
    int32_t T = 0, L = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const plume_batch_seq *q = &seqs[s];
        if (q->n <= 0 || q->pos0 < 0 || q->n_logits < 0 || q->n_logits > q->n)
            return plume_err(err, PLUME_ERR_INVALID,
                             "batch entry %d: bad shape (n %d, pos0 %d, n_logits %d)", s, q->n,
                             q->pos0, q->n_logits);
        if (q->n > r->max_tokens - T)
            return plume_err(err, PLUME_ERR_RANGE,
                             "the batch has more than %d positions (the runner's maximum)",
                             r->max_tokens);
        for (int32_t i = 0; i < q->n; i++) {
            int32_t tok = q->tokens[i], pos = q->pos0 + i;
            if (tok < 0 || tok >= nv)
                return plume_err(err, PLUME_ERR_INVALID,
                                 "token id %d at index %d is outside the vocabulary [0, %d)", tok,
                                 i, nv);
            int32_t blk = q->block_table[pos / bs];
            if (blk < 0 || blk >= r->kv->n_blocks)
                return plume_err(err, PLUME_ERR_INTERNAL,
                                 "block table entry %d = %d is outside the cache of %d blocks",
                                 pos / bs, blk, r->kv->n_blocks);
            r->tokens[T] = tok;
            r->slots[T] = blk * bs + pos % bs;
            r->rows[T] = (plume_attn_row){pos, q->block_table};
            if (i >= q->n - q->n_logits)
                r->logit_rows[L++] = T;
            T++;
        }
    }
    *n_logits = L;
    return T;
}

int plume_runner_forward(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs,
                         float *logits, plume_error *err)
{
    int32_t L = 0;
    int32_t n = plan(r, seqs, n_seqs, &L, err);
    if (n <= 0)
        return n == 0 ? plume_err(err, PLUME_ERR_INVALID, "empty batch") : -1;
    const plume_model *m = r->m;
    const plume_model_config *cfg = &m->cfg;
    const int E = cfg->n_embd, hd = cfg->head_dim, H = cfg->n_head, HKV = cfg->n_head_kv;
    const int Q = H * hd, KV = HKV * hd, F = cfg->n_ff;
    const int adjacent = cfg->rope_style == PLUME_ROPE_ADJACENT;
    const size_t layer_stride = (size_t)r->kv->n_blocks * r->kv->block_size * KV;
    plume_pool *pool = r->pool;

    for (int t = 0; t < n; t++)
        plume_cpu_get_row(m->tok_embd, r->tokens[t], r->a.x + (size_t)t * E);

    for (int l = 0; l < cfg->n_layer; l++) {
        const plume_layer *Ly = &m->layers[l];
        uint8_t *kc = (uint8_t *)r->kv->k + (size_t)l * layer_stride * r->kv->elem;
        uint8_t *vc = (uint8_t *)r->kv->v + (size_t)l * layer_stride * r->kv->elem;
        for (int t = 0; t < n; t++)
            plume_cpu_rmsnorm(r->a.xn + (size_t)t * E, r->a.x + (size_t)t * E, Ly->attn_norm, E,
                              cfg->rms_eps);
        {   /* Q, K, V share one quantization of xn and one pool pass */
            const plume_lin *const qkv[3] = {&Ly->q, &Ly->k, &Ly->v};
            float *const qkv_y[3] = {r->a.q, r->a.k, r->a.v};
            if (lin_forward_multi(r, qkv, 3, r->a.xn, n, qkv_y, err))
                return -1;
        }
        add_bias(r->a.q, Ly->bq, n, Q);
        add_bias(r->a.k, Ly->bk, n, KV);
        add_bias(r->a.v, Ly->bv, n, KV);
        for (int t = 0; t < n; t++) {
            const int pos = r->rows[t].pos;
            plume_cpu_rope_heads(r->a.q + (size_t)t * Q, H, hd, pos, m->rope_inv_freq, adjacent);
            plume_cpu_rope_heads(r->a.k + (size_t)t * KV, HKV, hd, pos, m->rope_inv_freq, adjacent);
            store_kv(r->kv, kc, r->slots[t], r->a.k + (size_t)t * KV, KV);
            store_kv(r->kv, vc, r->slots[t], r->a.v + (size_t)t * KV, KV);
        }
        plume_paged_attention(pool, r->a.q, kc, vc, r->kv->dtype == PLUME_KV_F16, r->rows, n,
                              r->kv->block_size, H, HKV, hd,
                              r->a.attn);
        if (lin_forward(r, &Ly->o, r->a.attn, n, r->a.xn, err))
            return -1;
        add_bias(r->a.xn, Ly->bo, n, E);
        for (size_t i = 0; i < (size_t)n * E; i++)
            r->a.x[i] += r->a.xn[i];

        for (int t = 0; t < n; t++)
            plume_cpu_rmsnorm(r->a.xn + (size_t)t * E, r->a.x + (size_t)t * E, Ly->ffn_norm, E,
                              cfg->rms_eps);
        {   /* gate and up share one quantization of xn and one pool pass */
            const plume_lin *const gu[2] = {&Ly->gate, &Ly->up};
            float *const gu_y[2] = {r->a.gate, r->a.up};
            if (lin_forward_multi(r, gu, 2, r->a.xn, n, gu_y, err))
                return -1;
        }
        plume_cpu_swiglu(r->a.gate, r->a.up, n * F);
        if (lin_forward(r, &Ly->down, r->a.gate, n, r->a.xn, err))
            return -1;
        for (size_t i = 0; i < (size_t)n * E; i++)
            r->a.x[i] += r->a.xn[i];
    }
    if (L > 0 && logits) {
        /* final norm of the wanted rows only, gathered, then one head matmul */
        for (int i = 0; i < L; i++)
            plume_cpu_rmsnorm(r->a.xn + (size_t)i * E, r->a.x + (size_t)r->logit_rows[i] * E,
                              m->out_norm, E, cfg->rms_eps);
        if (lin_forward(r, &m->output, r->a.xn, L, logits, err))
            return -1;
    }
    return 0;
}
