/* Fixture: registers a sampler named "standard", which the core already has.
 * With -DFIX_BAD_VTABLE it registers a vtable whose struct_size is too
 * small instead. */
#include "fixture_null_sampler.h"
#include "plume/plugin.h"

#ifdef FIX_BAD_VTABLE
#define SIZE 16
#define NAME "tiny-vtable"
#define PLUGIN "badvtable"
#else
#define SIZE sizeof(plume_sampler_vtable)
#define NAME "standard"
#define PLUGIN "dup"
#endif

static const plume_sampler_vtable vt = {
    .struct_size = SIZE,
    .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = NAME,
    .create = null_create,
    .destroy = null_destroy,
    .sample = null_sample,
};

static int dup_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_sampler(reg, &vt);
}

PLUME_PLUGIN_DEFINE(PLUGIN, "0.2.0", "fixture: a registration the registry refuses", "MIT",
                    dup_init)
