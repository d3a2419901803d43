/* safetensors reader (single file or sharded through an index).
 * Layout facts: formats.md §4.  Every check here guards against a corrupt
 * or hostile file: a bad file gives an error naming it, never a crash. */
#include "formats/safetensors.h"

#include "formats/json_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

typedef struct st_dtype_info {
    const char *name;
    unsigned bits;
    uint32_t type; /* plume_dtype, or PLUME_ST_RAW_TYPE */
} st_dtype_info;

/* The safetensors Dtype enum (formats.md §4) with bit sizes. */
static const st_dtype_info st_dtypes[] = {
    {"BOOL", 8, PLUME_ST_RAW_TYPE},
    {"F4", 4, PLUME_ST_RAW_TYPE},
    {"F6_E2M3", 6, PLUME_ST_RAW_TYPE},
    {"F6_E3M2", 6, PLUME_ST_RAW_TYPE},
    {"U8", 8, PLUME_ST_RAW_TYPE},
    {"I8", 8, PLUME_ST_RAW_TYPE},
    {"F8_E5M2", 8, PLUME_ST_RAW_TYPE},
    {"F8_E4M3", 8, PLUME_ST_RAW_TYPE},
    {"F8_E8M0", 8, PLUME_ST_RAW_TYPE},
    {"F8_E4M3FNUZ", 8, PLUME_ST_RAW_TYPE},
    {"F8_E5M2FNUZ", 8, PLUME_ST_RAW_TYPE},
    {"I16", 16, PLUME_ST_RAW_TYPE},
    {"U16", 16, PLUME_ST_RAW_TYPE},
    {"F16", 16, PLUME_DTYPE_F16},
    {"BF16", 16, PLUME_DTYPE_BF16},
    {"I32", 32, PLUME_ST_RAW_TYPE},
    {"U32", 32, PLUME_ST_RAW_TYPE},
    {"F32", 32, PLUME_DTYPE_F32},
    {"C64", 64, PLUME_ST_RAW_TYPE},
    {"F64", 64, PLUME_ST_RAW_TYPE},
    {"I64", 64, PLUME_ST_RAW_TYPE},
    {"U64", 64, PLUME_ST_RAW_TYPE},
};

typedef struct st_shard {
    char *path;         /* as opened; used in messages */
    const char *rel;    /* tail of path: the shard name an index uses */
    const uint8_t *map; /* whole file, read-only; NULL when size is 0 */
    size_t size;
} st_shard;

typedef struct st_entry {
    plume_tensor t; /* first member: safetensors_dtype maps a view back */
    const st_dtype_info *dtype;
    size_t shard;
    uint64_t begin, end; /* data_offsets, relative to the shard's buffer */
} st_entry;

struct safetensors {
    st_shard *shards;
    size_t n_shards;
    st_entry *entries; /* sorted by name once open succeeds */
    size_t n_entries, cap_entries;
};

/* ---- small helpers ---------------------------------------------------- */

/* Returns the dtype description for a safetensors dtype string, or NULL. */
static const st_dtype_info *st_dtype_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, name) == 0)
            return &st_dtypes[i];
    return NULL;
}

/* Writes "[d0, d1, ...]" (PyTorch order) into buf, truncating if needed. */
static const char *st_fmt_shape(char *buf, size_t cap, const int64_t *shape, int n)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

/* Joins dir and name with a '/'; NULL on allocation failure. */
static char *st_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* Returns a malloc'd copy of the directory part of path ("." if none). */
static char *st_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

