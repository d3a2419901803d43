#include "backend/cpu/ops.h"

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

typedef struct matmul_job {
    const plume_tensor *w;
    const float *x;
    int n_tok;
    float *y;
    float *scratch;
} matmul_job;

/* Each thread takes a contiguous slice of output rows; every weight row is
 * converted to f32 once and dotted with all tokens of the batch. */
static void matmul_worker(void *ctx, int ith, int nth)
{
    const matmul_job *j = ctx;
    const int64_t K = j->w->ne[0], N = j->w->ne[1];
    const int64_t r0 = N * ith / nth, r1 = N * (ith + 1) / nth;
    const size_t rb = plume_dtype_row_bytes(j->w->type, K);
    float *row = j->scratch + (size_t)ith * (size_t)K;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *src = (const uint8_t *)j->w->data + (size_t)r * rb;
        const float *wr;
        if (j->w->type == PLUME_DTYPE_F32 && ((uintptr_t)src % sizeof(float)) == 0) {
            wr = (const float *)src;
        } else if (j->w->type == PLUME_DTYPE_F32) { /* unaligned safetensors data */
            memcpy(row, src, sizeof(float) * (size_t)K);
            wr = row;
        } else {
            plume_dequantize((plume_dtype)j->w->type, src, row, K);
            wr = row;
        }
        for (int t = 0; t < j->n_tok; t++)
            j->y[(size_t)t * N + r] = plume_cpu_dot(wr, j->x + (size_t)t * K, (int)K);
    }
}

void plume_cpu_matmul(plume_pool *pool, const plume_tensor *w, const float *x, int n_tok,
                      float *y, float *scratch)
{
    matmul_job j = {w, x, n_tok, y, scratch};
    plume_pool_run(pool, matmul_worker, &j);
}
