/* backend-cuda: cuBLAS, opened with dlopen on first use (as quant-gptq
 * does), so that loading the plugin maps no cuBLAS and a machine without
 * it still runs the row matmul. */
#ifndef PLUME_CUDA_BLAS_H
#define PLUME_CUDA_BLAS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "plume/error.h"

typedef struct ck_blas ck_blas; /* a cuBLAS handle bound to one stream */

/* Opens libcublas (the toolkit's path first, then libcublas.so.<major>)
 * and creates a handle on stream; -1 with err (PLUME_ERR_UNSUPPORTED when
 * cuBLAS cannot be loaded, saying why). */
int ck_blas_create(cudaStream_t stream, ck_blas **out, plume_error *err);
void ck_blas_free(ck_blas *b);

/* y[t][o] (f32, [n][m]) = Σ_i W[o][i] x[t][i] with W an f16 [m][k] slab
 * and x f16 [n][k]: cublasGemmEx, f32 accumulation.  ldy: y's row
 * stride in elements (the full out-features when W is a slab). */
int ck_blas_gemm_f16(ck_blas *b, const void *w, const void *x, float *y, int m, int n, int k,
                     int ldy, plume_error *err);

#endif
