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

/* Registers in reg vt, made a copy of cpu named name whose supports() is
 * supports (vt outlives the registry: it is static); 0 or -1 as
 * plume_register_backend. */
static int register_picky(plume_registry *reg, plume_backend_vtable *vt,
                          const plume_backend_vtable *cpu, const char *name,
                          int (*supports)(plume_backend *, plume_backend_feature, int64_t))
{
    *vt = *cpu;
    vt->name = name;
    vt->supports = supports;
    return plume_register_backend(reg, vt);
}

static int picky_init(plume_registry *reg, plume_error *err)
{
    const plume_backend_vtable *cpu = plume_registry_find_backend(reg, "cpu");
    if (!cpu)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "picky-backend wraps the built-in backend cpu, which this registry "
                         "lacks");
    cpu_supports = cpu->supports;
    return register_picky(reg, &picky_weights, cpu, "picky-weights", weights_supports) ||
                   register_picky(reg, &picky_kv, cpu, "picky-kv", kv_supports) ||
                   register_picky(reg, &picky_moe, cpu, "picky-moe", moe_supports) ||
                   register_picky(reg, &picky_sinks, cpu, "picky-sinks", sinks_supports)
               ? -1
               : 0;
}

PLUME_PLUGIN_DEFINE("picky-backend", "1.0.0",
                    "fixture: the cpu backend refusing F32 weights (picky-weights), an f16 KV "
                    "cache (picky-kv), mixture-of-experts layers (picky-moe) or attention sinks "
                    "(picky-sinks)",
                    "Apache-2.0", picky_init)
