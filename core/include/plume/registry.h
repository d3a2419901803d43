/* plume — the provider registry and plugin loader (the host side of
 * plume/plugin.h).
 *
 * The registry is an object, not a global: the CLI (or any program
 * embedding plume) creates one, loads plugins into it and hands the
 * vtables it finds to the engine.  That keeps plume free of global state,
 * lets tests build as many independent registries as they like (one per
 * rejection case) and makes the lifetime rule explicit: a plugin is
 * dlclose'd only by plume_registry_free, so free the registry after every
 * engine, model or provider instance that uses its vtables.
 *
 * A new registry already holds the core's own providers (gguf, safetensors,
 * native linear, cpu, standard sampler, continuous scheduler), registered
 * through the same plume_register_* calls a plugin makes, as the built-in
 * plugin "core" (file "built-in").
 *
 * Loading by name searches, in order: the directories added with
 * plume_registry_add_search_dir (the CLI's --plugin-dir options), then those
 * of plume_registry_add_default_search_path: each entry of PLUME_PLUGIN_PATH
 * (colon-separated), the build tree's plugin directory (only when the
 * running program lives in that build tree) and the installed pluginsdir.
 * In each directory it looks for plume-<name>.so, then <name>/plume-<name>.so
 * (the layout of the build tree's plugins/).  Plugins are opened with
 * RTLD_NOW | RTLD_LOCAL. */
#ifndef PLUME_REGISTRY_H
#define PLUME_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"
#include "plume/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum plume_provider_kind {
    PLUME_KIND_WEIGHT_FORMAT = 0,
    PLUME_KIND_LINEAR,
    PLUME_KIND_BACKEND,
    PLUME_KIND_SAMPLER,
    PLUME_KIND_SCHEDULER,
    PLUME_KIND_PROPOSER,
    PLUME_KIND_KV_CONNECTOR,
    PLUME_KIND_COUNT
} plume_provider_kind;

/* "weight-format", "linear", "backend", "sampler", "scheduler", "proposer",
 * "kv-connector". */
PLUME_API const char *plume_kind_name(plume_provider_kind kind);

/* A registry holding the built-in providers and no search directories. */
PLUME_API int plume_registry_create(plume_registry **out, plume_error *err);
/* Closes every loaded plugin.  No vtable found in r may be used after. */
PLUME_API void plume_registry_free(plume_registry *r);

/* Appends dir to the search path (after the ones added before). */
PLUME_API int plume_registry_add_search_dir(plume_registry *r, const char *dir, plume_error *err);
/* Appends PLUME_PLUGIN_PATH's entries, the build tree's plugin directory
 * (when this program runs from that build tree) and the installed
 * pluginsdir. */
PLUME_API int plume_registry_add_default_search_path(plume_registry *r, plume_error *err);
PLUME_API size_t plume_registry_n_search_dirs(const plume_registry *r);
PLUME_API const char *plume_registry_search_dir(const plume_registry *r, size_t i);

/* Calls fn once for every plugin file on the search path, in the order
 * plume_registry_load searches (directory by directory; in each, the
 * plume-<name>.so files then the <name>/plume-<name>.so ones, by name).
 * shadowed is true when an earlier file has the same name, so loading by
 * name would never pick this one.  Opens nothing.  Returns how many files
 * it found. */
typedef void (*plume_plugin_file_fn)(void *ctx, const char *path, const char *name,
                                     bool shadowed);
PLUME_API size_t plume_registry_scan(const plume_registry *r, plume_plugin_file_fn fn, void *ctx);

/* Loads plugin `name` from the search path; loading an already loaded
 * plugin again does nothing and returns 0.  Every failure is one line in
 * err naming the file, the plugin, the plugin's and this plume's versions
 * and the fix; the registry is then unchanged. */
PLUME_API int plume_registry_load(plume_registry *r, const char *name, plume_error *err);
/* Loads the plugin file at path (any file name). */
PLUME_API int plume_registry_load_file(plume_registry *r, const char *path, plume_error *err);
/* Registers a plugin linked into the program (built with
 * -DPLUME_PLUGIN_STATIC); origin names it in listings and messages.  The
 * same checks and messages as for a file. */
PLUME_API int plume_registry_add_static(plume_registry *r, plume_plugin_entry_fn entry,
                                        const char *origin, plume_error *err);

/* What the registry knows about one provider. */
typedef struct plume_provider_info {
    plume_provider_kind kind;
    const char *name;            /* provider name */
    const char *plugin;          /* plugin name ("core" for the built-ins) */
    const char *plugin_version;
    const char *file;            /* the plugin's file, "built-in", or the static origin */
    uint32_t abi_major, abi_minor; /* the ABI the plugin was built for */
    uint32_t interface_version;  /* of the provider's vtable */
    const void *vtable;          /* the registry's copy, in this plume's layout */
} plume_provider_info;

/* Providers in registration order (built-ins first). */
PLUME_API size_t plume_registry_n_providers(const plume_registry *r);
PLUME_API int plume_registry_provider(const plume_registry *r, size_t i, plume_provider_info *out);

/* The provider of kind named name, or NULL.  When info is non-NULL it is
 * filled on success. */
PLUME_API const void *plume_registry_find(const plume_registry *r, plume_provider_kind kind,
                                          const char *name, plume_provider_info *info);
/* Comma-separated names of every provider of kind, in registration order,
 * into buf ("none" when there is none).  Returns buf. */
PLUME_API const char *plume_registry_names(const plume_registry *r, plume_provider_kind kind,
                                           char *buf, size_t cap);

/* Typed lookups: the registry's copy of the vtable (slots the provider's
 * build lacked are NULL), or NULL when no provider has that name.  The
 * pointer stays valid until plume_registry_free. */
PLUME_API const plume_weight_format_vtable *
plume_registry_find_weight_format(const plume_registry *r, const char *name);
PLUME_API const plume_linear_vtable *plume_registry_find_linear(const plume_registry *r,
                                                                const char *name);
PLUME_API const plume_backend_vtable *plume_registry_find_backend(const plume_registry *r,
                                                                  const char *name);
PLUME_API const plume_sampler_vtable *plume_registry_find_sampler(const plume_registry *r,
                                                                  const char *name);
PLUME_API const plume_scheduler_vtable *plume_registry_find_scheduler(const plume_registry *r,
                                                                      const char *name);
PLUME_API const plume_proposer_vtable *plume_registry_find_proposer(const plume_registry *r,
                                                                    const char *name);
PLUME_API const plume_kv_connector_vtable *plume_registry_find_kv_connector(const plume_registry *r,
                                                                            const char *name);

/* The weight format with the highest probe score for path, or NULL (err
 * then lists the registered formats). */
PLUME_API const plume_weight_format_vtable *plume_registry_probe_format(const plume_registry *r,
                                                                        const char *path,
                                                                        plume_error *err);
/* The backend with the highest score (the meaning of `backend: auto`). */
PLUME_API const plume_backend_vtable *plume_registry_best_backend(const plume_registry *r);

/* Loaded plugins (the built-in "core" first). */
typedef struct plume_plugin_info {
    const char *name, *version, *description, *license;
    const char *file;
    uint32_t abi_major, abi_minor;
    size_t n_providers;
} plume_plugin_info;

PLUME_API size_t plume_registry_n_plugins(const plume_registry *r);
PLUME_API int plume_registry_plugin(const plume_registry *r, size_t i, plume_plugin_info *out);

#ifdef __cplusplus
}
#endif
#endif