static bool st_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool st_is_regular(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Reads a little-endian u64. */
static uint64_t st_read_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* ---- mapping ---------------------------------------------------------- */

/* Opens and maps `path` read-only into a new shard slot; the slot owns a copy
 * of the path; path + rel_off is the name an index knows it by.  `what` prefixes the I/O error (the path, or a longer
 * description for shards reached through an index). */
static int st_map_shard(safetensors *st, const char *path, size_t rel_off, const char *what,
                        size_t *idx, plume_error *err)
{
    st_shard *grown = realloc(st->shards, (st->n_shards + 1) * sizeof *grown);
    if (!grown)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    st->shards = grown;
    st_shard *sh = &st->shards[st->n_shards];
    memset(sh, 0, sizeof *sh);
    sh->path = strdup(path);
    if (!sh->path)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    sh->rel = sh->path + rel_off;
    st->n_shards++;
    *idx = st->n_shards - 1;

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return plume_err(err, PLUME_ERR_IO, "%s: cannot open: %s", what, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return plume_err(err, PLUME_ERR_IO, "%s: cannot stat: %s", what, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return plume_err(err, PLUME_ERR_IO, "%s: not a regular file", what);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return plume_err(err, PLUME_ERR_IO, "%s: file too large to map", what);
    }
    sh->size = (size_t)sb.st_size;
    if (sh->size > 0) {
        void *m = mmap(NULL, sh->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return plume_err(err, PLUME_ERR_IO, "%s: cannot mmap %zu bytes: %s", what, sh->size,
                             strerror(e));
        }
        sh->map = m;
    }
    close(fd);
    return 0;
}

/* ---- header parsing --------------------------------------------------- */

/* Appends a zeroed entry and returns it, or NULL on allocation failure. */
static st_entry *st_push_entry(safetensors *st)
{
    if (st->n_entries == st->cap_entries) {
        size_t cap = st->cap_entries ? st->cap_entries * 2 : 64;
        st_entry *grown = realloc(st->entries, cap * sizeof *grown);
        if (!grown)
            return NULL;
        st->entries = grown;
        st->cap_entries = cap;
    }
    st_entry *e = &st->entries[st->n_entries++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Checks that "__metadata__" is a string->string object (as the Rust reader
 * requires); its contents are otherwise ignored. */
static int st_check_metadata(const char *path, json_t *meta, plume_error *err)
{
    if (!json_is_object(meta))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: __metadata__ is not an object", path);
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            return plume_err(err, PLUME_ERR_FORMAT, "%s: __metadata__ value '%s' is not a string",
                             path, k);
    }
    return 0;
}

/* Reads "shape" into shape[] (PyTorch order); at most PLUME_MAX_DIMS dims. */
static int st_parse_shape(const char *path, const char *name, json_t *js, int64_t *shape,
                          int *n_dims, plume_error *err)
{
    if (!json_is_array(js))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' has no \"shape\" array", path, name);
    size_t n = json_array_size(js);
    if (n > PLUME_MAX_DIMS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: tensor '%s' has %zu dimensions (at most %d are supported)", path,
                         name, n, PLUME_MAX_DIMS);
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: tensor '%s' shape[%zu] is not a non-negative integer", path,
                             name, i);
        shape[i] = (int64_t)json_integer_value(d);
    }
    *n_dims = (int)n;
    return 0;
}

/* Reads "data_offsets" [begin, end] with end >= begin. */
static int st_parse_offsets(const char *path, const char *name, json_t *js, uint64_t *begin,
                            uint64_t *end, plume_error *err)
{
    if (!json_is_array(js) || json_array_size(js) != 2)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' has no \"data_offsets\" [begin, end] pair", path, name);
    json_t *b = json_array_get(js, 0), *e = json_array_get(js, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' data_offsets are not non-negative integers", path, name);
    *begin = (uint64_t)json_integer_value(b);
    *end = (uint64_t)json_integer_value(e);
    if (*end < *begin)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' data_offsets [%llu, %llu) end before begin",
                         path, name, (unsigned long long)*begin, (unsigned long long)*end);
    return 0;
}

/* Computes numel * bits / 8 without overflow; fails when the size does not
 * fit in 64 bits or is not a whole number of bytes. */
static int st_tensor_bytes(const char *path, const char *name, const st_dtype_info *dt,
                           const int64_t *shape, int n_dims, uint64_t *bytes, plume_error *err)
{
    char sbuf[128];
    uint64_t numel = 1;
    for (int i = 0; i < n_dims; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && numel > UINT64_MAX / d)
            return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' shape %s is too large", path,
                             name, st_fmt_shape(sbuf, sizeof sbuf, shape, n_dims));
        numel *= d;
    }
    if (numel > UINT64_MAX / dt->bits)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' shape %s is too large", path, name,
                         st_fmt_shape(sbuf, sizeof sbuf, shape, n_dims));
    uint64_t bits = numel * dt->bits;
    if (bits % 8 != 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' dtype %s shape %s is not a whole number of bytes", path,
                         name, dt->name, st_fmt_shape(sbuf, sizeof sbuf, shape, n_dims));
    *bytes = bits / 8;
    return 0;
}

