/* The forward pass's element-wise and attention kernels, routed to the
 * active dispatch level. */
#include "backend/cpu/ops.h"

#include <math.h>
#include <string.h>

void plume_cpu_get_row(const plume_tensor *w, int64_t row, float *dst)
{
    size_t rb = plume_dtype_row_bytes(w->type, w->ne[0]);
    const uint8_t *src = (const uint8_t *)w->data + (size_t)row * rb;
    if (w->type == PLUME_DTYPE_F32)
        memcpy(dst, src, sizeof(float) * (size_t)w->ne[0]);
    else
        plume_dequantize((plume_dtype)w->type, src, dst, w->ne[0]);
}

float plume_cpu_dot(const float *a, const float *b, int n)
{
    return plume_kernels_active()->dot(a, b, n);
}

void plume_cpu_attn_step(const float *q, int nq, const float *k, const float *v, int64_t stride,
                         int n, int hd, float scale, float *m, float *l, float *o)
{
    plume_kernels_active()->attn_step(q, nq, k, v, stride, n, hd, scale, m, l, o);
}

void plume_cpu_attn_paged(const float *q, int nq, const void *k, const void *v, int64_t stride,
                          int kv_f16, const int32_t *block_table, int block_size, int n_pos,
                          int hd, float scale, float *o)
{
    plume_kernels_active()->attn_paged(q, nq, k, v, stride, kv_f16, block_table, block_size,
                                       n_pos, hd, scale, o);
}

void plume_cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps)
{
    plume_kernels_active()->rmsnorm(out, x, weight, n, eps);
}

/* Angles per call on the stack up to this many pairs; larger heads rotate
 * in slices of it. */
#define ROPE_MAX_HALF 256

void plume_cpu_rope_heads(float *v, int n_heads, int head_dim, int pos, const float *inv_freq,
                          int adjacent)
{
    const plume_kernels *k = plume_kernels_active();
    const int half = head_dim / 2;
    if (half > ROPE_MAX_HALF) { /* rare: no stack table, rotate pair by pair */
        for (int h = 0; h < n_heads; h++) {
            float *hv = v + (size_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                const float angle = (float)pos * inv_freq[i];
                const float c = cosf(angle), s = sinf(angle);
                const int a = adjacent ? 2 * i : i, b = adjacent ? 2 * i + 1 : i + half;
                const float x0 = hv[a], x1 = hv[b];
                hv[a] = x0 * c - x1 * s;
                hv[b] = x0 * s + x1 * c;
            }
        }
        return;
    }
    float c[ROPE_MAX_HALF], s[ROPE_MAX_HALF];
    for (int i = 0; i < half; i++) {
        const float angle = (float)pos * inv_freq[i];
        c[i] = cosf(angle);
        s[i] = sinf(angle);
    }
    for (int h = 0; h < n_heads; h++)
        k->rope(v + (size_t)h * head_dim, head_dim, c, s, adjacent);
}

void plume_cpu_rope(float *v, int head_dim, int pos, const float *inv_freq, int adjacent)
{
    plume_cpu_rope_heads(v, 1, head_dim, pos, inv_freq, adjacent);
}

void plume_cpu_swiglu(float *x, const float *y, int n)
{
    plume_kernels_active()->swiglu(x, y, n);
}

typedef struct attn_job {
    const plume_kernels *k;
    const float *q, *kc, *vc;
    int kv_stride, n_tok, pos0, n_head, n_head_kv, head_dim, n_ctx;
    float *out, *scratch;
} attn_job;

/* One (token, head) pair per work item, strided over threads. */
static void attn_worker(void *ctx, int ith, int nth)
{
    const attn_job *j = ctx;
    const plume_kernels *k = j->k;
    const int hd = j->head_dim;
    const int group = j->n_head / j->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    float *scores = j->scratch + (size_t)ith * j->n_ctx;
    const int q_stride = j->n_head * hd;
    for (int item = ith; item < j->n_tok * j->n_head; item += nth) {
        const int t = item / j->n_head, h = item % j->n_head;
        const int kvh = h / group;
        const int n_pos = j->pos0 + t + 1; /* causal: keys 0..pos */
        const float *q = j->q + (size_t)t * q_stride + (size_t)h * hd;
        for (int p = 0; p < n_pos; p++)
            scores[p] = k->dot(q, j->kc + (size_t)p * j->kv_stride + (size_t)kvh * hd, hd) * scale;
        const float inv = 1.0f / k->softmax_exp(scores, n_pos);
        float *o = j->out + (size_t)t * q_stride + (size_t)h * hd;
        memset(o, 0, sizeof(float) * (size_t)hd);
        for (int p = 0; p < n_pos; p++)
            k->axpy(o, scores[p] * inv, j->vc + (size_t)p * j->kv_stride + (size_t)kvh * hd, hd);
    }
}

void plume_cpu_attention(plume_pool *pool, const float *q, const float *k_cache,
                         const float *v_cache, int kv_stride, int n_tok, int pos0, int n_head,
                         int n_head_kv, int head_dim, float *out, float *scratch, int n_ctx)
{
    attn_job j = {plume_kernels_active(), q, k_cache, v_cache, kv_stride, n_tok, pos0, n_head,
                  n_head_kv, head_dim, n_ctx, out, scratch};
    plume_pool_run(pool, attn_worker, &j);
}
