/* common-cuda: what every CUDA plugin of plume shares (backend-cuda,
 * quant-gptq's kernels): CUDA errors as plume errors, the device probe,
 * and cuBLAS opened with dlopen on first use.  A static library linked
 * into each plugin (hidden symbols, so the copies never interpose); see
 * meson.build for the nvcc flags and static cudart both use. */
#ifndef PLUME_CC_CUDA_H
#define PLUME_CC_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "plume/backend.h" /* plume_gemm_precision */
#include "plume/error.h"

/* Fills err from a CUDA error ("<who>: <what>: <string> (<name>)") and
 * returns -1; the code is PLUME_ERR_NOMEM for an allocation failure,
 * PLUME_ERR_UNSUPPORTED for no device / old driver / no kernel image,
 * else PLUME_ERR_INTERNAL.  Clears a non-sticky error first. */
int cc_fail(plume_error *err, cudaError_t e, const char *who, const char *what);

/* Runs call (a cudaError_t expression); when it fails, returns cc_fail's -1
 * from the enclosing function, whose plume_error *err is filled. */
#define CC_CHECK(call, who, what)                                                                  \
    do {                                                                                           \
        cudaError_t cc_e_ = (call);                                                                \
        if (cc_e_ != cudaSuccess)                                                                  \
            return cc_fail(err, cc_e_, who, what);                                                 \
    } while (0)

/* Makes *buf (a cudaMalloc'd scratch of *cap bytes; NULL and 0 at first)
 * hold at least bytes: when it must grow, waits for stream (kernels may
 * still read the old one), frees it and allocates bytes.  0, or -1 with
 * err from cc_fail (who) and *buf NULL, *cap 0. */
int cc_scratch_reserve(cudaStream_t stream, void **buf, size_t *cap, size_t bytes,
                       const char *who, plume_error *err);

/* True when device `device` exists and probe() (cudaFuncGetAttributes on
 * the caller's kernels, run after cudaSetDevice(device)) succeeds; else
 * false with why: "no CUDA device (cudaGetDeviceCount: ...)", the missing
 * ordinal, or "CUDA device N (name, sm_XY) cannot run <kernels> (built for
 * sm_80, sm_90, compute_80): ...". */
bool cc_device_usable(int device, cudaError_t (*probe)(void), const char *kernels, char *why,
                      size_t n);

/* ---- cuBLAS (dlopen-ed: the toolkit's libcublas first, then
 * libcublas.so.<major>; loading the plugin maps none of it) ---- */

typedef struct cc_blas cc_blas; /* a cuBLAS handle bound to one stream */

/* True when libcublas can be (or was) loaded; else false with *why set. */
bool cc_blas_loadable(const char **why);
/* A handle on stream; errors start with who.  PLUME_ERR_UNSUPPORTED when
 * cuBLAS cannot be loaded, saying why and what to do (fix, the fallback
 * named by `fallback`). */
int cc_blas_create(cudaStream_t stream, const char *who, const char *fallback, cc_blas **out,
                   plume_error *err);
int cc_blas_set_stream(cc_blas *b, cudaStream_t stream, plume_error *err);
void cc_blas_free(cc_blas *b);

/* cublasGemmEx, column-major, f32 output and accumulation:
 * C (m x n, ldc) = op(A) (m x k) · B (k x n), op(A) = A (lda >= m) or,
 * with trans_a, Aᵀ for A stored k x m (lda >= k).  A and B are f32 or,
 * with PLUME_GEMM_F16, binary16; PLUME_GEMM_TF32 allows tf32 products. */
int cc_blas_gemm(cc_blas *b, bool trans_a, int m, int n, int k, const void *A, int lda,
                 const void *B, int ldb, float *C, int ldc, plume_gemm_precision p,
                 plume_error *err);

#endif
