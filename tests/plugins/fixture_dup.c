/* Fixture: registers a sampler named "standard", which the core already has.
 * With -DFIX_BAD_VTABLE it registers a vtable whose struct_size is too
 * small instead. */
#include "plume/plugin.h"

static int32_t first(plume_sampler_state *st, const float *l, const int32_t *h, size_t n)
{
    (void)st;
    (void)l;
    (void)h;
    (void)n;
    return 0;
}
static int create(const plume_settings *s, int32_t nv, uint64_t seed, plume_sampler_state **out,
                  plume_error *err)
{
    (void)s;
    (void)nv;
    (void)seed;
    (void)err;
    *out = NULL;
    return 0;
}
static void destroy(plume_sampler_state *st) { (void)st; }

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
    .create = create,
    .destroy = destroy,
    .sample = first,
};

static int dup_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_sampler(reg, &vt);
}

PLUME_PLUGIN_DEFINE(PLUGIN, "0.2.0", "fixture: a registration the registry refuses", "MIT",
                    dup_init)
