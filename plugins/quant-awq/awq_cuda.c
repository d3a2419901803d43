/* quant-awq: AWQ layers uploaded for quant-gptq's CUDA kernels. */
#include "awq_cuda.h"

int awq_cuda_layer_upload(gptq_cuda_ctx *ctx, const int32_t *qweight, const int32_t *qzeros,
                          const float *scales, const float *bias, int64_t K, int64_t N,
                          int64_t group_size, gptq_cuda_layer **out, plume_error *err)
{
    awq_cuda_host h;
    if (awq_cuda_desc(qweight, qzeros, scales, bias, K, N, group_size, &h, err))
        return -1;
    int rc = gptq_cuda_layer_upload(ctx, &h.desc, out, err);
    awq_cuda_host_free(&h);
    return rc;
}
