/* Fixture: a hand-written descriptor with one field wrong, chosen at build
 * time: FIX_MAGIC, FIX_MAJOR, FIX_MINOR, FIX_SIZE (the struct_size). */
#include "plume/plugin.h"

static int desc_init(plume_registry *reg, plume_error *err)
{
    (void)reg;
    (void)err;
    return 0;
}

PLUME_PLUGIN_EXTERN_C PLUME_PLUGIN_EXPORT const plume_plugin_desc *plume_plugin_entry(void);
PLUME_PLUGIN_EXTERN_C PLUME_PLUGIN_EXPORT const plume_plugin_desc *plume_plugin_entry(void)
{
    static const plume_plugin_desc d = {FIX_MAGIC, FIX_MAJOR, FIX_MINOR, FIX_SIZE,
                                        FIX_NAME, "0.0.1", "fixture descriptor", "MIT",
                                        desc_init};
    return &d;
}
