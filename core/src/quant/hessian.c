/* H = (2/n) XᵀX as chunked f32 matrix products summed in double. */
#include "quant/hessian.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "plume/tensor.h"

enum { CHUNK = 256 }; /* rows per product: the f32 sum inside stays short */

int plume_hessian(plume_pool *pool, const float *x, int64_t n, int64_t K, double *H,
                  plume_error *err)
{
    memset(H, 0, sizeof(double) * (size_t)(K * K));
    if (n <= 0)
        return 0;
    float *xt = malloc(sizeof(float) * (size_t)(K * CHUNK));
    float *y = malloc(sizeof(float) * (size_t)(K * K));
    if (!xt || !y) {
        free(xt);
        free(y);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for a %lld x %lld Hessian",
                         (long long)K, (long long)K);
    }
    for (int64_t t0 = 0; t0 < n; t0 += CHUNK) {
        int64_t c = n - t0 < CHUNK ? n - t0 : CHUNK;
        /* xt[k][j] = x[t0 + j][k]: row k is input k over the chunk's tokens */
        for (int64_t j = 0; j < c; j++)
            for (int64_t k = 0; k < K; k++)
                xt[k * c + j] = x[(t0 + j) * K + k];
        /* y[a][b] = Σ_j xt[a][j]·xt[b][j]: xt as both the weight and the input */
        plume_tensor w = {.name = "calibration", .type = PLUME_DTYPE_F32, .n_dims = 2,
                          .ne = {c, K, 1, 1}, .data = xt,
                          .nbytes = sizeof(float) * (size_t)(K * c)};
        plume_cpu_matmul(pool, &w, xt, (int)K, y);
        for (int64_t i = 0; i < K * K; i++)
            H[i] += y[i];
    }
    const double s = 2.0 / (double)n;
    for (int64_t i = 0; i < K * K; i++)
        H[i] *= s;
    free(xt);
    free(y);
    return 0;
}
