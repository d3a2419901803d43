/* quant-awq: AutoAWQ GEMM checkpoints (formats.md §2) as a plume plugin:
 * the "awq" linear method — loading AWQ layers into the repacked layer and
 * kernels it shares with quant-gptq (awq_linear.c) and making AWQ
 * checkpoints for `plume quantize --method awq` (awq_quantizer.c; the
 * scale and clip searches are the core's, core/src/quant/awq_search.c).
 * CUDA: awq_cuda.c hands the same GPTQ-layout arrays to quant-gptq's CUDA
 * kernels (built when nvcc is found). */
#include "awq_linear.h"
#include "awq_quantizer.h"
#include "plume/plugin.h"

static int quant_awq_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    plume_linear_vtable vt = *awq_linear_vtable();
    vt.quant_begin = awq_quant_begin;
    vt.quantize = awq_quantize_job;
    return plume_register_linear(reg, &vt);
}

PLUME_PLUGIN_DEFINE("quant-awq", PLUME_AWQ_VERSION,
                    "AutoAWQ GEMM checkpoints (4-bit, zero points, groups of 32·n): load, run "
                    "and make them",
                    "Apache-2.0", quant_awq_init)