/* Parses one tensor description into a new entry of shard `shard`; checks its
 * size against dtype and shape and its end against the buffer size. */
static int st_parse_tensor(safetensors *st, size_t shard, const char *name, json_t *desc,
                           uint64_t buf_size, plume_error *err)
{
    const char *path = st->shards[shard].path;
    if (!json_is_object(desc))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' is not an object", path, name);
    json_t *jd = json_object_get(desc, "dtype");
    if (!json_is_string(jd))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' has no \"dtype\" string", path, name);
    const st_dtype_info *dt = st_dtype_lookup(json_string_value(jd));
    if (!dt)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' has unknown dtype '%s'", path,
                         name, json_string_value(jd));
    int64_t shape[PLUME_MAX_DIMS];
    int n_dims = 0;
    uint64_t begin = 0, end = 0, need = 0;
    if (st_parse_shape(path, name, json_object_get(desc, "shape"), shape, &n_dims, err) ||
        st_parse_offsets(path, name, json_object_get(desc, "data_offsets"), &begin, &end, err) ||
        st_tensor_bytes(path, name, dt, shape, n_dims, &need, err))
        return -1;
    char sbuf[128];
    if (end - begin != need)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' data_offsets [%llu, %llu) has %llu bytes but dtype %s "
                         "shape %s needs %llu",
                         path, name, (unsigned long long)begin, (unsigned long long)end,
                         (unsigned long long)(end - begin), dt->name,
                         st_fmt_shape(sbuf, sizeof sbuf, shape, n_dims), (unsigned long long)need);
    if (end > buf_size)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' data_offsets [%llu, %llu) run past the %llu-byte data "
                         "buffer (truncated file?)",
                         path, name, (unsigned long long)begin, (unsigned long long)end,
                         (unsigned long long)buf_size);
    st_entry *e = st_push_entry(st);
    char *copy = strdup(name);
    if (!e || !copy) {
        free(copy);
        if (e)
            st->n_entries--;
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    }
    e->t.name = copy;
    e->t.type = dt->type;
    e->t.n_dims = n_dims;
    for (int i = 0; i < PLUME_MAX_DIMS; i++)
        e->t.ne[i] = i < n_dims ? shape[n_dims - 1 - i] : 1;
    e->t.nbytes = (size_t)need;
    e->dtype = dt;
    e->shard = shard;
    e->begin = begin;
    e->end = end;
    return 0;
}

