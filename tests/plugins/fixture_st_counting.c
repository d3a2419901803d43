/* Fixture plugin "st-counting": a weight format that wraps the built-in
 * "safetensors" (found in the registry at init) and claims, with a higher
 * probe score, the directories holding a file named st-counting.marker.
 * Every open, find and close is appended as one line to the file named by
 * PLUME_ST_COUNTING_LOG (when set), so a test can see that the loader
 * really read the model through this provider. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plume/plugin.h"
#include "plume/registry.h"

/* The registry's safetensors: set by the last init (the tests use one
 * registry at a time). */
static const plume_weight_format_vtable *inner;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    const char *path = getenv("PLUME_ST_COUNTING_LOG");
    FILE *f = path && path[0] ? fopen(path, "a") : NULL;
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static int counting_probe(const char *path)
{
    char marker[4096];
    struct stat sb;
    snprintf(marker, sizeof marker, "%s/st-counting.marker", path);
    if (stat(marker, &sb) != 0)
        return 0;
    int s = inner->probe(path);
    return s > 0 ? s + 100 : 0;
}

static int counting_open(const char *path, const plume_settings *s, plume_checkpoint **out,
                         plume_error *err)
{
    note("open %s", path);
    return inner->open(path, s, out, err);
}

static void counting_close(plume_checkpoint *c)
{
    note("close");
    inner->close(c);
}

static size_t counting_n_tensors(const plume_checkpoint *c) { return inner->n_tensors(c); }

static const plume_tensor *counting_tensor(const plume_checkpoint *c, size_t i)
{
    return inner->tensor(c, i);
}

static const plume_tensor *counting_find(const plume_checkpoint *c, const char *name)
{
    note("find %s", name);
    if (inner->find)
        return inner->find(c, name);
    for (size_t i = 0, n = inner->n_tensors(c); i < n; i++) {
        const plume_tensor *t = inner->tensor(c, i);
        if (strcmp(t->name, name) == 0)
            return t;
    }
    return NULL;
}

static int counting_metadata(const plume_checkpoint *c, const char *key, char *buf, size_t cap)
{
    return inner->metadata ? inner->metadata(c, key, buf, cap) : -1;
}

static const plume_weight_format_vtable counting = {
    .struct_size = sizeof(plume_weight_format_vtable),
    .interface_version = PLUME_WEIGHT_FORMAT_INTERFACE_VERSION,
    .name = "st-counting",
    .probe = counting_probe,
    .open = counting_open,
    .close = counting_close,
    .n_tensors = counting_n_tensors,
    .tensor = counting_tensor,
    .find = counting_find,
    .metadata = counting_metadata,
};

static int counting_init(plume_registry *reg, plume_error *err)
{
    inner = plume_registry_find_weight_format(reg, "safetensors");
    if (!inner)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "st-counting wraps the built-in weight format safetensors, which this "
                         "registry lacks");
    return plume_register_weight_format(reg, &counting);
}

PLUME_PLUGIN_DEFINE("st-counting", "1.0.0",
                    "fixture: safetensors, claiming directories with st-counting.marker and "
                    "logging its use",
                    "Apache-2.0", counting_init)
