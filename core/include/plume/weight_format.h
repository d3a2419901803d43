/* plume — the weight format provider interface: opening a checkpoint,
 * listing its tensors and reading its metadata.
 *
 * Built in: "gguf" (one .gguf file) and "safetensors" (a .safetensors file,
 * a sharded index, or an HF directory holding them).  A format never copies
 * weights: tensors are views into a mapping that lives as long as the
 * checkpoint is open. */
#ifndef PLUME_WEIGHT_FORMAT_H
#define PLUME_WEIGHT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/settings.h"
#include "plume/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_WEIGHT_FORMAT_INTERFACE_VERSION 1

typedef struct plume_checkpoint plume_checkpoint; /* an open checkpoint */

typedef struct plume_weight_format_vtable {
    uint32_t struct_size;        /* sizeof(plume_weight_format_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_WEIGHT_FORMAT_INTERFACE_VERSION */
    const char *name;            /* "gguf", "safetensors", ... */

    /* Optional: checks the provider's settings (NULL: it takes none). */
    int (*validate)(const plume_settings *s, plume_error *err);

    /* How sure the format is that path is one of its checkpoints, from
     * cheap checks only (a name, a few header bytes): 0 = not mine, higher
     * = surer.  Must not read weights. */
    int (*probe)(const char *path);

    /* Opens and validates the checkpoint's headers; weights stay mapped. */
    int (*open)(const char *path, const plume_settings *s, plume_checkpoint **out,
                plume_error *err);
    void (*close)(plume_checkpoint *c);

    size_t (*n_tensors)(const plume_checkpoint *c);
    /* The i-th tensor (i < n_tensors), valid while c is open. */
    const plume_tensor *(*tensor)(const plume_checkpoint *c, size_t i);
    /* By name; NULL when absent.  Optional: NULL means a linear scan. */
    const plume_tensor *(*find)(const plume_checkpoint *c, const char *name);

    /* Optional: the metadata value under key rendered as text into buf
     * (cap bytes, NUL-terminated, truncated if needed).  Returns the full
     * length, or -1 when the key is absent.  NULL: the format has none. */
    int (*metadata)(const plume_checkpoint *c, const char *key, char *buf, size_t cap);
} plume_weight_format_vtable;

#ifdef __cplusplus
}
#endif
#endif
