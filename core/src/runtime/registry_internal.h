/* The registry's state, shared by registry.c (storage, registration,
 * lookups), loader.c (opening plugins) and builtin.c. */
#ifndef PLUME_RUNTIME_REGISTRY_INTERNAL_H
#define PLUME_RUNTIME_REGISTRY_INTERNAL_H

#include "plume/registry.h"

typedef struct plugin_rec {
    char *name, *version, *description, *license, *file;
    uint32_t abi_major, abi_minor;
    void *handle;           /* dlopen handle; NULL for built-in and static plugins */
    size_t n_providers;
} plugin_rec;

typedef struct provider_rec {
    plume_provider_kind kind;
    void *vt;               /* malloc'd copy in this plume's layout */
    uint32_t interface_version;
    size_t plugin;          /* index into plugins */
} provider_rec;

struct plume_registry {
    plugin_rec *plugins;
    size_t n_plugins;
    provider_rec *prov;
    size_t n_prov;
    /* Registration of the plugin being initialised goes here first. */
    bool staging;
    provider_rec *stage;
    size_t n_stage;
    char stage_err[PLUME_ERROR_MSG_MAX]; /* first registration failure */
    char **dirs;
    size_t n_dirs;
};

/* Runs desc->init with staging on; on success commits the staged providers
 * under a new plugin record (taking handle), else discards them, leaves
 * the registry unchanged and fills err with the reason (the loader adds
 * the file and versions). */
int registry_init_plugin(plume_registry *r, const plume_plugin_desc *desc, const char *file,
                         void *handle, plume_error *err);

/* Index of the loaded plugin named name, or SIZE_MAX. */
size_t registry_plugin_index(const plume_registry *r, const char *name);

/* Registers the core's own providers as plugin "core" (builtin.c). */
int registry_add_builtins(plume_registry *r, plume_error *err);

/* dlcloses a plugin handle (loader.c). */
void dlclose_plugin(void *handle);

#define PLUME_CORE_PLUGIN_NAME "core"

#endif