static int st_cmp_offsets(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* Checks that entries [first, n_entries) cover [0, buf_size) contiguously,
 * without holes or overlaps, as the Rust reader does. */
static int st_check_coverage(safetensors *st, size_t first, const char *path, uint64_t buf_size,
                             plume_error *err)
{
    size_t n = st->n_entries - first;
    const st_entry **order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++)
        order[i] = &st->entries[first + i];
    qsort(order, n, sizeof *order, st_cmp_offsets);
    uint64_t cursor = 0;
    const st_entry *prev = NULL;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const st_entry *e = order[i];
        if (e->begin < cursor)
            rc = plume_err(err, PLUME_ERR_FORMAT,
                           "%s: tensor '%s' data_offsets [%llu, %llu) overlap tensor '%s' [%llu, %llu)",
                           path, e->t.name, (unsigned long long)e->begin,
                           (unsigned long long)e->end, prev->t.name,
                           (unsigned long long)prev->begin, (unsigned long long)prev->end);
        else if (e->begin > cursor)
            rc = plume_err(err, PLUME_ERR_FORMAT,
                           "%s: hole in the data buffer: bytes [%llu, %llu) before tensor '%s' "
                           "belong to no tensor",
                           path, (unsigned long long)cursor, (unsigned long long)e->begin, e->t.name);
        cursor = e->end;
        prev = e;
    }
    free(order);
    if (rc == 0 && cursor != buf_size)
        rc = plume_err(err, PLUME_ERR_FORMAT,
                       "%s: %llu bytes of trailing data after the last tensor (tensors end at "
                       "byte %llu of a %llu-byte data buffer)",
                       path, (unsigned long long)(buf_size - cursor), (unsigned long long)cursor,
                       (unsigned long long)buf_size);
    return rc;
}

/* Parses the JSON header of mapped shard `shard`; adds its tensors with data
 * pointers into the mapping after validating the whole layout. */
static int st_parse_shard(safetensors *st, size_t shard, plume_error *err)
{
    const st_shard *sh = &st->shards[shard];
    const char *path = sh->path;
    if (sh->size < 8)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: file is %zu bytes, too short for a safetensors header", path, sh->size);
    uint64_t n = st_read_u64le(sh->map);
    if (n > ST_MAX_HEADER)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: header size %llu exceeds the %llu-byte limit (not a safetensors file?)",
                         path, (unsigned long long)n, ST_MAX_HEADER);
    if (n > sh->size - 8)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: header size %llu runs past the end of the %zu-byte file (truncated?)",
                         path, (unsigned long long)n, sh->size);
    const char *hdr = (const char *)sh->map + 8;
    if (n == 0 || hdr[0] != '{')
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: header does not start with '{' (not a safetensors file?)", path);
    json_error_t jerr;
    json_t *root = json_loadb(hdr, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: header is not valid JSON: %s (byte %d)", path,
                         jerr.text, jerr.position);
    int rc = 0;
    if (!json_is_object(root))
        rc = plume_err(err, PLUME_ERR_FORMAT, "%s: header is not a JSON object", path);
    uint64_t buf_size = (uint64_t)sh->size - 8 - n;
    size_t first = st->n_entries;
    const char *key;
    json_t *val;
    if (rc == 0) {
        json_object_foreach(root, key, val) {
            if (strcmp(key, "__metadata__") == 0)
                rc = st_check_metadata(path, val, err);
            else
                rc = st_parse_tensor(st, shard, key, val, buf_size, err);
            if (rc)
                break;
        }
    }
    json_decref(root);
    if (rc == 0)
        rc = st_check_coverage(st, first, path, buf_size, err);
    if (rc)
        return -1;
    const uint8_t *data = st->shards[shard].map + 8 + n;
    for (size_t i = first; i < st->n_entries; i++)
        st->entries[i].t.data = data + st->entries[i].begin;
    return 0;
}

/* ---- lookup ------------------------------------------------------------ */

static int st_cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->t.name, ((const st_entry *)b)->t.name);
}

static int st_cmp_key(const void *key, const void *elem)
{
    return strcmp((const char *)key, ((const st_entry *)elem)->t.name);
}

/* Sorts the entries by name and rejects a name that occurs twice. */
static int st_sort_and_dedup(safetensors *st, plume_error *err)
{
    if (st->n_entries > 1)
        qsort(st->entries, st->n_entries, sizeof *st->entries, st_cmp_name);
    for (size_t i = 1; i < st->n_entries; i++) {
        const st_entry *a = &st->entries[i - 1], *b = &st->entries[i];
        if (strcmp(a->t.name, b->t.name) == 0)
            return plume_err(err, PLUME_ERR_FORMAT, "duplicate tensor '%s' in %s and %s", a->t.name,
                             st->shards[a->shard].path, st->shards[b->shard].path);
    }
    return 0;
}

