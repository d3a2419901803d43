/* The Llama-family forward pass (llama2.c's shape: one straight loop over
 * layers) over a batch of sequences with a paged KV cache.  It calls only
 * the backend vtable (plume/backend.h) and the linear methods
 * (plume/linear.h): every buffer is the model's backend's, so the same code
 * runs on the cpu backend, a device backend or backend-ref.  Linear layers
 * run as one matrix product over all positions of the batch; attention
 * reads each sequence's K/V through its block table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "model/moe.h"
#include "model/runner.h"

/* The runner's activation buffers, [max_tokens][...] on the backend. */
enum { A_X, A_XN, A_Q, A_K, A_V, A_ATTN, A_GATE, A_UP,
       A_ROUTER, A_XG, A_Y, /* mixture-of-experts layers only (0 wide otherwise) */
       A_COUNT };

struct plume_runner {
    const plume_model *m;
    const plume_backend_vtable *bvt;
    plume_backend *b;
    plume_kv_cache *kv;
    int32_t max_tokens;
    plume_buf *a[A_COUNT];
    plume_buf *out;          /* logits rows, out_cap of them */
    int32_t out_cap;
    /* the current step (host) */
    plume_step st;
    bool in_step;
    int32_t *tokens, *pos, *slots, *out_rows; /* [max_tokens] */
    plume_step_seq *seqs;                      /* [max_tokens] */
    plume_moe_plan moe;                        /* routing scratch (MoE models) */
};

int plume_kv_cache_create(const plume_model *m, int32_t n_blocks, int32_t block_size,
                          plume_kv_dtype dtype, plume_kv_cache **out, plume_error *err)
{
    return plume_kv_cache_create_layers(m, m->cfg.n_layer, n_blocks, block_size, dtype, out, err);
}

int plume_kv_cache_create_layers(const plume_model *m, int32_t n_layer, int32_t n_blocks,
                                 int32_t block_size, plume_kv_dtype dtype, plume_kv_cache **out,
                                 plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    if (n_blocks <= 0 || block_size <= 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "KV cache needs a positive number of blocks and block size (got %d x %d)",
                         n_blocks, block_size);
    if (!m->bvt->supports(m->b, PLUME_FEAT_KV_DTYPE, dtype))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "backend %s cannot store the KV cache as %s; use kv_cache.dtype f32 "
                         "(--kv-dtype f32), or speculative.kv_dtype f32 for a draft model",
                         m->bvt->name, plume_kv_dtype_name(dtype));
    plume_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    kv->bvt = m->bvt;
    kv->b = m->b;
    kv->pool = (plume_kv_pool){.n_layer = n_layer, .n_blocks = n_blocks,
                               .block_size = block_size, .n_head_kv = c->n_head_kv,
                               .head_dim = c->head_dim, .dtype = dtype};
    if (m->bvt->kv_alloc(m->b, &kv->pool, err)) {
        free(kv);
        return plume_err_prefix(err, "backend %s", m->bvt->name);
    }
    *out = kv;
    return 0;
}

void plume_kv_cache_free(plume_kv_cache *kv)
{
    if (!kv)
        return;
    kv->bvt->kv_free(kv->b, &kv->pool);
    free(kv);
}

/* Floats per position of each activation buffer. */
static void activation_widths(const plume_model_config *c, int32_t max_tokens,
                              size_t width[A_COUNT])
{
    const size_t E = (size_t)c->n_embd, Q = (size_t)c->n_head * (size_t)c->head_dim,
                 KV = (size_t)c->n_head_kv * (size_t)c->head_dim, F = (size_t)c->n_ff;
    width[A_X] = E;
    width[A_XN] = E > Q ? E : Q;
    width[A_Q] = Q;
    width[A_K] = width[A_V] = KV;
    width[A_ATTN] = Q;
    width[A_GATE] = width[A_UP] = F;
    const bool moe = c->n_expert > 0;
    if (moe && (size_t)c->n_ff_exp > width[A_GATE])
        width[A_GATE] = width[A_UP] = (size_t)c->n_ff_exp;
    if (moe && (size_t)c->n_ff_shexp > width[A_GATE])
        width[A_GATE] = width[A_UP] = (size_t)c->n_ff_shexp;
    width[A_ROUTER] = moe ? (size_t)c->n_expert : 0;
    width[A_XG] = width[A_Y] = moe ? E : 0;
    if (!moe)
        return;
    /* the grouped experts' rows (moe.h) in the same buffers */
    const size_t T = (size_t)max_tokens, G = (size_t)plume_moe_grouped_rows(c, max_tokens);
    const size_t xg = (G * E + T - 1) / T, ff = (G * (size_t)c->n_ff_exp + T - 1) / T;
    if (xg > width[A_XG])
        width[A_XG] = width[A_Y] = xg;
    if (ff > width[A_GATE])
        width[A_GATE] = width[A_UP] = ff;
}

