/* quant-gptq: GPTQ checkpoints (formats.md §1) as a plume plugin.  This
 * round: the "gptq" linear provider with a CPU reference kernel; the model
 * loader does not consult linear providers yet. */
#include "gptq_linear.h"
#include "plume/plugin.h"

static int quant_gptq_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_linear(reg, gptq_linear_vtable());
}

PLUME_PLUGIN_DEFINE("quant-gptq", "0.1.0",
                    "GPTQ checkpoints (gptq / gptq_v2, 2/3/4/8-bit, act-order): a linear provider",
                    "Apache-2.0", quant_gptq_init)
