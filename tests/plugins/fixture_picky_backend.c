/* Fixture plugin "picky-backend": two backends that are the registry's
 * "cpu" backend except for what supports() answers: "picky-weights" runs
 * no F32 weights, "picky-kv" no f16 KV cache, "picky-moe" no
 * mixture-of-experts layers (as cuda today), "picky-sinks" no attention
 * sinks (gpt-oss; as cuda today).  Tests check that loading a
 * model or creating an engine on them fails naming the backend and what it
 * cannot run. */
#include "plume/plugin.h"
#include "plume/registry.h"

static plume_backend_vtable picky_weights, picky_kv, picky_moe, picky_sinks;
static int (*cpu_supports)(plume_backend *, plume_backend_feature, int64_t);

static int weights_supports(plume_backend *b, plume_backend_feature f, int64_t arg)
{
    if (f == PLUME_FEAT_WEIGHT_TYPE && arg == PLUME_DTYPE_F32)
        return 0;
    return cpu_supports(b, f, arg);
}

static int kv_supports(plume_backend *b, plume_backend_feature f, int64_t arg)
{
    if (f == PLUME_FEAT_KV_DTYPE && arg == PLUME_KV_F16)
        return 0;
    return cpu_supports(b, f, arg);
}

static int moe_supports(plume_backend *b, plume_backend_feature f, int64_t arg)
{
    if (f == PLUME_FEAT_MOE)
        return 0;
    return cpu_supports(b, f, arg);
}

static int sinks_supports(plume_backend *b, plume_backend_feature f, int64_t arg)
{
    if (f == PLUME_FEAT_ATTN_SINKS)
        return 0;
    return cpu_supports(b, f, arg);
}

static int picky_init(plume_registry *reg, plume_error *err)
{
    const plume_backend_vtable *cpu = plume_registry_find_backend(reg, "cpu");
    if (!cpu)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "picky-backend wraps the built-in backend cpu, which this registry "
                         "lacks");
    cpu_supports = cpu->supports;
    picky_weights = *cpu;
    picky_weights.name = "picky-weights";
    picky_weights.supports = weights_supports;
    picky_kv = *cpu;
    picky_kv.name = "picky-kv";
    picky_kv.supports = kv_supports;
    picky_moe = *cpu;
    picky_moe.name = "picky-moe";
    picky_moe.supports = moe_supports;
    picky_sinks = *cpu;
    picky_sinks.name = "picky-sinks";
    picky_sinks.supports = sinks_supports;
    return plume_register_backend(reg, &picky_weights) || plume_register_backend(reg, &picky_kv) ||
                   plume_register_backend(reg, &picky_moe) ||
                   plume_register_backend(reg, &picky_sinks)
               ? -1
               : 0;
}

PLUME_PLUGIN_DEFINE("picky-backend", "1.0.0",
                    "fixture: the cpu backend refusing F32 weights (picky-weights), an f16 KV "
                    "cache (picky-kv), mixture-of-experts layers (picky-moe) or attention sinks "
                    "(picky-sinks)",
                    "Apache-2.0", picky_init)
