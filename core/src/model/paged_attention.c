#include "model/paged_attention.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/fp16.h"

/* Query heads handled together per K/V row (heads of one GQA group). */
#define MAX_GROUP 16

/* Largest head_dim for the f16 row conversion buffer. */
#define MAX_HEAD_DIM 512

typedef struct job {
    const float *q;
    const void *k, *v;
    int kv_f16;
    const plume_attn_row *rows;
    int32_t n_rows, block_size;
    int n_head, n_head_kv, head_dim;
    float *out;
} job;

/* Items are (row, kv head) pairs strided over threads.  Each item streams
 * its sequence's K/V rows once for all query heads of the GQA group that
 * share them, with an online softmax per head (running max m and sum l;
 * the accumulator is rescaled when the max grows). */
static void worker(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    const plume_kernels *kern = plume_kernels_active();
    const int hd = j->head_dim, kv_dim = j->n_head_kv * hd, group = j->n_head / j->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const int q_stride = j->n_head * hd;
    for (int item = ith; item < j->n_rows * j->n_head_kv; item += nth) {
        const int r = item / j->n_head_kv, kvh = item % j->n_head_kv;
        const plume_attn_row *row = &j->rows[r];
        for (int h0 = 0; h0 < group; h0 += MAX_GROUP) {
            const int gh = group - h0 < MAX_GROUP ? group - h0 : MAX_GROUP;
            const int first = kvh * group + h0; /* first query head of this chunk */
            float m[MAX_GROUP], l[MAX_GROUP];
            for (int g = 0; g < gh; g++) {
                m[g] = -INFINITY;
                l[g] = 0.0f;
                memset(j->out + (size_t)r * q_stride + (size_t)(first + g) * hd, 0,
                       sizeof(float) * (size_t)hd);
            }
            for (int32_t p0 = 0; p0 <= row->pos; p0 += j->block_size) {
                const size_t base = (size_t)row->block_table[p0 / j->block_size] * j->block_size;
                int32_t n = row->pos - p0 + 1;
                if (n > j->block_size)
                    n = j->block_size;
                for (int32_t i = 0; i < n; i++) {
                    const size_t slot = (base + (size_t)i) * kv_dim + (size_t)kvh * hd;
                    float kbuf[MAX_HEAD_DIM], vbuf[MAX_HEAD_DIM];
                    const float *kr, *vr;
                    if (j->kv_f16) { /* one conversion serves the whole group */
                        const uint16_t *k16 = (const uint16_t *)j->k + slot;
                        const uint16_t *v16 = (const uint16_t *)j->v + slot;
                        for (int d = 0; d < hd; d++) {
                            kbuf[d] = plume_fp16_to_fp32(k16[d]);
                            vbuf[d] = plume_fp16_to_fp32(v16[d]);
                        }
                        kr = kbuf;
                        vr = vbuf;
                    } else {
                        kr = (const float *)j->k + slot;
                        vr = (const float *)j->v + slot;
                    }
                    for (int g = 0; g < gh; g++) {
                        const float *q = j->q + (size_t)r * q_stride + (size_t)(first + g) * hd;
                        float *o = j->out + (size_t)r * q_stride + (size_t)(first + g) * hd;
                        const float s = kern->dot(q, kr, hd) * scale;
                        if (s > m[g]) {
                            const float c = expf(m[g] - s); /* 0 on the first key */
                            l[g] = l[g] * c + 1.0f;
                            for (int d = 0; d < hd; d++)
                                o[d] *= c;
                            kern->axpy(o, 1.0f, vr, hd);
                            m[g] = s;
                        } else {
                            const float w = expf(s - m[g]);
                            l[g] += w;
                            kern->axpy(o, w, vr, hd);
                        }
                    }
                }
            }
            for (int g = 0; g < gh; g++) {
                float *o = j->out + (size_t)r * q_stride + (size_t)(first + g) * hd;
                const float inv = 1.0f / l[g];
                for (int d = 0; d < hd; d++)
                    o[d] *= inv;
            }
        }
    }
}

void plume_paged_attention(plume_pool *pool, const float *q, const void *k_layer,
                           const void *v_layer, int kv_f16, const plume_attn_row *rows, int32_t n_rows,
                           int32_t block_size, int n_head, int n_head_kv, int head_dim, float *out)
{
    job j = {q, k_layer, v_layer, kv_f16, rows, n_rows, block_size, n_head, n_head_kv, head_dim, out};
    plume_pool_run(pool, worker, &j);
}
