/* Fixture: init registers a sampler, then fails with its own message; the
 * registry must not keep the sampler. */
#include "fixture_null_sampler.h"
#include "plume/plugin.h"

static const plume_sampler_vtable vt = {
    .struct_size = sizeof(plume_sampler_vtable),
    .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = "initfail-sampler",
    .create = null_create,
    .destroy = null_destroy,
    .sample = null_sample,
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