int plume_runner_create(const plume_model *m, plume_kv_cache *kv, int32_t max_tokens,
                        plume_runner **out, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    if (max_tokens <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "max batched tokens must be positive, got %d",
                         max_tokens);
    if (kv->b != m->b)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the KV cache lives on another backend instance than the model");
    plume_runner *r = calloc(1, sizeof *r);
    if (!r)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    r->m = m;
    r->bvt = m->bvt;
    r->b = m->b;
    r->kv = kv;
    r->max_tokens = max_tokens;
    const size_t T = (size_t)max_tokens;
    size_t width[A_COUNT];
    activation_widths(c, max_tokens, width);
    for (int i = 0; i < A_COUNT; i++)
        if (!(r->a[i] = r->bvt->buf_alloc(r->b, sizeof(float) * T * width[i], err))) {
            plume_runner_free(r);
            return plume_err_prefix(err, "activations for %d batched tokens", max_tokens);
        }
    r->tokens = malloc(sizeof(int32_t) * T);
    r->pos = malloc(sizeof(int32_t) * T);
    r->slots = malloc(sizeof(int32_t) * T);
    r->out_rows = malloc(sizeof(int32_t) * T);
    r->seqs = malloc(sizeof *r->seqs * T);
    if (!r->tokens || !r->pos || !r->slots || !r->out_rows || !r->seqs) {
        plume_runner_free(r);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory allocating a batch of %d tokens", max_tokens);
    }
    if (c->n_expert > 0 && plume_moe_plan_init(&r->moe, c, max_tokens, err)) {
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
    if (r->in_step && r->bvt->step_end)
        r->bvt->step_end(r->b, &r->st);
    for (int i = 0; i < A_COUNT; i++)
        r->bvt->buf_free(r->b, r->a[i]);
    r->bvt->buf_free(r->b, r->out);
    free(r->tokens);
    free(r->pos);
    free(r->slots);
    free(r->out_rows);
    free(r->seqs);
    plume_moe_plan_free(&r->moe);
    free(r);
}

int32_t plume_runner_max_tokens(const plume_runner *r) { return r->max_tokens; }

int64_t plume_runner_scratch_bytes(const plume_runner *r)
{
    size_t width[A_COUNT], floats = 0;
    activation_widths(&r->m->cfg, r->max_tokens, width);
    for (int i = 0; i < A_COUNT; i++)
        floats += width[i];
    const int64_t T = r->max_tokens;
    return T * (int64_t)(sizeof(float) * floats) + /* activations */
           (int64_t)r->out_cap * r->m->cfg.n_vocab * (int64_t)sizeof(float) + /* logits */
           T * (int64_t)(4 * sizeof(int32_t) + sizeof(plume_step_seq)) + /* host plan */
           (r->m->cfg.n_expert > 0 ? plume_moe_plan_bytes(&r->m->cfg, r->max_tokens) : 0);
}

/* Flattens the batch into the step's per-row token, position and slot,
 * checking ids, positions and block tables. */
static int plan(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs, plume_error *err)
{
    const int32_t nv = r->m->cfg.n_vocab, bs = r->kv->pool.block_size;
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
        r->seqs[s] = (plume_step_seq){T, q->n, q->pos0, q->block_table,
                                      (q->pos0 + q->n + bs - 1) / bs};
        for (int32_t i = 0; i < q->n; i++) {
            int32_t tok = q->tokens[i], pos = q->pos0 + i;
            if (tok < 0 || tok >= nv)
                return plume_err(err, PLUME_ERR_INVALID,
                                 "token id %d at index %d is outside the vocabulary [0, %d)", tok,
                                 i, nv);
            int32_t blk = q->block_table[pos / bs];
            if (blk < 0 || blk >= r->kv->pool.n_blocks)
                return plume_err(err, PLUME_ERR_INTERNAL,
                                 "block table entry %d = %d is outside the cache of %d blocks",
                                 pos / bs, blk, r->kv->pool.n_blocks);
            r->tokens[T] = tok;
            r->pos[T] = pos;
            r->slots[T] = blk * bs + pos % bs;
            if (i >= q->n - q->n_logits)
                r->out_rows[L++] = T;
            T++;
        }
    }
    if (T == 0)
        return plume_err(err, PLUME_ERR_INVALID, "empty batch");
    r->st = (plume_step){T, r->tokens, r->pos, r->slots, r->seqs, n_seqs, r->out_rows, L, NULL};
    return 0;
}

