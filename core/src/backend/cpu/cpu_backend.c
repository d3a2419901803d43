/* The built-in "cpu" backend: plume/backend.h over host memory, the
 * repacked CPU matmul (repack.h), the int8-activation kernels (dispatch.h)
 * and a thread pool.  Buffers are host allocations (the handle is the
 * address, which host_ptr hands to host-side plugin kernels); a prepared
 * weight keeps a view of its checkpoint tensor plus, for the matmul, the
 * repacked copy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/microbench.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/threadpool.h"
#include "runtime/builtin.h"

typedef struct cpu_backend {
    plume_pool *pool;
    plume_attn_row *rows; /* attention's per-row context, grown as needed */
    int32_t rows_cap;
    plume_attn_scratch attn; /* attention's tiles and split-K partials */
} cpu_backend;

struct plume_bweight {
    plume_tensor t;      /* the checkpoint tensor (its data stays mapped) */
    plume_cpu_weight cw; /* matrices: prepared for the matmul */
    float *f32;          /* vectors: an f32 copy */
};

static cpu_backend *cpu(plume_backend *b) { return (cpu_backend *)b; }
static float *F(plume_buf *buf) { return (float *)buf; }
static const float *CF(const plume_buf *buf) { return (const float *)buf; }

static int cpu_create(const plume_settings *s, int n_threads, plume_backend **out,
                      plume_error *err)
{
    (void)s;
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the cpu backend");
    if (plume_pool_create(n_threads > 0 ? n_threads : plume_cpu_count(), &b->pool, err)) {
        free(b);
        return -1;
    }
    *out = (plume_backend *)b;
    return 0;
}

static void cpu_destroy(plume_backend *be)
{
    cpu_backend *b = cpu(be);
    if (!b)
        return;
    plume_pool_free(b->pool);
    free(b->rows);
    plume_attn_scratch_free(&b->attn);
    free(b);
}

static int cpu_supports(plume_backend *b, plume_backend_feature f, int64_t arg)
{
    (void)b;
    switch (f) {
    case PLUME_FEAT_WEIGHT_TYPE:
        return arg >= 0 && arg <= UINT32_MAX && plume_dtype_supported((uint32_t)arg);
    case PLUME_FEAT_KV_DTYPE:
        return arg == PLUME_KV_F32 || arg == PLUME_KV_F16 || arg == PLUME_KV_INT8;
    case PLUME_FEAT_HEAD_DIM: /* up to the attention kernels' row buffers */
        return arg > 0 && arg <= 512 && arg % 2 == 0;
    case PLUME_FEAT_ROPE_ADJACENT:
        return arg == 0 || arg == 1;
    case PLUME_FEAT_MOE:
        return arg > 0;
    case PLUME_FEAT_ATTN_SINKS: /* paged_attention.c folds them into the denominator */
        return arg > 0;
    }
    return 0;
}

/* ---- buffers ---- */

static plume_buf *cpu_buf_alloc(plume_backend *be, size_t bytes, plume_error *err)
{
    (void)be;
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p)
        plume_err(err, PLUME_ERR_NOMEM, "cpu backend: out of memory allocating %zu bytes", bytes);
    return p;
}

static void cpu_buf_free(plume_backend *be, plume_buf *buf)
{
    (void)be;
    free(buf);
}

static int cpu_upload(plume_backend *be, plume_buf *dst, size_t off, const void *src,
                      size_t bytes, plume_error *err)
{
    (void)be;
    (void)err;
    memcpy((char *)dst + off, src, bytes);
    return 0;
}

static int cpu_download(plume_backend *be, void *dst, const plume_buf *src, size_t off,
                        size_t bytes, plume_error *err)
{
    (void)be;
    (void)err;
    memcpy(dst, (const char *)src + off, bytes);
    return 0;
}

static void *cpu_host_ptr(plume_backend *be, const plume_buf *buf)
{
    (void)be;
    return (void *)buf;
}

/* ---- weights ---- */

