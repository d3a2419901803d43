/* quant-gptq CUDA: the kernel table (gptq_dev_kernels) int4_linear.c runs
 * on a backend's device: the launchers of gptq_cuda_kernels.cu with plume
 * errors. */
#include <cuda_runtime_api.h>

#include "cc_cuda.h"
#include "gptq_cuda_dev.h"
#include "gptq_cuda_internal.h"

#define WHO "gptq (cuda)"

static int probe(int device, char *why, size_t n)
{
    return cc_device_usable(device, gptq_cuda_kernel_probe, "the gptq kernels", why, n) ? 0 : -1;
}

static int sm_count(int device, int *out, plume_error *err)
{
    cudaError_t e = cudaDeviceGetAttribute(out, cudaDevAttrMultiProcessorCount, device);
    return e == cudaSuccess ? 0 : cc_fail(err, e, WHO, "cudaDeviceGetAttribute (SM count)");
}

static int gemv(const gptq_cuda_dev *L, const float *x, int T, float *y, float *partial,
                int ksplit, int tps, void *stream, plume_error *err)
{
    cudaError_t e = gptq_cuda_launch_gemv(L, x, T, y, partial, ksplit, tps, (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : cc_fail(err, e, WHO, "gemv kernel launch");
}

static int dequant(const gptq_cuda_dev *L, int64_t n0, int64_t nb, void *w, int f16,
                   void *stream, plume_error *err)
{
    cudaError_t e = gptq_cuda_launch_dequant(L, n0, nb, w, f16, (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : cc_fail(err, e, WHO, "dequantize kernel launch");
}

static int add_bias(float *y, const float *bias, int64_t T, int64_t N, void *stream,
                    plume_error *err)
{
    cudaError_t e = gptq_cuda_launch_add_bias(y, bias, T, N, (cudaStream_t)stream);
    return e == cudaSuccess ? 0 : cc_fail(err, e, WHO, "bias kernel launch");
}

static const gptq_dev_kernels k_table = {probe, sm_count, gemv, dequant, add_bias};

const gptq_dev_kernels *gptq_cuda_dev_kernels(void) { return &k_table; }