/* ---- sharded checkpoints ----------------------------------------------- */

typedef struct st_mapping {
    const char *tensor;
    const char *shard;
} st_mapping;

static int st_cmp_mapping(const void *a, const void *b)
{
    const st_mapping *x = a, *y = b;
    int c = strcmp(x->shard, y->shard);
    return c ? c : strcmp(x->tensor, y->tensor);
}

/* True when a shard file name from an index stays inside the index's
 * directory (no absolute path, no ".." component). */
static bool st_shard_name_ok(const char *name)
{
    if (name[0] == '\0' || name[0] == '/')
        return false;
    for (const char *p = name; *p;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return false;
        p += len + (slash ? 1 : 0);
    }
    return true;
}

/* Collects the weight_map of an index into an array sorted by shard name. */
static int st_read_weight_map(const char *path, json_t *root, st_mapping **out, size_t *n_out,
                              plume_error *err)
{
    json_t *wm = json_is_object(root) ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(wm))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: no \"weight_map\" object", path);
    size_t n = json_object_size(wm);
    if (n == 0)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: \"weight_map\" is empty", path);
    st_mapping *m = malloc(n * sizeof *m);
    if (!m)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    size_t i = 0;
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        if (!json_is_string(val) || !st_shard_name_ok(json_string_value(val))) {
            free(m);
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: weight_map entry for tensor '%s' is not a shard file name in "
                             "the index's directory",
                             path, key);
        }
        m[i].tensor = key;
        m[i].shard = json_string_value(val);
        i++;
    }
    qsort(m, n, sizeof *m, st_cmp_mapping);
    *out = m;
    *n_out = n;
    return 0;
}

/* Maps and parses each distinct shard named in the (shard-sorted) map. */
static int st_open_shards(safetensors *st, const char *index, const char *dir, const st_mapping *m,
                          size_t n, plume_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(m[i].shard, m[i - 1].shard) == 0)
            continue;
        char *spath = st_join(dir, m[i].shard);
        if (!spath)
            return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", index);
        size_t what_len = strlen(index) + strlen(m[i].shard) + strlen(m[i].tensor) + 64;
        char *what = malloc(what_len);
        if (!what) {
            free(spath);
            return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", index);
        }
        snprintf(what, what_len, "%s: shard '%s' (holding tensor '%s')", index, m[i].shard,
                 m[i].tensor);
        size_t idx;
        int rc = st_map_shard(st, spath, strlen(dir) + 1, what, &idx, err);
        free(what);
        free(spath);
        if (rc || st_parse_shard(st, idx, err))
            return -1;
    }
    return 0;
}

/* Checks every weight_map entry against the (name-sorted) tensors. */
static int st_check_weight_map(const safetensors *st, const char *index, const st_mapping *m,
                               size_t n, plume_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const st_entry *e = bsearch(m[i].tensor, st->entries, st->n_entries, sizeof *st->entries,
                                    st_cmp_key);
        const char *sp = e ? st->shards[e->shard].path : NULL;
        if (!e || strcmp(st->shards[e->shard].rel, m[i].shard) != 0)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: tensor '%s' is mapped to shard '%s' but that shard does not "
                             "contain it%s%s",
                             index, m[i].tensor, m[i].shard, e ? "; it is in " : "", e ? sp : "");
    }
    return 0;
}

