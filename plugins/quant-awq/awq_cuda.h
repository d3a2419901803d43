/* quant-awq on CUDA: AWQ GEMM layers run by quant-gptq's CUDA kernels
 * (plugins/quant-gptq/cuda/gptq_cuda.h: the dequantizing GEMV for decode,
 * dequantize + cuBLAS for prefill).  Those kernels take GPTQ-layout arrays,
 * so an AWQ layer is converted on the host at upload (awq_to_gptq: the same
 * codes packed along the input dim, true zeros as format gptq_v2) — one set
 * of CUDA kernels for both formats.  The upload is built whenever nvcc is
 * found; awq_cuda_desc is plain C (the emulation test uses it). */
#ifndef PLUME_AWQ_CUDA_H
#define PLUME_AWQ_CUDA_H

#include <stdint.h>

#include "cuda/gptq_cuda.h"

/* The converted arrays of one AWQ layer and the descriptor over them. */
typedef struct awq_cuda_host {
    gptq_cuda_layer_desc desc; /* points into the arrays below and the caller's */
    int32_t *qweight;          /* [K/8][N] */
    int32_t *qzeros;           /* [G][N/8] */
} awq_cuda_host;

/* From AWQ checkpoint arrays (formats.md §2.1; scales [G][N] f32, bias [N]
 * or NULL, which must outlive h): K a positive multiple of group_size,
 * itself a positive multiple of 32; N of 8.  Errors name what is wrong. */
int awq_cuda_desc(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                  const float *bias, int64_t K, int64_t N, int64_t group_size, awq_cuda_host *h,
                  plume_error *err);
void awq_cuda_host_free(awq_cuda_host *h);

/* awq_cuda_desc, then gptq_cuda_layer_upload; the host arrays may be freed
 * on return.  Run it with gptq_cuda_forward / gptq_cuda_forward_path. */
int awq_cuda_layer_upload(gptq_cuda_ctx *ctx, const int32_t *qweight, const int32_t *qzeros,
                          const float *scales, const float *bias, int64_t K, int64_t N,
                          int64_t group_size, gptq_cuda_layer **out, plume_error *err);

#endif