/* Stops the pass at the first failing call. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if (call)                                                                                  \
            return -1;                                                                             \
    } while (0)

/* Several layers on the same input: through their method's forward_multi
 * when they share one (one quantization of x for the cpu backend), else
 * one after another. */
static int lin_group(plume_runner *r, const plume_lin *const *L, int n_lin, const plume_buf *x,
                     int32_t n, plume_buf *const *y, plume_error *err)
{
    const plume_linear_vtable *vt = L[0]->vt;
    bool same = vt->forward_multi != NULL;
    for (int i = 1; i < n_lin; i++)
        same = same && L[i]->vt == vt;
    if (same) {
        plume_linear *pl[4];
        for (int i = 0; i < n_lin; i++)
            pl[i] = L[i]->pl;
        if (vt->forward_multi(pl, n_lin, r->bvt, r->b, x, n, y, err))
            return plume_err_prefix(err, "linear method %s", vt->name);
        return 0;
    }
    for (int i = 0; i < n_lin; i++)
        if (L[i]->vt->forward(L[i]->pl, r->bvt, r->b, x, n, y[i], err))
            return plume_err_prefix(err, "linear method %s", L[i]->vt->name);
    return 0;
}

static int lin(plume_runner *r, const plume_lin *L, const plume_buf *x, int32_t n, plume_buf *y,
               plume_error *err)
{
    return lin_group(r, &L, 1, x, n, &y, err);
}

int plume_runner_begin(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs,
                       plume_error *err)
{
    TRY(plan(r, seqs, n_seqs, err));
    if (r->bvt->step_begin && r->bvt->step_begin(r->b, &r->st, err))
        return plume_err_prefix(err, "backend %s", r->bvt->name);
    r->in_step = true;
    const int32_t E = r->m->cfg.n_embd;
    if (r->bvt->embed(r->b, &r->st, r->m->tok_embd, r->a[A_X], E, err) ||
        (r->m->embed_scale != 0.0f &&
         r->bvt->scale(r->b, r->a[A_X], r->m->embed_scale, (size_t)r->st.n_rows * E, err))) {
        plume_runner_end(r, NULL, NULL);
        return -1;
    }
    return 0;
}

int plume_runner_layer(plume_runner *r, int l, int kv_layer, plume_lin_hook hook, void *hook_ctx,
                       plume_error *err)
{
    const plume_backend_vtable *B = r->bvt;
    plume_backend *b = r->b;
    const plume_step *st = &r->st;
    const plume_model_config *c = &r->m->cfg;
    const plume_layer *Ly = &r->m->layers[l];
    const int32_t n = st->n_rows, E = c->n_embd, F = c->n_ff;
    const int adjacent = c->rope_style == PLUME_ROPE_ADJACENT;
    plume_buf *const *a = r->a;
#define HOOK(which, x) TRY(hook && hook(hook_ctx, l, which, x, n, err))

    TRY(B->rmsnorm(b, a[A_XN], a[A_X], Ly->attn_norm, n, E, c->rms_eps, err));
    HOOK(PLUME_LIN_QKV, a[A_XN]);
    {   /* q, k and v share their input (and, natively, its quantization) */
        const plume_lin *const qkv[3] = {&Ly->q, &Ly->k, &Ly->v};
        plume_buf *const y[3] = {a[A_Q], a[A_K], a[A_V]};
        TRY(lin_group(r, qkv, 3, a[A_XN], n, y, err));
    }
    if (Ly->q_norm && c->qk_norm_full) { /* OLMoE: over the whole projections */
        TRY(B->rmsnorm(b, a[A_Q], a[A_Q], Ly->q_norm, n, c->n_head * c->head_dim, c->rms_eps,
                       err));
        TRY(B->rmsnorm(b, a[A_K], a[A_K], Ly->k_norm, n, c->n_head_kv * c->head_dim, c->rms_eps,
                       err));
    } else if (Ly->q_norm) { /* per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3) */
        TRY(B->rmsnorm(b, a[A_Q], a[A_Q], Ly->q_norm, n * c->n_head, c->head_dim, c->rms_eps,
                       err));
        TRY(B->rmsnorm(b, a[A_K], a[A_K], Ly->k_norm, n * c->n_head_kv, c->head_dim, c->rms_eps,
                       err));
    }
    if (Ly->rope_freq) { /* SmolLM3's NoPE layers rotate nothing */
        TRY(B->rope(b, st, a[A_Q], c->n_head, c->head_dim, Ly->rope_freq, adjacent, err));
        TRY(B->rope(b, st, a[A_K], c->n_head_kv, c->head_dim, Ly->rope_freq, adjacent, err));
    }
    TRY(B->kv_store(b, st, &r->kv->pool, kv_layer, a[A_K], a[A_V], err));
    const plume_attn_params ap = {c->n_head, Ly->attn_scale, Ly->window, Ly->sinks};
    TRY(B->attention(b, st, &r->kv->pool, kv_layer, a[A_Q], &ap, a[A_ATTN], err));
    HOOK(PLUME_LIN_O, a[A_ATTN]);
    TRY(lin(r, &Ly->o, a[A_ATTN], n, a[A_XN], err));
    if (Ly->post_attn_norm)
        TRY(B->rmsnorm(b, a[A_XN], a[A_XN], Ly->post_attn_norm, n, E, c->rms_eps, err));
    TRY(B->add(b, a[A_X], a[A_XN], (size_t)n * E, err));

    TRY(B->rmsnorm(b, a[A_XN], a[A_X], Ly->ffn_norm, n, E, c->rms_eps, err));
    if (Ly->moe) { /* mixture of experts: adds its output to the residual itself */
        if (hook)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "layer %d is a mixture-of-experts layer, which calibration hooks "
                             "(GPTQ/AWQ quantization) do not cover",
                             l);
        const plume_moe_bufs mb = {a[A_ROUTER], a[A_XG], a[A_GATE], a[A_UP], a[A_Y]};
        return plume_moe_forward(B, b, c, Ly->moe, &r->moe, &mb, a[A_XN], a[A_X], n, err);
    }
    HOOK(PLUME_LIN_GATE_UP, a[A_XN]);
    {   /* gate and up share their input */
        const plume_lin *const gu[2] = {&Ly->gate, &Ly->up};
        plume_buf *const y[2] = {a[A_GATE], a[A_UP]};
        TRY(lin_group(r, gu, 2, a[A_XN], n, y, err));
    }
    if (c->ffn_act == PLUME_FFN_GELU_TANH)
        TRY(B->geglu(b, a[A_GATE], a[A_UP], (size_t)n * F, err));
    else
        TRY(B->swiglu(b, a[A_GATE], a[A_UP], (size_t)n * F, err));
    HOOK(PLUME_LIN_DOWN, a[A_GATE]);
    TRY(lin(r, &Ly->down, a[A_GATE], n, a[A_XN], err));
    if (Ly->post_ffn_norm)
        TRY(B->rmsnorm(b, a[A_XN], a[A_XN], Ly->post_ffn_norm, n, E, c->rms_eps, err));
    TRY(B->add(b, a[A_X], a[A_XN], (size_t)n * E, err));
