/* The Llama-family forward pass on the CPU (llama2.c's shape: one straight
 * loop over layers), over a batch of consecutive positions of one sequence
 * with a contiguous f32 KV cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "model/model_internal.h"

struct plume_context {
    const plume_model *m;
    plume_pool *pool;
    int n_ctx;
    int n_past;
    int max_batch;       /* positions per internal chunk */
    float *k_cache;      /* [n_layer][n_ctx][n_head_kv * head_dim] */
    float *v_cache;
    /* activations, [max_batch][...] */
    float *x, *xn, *q, *attn, *gate, *up, *logits_in;
    float *scratch;      /* nth * max(K of any matmul, n_ctx) */
};

#define MAX_BATCH 64

int plume_context_create(const plume_model *m, int n_ctx, int n_threads, plume_context **out,
                         plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    if (n_ctx <= 0)
        n_ctx = c->n_ctx_train;
    if (n_ctx <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "context size must be positive, got %d", n_ctx);
    if (n_threads <= 0)
        n_threads = plume_cpu_count();
    plume_context *x = calloc(1, sizeof *x);
    if (!x)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating a context");
    x->m = m;
    x->n_ctx = n_ctx;
    x->max_batch = MAX_BATCH;
    const size_t B = (size_t)x->max_batch, E = (size_t)c->n_embd,
                 Q = (size_t)c->n_head * c->head_dim, KV = (size_t)c->n_head_kv * c->head_dim,
                 F = (size_t)c->n_ff;
    size_t kmax = E > Q ? E : Q;
    if (F > kmax)
        kmax = F;
    if ((size_t)n_ctx > kmax)
        kmax = (size_t)n_ctx;
    size_t cache = (size_t)c->n_layer * (size_t)n_ctx * KV;
    x->k_cache = calloc(cache, sizeof(float));
    x->v_cache = calloc(cache, sizeof(float));
    x->x = malloc(sizeof(float) * B * E);
    x->xn = malloc(sizeof(float) * B * (E > Q ? E : Q));
    x->q = malloc(sizeof(float) * B * (Q + 2 * KV));
    x->attn = malloc(sizeof(float) * B * Q);
    x->gate = malloc(sizeof(float) * B * F);
    x->up = malloc(sizeof(float) * B * F);
    x->logits_in = malloc(sizeof(float) * E);
    x->scratch = malloc(sizeof(float) * (size_t)n_threads * kmax);
    if (!x->k_cache || !x->v_cache || !x->x || !x->xn || !x->q || !x->attn || !x->gate ||
        !x->up || !x->logits_in || !x->scratch) {
        plume_context_free(x);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory allocating a %d-token KV cache (%.1f MiB); use a smaller "
                         "context",
                         n_ctx, 2.0 * (double)cache * sizeof(float) / (1 << 20));
    }
    if (plume_pool_create(n_threads, &x->pool, err)) {
        plume_context_free(x);
        return -1;
    }
    *out = x;
    return 0;
}

void plume_context_free(plume_context *c)
{
    if (!c)
        return;
    plume_pool_free(c->pool);
    free(c->k_cache);
    free(c->v_cache);
    free(c->x);
    free(c->xn);
    free(c->q);
    free(c->attn);
    free(c->gate);
    free(c->up);
    free(c->logits_in);
    free(c->scratch);
    free(c);
}

int plume_context_n_ctx(const plume_context *c) { return c->n_ctx; }
int plume_context_n_past(const plume_context *c) { return c->n_past; }
void plume_context_reset(plume_context *c) { c->n_past = 0; }

static void add_bias(float *y, const float *b, int n_tok, int n)
{
    if (!b)
        return;
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < n; i++)
            y[(size_t)t * n + i] += b[i];
}

