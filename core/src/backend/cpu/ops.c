#include "backend/cpu/ops.h"

#include <math.h>
#include <string.h>

float plume_cpu_dot(const float *a, const float *b, int n)
{
    /* eight independent partial sums let the compiler use vector FMAs
     * without -ffast-math */
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    float sum = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

void plume_cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++)
        out[i] = x[i] * scale * weight[i];
}

void plume_cpu_rope(float *v, int head_dim, int pos, const float *inv_freq, int adjacent)
{
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float angle = (float)pos * inv_freq[i];
        float c = cosf(angle), s = sinf(angle);
        int a = adjacent ? 2 * i : i;
        int b = adjacent ? 2 * i + 1 : i + half;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

void plume_cpu_swiglu(float *x, const float *y, int n)
{
    for (int i = 0; i < n; i++) {
        float g = x[i];
        x[i] = g / (1.0f + expf(-g)) * y[i];
    }
}

typedef struct attn_job {
    const float *q, *k, *v;
    int kv_stride, n_tok, pos0, n_head, n_head_kv, head_dim, n_ctx;
    float *out, *scratch;
} attn_job;

/* One (token, head) pair per work item, strided over threads. */
static void attn_worker(void *ctx, int ith, int nth)
{
    const attn_job *j = ctx;
    const int hd = j->head_dim;
    const int group = j->n_head / j->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    float *scores = j->scratch + (size_t)ith * j->n_ctx;
    const int q_stride = j->n_head * hd;
    for (int item = ith; item < j->n_tok * j->n_head; item += nth) {
        int t = item / j->n_head, h = item % j->n_head;
        int kvh = h / group;
        int n_pos = j->pos0 + t + 1; /* causal: keys 0..pos */
        const float *q = j->q + (size_t)t * q_stride + (size_t)h * hd;
        float maxs = -INFINITY;
        for (int p = 0; p < n_pos; p++) {
            const float *k = j->k + (size_t)p * j->kv_stride + (size_t)kvh * hd;
            float s = plume_cpu_dot(q, k, hd) * scale;
            scores[p] = s;
            if (s > maxs)
                maxs = s;
        }
        float sum = 0.0f;
        for (int p = 0; p < n_pos; p++) {
            scores[p] = expf(scores[p] - maxs);
            sum += scores[p];
        }
        float inv = 1.0f / sum;
        float *o = j->out + (size_t)t * q_stride + (size_t)h * hd;
        memset(o, 0, sizeof(float) * (size_t)hd);
        for (int p = 0; p < n_pos; p++) {
            const float *v = j->v + (size_t)p * j->kv_stride + (size_t)kvh * hd;
            float w = scores[p] * inv;
            for (int d = 0; d < hd; d++)
                o[d] += w * v[d];
        }
    }
}

void plume_cpu_attention(plume_pool *pool, const float *q, const float *k_cache,
                         const float *v_cache, int kv_stride, int n_tok, int pos0, int n_head,
                         int n_head_kv, int head_dim, float *out, float *scratch, int n_ctx)
{
    attn_job j = {q, k_cache, v_cache, kv_stride, n_tok, pos0, n_head, n_head_kv, head_dim, n_ctx,
                  out, scratch};
    plume_pool_run(pool, attn_worker, &j);
}
