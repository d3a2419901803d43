/* quant-gptq: GPTQ checkpoints (formats.md §1) as a plume plugin: the
 * "gptq" linear method — loading and running GPTQ layers on the CPU
 * (gptq_linear.c, gptq_kernels_*.c) and making GPTQ checkpoints for
 * `plume quantize` (gptq_quantizer.c: GPTQ or RTN).  CUDA kernels for the
 * same layers live in cuda/ (built when nvcc is found). */
#include "gptq_linear.h"
#include "gptq_quantizer.h"
#include "plume/plugin.h"

static int quant_gptq_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    /* the registry keeps its own copy of a vtable: the quantizer slots are
     * filled in here, next to the loading and running ones */
    plume_linear_vtable vt = *gptq_linear_vtable();
    vt.quant_begin = gptq_quant_begin;
    vt.quantize = gptq_quantize_job;
    return plume_register_linear(reg, &vt);
}

PLUME_PLUGIN_DEFINE("quant-gptq", PLUME_GPTQ_VERSION,
                    "GPTQ checkpoints (gptq / gptq_v2, 2/3/4/8-bit, act-order): load, run and make them",
                    "Apache-2.0", quant_gptq_init)
