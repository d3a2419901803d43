/* Registers the core's own providers through the same registry calls a
 * plugin makes, as the plugin "core" with file "built-in". */
#include "runtime/builtin.h"

#include "runtime/plume_config.h"
#include "runtime/registry_internal.h"

static int core_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    if (plume_register_weight_format(reg, &plume_builtin_gguf) ||
        plume_register_weight_format(reg, &plume_builtin_safetensors) ||
        plume_register_weight_format(reg, &plume_builtin_dummy) ||
        plume_register_linear(reg, &plume_builtin_native_linear) ||
        plume_register_backend(reg, &plume_builtin_cpu) ||
        plume_register_sampler(reg, &plume_builtin_standard_sampler) ||
        plume_register_scheduler(reg, &plume_builtin_continuous))
        return -1;
    return 0;
}

static const plume_plugin_desc core_desc = {
    PLUME_PLUGIN_MAGIC, PLUME_ABI_MAJOR, PLUME_ABI_MINOR, (uint32_t)sizeof(plume_plugin_desc),
    PLUME_CORE_PLUGIN_NAME, PLUME_VERSION_STRING,
    "the core: GGUF and safetensors, native linear layers, the CPU backend, the standard "
    "sampler, the continuous-batching scheduler",
    "Apache-2.0", core_init};

int registry_add_builtins(plume_registry *r, plume_error *err)
{
    if (registry_init_plugin(r, &core_desc, "built-in", NULL, err))
        return plume_err_prefix(err, "registering the built-in providers (a bug in plume)");
    return 0;
}