/* Opens a sharded checkpoint through its index JSON. */
static int st_open_index(safetensors *st, const char *path, plume_error *err)
{
    json_t *root = json_file_load(path, err);
    if (!root)
        return -1;
    st_mapping *m = NULL;
    size_t n = 0;
    char *dir = NULL;
    int rc = st_read_weight_map(path, root, &m, &n, err);
    if (rc == 0 && !(dir = st_dirname(path)))
        rc = plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    if (rc == 0)
        rc = st_open_shards(st, path, dir, m, n, err);
    if (rc == 0)
        rc = st_sort_and_dedup(st, err);
    if (rc == 0)
        rc = st_check_weight_map(st, path, m, n, err);
    free(dir);
    free(m);
    json_decref(root); /* m's strings point into root: freed last */
    return rc;
}

/* Opens a single .safetensors file. */
static int st_open_single(safetensors *st, const char *path, plume_error *err)
{
    size_t idx;
    if (st_map_shard(st, path, 0, path, &idx, err) || st_parse_shard(st, idx, err))
        return -1;
    return st_sort_and_dedup(st, err);
}

/* Opens a directory: the index if present, else model.safetensors. */
static int st_open_dir(safetensors *st, const char *path, plume_error *err)
{
    char *index = st_join(path, ST_INDEX_NAME);
    char *single = st_join(path, ST_SINGLE_NAME);
    int rc;
    if (!index || !single)
        rc = plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    else if (st_is_regular(index))
        rc = st_open_index(st, index, err);
    else if (st_is_regular(single))
        rc = st_open_single(st, single, err);
    else
        rc = plume_err(err, PLUME_ERR_IO,
                       "%s: directory holds neither " ST_INDEX_NAME " nor " ST_SINGLE_NAME, path);
    free(index);
    free(single);
    return rc;
}

/* ---- public API -------------------------------------------------------- */

int safetensors_open(const char *path, safetensors **out, plume_error *err)
{
    if (!path || !out)
        return plume_err(err, PLUME_ERR_INVALID, "safetensors_open: NULL argument");
    *out = NULL;
    safetensors *st = calloc(1, sizeof *st);
    if (!st)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
    struct stat sb;
    int rc;
    if (stat(path, &sb) != 0)
        rc = plume_err(err, PLUME_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        rc = st_open_dir(st, path, err);
    else if (st_ends_with(path, ".json"))
        rc = st_open_index(st, path, err);
    else
        rc = st_open_single(st, path, err);
    if (rc) {
        safetensors_close(st);
        return -1;
    }
    *out = st;
    return 0;
}

void safetensors_close(safetensors *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_entries; i++)
        free((char *)st->entries[i].t.name);
    for (size_t i = 0; i < st->n_shards; i++) {
        if (st->shards[i].map)
            munmap((void *)st->shards[i].map, st->shards[i].size);
        free(st->shards[i].path);
    }
    free(st->entries);
    free(st->shards);
    free(st);
}

size_t safetensors_n_tensors(const safetensors *st)
{
    return st ? st->n_entries : 0;
}

const plume_tensor *safetensors_tensor(const safetensors *st, size_t i)
{
    return st && i < st->n_entries ? &st->entries[i].t : NULL;
}

const plume_tensor *safetensors_find(const safetensors *st, const char *name)
{
    if (!st || !name || st->n_entries == 0)
        return NULL;
    const st_entry *e = bsearch(name, st->entries, st->n_entries, sizeof *st->entries, st_cmp_key);
    return e ? &e->t : NULL;
}

/* Maps a view back to its entry (views are the first member of entries);
 * NULL for a pointer that is not one of this reader's views. */
const char *safetensors_dtype(const safetensors *st, const plume_tensor *t)
{
    if (!st || !t || st->n_entries == 0)
        return NULL;
    uintptr_t p = (uintptr_t)t, lo = (uintptr_t)st->entries;
    uintptr_t hi = (uintptr_t)(st->entries + st->n_entries);
    if (p < lo || p >= hi || (p - lo) % sizeof *st->entries != 0)
        return NULL;
    return ((const st_entry *)t)->dtype->name;
}
