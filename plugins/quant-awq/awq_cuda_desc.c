/* quant-awq: an AWQ layer as the descriptor quant-gptq's CUDA kernels take
 * (host side, plain C). */
#include "awq_cuda.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "awq_pack.h"

void awq_cuda_host_free(awq_cuda_host *h)
{
    free(h->qweight);
    free(h->qzeros);
    memset(h, 0, sizeof *h);
}

int awq_cuda_desc(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                  const float *bias, int64_t K, int64_t N, int64_t group_size, awq_cuda_host *h,
                  plume_error *err)
{
    memset(h, 0, sizeof *h);
    if (group_size <= 0 || group_size % 32 || K <= 0 || K % group_size || N <= 0 || N % 8)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "awq: a %" PRId64 " x %" PRId64 " layer with group_size %" PRId64
                         ": AWQ GEMM on CUDA needs group_size a positive multiple of 32 dividing "
                         "in_features, and out_features a multiple of 8",
                         N, K, group_size);
    const int64_t G = K / group_size;
    h->qweight = malloc(sizeof *h->qweight * (size_t)(K / 8 * N));
    h->qzeros = malloc(sizeof *h->qzeros * (size_t)(G * N / 8));
    if (!h->qweight || !h->qzeros) {
        awq_cuda_host_free(h);
        return plume_err(err, PLUME_ERR_NOMEM, "awq: out of memory converting a layer for CUDA");
    }
    if (awq_to_gptq(qweight, qzeros, K, N, G, h->qweight, h->qzeros, err)) {
        awq_cuda_host_free(h);
        return -1;
    }
    h->desc = (gptq_cuda_layer_desc){.qweight = h->qweight, .qzeros = h->qzeros,
                                     .scales = scales, .g_idx = NULL, .bias = bias, .K = K,
                                     .N = N, .G = G, .bits = 4, .group_size = group_size,
                                     .fmt = GPTQ_ZERO_V2};
    return 0;
}
