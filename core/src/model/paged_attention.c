#include "model/paged_attention.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/ops.h"

typedef struct job {
    const float *q, *k, *v;
    const plume_attn_row *rows;
    int32_t n_rows, block_size;
    int n_head, n_head_kv, head_dim;
    float *out;
} job;

/* (row, head) items strided over threads; online softmax (running max and
 * sum, rescaling the accumulator when the max grows). */
static void worker(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    const int hd = j->head_dim, kv_dim = j->n_head_kv * hd, group = j->n_head / j->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const int q_stride = j->n_head * hd;
    for (int item = ith; item < j->n_rows * j->n_head; item += nth) {
        const int r = item / j->n_head, h = item % j->n_head, kvh = h / group;
        const plume_attn_row *row = &j->rows[r];
        const float *q = j->q + (size_t)r * q_stride + (size_t)h * hd;
        float *o = j->out + (size_t)r * q_stride + (size_t)h * hd;
        memset(o, 0, sizeof(float) * (size_t)hd);
        float m = -INFINITY, l = 0.0f;
        for (int32_t p0 = 0; p0 <= row->pos; p0 += j->block_size) {
            const size_t base = (size_t)row->block_table[p0 / j->block_size] * j->block_size;
            int32_t n = row->pos - p0 + 1;
            if (n > j->block_size)
                n = j->block_size;
            for (int32_t i = 0; i < n; i++) {
                const size_t slot = (base + (size_t)i) * kv_dim + (size_t)kvh * hd;
                float s = plume_cpu_dot(q, j->k + slot, hd) * scale;
                const float *v = j->v + slot;
                if (s > m) {
                    float c = expf(m - s); /* 0 on the first key */
                    l = l * c + 1.0f;
                    for (int d = 0; d < hd; d++)
                        o[d] = o[d] * c + v[d];
                    m = s;
                } else {
                    float w = expf(s - m);
                    l += w;
                    for (int d = 0; d < hd; d++)
                        o[d] += w * v[d];
                }
            }
        }
        const float inv = 1.0f / l;
        for (int d = 0; d < hd; d++)
            o[d] *= inv;
    }
}

void plume_paged_attention(plume_pool *pool, const float *q, const float *k_layer,
                           const float *v_layer, const plume_attn_row *rows, int32_t n_rows,
                           int32_t block_size, int n_head, int n_head_kv, int head_dim, float *out)
{
    job j = {q, k_layer, v_layer, rows, n_rows, block_size, n_head, n_head_kv, head_dim, out};
    plume_pool_run(pool, worker, &j);
}
