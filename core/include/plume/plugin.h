/* plume — the plugin ABI: what a plugin exports and how it registers providers.
 *
 * A plugin is a shared object named plume-<name>.so that exports exactly one
 * function, plume_plugin_entry, returning a constant descriptor.  A function,
 * not a data symbol, because dlsym is only guaranteed for functions
 * (PostgreSQL's PG_MODULE_MAGIC does the same).  PLUME_PLUGIN_DEFINE emits it:
 *
 *     static int typical_init(plume_registry *reg, plume_error *err)
 *     {
 *         return plume_register_sampler(reg, &typical_sampler);
 *     }
 *     PLUME_PLUGIN_DEFINE("typical", "0.1.0", "locally typical sampling",
 *                         "Apache-2.0", typical_init)
 *
 * The descriptor's first four fields never change (magic, ABI major, ABI
 * minor, struct size): a host of any version can read them and say exactly
 * what is wrong.  Later ABI minors only append fields; a plugin built for a
 * newer minor than the host is refused (it may call functions the host
 * lacks), an older minor is accepted.  Another major is refused.
 *
 * init registers providers into the registry it is given.  Registration is
 * staged: if init returns -1, or any plume_register_* call failed, nothing
 * the plugin registered becomes visible and the plugin is closed.  The
 * message init leaves in err is shown to the user in the loader's one-line
 * rejection, so make it say what was wrong and what to do.
 *
 * Every provider vtable starts with struct_size and interface_version; the
 * registry copies it into the host's layout and zero-fills slots the plugin
 * did not know about, so a NULL (or absent) optional slot means "the core's
 * default".  The vtable and the strings it points to must stay valid while
 * the plugin is loaded (static const storage is the usual choice). */
#ifndef PLUME_PLUGIN_H
#define PLUME_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/backend.h"
#include "plume/error.h"
#include "plume/kv_connector.h"
#include "plume/linear.h"
#include "plume/proposer.h"
#include "plume/sampler_provider.h"
#include "plume/scheduler.h"
#include "plume/settings.h"
#include "plume/struct_size.h"
#include "plume/weight_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "PLUM" in ASCII. */
#define PLUME_PLUGIN_MAGIC 0x504C554Du
/* The plugin ABI this header describes.  Major: the descriptor layout or the
 * meaning of an existing function changed.  Minor: something was appended. */
#define PLUME_ABI_MAJOR 2
#define PLUME_ABI_MINOR 2

/* The registry: see plume/registry.h for the host side. */
typedef struct plume_registry plume_registry;

typedef struct plume_plugin_desc {
    /* Fixed forever: */
    uint32_t magic;          /* PLUME_PLUGIN_MAGIC */
    uint32_t abi_major;      /* PLUME_ABI_MAJOR of the headers the plugin was built with */
    uint32_t abi_minor;      /* PLUME_ABI_MINOR of those headers */
    uint32_t struct_size;    /* sizeof(plume_plugin_desc) of that build */
    /* ABI 1.0: */
    const char *name;        /* "spec-ngram": must match the file name plume-<name>.so */
    const char *version;     /* the plugin's own version, e.g. "0.1.0" */
    const char *description; /* one line */
    const char *license;     /* SPDX identifier, e.g. "Apache-2.0" */
    /* Registers the plugin's providers; 0 on success, -1 with err filled. */
    int (*init)(plume_registry *reg, plume_error *err);
} plume_plugin_desc;

/* The entry point's type; its exported name is plume_plugin_entry. */
typedef const plume_plugin_desc *(*plume_plugin_entry_fn)(void);

#define PLUME_PLUGIN_ENTRY_SYMBOL "plume_plugin_entry"

#if defined(_WIN32)
#define PLUME_PLUGIN_EXPORT __declspec(dllexport)
#else
#define PLUME_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define PLUME_PLUGIN_EXTERN_C extern "C"
#else
#define PLUME_PLUGIN_EXTERN_C
#endif

/* With -DPLUME_PLUGIN_STATIC the entry is an ordinary function named
 * plume_plugin_entry_<init_fn> (so several plugins can be linked into one
 * test binary; give each init function a distinct name) and is handed to
 * plume_registry_add_static().  Otherwise it is the exported
 * plume_plugin_entry that the loader finds with dlsym. */
#ifdef PLUME_PLUGIN_STATIC
#define PLUME_PLUGIN_ENTRY_NAME(init_fn) plume_plugin_entry_##init_fn
#define PLUME_PLUGIN_ENTRY_LINKAGE PLUME_PLUGIN_EXTERN_C
#else
#define PLUME_PLUGIN_ENTRY_NAME(init_fn) plume_plugin_entry
#define PLUME_PLUGIN_ENTRY_LINKAGE PLUME_PLUGIN_EXTERN_C PLUME_PLUGIN_EXPORT
#endif

/* Emits the plugin's entry function.  name, version, description and
 * license are string literals; init_fn is the plugin's init function. */
#define PLUME_PLUGIN_DEFINE(name, version, description, license, init_fn)                    \
    PLUME_PLUGIN_ENTRY_LINKAGE const plume_plugin_desc *PLUME_PLUGIN_ENTRY_NAME(init_fn)(void); \
    PLUME_PLUGIN_ENTRY_LINKAGE const plume_plugin_desc *PLUME_PLUGIN_ENTRY_NAME(init_fn)(void)  \
    {                                                                                          \
        static const plume_plugin_desc plume_desc_ = {                                         \
            PLUME_PLUGIN_MAGIC, PLUME_ABI_MAJOR, PLUME_ABI_MINOR,                              \
            (uint32_t)sizeof(plume_plugin_desc), name, version, description, license, init_fn}; \
        return &plume_desc_;                                                                   \
    }

/* Provider registration, called from a plugin's init.  Each checks the
 * vtable (struct_size at least interface version 1's size, an
 * interface_version this plume knows, a name of [a-z0-9_.-], every required
 * slot set) and that no provider of the same kind already has the name.
 * Returns 0, or -1 after recording the reason in the registry: the loader
 * then rejects the whole plugin with that reason, whatever init returns. */
PLUME_API int plume_register_weight_format(plume_registry *reg,
                                           const plume_weight_format_vtable *vt);
PLUME_API int plume_register_linear(plume_registry *reg, const plume_linear_vtable *vt);
PLUME_API int plume_register_backend(plume_registry *reg, const plume_backend_vtable *vt);
PLUME_API int plume_register_sampler(plume_registry *reg, const plume_sampler_vtable *vt);
PLUME_API int plume_register_scheduler(plume_registry *reg, const plume_scheduler_vtable *vt);
PLUME_API int plume_register_proposer(plume_registry *reg, const plume_proposer_vtable *vt);
PLUME_API int plume_register_kv_connector(plume_registry *reg, const plume_kv_connector_vtable *vt);

/* The plume version the plugin is running in ("0.1.0") and its ABI, for
 * plugins that want to log or check them. */
PLUME_API const char *plume_version(void);
PLUME_API void plume_abi_version(uint32_t *major, uint32_t *minor);

#ifdef __cplusplus
}
#endif
#endif