/* One chunk of n positions starting at c->n_past. */
static void forward_chunk(plume_context *c, const int32_t *tokens, int n, float *logits)
{
    const plume_model *m = c->m;
    const plume_model_config *cfg = &m->cfg;
    const int E = cfg->n_embd, hd = cfg->head_dim, H = cfg->n_head, HKV = cfg->n_head_kv;
    const int Q = H * hd, KV = HKV * hd, F = cfg->n_ff;
    const int pos0 = c->n_past;
    const int adjacent = cfg->rope_style == PLUME_ROPE_ADJACENT;
    plume_pool *pool = c->pool;

    for (int t = 0; t < n; t++)
        plume_cpu_get_row(m->tok_embd, tokens[t], c->x + (size_t)t * E);

    float *q = c->q, *k = c->q + (size_t)n * Q, *v = k + (size_t)n * KV;
    for (int l = 0; l < cfg->n_layer; l++) {
        const plume_layer *L = &m->layers[l];
        for (int t = 0; t < n; t++)
            plume_cpu_rmsnorm(c->xn + (size_t)t * E, c->x + (size_t)t * E, L->attn_norm, E,
                              cfg->rms_eps);
        plume_cpu_matmul(pool, L->wq, c->xn, n, q, c->scratch);
        plume_cpu_matmul(pool, L->wk, c->xn, n, k, c->scratch);
        plume_cpu_matmul(pool, L->wv, c->xn, n, v, c->scratch);
        add_bias(q, L->bq, n, Q);
        add_bias(k, L->bk, n, KV);
        add_bias(v, L->bv, n, KV);
        float *kc = c->k_cache + (size_t)l * c->n_ctx * KV;
        float *vc = c->v_cache + (size_t)l * c->n_ctx * KV;
        for (int t = 0; t < n; t++) {
            for (int h = 0; h < H; h++)
                plume_cpu_rope(q + (size_t)t * Q + (size_t)h * hd, hd, pos0 + t, m->rope_inv_freq,
                               adjacent);
            for (int h = 0; h < HKV; h++)
                plume_cpu_rope(k + (size_t)t * KV + (size_t)h * hd, hd, pos0 + t,
                               m->rope_inv_freq, adjacent);
            memcpy(kc + (size_t)(pos0 + t) * KV, k + (size_t)t * KV, sizeof(float) * KV);
            memcpy(vc + (size_t)(pos0 + t) * KV, v + (size_t)t * KV, sizeof(float) * KV);
        }
        plume_cpu_attention(pool, q, kc, vc, KV, n, pos0, H, HKV, hd, c->attn, c->scratch,
                            c->n_ctx);
        plume_cpu_matmul(pool, L->wo, c->attn, n, c->xn, c->scratch);
        for (size_t i = 0; i < (size_t)n * E; i++)
            c->x[i] += c->xn[i];

        for (int t = 0; t < n; t++)
            plume_cpu_rmsnorm(c->xn + (size_t)t * E, c->x + (size_t)t * E, L->ffn_norm, E,
                              cfg->rms_eps);
        plume_cpu_matmul(pool, L->w_gate, c->xn, n, c->gate, c->scratch);
        plume_cpu_matmul(pool, L->w_up, c->xn, n, c->up, c->scratch);
        plume_cpu_swiglu(c->gate, c->up, n * F);
        plume_cpu_matmul(pool, L->w_down, c->gate, n, c->xn, c->scratch);
        for (size_t i = 0; i < (size_t)n * E; i++)
            c->x[i] += c->xn[i];
    }
    c->n_past += n;
    if (logits) {
        plume_cpu_rmsnorm(c->logits_in, c->x + (size_t)(n - 1) * E, m->out_norm, E,
                          cfg->rms_eps);
        plume_cpu_matmul(pool, m->output, c->logits_in, 1, logits, c->scratch);
    }
}

int plume_decode(plume_context *c, const int32_t *tokens, size_t n, float *logits,
                 plume_error *err)
{
    const int32_t nv = c->m->cfg.n_vocab;
    if (n == 0)
        return plume_err(err, PLUME_ERR_INVALID, "plume_decode needs at least one token");
    if ((size_t)c->n_past + n > (size_t)c->n_ctx)
        return plume_err(err, PLUME_ERR_RANGE,
                         "%zu tokens after %d cached positions exceed the context of %d tokens; "
                         "use a larger --ctx-size or a shorter prompt",
                         n, c->n_past, c->n_ctx);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= nv)
            return plume_err(err, PLUME_ERR_INVALID,
                             "token id %d at index %zu is outside the vocabulary [0, %d)",
                             tokens[i], i, nv);
    for (size_t done = 0; done < n;) {
        size_t chunk = n - done;
        if (chunk > (size_t)c->max_batch)
            chunk = (size_t)c->max_batch;
        bool last = done + chunk == n;
        forward_chunk(c, tokens + done, (int)chunk, last ? logits : NULL);
        done += chunk;
    }
    return 0;
}