static int cpu_weight_prepare(plume_backend *be, const plume_tensor *t, plume_bweight **out,
                              plume_error *err)
{
    (void)be;
    if (!plume_dtype_supported(t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "cpu backend: tensor %s has type %s, which the cpu kernels cannot run",
                         t->name ? t->name : "?", plume_dtype_name(t->type));
    plume_bweight *w = calloc(1, sizeof *w);
    if (!w)
        return plume_err(err, PLUME_ERR_NOMEM, "cpu backend: out of memory");
    w->t = *t;
    int64_t n = plume_tensor_nelements(t);
    if (t->n_dims == 1) {
        w->f32 = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        if (!w->f32) {
            free(w);
            return plume_err(err, PLUME_ERR_NOMEM, "cpu backend: out of memory");
        }
        plume_dequantize((plume_dtype)t->type, t->data, w->f32, n);
    } else if (plume_cpu_weight_init(&w->cw, &w->t, err)) {
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

static void cpu_weight_free(plume_backend *be, plume_bweight *w)
{
    (void)be;
    if (!w)
        return;
    plume_cpu_weight_release(&w->cw);
    free(w->f32);
    free(w);
}

/* ---- the KV cache ---- */

static int cpu_kv_alloc(plume_backend *be, plume_kv_pool *kv, plume_error *err)
{
    (void)be;
    kv->elem_bytes = kv->dtype == PLUME_KV_INT8 ? 1 : kv->dtype == PLUME_KV_F16 ? 2 : sizeof(float);
    kv->head_stride = (size_t)kv->head_dim * kv->elem_bytes;
    kv->scale_offset = 0;
    if (kv->dtype == PLUME_KV_INT8) { /* each head's values, then its f32 scale */
        kv->scale_offset = PLUME_KV_I8_SCALE_AT(kv->head_dim);
        kv->head_stride = kv->scale_offset + sizeof(float);
    }
    kv->slot_stride = kv->head_stride * (size_t)kv->n_head_kv;
    kv->layer_stride = kv->slot_stride * (size_t)kv->n_blocks * (size_t)kv->block_size;
    size_t bytes = kv->layer_stride * (size_t)kv->n_layer;
    kv->k = calloc(1, bytes ? bytes : 1);
    kv->v = calloc(1, bytes ? bytes : 1);
    if (!kv->k || !kv->v) {
        free(kv->k);
        free(kv->v);
        kv->k = kv->v = NULL;
        return plume_err(err, PLUME_ERR_NOMEM,
                         "cpu backend: out of memory allocating a KV cache of %d blocks x %d "
                         "tokens (%.1f MiB); lower kv_cache.max_tokens",
                         kv->n_blocks, kv->block_size, 2.0 * (double)bytes / (1 << 20));
    }
    return 0;
}

static void cpu_kv_free(plume_backend *be, plume_kv_pool *kv)
{
    (void)be;
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

/* ---- layer ops ---- */

static int cpu_embed(plume_backend *be, const plume_step *st, const plume_bweight *table,
                     plume_buf *x, int32_t dim, plume_error *err)
{
    (void)be;
    (void)err;
    for (int32_t r = 0; r < st->n_rows; r++)
        plume_cpu_get_row(&table->t, st->tokens[r], F(x) + (size_t)r * dim);
    return 0;
}

static int cpu_rmsnorm(plume_backend *be, plume_buf *out, const plume_buf *x,
                       const plume_bweight *w, int32_t n_rows, int32_t dim, float eps,
                       plume_error *err)
{
    (void)be;
    (void)err;
    for (int32_t r = 0; r < n_rows; r++)
        plume_cpu_rmsnorm(F(out) + (size_t)r * dim, CF(x) + (size_t)r * dim, w->f32, dim, eps);
    return 0;
}

static int cpu_rope(plume_backend *be, const plume_step *st, plume_buf *x, int32_t n_heads,
                    int32_t head_dim, const plume_bweight *inv_freq, int adjacent,
                    plume_error *err)
{
    (void)be;
    (void)err;
    const size_t stride = (size_t)n_heads * head_dim;
    for (int32_t r = 0; r < st->n_rows; r++)
        plume_cpu_rope_heads(F(x) + (size_t)r * stride, n_heads, head_dim, st->pos[r],
                             inv_freq->f32, adjacent);
    return 0;
}

/* One row's kv_dim values into its cache slot. */
static void store_row(const plume_kernels *kern, const plume_kv_pool *kv, uint8_t *layer,
                      int32_t slot, const float *src, int kv_dim)
{
    uint8_t *dst = layer + (size_t)slot * kv->slot_stride;
    if (kv->dtype == PLUME_KV_INT8) { /* each head: int8 values, then its f32 scale */
        for (int h = 0; h < kv->n_head_kv; h++) {
            uint8_t *hd = dst + (size_t)h * kv->head_stride;
            float d;
            kern->kv_i8(src + (size_t)h * kv->head_dim, kv->head_dim, (int8_t *)hd, &d);
            memcpy(hd + kv->scale_offset, &d, sizeof d);
        }
        return;
    }
    if (kv->dtype == PLUME_KV_F32) {
        memcpy(dst, src, sizeof(float) * (size_t)kv_dim);
        return;
    }
    kern->f32_to_f16(src, (uint16_t *)dst, kv_dim);
}

static int cpu_kv_store(plume_backend *be, const plume_step *st, plume_kv_pool *kv,
                        int32_t layer, const plume_buf *k, const plume_buf *v, plume_error *err)
{
    (void)be;
    (void)err;
    const int kv_dim = kv->n_head_kv * kv->head_dim;
    uint8_t *kc = (uint8_t *)kv->k + (size_t)layer * kv->layer_stride;
    uint8_t *vc = (uint8_t *)kv->v + (size_t)layer * kv->layer_stride;
    const plume_kernels *kern = plume_kernels_active();
    for (int32_t r = 0; r < st->n_rows; r++) {
        store_row(kern, kv, kc, st->slots[r], CF(k) + (size_t)r * kv_dim, kv_dim);
        store_row(kern, kv, vc, st->slots[r], CF(v) + (size_t)r * kv_dim, kv_dim);
    }
    return 0;
}

static int cpu_attention(plume_backend *be, const plume_step *st, const plume_kv_pool *kv,
                         int32_t layer, const plume_buf *q, const plume_attn_params *p,
                         plume_buf *out, plume_error *err)
{
    cpu_backend *b = cpu(be);
    if (p->n_head <= 0 || p->n_head % kv->n_head_kv != 0 || p->window < 0 || !(p->scale >= 0))
        return plume_err(err, PLUME_ERR_INVALID,
                         "cpu backend: attention: %d query heads over %d kv heads, scale %g, "
                         "window %d (want a positive multiple of the kv heads, a scale >= 0 "
                         "and a window >= 0): a bug in the caller",
                         p->n_head, kv->n_head_kv, (double)p->scale, p->window);
    const float scale = p->scale > 0 ? p->scale : 1.0f / sqrtf((float)kv->head_dim);
    const float *sinks = p->sinks ? p->sinks->f32 : NULL;
    if (p->sinks && (!sinks || p->sinks->t.n_dims != 1 || p->sinks->t.ne[0] != p->n_head))
        return plume_err(err, PLUME_ERR_INVALID,
                         "cpu backend: attention sinks must be a prepared vector of the %d query "
                         "heads' logits: a bug in the caller",
                         p->n_head);
    if (st->n_rows > b->rows_cap) {
        plume_attn_row *rows = realloc(b->rows, sizeof *rows * (size_t)st->n_rows);
        if (!rows)
            return plume_err(err, PLUME_ERR_NOMEM, "cpu backend: out of memory");
        b->rows = rows;
        b->rows_cap = st->n_rows;
    }
    for (int32_t s = 0; s < st->n_seqs; s++)
        for (int32_t i = 0; i < st->seqs[s].n; i++) {
            int32_t r = st->seqs[s].row0 + i;
            b->rows[r] = (plume_attn_row){st->pos[r], st->seqs[s].block_table};
        }
    const uint8_t *kc = (const uint8_t *)kv->k + (size_t)layer * kv->layer_stride;
    const uint8_t *vc = (const uint8_t *)kv->v + (size_t)layer * kv->layer_stride;
    if (plume_paged_attention(b->pool, &b->attn, CF(q), kc, vc, (int)kv->dtype,
                              (int64_t)(kv->slot_stride / kv->elem_bytes),
                              (int64_t)(kv->head_stride / kv->elem_bytes), b->rows,
                              st->n_rows, kv->block_size, p->n_head, kv->n_head_kv, kv->head_dim,
                              scale, p->window, sinks, F(out)))
        return plume_err(err, PLUME_ERR_NOMEM, "cpu backend: out of memory for attention scratch");
    return 0;
}

static int cpu_swiglu(plume_backend *be, plume_buf *gate, const plume_buf *up, size_t n,
                      plume_error *err)
{
    (void)be;
    (void)err;
    plume_cpu_swiglu(F(gate), CF(up), (int)n);
    return 0;
}

static int cpu_swiglu_oai(plume_backend *be, plume_buf *gate, const plume_buf *up, size_t n,
                          float alpha, float limit, plume_error *err)
{
    (void)be;
    (void)err;
    plume_cpu_swiglu_oai(F(gate), CF(up), n, alpha, limit);
    return 0;
}

static int cpu_geglu(plume_backend *be, plume_buf *gate, const plume_buf *up, size_t n,
                     plume_error *err)
{
    (void)be;
    (void)err;
    plume_cpu_geglu(F(gate), CF(up), n);
    return 0;
}

static int cpu_scale(plume_backend *be, plume_buf *x, float s, size_t n, plume_error *err)
{
    (void)be;
    (void)err;
    float *a = F(x);
    for (size_t i = 0; i < n; i++)
        a[i] *= s;
    return 0;
}

static int cpu_add(plume_backend *be, plume_buf *x, const plume_buf *y, size_t n,
                   plume_error *err)
{
    (void)be;
    (void)err;
    float *a = F(x);
    const float *c = CF(y);
    for (size_t i = 0; i < n; i++)
        a[i] += c[i];
    return 0;
}

static int cpu_add_bias(plume_backend *be, plume_buf *y, const plume_bweight *bias,
                        int32_t n_rows, int32_t dim, plume_error *err)
{
    (void)be;
    (void)err;
    float *a = F(y);
    for (int32_t r = 0; r < n_rows; r++)
        for (int32_t i = 0; i < dim; i++)
            a[(size_t)r * dim + i] += bias->f32[i];
    return 0;
}

static int cpu_gather_out_rows(plume_backend *be, const plume_step *st, plume_buf *dst,
                               const plume_buf *src, int32_t dim, plume_error *err)
{
    (void)be;
    (void)err;
    for (int32_t i = 0; i < st->n_out; i++)
        memmove(F(dst) + (size_t)i * dim, CF(src) + (size_t)st->out_rows[i] * dim,
                sizeof(float) * (size_t)dim);
    return 0;
}

static int cpu_matmul(plume_backend *be, const plume_bweight *const *w, int n_w,
                      const plume_buf *x, int32_t n_rows, plume_buf *const *y, plume_error *err)
{
    cpu_backend *b = cpu(be);
    for (int i = 0; i < n_w; i++)
        if (!w[i]->cw.t || w[i]->cw.K != w[0]->cw.K)
            return plume_err(err, PLUME_ERR_INVALID,
                             "cpu backend: matmul of %s needs prepared matrices of equal "
                             "in-features",
                             w[i]->t.name ? w[i]->t.name : "?");
    if (n_rows <= 0)
        return 0;
    for (int i0 = 0; i0 < n_w; i0 += PLUME_CPU_MULTI_MAX) {
        int n = n_w - i0 < PLUME_CPU_MULTI_MAX ? n_w - i0 : PLUME_CPU_MULTI_MAX;
        if (n == 1) {
            plume_cpu_matmul_w(b->pool, &w[i0]->cw, CF(x), n_rows, F(y[i0]));
            continue;
        }
        const plume_cpu_weight *cw[PLUME_CPU_MULTI_MAX];
        float *ys[PLUME_CPU_MULTI_MAX];
        for (int i = 0; i < n; i++) {
            cw[i] = &w[i0 + i]->cw;
            ys[i] = F(y[i0 + i]);
        }
        plume_cpu_matmul_multi(b->pool, cw, n, CF(x), n_rows, ys);
    }
    return 0;
}

static int cpu_matmul_segments(plume_backend *be, const plume_bweight *const *w, int n_w,
                               int32_t n_seg, const int32_t *off, const plume_buf *x,
                               plume_buf *const *y, plume_error *err)
{
    cpu_backend *b = cpu(be);
    const size_t n_pair = (size_t)n_seg * (size_t)(n_w > 0 ? n_w : 0);
    if (n_pair == 0 || off[n_seg] <= 0)
        return 0;
    const plume_cpu_weight **cw = malloc(sizeof *cw * n_pair);
    float **ys = malloc(sizeof *ys * (size_t)n_w);
    if (!cw || !ys) {
        free(cw);
        free(ys);
        return plume_err(err, PLUME_ERR_NOMEM, "cpu backend: out of memory for %zu expert matmuls",
                         n_pair);
    }
    for (size_t i = 0; i < n_pair; i++) {
        cw[i] = &w[i]->cw;
        if (!cw[i]->t || cw[i]->K != cw[0]->K || cw[i]->N != w[i % (size_t)n_w]->cw.N) {
            const char *name = w[i]->t.name ? w[i]->t.name : "?";
            free(cw);
            free(ys);
            return plume_err(err, PLUME_ERR_INVALID,
                             "cpu backend: matmul_segments of %s needs prepared matrices of "
                             "equal in-features and, per output, equal out-features",
                             name);
        }
    }
    for (int j = 0; j < n_w; j++)
        ys[j] = F(y[j]);
    plume_cpu_matmul_segments(b->pool, cw, n_w, n_seg, off, CF(x), ys);
    free(cw);
    free(ys);
    return 0;
}

static int cpu_gather_rows(plume_backend *be, plume_buf *dst, const plume_buf *src,
                           const int32_t *idx, int32_t n, int32_t dim, plume_error *err)
{
    (void)be;
    (void)err;
    plume_cpu_gather_rows(F(dst), CF(src), idx, n, dim);
    return 0;
}

static int cpu_scatter_add_rows(plume_backend *be, plume_buf *dst, const plume_buf *src,
                                const int32_t *idx, const float *w, int32_t n, int32_t dim,
                                plume_error *err)
{
    (void)be;
    (void)err;
    plume_cpu_scatter_add_rows(F(dst), CF(src), idx, w, n, dim);
    return 0;
}

static void cpu_parallel_for(plume_backend *be, void (*fn)(void *ctx, int ith, int nth),
                             void *ctx)
{
    cpu_backend *b = cpu(be);
    if (!b || !b->pool) {
        fn(ctx, 0, 1);
        return;
    }
    plume_pool_run(b->pool, fn, ctx);
}

static int cpu_microbench_slot(plume_backend *be, plume_microbench what, int reps, double *out,
                               plume_error *err)
{
    return plume_cpu_microbench(cpu(be)->pool, what, reps, out, err);
}

const plume_backend_vtable plume_builtin_cpu = {
    .struct_size = sizeof(plume_backend_vtable),
    .interface_version = PLUME_BACKEND_INTERFACE_VERSION,
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .supports = cpu_supports,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .host_ptr = cpu_host_ptr,
    .weight_prepare = cpu_weight_prepare,
    .weight_free = cpu_weight_free,
    .kv_alloc = cpu_kv_alloc,
    .kv_free = cpu_kv_free,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .add_bias = cpu_add_bias,
    .gather_out_rows = cpu_gather_out_rows,
    .matmul = cpu_matmul,
    .parallel_for = cpu_parallel_for,
    .microbench = cpu_microbench_slot,
    .scale = cpu_scale,
    .geglu = cpu_geglu,
    .gather_rows = cpu_gather_rows,
    .scatter_add_rows = cpu_scatter_add_rows,
    .swiglu_oai = cpu_swiglu_oai,
    .matmul_segments = cpu_matmul_segments,
};
