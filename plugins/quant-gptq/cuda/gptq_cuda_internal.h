/* quant-gptq CUDA: what gptq_cuda.c (host C) and gptq_cuda_kernels.cu
 * (device code) share.  Plain C; no plume headers, so that nvcc sees only
 * this and the CUDA runtime.
 *
 * Device layout of an uploaded layer (all device pointers):
 *   qweight [K·b/32][N] int32  the checkpoint's packing (formats.md §1.2),
 *                              rows in "sorted" input order: row i holds
 *                              input channel perm[i] (identity without
 *                              act-order), so the groups gs[i] are
 *                              non-decreasing in i.
 *   scales  [G][N] f32         as in the checkpoint.
 *   zeros   [G][N] u16         true zero points (v1 fields + 1; ≤ 2^b).
 *   gs      [K] i32            group of sorted row i (non-decreasing).
 *   gend    [G] i32            one past the last sorted row of group g
 *                              (= number of rows with group ≤ g).
 *   perm    [K] i32 or NULL    input channel of sorted row i.
 *   bias    [N] f32 or NULL.
 * Codes are read as one little-endian bit stream along the input dim, in
 * units of GPTQ_CUDA_UNIT_CODES(b) codes = GPTQ_CUDA_UNIT_WORDS(b) words
 * (pf codes in 1 word for b = 2, 4, 8; 32 codes in 3 words for b = 3). */
#ifndef PLUME_GPTQ_CUDA_INTERNAL_H
#define PLUME_GPTQ_CUDA_INTERNAL_H

#include <stdint.h>

#include "gptq_cuda_dev.h"

#ifndef GPTQ_CUDA_EMU
#include <cuda_runtime_api.h>
#else /* the CPU emulation of the kernels (tests/gptq/cuda) */
typedef int cudaError_t;
typedef void *cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* y[t][n] (t < T ≤ GEMV_MAXTOK) = Σ_k x[t][k]·W[n][k] + bias[n] with K
 * split ksplit ways of tiles_per_split tiles each.  ksplit == 1: written
 * straight to y.  ksplit > 1: each split writes partial[split][t][n]
 * (ksplit·T·N floats) and a second kernel sums them into y (deterministic,
 * no atomics). */
cudaError_t gptq_cuda_launch_gemv(const gptq_cuda_dev *L, const float *x, int T, float *y,
                                  float *partial, int ksplit, int tiles_per_split,
                                  cudaStream_t stream);

/* Dequantizes output columns [n0, n0 + nb) into w: [K][nb] row-major (row
 * k = input channel k in the ORIGINAL order, i.e. act-order undone), f32
 * (f16 == 0) or IEEE half (f16 != 0). */
cudaError_t gptq_cuda_launch_dequant(const gptq_cuda_dev *L, int64_t n0, int64_t nb, void *w,
                                     int f16, cudaStream_t stream);

/* xh[i] = half(x[i]) for i < count. */
cudaError_t gptq_cuda_launch_to_f16(const float *x, int64_t count, void *xh, cudaStream_t stream);

/* y[t][n] += bias[n]. */
cudaError_t gptq_cuda_launch_add_bias(float *y, const float *bias, int64_t T, int64_t N,
                                      cudaStream_t stream);

/* cudaFuncGetAttributes on the kernels for the current device: catches
 * "no kernel image is available" (a GPU older than the archs built). */
cudaError_t gptq_cuda_kernel_probe(void);

#ifdef __cplusplus
}
#endif

#endif
