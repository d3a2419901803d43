/* Fixture: init registers a sampler, then fails with its own message; the
 * registry must not keep the sampler. */
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

static const plume_sampler_vtable vt = {
    .struct_size = sizeof(plume_sampler_vtable),
    .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = "initfail-sampler",
    .create = create,
    .destroy = destroy,
    .sample = first,
};

static int initfail_init(plume_registry *reg, plume_error *err)
{
    if (plume_register_sampler(reg, &vt))
        return -1;
    return plume_err(err, PLUME_ERR_IO,
                     "cannot open /dev/fixture0: no such device; connect the device or set "
                     "PLUME_FIXTURE_DEVICE");
}

PLUME_PLUGIN_DEFINE("initfail", "0.3.0", "fixture: init fails", "MIT", initfail_init)
