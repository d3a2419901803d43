/* The built-in weight formats: gguf and safetensors, over the core's
 * readers (formats/gguf.h, formats/safetensors.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "runtime/builtin.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool file_in(const char *dir, const char *name)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- gguf ---- */

static int gguf_probe(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    char magic[4] = {0};
    size_t n = fread(magic, 1, 4, f);
    fclose(f);
    if (n == 4 && memcmp(magic, "GGUF", 4) == 0)
        return 10;
    return ends_with(path, ".gguf") ? 1 : 0;
}

static int gguf_ck_open(const char *path, const plume_settings *s, plume_checkpoint **out,
                        plume_error *err)
{
    (void)s;
    gguf_file *f;
    if (gguf_open(path, &f, err))
        return -1;
    *out = (plume_checkpoint *)f;
    return 0;
}

static void gguf_ck_close(plume_checkpoint *c) { gguf_close((gguf_file *)c); }

static size_t gguf_ck_n(const plume_checkpoint *c) { return gguf_n_tensors((const gguf_file *)c); }

static const plume_tensor *gguf_ck_tensor(const plume_checkpoint *c, size_t i)
{
    return gguf_tensor((const gguf_file *)c, i);
}

static const plume_tensor *gguf_ck_find(const plume_checkpoint *c, const char *name)
{
    return gguf_find_tensor((const gguf_file *)c, name);
}

static int gguf_ck_metadata(const plume_checkpoint *c, const char *key, char *buf, size_t cap)
{
    const gguf_value *v = gguf_get((const gguf_file *)c, key);
    if (!v)
        return -1;
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        return snprintf(buf, cap, "%" PRIu64, v->u);
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        return snprintf(buf, cap, "%" PRId64, v->i);
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        return snprintf(buf, cap, "%.9g", v->f);
    case GGUF_TYPE_BOOL:
        return snprintf(buf, cap, "%s", v->b ? "true" : "false");
    case GGUF_TYPE_STRING:
        return snprintf(buf, cap, "%.*s", (int)(v->s.len > 1u << 30 ? 1u << 30 : v->s.len),
                        v->s.ptr);
    case GGUF_TYPE_ARRAY:
        return snprintf(buf, cap, "[%" PRIu64 " x %s]", v->arr.n, gguf_type_name(v->arr.type));
    default:
        return snprintf(buf, cap, "(%s)", gguf_type_name(v->type));
    }
}

const plume_weight_format_vtable plume_builtin_gguf = {
    .struct_size = sizeof(plume_weight_format_vtable),
    .interface_version = PLUME_WEIGHT_FORMAT_INTERFACE_VERSION,
    .name = "gguf",
    .probe = gguf_probe,
    .open = gguf_ck_open,
    .close = gguf_ck_close,
    .n_tensors = gguf_ck_n,
    .tensor = gguf_ck_tensor,
    .find = gguf_ck_find,
    .metadata = gguf_ck_metadata,
};

/* ---- safetensors ---- */

static int st_probe(const char *path)
{
    if (is_dir(path))
        return file_in(path, "model.safetensors.index.json") || file_in(path, "model.safetensors")
                   ? 10 : 0;
    if (ends_with(path, ".safetensors") || ends_with(path, ".safetensors.index.json"))
        return 10;
    return 0;
}

static int st_open(const char *path, const plume_settings *s, plume_checkpoint **out,
                   plume_error *err)
{
    (void)s;
    safetensors *st;
    if (safetensors_open(path, &st, err))
        return -1;
    *out = (plume_checkpoint *)st;
    return 0;
}

static void st_close(plume_checkpoint *c) { safetensors_close((safetensors *)c); }

static size_t st_n(const plume_checkpoint *c)
{
    return safetensors_n_tensors((const safetensors *)c);
}

static const plume_tensor *st_tensor(const plume_checkpoint *c, size_t i)
{
    return safetensors_tensor((const safetensors *)c, i);
}

static const plume_tensor *st_find(const plume_checkpoint *c, const char *name)
{
    return safetensors_find((const safetensors *)c, name);
}

const plume_weight_format_vtable plume_builtin_safetensors = {
    .struct_size = sizeof(plume_weight_format_vtable),
    .interface_version = PLUME_WEIGHT_FORMAT_INTERFACE_VERSION,
    .name = "safetensors",
    .probe = st_probe,
    .open = st_open,
    .close = st_close,
    .n_tensors = st_n,
    .tensor = st_tensor,
    .find = st_find,
};