#undef HOOK
    return 0;
}

/* The final norm of the wanted rows only, gathered, then the head and the
 * copy back to the host. */
static int logits_rows(plume_runner *r, float *logits, plume_error *err)
{
    const plume_backend_vtable *B = r->bvt;
    const int32_t L = r->st.n_out, E = r->m->cfg.n_embd, V = r->m->cfg.n_vocab;
    if (L > r->out_cap) {
        B->buf_free(r->b, r->out);
        r->out_cap = 0;
        if (!(r->out = B->buf_alloc(r->b, sizeof(float) * (size_t)L * V, err)))
            return plume_err_prefix(err, "logits of %d rows", L);
        r->out_cap = L;
    }
    TRY(B->gather_out_rows(r->b, &r->st, r->a[A_XN], r->a[A_X], E, err));
    TRY(B->rmsnorm(r->b, r->a[A_XN], r->a[A_XN], r->m->out_norm, L, E, r->m->cfg.rms_eps, err));
    TRY(lin(r, &r->m->output, r->a[A_XN], L, r->out, err));
    TRY(B->synchronize && B->synchronize(r->b, err));
    TRY(B->download(r->b, logits, r->out, 0, sizeof(float) * (size_t)L * V, err));
    const float cap = r->m->cfg.final_softcap;
    if (cap > 0.0f) /* Gemma's final soft-capping, as transformers computes it in f32 */
        for (size_t i = 0; i < (size_t)L * V; i++)
            logits[i] = tanhf(logits[i] / cap) * cap;
    return 0;
}

int plume_runner_end(plume_runner *r, float *logits, plume_error *err)
{
    int rc = r->st.n_out > 0 && logits ? logits_rows(r, logits, err) : 0;
    if (r->in_step && r->bvt->step_end)
        r->bvt->step_end(r->b, &r->st);
    r->in_step = false;
    return rc;
}

int plume_runner_forward(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs,
                         float *logits, plume_error *err)
{
    TRY(plume_runner_begin(r, seqs, n_seqs, err));
    for (int l = 0; l < r->m->cfg.n_layer; l++)
        if (plume_runner_layer(r, l, l, NULL, NULL, err)) {
            plume_runner_end(r, NULL, NULL);
            return -1;
        }
    return plume_runner_end(r, logits, err);
}
