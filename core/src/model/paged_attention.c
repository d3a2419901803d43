#include "model/paged_attention.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/fp16.h"

typedef struct job {
    const float *q;
    const void *k, *v;
    int kv_f16;
    const plume_attn_row *rows;
    int32_t n_rows, block_size;
    int n_head, n_head_kv, head_dim;
    int per_head; /* items are (row, head) rather than (row, kv head) */
    float *out;
} job;

/* Items are (row, kv head) pairs strided over threads: the kernel streams
 * the sequence's K/V rows once for all query heads of the GQA group (online
 * softmax per head).  With few rows (decode) items are (row, head), for
 * balance; a head's result is the same bits either way. */
static void worker(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    const plume_kernels *kern = plume_kernels_active();
    const int hd = j->head_dim, kv_dim = j->n_head_kv * hd, group = j->n_head / j->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const int q_stride = j->n_head * hd;
    const int per_row = j->per_head ? j->n_head : j->n_head_kv;
    const size_t esz = j->kv_f16 ? 2 : 4;
    for (int item = ith; item < j->n_rows * per_row; item += nth) {
        const int r = item / per_row, i = item % per_row;
        const int h0 = j->per_head ? i : i * group, nq = j->per_head ? 1 : group;
        const int kvh = h0 / group;
        const plume_attn_row *row = &j->rows[r];
        kern->attn_paged(j->q + (size_t)r * q_stride + (size_t)h0 * hd, nq,
                         (const char *)j->k + esz * (size_t)kvh * hd,
                         (const char *)j->v + esz * (size_t)kvh * hd, kv_dim, j->kv_f16,
                         row->block_table, j->block_size, row->pos + 1, hd, scale,
                         j->out + (size_t)r * q_stride + (size_t)h0 * hd);
    }
}

void plume_paged_attention(plume_pool *pool, const float *q, const void *k_layer,
                           const void *v_layer, int kv_f16, const plume_attn_row *rows, int32_t n_rows,
                           int32_t block_size, int n_head, int n_head_kv, int head_dim, float *out)
{
    job j = {q, k_layer, v_layer, kv_f16, rows, n_rows, block_size, n_head, n_head_kv, head_dim,
             n_rows * n_head_kv < 4 * plume_pool_threads(pool), out};
    plume_pool_run(pool, worker, &j);
}
