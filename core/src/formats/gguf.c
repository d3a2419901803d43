/* GGUF reader: v2/v3 little-endian files over a read-only mmap.
 *
 * Layout (formats.md §3.1): magic "GGUF", u32 version, u64 tensor_count,
 * u64 kv_count, kv pairs, tensor infos, zero padding to the alignment, tensor
 * data.  Strings are u64 length + bytes (no NUL).  Tensor offsets are
 * relative to the data section, which starts at the aligned end of the
 * tensor infos.
 *
 * Every read goes through the bounds-checked cursor below; every size and
 * count is checked against the bytes left in the file before it is used, so
 * corrupt input yields PLUME_ERR_FORMAT with the file, field and offset. */
#include "formats/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DEPTH 16      /* deepest array nesting accepted */
#define GGUF_KV_MIN_BYTES 13   /* u64 key length + u32 type + 1-byte value */
#define GGUF_TI_MIN_BYTES 24   /* u64 name length + u32 n_dims + u32 type + u64 offset */
#define NAME_SHOW_MAX 80       /* longest key/name quoted in a message */

/* Open-addressing hash index from a string to its position in an array. */
typedef struct name_index {
    size_t *slots; /* position + 1; 0 = empty */
    size_t mask;
} name_index;

struct gguf_file {
    char *path;
    const uint8_t *map;
    size_t size;
    uint32_t version;
    uint32_t alignment;
    size_t data_offset;

    size_t n_kv;
    gguf_str *keys;
    gguf_value *values;
    name_index kv_index;

    size_t n_tensors;
    plume_tensor *tensors;
    gguf_str *tensor_names; /* the names as they lie in the mapping */
    name_index tensor_index;

    /* the other shards of a split model (split.count > 1), kept open: their
     * tensors, appended above, point into their mappings */
    gguf_file **shards;
    size_t n_shards;
};

/* ------------------------------------------------------------------ */
/* Bounds-checked cursor with error context                            */

typedef struct reader {
    const gguf_file *f;
    size_t off;
    plume_error *err;
    char ctx[384];                   /* the field being read, for messages */
    int depth;                       /* current array nesting */
    uint64_t elem[GGUF_MAX_DEPTH + 1]; /* element index at each nesting level */
} reader;

/* Copies up to NAME_SHOW_MAX bytes of s into out (size > NAME_SHOW_MAX + 4)
 * as printable text: other bytes become '?', a longer name ends in "...". */
static void show_name(char *out, size_t cap, const char *s, uint64_t len)
{
    size_t n = len > NAME_SHOW_MAX ? NAME_SHOW_MAX : (size_t)len;
    if (n + 4 > cap)
        n = cap > 4 ? cap - 4 : 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (n < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* Sets the field description used by later error messages. */
static void set_ctx(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_ctx(reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->ctx, sizeof r->ctx, fmt, ap);
    va_end(ap);
    r->depth = 0;
}

/* Fails with "<path>: <field>[elements]: <what> at offset <off>[; hint]".
 * Always returns -1. */
static int fail_at(reader *r, plume_status code, size_t off, const char *hint, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));
static int fail_at(reader *r, plume_status code, size_t off, const char *hint, const char *fmt,
                   ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    char idx[(GGUF_MAX_DEPTH + 1) * 24] = ""; /* "[i][j]...": at most 22 chars each */
    size_t o = 0;
    for (int d = 0; d < r->depth && d <= GGUF_MAX_DEPTH; d++)
        o += (size_t)snprintf(idx + o, sizeof idx - o, "[%llu]", (unsigned long long)r->elem[d]);
    return plume_err(r->err, code, "%s: %s%s: %s at offset %zu%s%s", r->f->path, r->ctx, idx, what,
                     off, hint ? "; " : "", hint ? hint : "");
}

static const char HINT_TRUNCATED[] = "the file is truncated or corrupt; re-download or re-convert it";
static const char HINT_CORRUPT[] = "the file is corrupt or not a GGUF file; re-download or re-convert it";

/* Succeeds when n more bytes are readable at the cursor. */
static int need(reader *r, uint64_t n)
{
    size_t left = r->f->size - r->off;
    if (n <= left)
        return 0;
    return fail_at(r, PLUME_ERR_FORMAT, r->off, HINT_TRUNCATED,
                   "needs %llu bytes but only %zu remain (file has %zu bytes)",
                   (unsigned long long)n, left, r->f->size);
}

/* Little-endian scalar reads (the host is little-endian; formats.md §3.1). */
static int rd_bytes(reader *r, void *dst, size_t n)
{
    if (need(r, n) < 0)
        return -1;
    memcpy(dst, r->f->map + r->off, n);
    r->off += n;
    return 0;
}

static int rd_u32(reader *r, uint32_t *v) { return rd_bytes(r, v, 4); }
static int rd_u64(reader *r, uint64_t *v) { return rd_bytes(r, v, 8); }

/* A string: u64 length, then that many bytes, left in place. */
static int rd_str(reader *r, gguf_str *s)
{
    uint64_t len;
    size_t at = r->off;
    if (rd_u64(r, &len) < 0)
        return -1;
    size_t left = r->f->size - r->off;
    if (len > left)
        return fail_at(r, PLUME_ERR_FORMAT, at, HINT_TRUNCATED,
                       "string length %llu exceeds the %zu bytes left in the file",
                       (unsigned long long)len, left);
    s->ptr = (const char *)r->f->map + r->off;
    s->len = len;
    r->off += (size_t)len;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Metadata values                                                     */

/* Fewest bytes one value of type t can occupy. */
static uint64_t min_value_bytes(gguf_type t)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    case GGUF_TYPE_STRING: return 8;
    case GGUF_TYPE_ARRAY: return 12;
    default: return 1;
    }
}

/* Releases the arrays owned by v (recursively). */
static void free_value(gguf_value *v)
{
    if (v->type != GGUF_TYPE_ARRAY || !v->arr.items)
        return;
    if (v->arr.type == GGUF_TYPE_ARRAY)
        for (uint64_t i = 0; i < v->arr.n; i++)
            free_value(&v->arr.items[i]);
    free(v->arr.items);
    v->arr.items = NULL;
}

static int read_value(reader *r, gguf_type type, gguf_value *v);

/* Reads a u32 value type and checks it names one of the 13 types. */
static int read_type(reader *r, gguf_type *t, const char *which)
{
    size_t at = r->off;
    uint32_t raw;
    if (rd_u32(r, &raw) < 0)
        return -1;
    if (raw >= GGUF_TYPE_COUNT)
        return fail_at(r, PLUME_ERR_FORMAT, at, HINT_CORRUPT,
                       "%s %u is not a GGUF value type (0..12)", which, raw);
    *t = (gguf_type)raw;
    return 0;
}

/* An ARRAY value: element type, u64 count, elements.  The count is checked
 * against the remaining bytes before anything is allocated. */
static int read_array(reader *r, gguf_value *v)
{
    gguf_type et = GGUF_TYPE_UINT8;
    uint64_t n;
    if (r->depth >= GGUF_MAX_DEPTH)
        return fail_at(r, PLUME_ERR_FORMAT, r->off, HINT_CORRUPT,
                       "arrays are nested more than %d deep", GGUF_MAX_DEPTH);
    if (read_type(r, &et, "array element type") < 0)
        return -1;
    size_t at = r->off;
    if (rd_u64(r, &n) < 0)
        return -1;
    uint64_t left = r->f->size - r->off;
    if (n > left / min_value_bytes(et))
        return fail_at(r, PLUME_ERR_FORMAT, at, HINT_TRUNCATED,
                       "array count %llu of %s does not fit in the %llu bytes left in the file",
                       (unsigned long long)n, gguf_type_name(et), (unsigned long long)left);
    v->arr.type = et;
    v->arr.n = 0;
    v->arr.items = NULL;
    if (n == 0)
        return 0;
    if (n > SIZE_MAX / sizeof(gguf_value) ||
        !(v->arr.items = calloc((size_t)n, sizeof(gguf_value))))
        return fail_at(r, PLUME_ERR_NOMEM, at, NULL,
                       "out of memory for an array of %llu values", (unsigned long long)n);
    int d = r->depth++;
    for (uint64_t i = 0; i < n; i++) {
        r->elem[d] = i;
        v->arr.n = i + 1; /* so that free_value releases what was read */
        if (read_value(r, et, &v->arr.items[i]) < 0)
            return -1;
    }
    r->depth = d;
    return 0;
}

/* Reads one value of the given type at the cursor into v. */
static int read_value(reader *r, gguf_type type, gguf_value *v)
{
    v->type = type;
    switch (type) {
    case GGUF_TYPE_UINT8: { uint8_t x; if (rd_bytes(r, &x, 1) < 0) return -1; v->u = x; return 0; }
    case GGUF_TYPE_INT8: { int8_t x; if (rd_bytes(r, &x, 1) < 0) return -1; v->i = x; return 0; }
    case GGUF_TYPE_UINT16: { uint16_t x; if (rd_bytes(r, &x, 2) < 0) return -1; v->u = x; return 0; }
    case GGUF_TYPE_INT16: { int16_t x; if (rd_bytes(r, &x, 2) < 0) return -1; v->i = x; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t x; if (rd_bytes(r, &x, 4) < 0) return -1; v->u = x; return 0; }
    case GGUF_TYPE_INT32: { int32_t x; if (rd_bytes(r, &x, 4) < 0) return -1; v->i = x; return 0; }
    case GGUF_TYPE_UINT64: { uint64_t x; if (rd_bytes(r, &x, 8) < 0) return -1; v->u = x; return 0; }
    case GGUF_TYPE_INT64: { int64_t x; if (rd_bytes(r, &x, 8) < 0) return -1; v->i = x; return 0; }
    case GGUF_TYPE_FLOAT32: { float x; if (rd_bytes(r, &x, 4) < 0) return -1; v->f = x; return 0; }
    case GGUF_TYPE_FLOAT64: { double x; if (rd_bytes(r, &x, 8) < 0) return -1; v->f = x; return 0; }
    case GGUF_TYPE_BOOL: {
        /* 0 = false, anything else true (as ggml reads it). */
        uint8_t x;
        if (rd_bytes(r, &x, 1) < 0)
            return -1;
        v->b = x != 0;
        return 0;
    }
    case GGUF_TYPE_STRING: return rd_str(r, &v->s);
    case GGUF_TYPE_ARRAY: return read_array(r, v);
    default: break;
    }
    return fail_at(r, PLUME_ERR_INTERNAL, r->off, NULL, "value type %d reached read_value", (int)type);
}

/* ------------------------------------------------------------------ */
/* Name index                                                          */

static uint64_t hash_bytes(const char *s, uint64_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static bool str_eq(gguf_str a, const char *b, size_t blen)
{
    return a.len == blen && memcmp(a.ptr, b, blen) == 0;
}

/* Allocates an empty index for n names (load factor <= 1/2). */
static int index_init(name_index *ix, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    ix->slots = calloc(cap, sizeof *ix->slots);
    ix->mask = cap - 1;
    return ix->slots ? 0 : -1;
}

/* Position of name among names[], or SIZE_MAX when absent. */
static size_t index_find(const name_index *ix, const gguf_str *names, const char *s, size_t len)
{
    if (!ix->slots)
        return SIZE_MAX;
    for (size_t h = (size_t)hash_bytes(s, len) & ix->mask;; h = (h + 1) & ix->mask) {
        size_t slot = ix->slots[h];
        if (slot == 0)
            return SIZE_MAX;
        if (str_eq(names[slot - 1], s, len))
            return slot - 1;
    }
}

/* Adds names[i]; returns the position of an earlier equal name, or SIZE_MAX
 * when it was new and is now indexed. */
static size_t index_add(name_index *ix, const gguf_str *names, size_t i)
{
    gguf_str s = names[i];
    size_t h = (size_t)hash_bytes(s.ptr, s.len) & ix->mask;
    for (;; h = (h + 1) & ix->mask) {
        size_t slot = ix->slots[h];
        if (slot == 0)
            break;
        if (str_eq(names[slot - 1], s.ptr, (size_t)s.len))
            return slot - 1;
    }
    ix->slots[h] = i + 1;
    return SIZE_MAX;
}

/* ------------------------------------------------------------------ */
/* File structure                                                      */

/* Magic, version and the two counts; counts are checked against the bytes
 * left so that later allocations are bounded by the file size. */
static int read_header(reader *r, gguf_file *f, uint64_t *n_tensors, uint64_t *n_kv)
{
    uint32_t magic;
    set_ctx(r, "header magic");
    if (rd_u32(r, &magic) < 0)
        return -1;
    if (magic != GGUF_MAGIC) {
        const uint8_t *m = f->map;
        return fail_at(r, PLUME_ERR_FORMAT, 0, "check that this is a .gguf model file",
                       "expected \"GGUF\" (47 47 55 46), found %02x %02x %02x %02x", m[0], m[1],
                       m[2], m[3]);
    }
    set_ctx(r, "header version");
    if (rd_u32(r, &f->version) < 0)
        return -1;
    uint32_t v = f->version;
    if (v == 0)
        return fail_at(r, PLUME_ERR_FORMAT, 4, HINT_CORRUPT, "version 0 is not a GGUF version");
    if ((v & 0xFFFF) == 0)
        return fail_at(r, PLUME_ERR_UNSUPPORTED, 4,
                       "convert it to little-endian (gguf-py's gguf-convert-endian)",
                       "version field 0x%08x means a big-endian GGUF file, which is unsupported", v);
    if (v == 1)
        return fail_at(r, PLUME_ERR_UNSUPPORTED, 4,
                       "re-convert the model with a current llama.cpp (GGUF v2 or v3)",
                       "GGUF version 1 is no longer supported");
    if (v > 3)
        return fail_at(r, PLUME_ERR_UNSUPPORTED, 4,
                       "plume reads versions 2 and 3; re-convert the model or update plume",
                       "GGUF version %u is newer than plume knows", v);
    set_ctx(r, "header tensor_count");
    if (rd_u64(r, n_tensors) < 0)
        return -1;
    set_ctx(r, "header metadata_kv_count");
    if (rd_u64(r, n_kv) < 0)
        return -1;
    uint64_t left = f->size - r->off;
    if (*n_kv > left / GGUF_KV_MIN_BYTES)
        return fail_at(r, PLUME_ERR_FORMAT, 16, HINT_TRUNCATED,
                       "%llu metadata pairs cannot fit in the %llu bytes left in the file",
                       (unsigned long long)*n_kv, (unsigned long long)left);
    if (*n_tensors > left / GGUF_TI_MIN_BYTES) {
        set_ctx(r, "header tensor_count");
        return fail_at(r, PLUME_ERR_FORMAT, 8, HINT_TRUNCATED,
                       "%llu tensor infos cannot fit in the %llu bytes left in the file",
                       (unsigned long long)*n_tensors, (unsigned long long)left);
    }
    return 0;
}

/* Validates general.alignment: a u32, nonzero power of two. */
static int check_alignment(reader *r, gguf_file *f, size_t i, size_t at)
{
    const gguf_value *v = &f->values[i];
    if (v->type != GGUF_TYPE_UINT32)
        return fail_at(r, PLUME_ERR_FORMAT, at, HINT_CORRUPT,
                       "general.alignment must be a uint32, found %s", gguf_type_name(v->type));
    if (v->u == 0 || (v->u & (v->u - 1)) != 0)
        return fail_at(r, PLUME_ERR_FORMAT, at, HINT_CORRUPT,
                       "general.alignment %llu is not a nonzero power of two",
                       (unsigned long long)v->u);
    f->alignment = (uint32_t)v->u;
    return 0;
}

/* All metadata pairs: key, type, value; duplicates are an error. */
static int read_kvs(reader *r, gguf_file *f, uint64_t n)
{
    f->keys = calloc(n ? n : 1, sizeof *f->keys);
    f->values = calloc(n ? n : 1, sizeof *f->values);
    if (!f->keys || !f->values || index_init(&f->kv_index, (size_t)n) < 0)
        return plume_err(r->err, PLUME_ERR_NOMEM, "%s: out of memory for %llu metadata pairs",
                         f->path, (unsigned long long)n);
    for (size_t i = 0; i < n; i++) {
        char name[NAME_SHOW_MAX + 8];
        size_t key_at = r->off;
        set_ctx(r, "metadata key #%zu", i);
        if (rd_str(r, &f->keys[i]) < 0)
            return -1;
        show_name(name, sizeof name, f->keys[i].ptr, f->keys[i].len);
        set_ctx(r, "metadata key #%zu '%s' type", i, name);
        gguf_type t = GGUF_TYPE_UINT8;
        if (read_type(r, &t, "value type") < 0)
            return -1;
        set_ctx(r, "metadata key #%zu '%s' value", i, name);
        size_t val_at = r->off;
        f->n_kv = i + 1; /* so that gguf_close frees this value's arrays */
        if (read_value(r, t, &f->values[i]) < 0)
            return -1;
        size_t dup = index_add(&f->kv_index, f->keys, i);
        if (dup != SIZE_MAX) {
            set_ctx(r, "metadata key #%zu '%s'", i, name);
            return fail_at(r, PLUME_ERR_FORMAT, key_at, HINT_CORRUPT,
                           "duplicates metadata key #%zu", dup);
        }
        if (str_eq(f->keys[i], "general.alignment", 17) && check_alignment(r, f, i, val_at) < 0)
            return -1;
    }
    return 0;
}

/* Computes t->nbytes from the dims and type, rejecting unknown types,
 * rows that are not whole blocks and sizes that overflow. */
static int tensor_nbytes(reader *r, plume_tensor *t, size_t i, const char *name, size_t type_at,
                         size_t dims_at)
{
    size_t bb = plume_dtype_block_bytes(t->type);
    size_t be = plume_dtype_block_elems(t->type);
    if (bb == 0)
        return fail_at(r, PLUME_ERR_UNSUPPORTED, type_at,
                       "re-quantize the model to a common type (e.g. Q8_0, Q4_K, F16)",
                       "type id %u (%s) has a block size plume does not know", t->type,
                       plume_dtype_name(t->type));
    set_ctx(r, "tensor info #%zu '%s' dims", i, name);
    if ((uint64_t)t->ne[0] % be != 0)
        return fail_at(r, PLUME_ERR_FORMAT, dims_at, HINT_CORRUPT,
                       "ne[0] = %lld is not a multiple of the %s block size %zu",
                       (long long)t->ne[0], plume_dtype_name(t->type), be);
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)t->ne[0] / be, (uint64_t)bb, &bytes))
        return fail_at(r, PLUME_ERR_FORMAT, dims_at, HINT_CORRUPT,
                       "the tensor's byte size overflows 64 bits");
    for (int d = 1; d < PLUME_MAX_DIMS; d++)
        if (__builtin_mul_overflow(bytes, (uint64_t)t->ne[d], &bytes))
            return fail_at(r, PLUME_ERR_FORMAT, dims_at, HINT_CORRUPT,
                           "the tensor's byte size overflows 64 bits");
    if (bytes > SIZE_MAX)
        return fail_at(r, PLUME_ERR_FORMAT, dims_at, HINT_CORRUPT, "the tensor is too large");
    t->nbytes = (size_t)bytes;
    return 0;
}

/* n_dims (<= 4) and dims; unused dims are 1 and the element count must fit
 * in an int64. */
static int read_dims(reader *r, plume_tensor *t)
{
    size_t at = r->off;
    uint32_t n_dims;
    if (rd_u32(r, &n_dims) < 0)
        return -1;
    if (n_dims > PLUME_MAX_DIMS)
        return fail_at(r, PLUME_ERR_FORMAT, at, HINT_CORRUPT, "n_dims %u exceeds the maximum %d",
                       n_dims, PLUME_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    for (int d = 0; d < PLUME_MAX_DIMS; d++) {
        uint64_t ne = 1;
        size_t dim_at = r->off;
        if (d < (int)n_dims && rd_u64(r, &ne) < 0)
            return -1;
        if (ne > INT64_MAX || __builtin_mul_overflow(nel, (int64_t)ne, &nel))
            return fail_at(r, PLUME_ERR_FORMAT, dim_at, HINT_CORRUPT,
                           "dims overflow: ne[%d] = %llu makes the element count exceed 2^63", d,
                           (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    return 0;
}

/* One tensor info: name, n_dims, dims, type, offset (checked later against
 * the data section). */
static int read_tensor_info(reader *r, gguf_file *f, size_t i, uint64_t *offset, size_t *off_at)
{
    plume_tensor *t = &f->tensors[i];
    gguf_str *nm = &f->tensor_names[i];
    char name[NAME_SHOW_MAX + 8];
    set_ctx(r, "tensor info #%zu name", i);
    size_t name_at = r->off;
    if (rd_str(r, nm) < 0)
        return -1;
    char *copy = malloc((size_t)nm->len + 1);
    if (!copy)
        return fail_at(r, PLUME_ERR_NOMEM, name_at, NULL, "out of memory for the name");
    memcpy(copy, nm->ptr, (size_t)nm->len);
    copy[nm->len] = '\0';
    t->name = copy;
    show_name(name, sizeof name, nm->ptr, nm->len);
    size_t dup = index_add(&f->tensor_index, f->tensor_names, i);
    if (dup != SIZE_MAX) {
        set_ctx(r, "tensor info #%zu '%s'", i, name);
        return fail_at(r, PLUME_ERR_FORMAT, name_at, HINT_CORRUPT,
                       "duplicates the name of tensor #%zu", dup);
    }
    set_ctx(r, "tensor info #%zu '%s' dims", i, name);
    size_t dims_at = r->off;
    if (read_dims(r, t) < 0)
        return -1;
    set_ctx(r, "tensor info #%zu '%s' type", i, name);
    size_t type_at = r->off;
    if (rd_u32(r, &t->type) < 0 || tensor_nbytes(r, t, i, name, type_at, dims_at) < 0)
        return -1;
    set_ctx(r, "tensor info #%zu '%s' offset", i, name);
    *off_at = r->off;
    if (rd_u64(r, offset) < 0)
        return -1;
    if (*offset % f->alignment != 0)
        return fail_at(r, PLUME_ERR_FORMAT, *off_at, HINT_CORRUPT,
                       "data offset %llu is not a multiple of the alignment %u",
                       (unsigned long long)*offset, f->alignment);
    return 0;
}

/* Places tensor i's data in the data section, checking it lies in the file. */
static int place_tensor(reader *r, gguf_file *f, size_t i, uint64_t offset, size_t off_at)
{
    plume_tensor *t = &f->tensors[i];
    char name[NAME_SHOW_MAX + 8];
    show_name(name, sizeof name, f->tensor_names[i].ptr, f->tensor_names[i].len);
    set_ctx(r, "tensor info #%zu '%s' offset", i, name);
    uint64_t room = f->data_offset <= f->size ? f->size - f->data_offset : 0;
    /* an empty tensor too: a file cut inside the padding has no data section */
    if (f->data_offset > f->size || offset > room || t->nbytes > room - offset) {
        uint64_t end;
        if (__builtin_add_overflow(offset, (uint64_t)t->nbytes, &end) ||
            __builtin_add_overflow(end, (uint64_t)f->data_offset, &end))
            end = UINT64_MAX;
        return fail_at(r, PLUME_ERR_FORMAT, off_at, HINT_TRUNCATED,
                       "data (offset %llu, %zu bytes, data section at %zu) runs past the end of "
                       "the file (expected at least %llu bytes, file has %zu)",
                       (unsigned long long)offset, t->nbytes, f->data_offset,
                       (unsigned long long)end, f->size);
    }
    t->data = f->map + f->data_offset + offset;
    return 0;
}

/* All tensor infos, then the data section start and every tensor's range. */
static int read_tensors(reader *r, gguf_file *f, uint64_t n)
{
    uint64_t *offsets = calloc(n ? n : 1, sizeof *offsets);
    size_t *off_at = calloc(n ? n : 1, sizeof *off_at);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->tensor_names = calloc(n ? n : 1, sizeof *f->tensor_names);
    int rc = -1;
    if (!offsets || !off_at || !f->tensors || !f->tensor_names ||
        index_init(&f->tensor_index, (size_t)n) < 0) {
        plume_err(r->err, PLUME_ERR_NOMEM, "%s: out of memory for %llu tensor infos", f->path,
                  (unsigned long long)n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        f->n_tensors = i + 1; /* so that gguf_close frees the name */
        if (read_tensor_info(r, f, i, &offsets[i], &off_at[i]) < 0)
            goto out;
    }
    size_t a = f->alignment;
    f->data_offset = (r->off + a - 1) / a * a; /* r->off <= size, a <= 2^31: no overflow */
    for (size_t i = 0; i < n; i++)
        if (place_tensor(r, f, i, offsets[i], off_at[i]) < 0)
            goto out;
    rc = 0;
out:
    free(offsets);
    free(off_at);
    return rc;
}

/* Maps path read-only into f->map / f->size. */
static int map_file(gguf_file *f, plume_error *err)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return plume_err(err, PLUME_ERR_IO, "%s: cannot open: %s; check the path and permissions",
                         f->path, strerror(errno));
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) < 0) {
        plume_err(err, PLUME_ERR_IO, "%s: cannot stat: %s", f->path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        plume_err(err, PLUME_ERR_IO, "%s: not a regular file; give the path of a .gguf file",
                  f->path);
    } else if ((uint64_t)st.st_size > SIZE_MAX) {
        plume_err(err, PLUME_ERR_IO, "%s: file too large to map on this system", f->path);
    } else if (st.st_size == 0) {
        plume_err(err, PLUME_ERR_FORMAT,
                  "%s: the file is empty (0 bytes) at offset 0; re-download or re-convert it",
                  f->path);
    } else {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            plume_err(err, PLUME_ERR_IO, "%s: cannot mmap %lld bytes: %s", f->path,
                      (long long)st.st_size, strerror(errno));
        } else {
            f->map = m;
            f->size = (size_t)st.st_size;
            rc = 0;
        }
    }
    close(fd);
    return rc;
}

/* One file, shards not followed. */
static int open_file(const char *path, gguf_file **out, plume_error *err)
{
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory opening the file", path);
    }
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    reader r = {.f = f, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    if (map_file(f, err) < 0 || read_header(&r, f, &n_tensors, &n_kv) < 0 ||
        read_kvs(&r, f, n_kv) < 0 || read_tensors(&r, f, n_tensors) < 0) {
        gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

/* split.no / split.count of f (0 / 1 for an unsplit file); -1 on a bad value. */
static int split_keys(const gguf_file *f, int64_t *no, int64_t *count, plume_error *err)
{
    *no = 0;
    *count = 1;
    const gguf_value *nv = gguf_get(f, "split.no"), *cv = gguf_get(f, "split.count");
    if ((nv && !gguf_get_i64(f, "split.no", no)) || (cv && !gguf_get_i64(f, "split.count", count)) ||
        *count < 1 || *count > 9999 || *no < 0 || *no >= *count)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: split.no / split.count are not a shard number below a count of "
                         "1..9999; fix the metadata or re-split the model",
                         f->path);
    return 0;
}

/* Appends the tensors of shard s to f (moving their names), reindexing. */
static int adopt_shard(gguf_file *f, gguf_file *s, plume_error *err)
{
    size_t n = f->n_tensors + s->n_tensors;
    plume_tensor *t = realloc(f->tensors, (n ? n : 1) * sizeof *t);
    if (t)
        f->tensors = t;
    gguf_str *names = t ? realloc(f->tensor_names, (n ? n : 1) * sizeof *names) : NULL;
    if (names)
        f->tensor_names = names;
    if (!t || !names)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory adding shard %s", f->path,
                         s->path);
    memcpy(f->tensors + f->n_tensors, s->tensors, s->n_tensors * sizeof *t);
    memcpy(f->tensor_names + f->n_tensors, s->tensor_names, s->n_tensors * sizeof *names);
    f->n_tensors = n;
    s->n_tensors = 0; /* f frees the names now */
    free(f->tensor_index.slots);
    f->tensor_index.slots = NULL;
    if (index_init(&f->tensor_index, n) < 0)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory indexing tensors", f->path);
    for (size_t i = 0; i < n; i++)
        if (index_add(&f->tensor_index, f->tensor_names, i) != SIZE_MAX) {
            char name[NAME_SHOW_MAX + 8];
            show_name(name, sizeof name, f->tensor_names[i].ptr, f->tensor_names[i].len);
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: tensor '%s' stands in two shards of the split model; re-split it",
                             s->path, name);
        }
    return 0;
}

/* A split model (llama.cpp's gguf-split, gguf-py's split_max_*): the first
 * shard PREFIX-00001-of-N.gguf holds the metadata, every shard
 * PREFIX-0000i-of-N.gguf tensors.  Opens shards 2..N into f. */
static int open_shards(gguf_file *f, int64_t count, plume_error *err)
{
    char tail[64];
    snprintf(tail, sizeof tail, "-00001-of-%05lld.gguf", (long long)count);
    size_t n = strlen(f->path), tn = strlen(tail);
    if (n < tn || strcmp(f->path + n - tn, tail) != 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: this is the first of %lld shards of a split model, but its name "
                         "does not end in '%s', so the others cannot be found; rename the shards "
                         "as gguf-split named them",
                         f->path, (long long)count, tail);
    if (!(f->shards = calloc((size_t)count, sizeof *f->shards)))
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", f->path);
    for (int64_t i = 1; i < count; i++) {
        char *p = malloc(n - tn + 64); /* as long as the first's name */
        if (!p)
            return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", f->path);
        memcpy(p, f->path, n - tn);
        snprintf(p + n - tn, 64, "-%05lld-of-%05lld.gguf", (long long)i + 1, (long long)count);
        gguf_file *s;
        int rc = open_file(p, &s, err);
        free(p);
        if (rc)
            return plume_err_prefix(err, "shard %lld of %lld of %s", (long long)i + 1,
                                    (long long)count, f->path);
        f->shards[f->n_shards++] = s;
        int64_t no, cnt;
        if (split_keys(s, &no, &cnt, err))
            return -1;
        if (no != i || cnt != count)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: split.no %lld of split.count %lld where shard %lld of %lld "
                             "was expected; the shards are of different splits",
                             s->path, (long long)no, (long long)cnt, (long long)i, (long long)count);
        if (adopt_shard(f, s, err))
            return -1;
    }
    int64_t total;
    if (gguf_get_i64(f, "split.tensors.count", &total) && (uint64_t)total != f->n_tensors)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: the %lld shards hold %zu tensors, split.tensors.count says %lld; a "
                         "shard is missing tensors",
                         f->path, (long long)count, f->n_tensors, (long long)total);
    return 0;
}

int gguf_open(const char *path, gguf_file **out, plume_error *err)
{
    gguf_file *f;
    *out = NULL;
    if (open_file(path, &f, err))
        return -1;
    int64_t no, count;
    if (split_keys(f, &no, &count, err)) {
        gguf_close(f);
        return -1;
    }
    if (no != 0) {
        plume_err(err, PLUME_ERR_INVALID,
                  "%s: this is shard %lld of %lld of a split model; give the first shard "
                  "(...-00001-of-%05lld.gguf), which holds the metadata",
                  path, (long long)no + 1, (long long)count, (long long)count);
        gguf_close(f);
        return -1;
    }
    if (count > 1 && open_shards(f, count, err)) {
        gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

void gguf_close(gguf_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n_shards; i++)
        gguf_close(f->shards[i]);
    free(f->shards);
    for (size_t i = 0; i < f->n_kv; i++)
        free_value(&f->values[i]);
    free(f->values);
    free(f->keys);
    free(f->kv_index.slots);
    for (size_t i = 0; i < f->n_tensors; i++)
        free((char *)f->tensors[i].name);
    free(f->tensors);
    free(f->tensor_names);
    free(f->tensor_index.slots);
    if (f->map)
        munmap((void *)f->map, f->size);
    free(f->path);
    free(f);
}

/* ------------------------------------------------------------------ */
/* Accessors                                                           */

const char *gguf_path(const gguf_file *f) { return f->path; }
uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint32_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_file_size(const gguf_file *f) { return f->size; }
const void *gguf_map(const gguf_file *f) { return f->map; }
size_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
size_t gguf_n_kv(const gguf_file *f) { return f->n_kv; }
size_t gguf_n_tensors(const gguf_file *f) { return f->n_tensors; }

gguf_str gguf_kv_key(const gguf_file *f, size_t i)
{
    gguf_str none = {NULL, 0};
    return i < f->n_kv ? f->keys[i] : none;
}

const gguf_value *gguf_kv_value(const gguf_file *f, size_t i)
{
    return i < f->n_kv ? &f->values[i] : NULL;
}

const gguf_value *gguf_get(const gguf_file *f, const char *key)
{
    size_t i = index_find(&f->kv_index, f->keys, key, strlen(key));
    return i == SIZE_MAX ? NULL : &f->values[i];
}

static bool is_unsigned(gguf_type t)
{
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 ||
           t == GGUF_TYPE_UINT64;
}

static bool is_signed(gguf_type t)
{
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_INT64;
}

/* Whether v (NULL: missing) is an integer of either signedness in
 * [lo, hi] (lo <= 0 <= hi); *out gets it. */
static bool int_in(const gguf_value *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (v && is_unsigned(v->type) && v->u <= (uint64_t)hi) {
        *out = (int64_t)v->u;
        return true;
    }
    if (v && is_signed(v->type) && v->i >= lo && v->i <= hi) {
        *out = v->i;
        return true;
    }
    return false;
}

bool gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out)
{
    int64_t x;
    if (!int_in(gguf_get(f, key), 0, UINT32_MAX, &x))
        return false;
    *out = (uint32_t)x;
    return true;
}

bool gguf_get_i64(const gguf_file *f, const char *key, int64_t *out)
{
    return int_in(gguf_get(f, key), INT64_MIN, INT64_MAX, out);
}

bool gguf_get_f32(const gguf_file *f, const char *key, float *out)
{
    const gguf_value *v = gguf_get(f, key);
    if (!v)
        return false;
    if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64)
        *out = (float)v->f;
    else if (is_unsigned(v->type))
        *out = (float)v->u;
    else if (is_signed(v->type))
        *out = (float)v->i;
    else
        return false;
    return true;
}

bool gguf_get_bool(const gguf_file *f, const char *key, bool *out)
{
    const gguf_value *v = gguf_get(f, key);
    if (!v || v->type != GGUF_TYPE_BOOL)
        return false;
    *out = v->b;
    return true;
}

bool gguf_get_str(const gguf_file *f, const char *key, gguf_str *out)
{
    const gguf_value *v = gguf_get(f, key);
    if (!v || v->type != GGUF_TYPE_STRING)
        return false;
    *out = v->s;
    return true;
}

bool gguf_get_arr(const gguf_file *f, const char *key, gguf_type *elem_type, uint64_t *n,
                  const gguf_value **items)
{
    const gguf_value *v = gguf_get(f, key);
    if (!v || v->type != GGUF_TYPE_ARRAY)
        return false;
    *elem_type = v->arr.type;
    *n = v->arr.n;
    *items = v->arr.items;
    return true;
}

const char *gguf_type_name(gguf_type t)
{
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32",  "float32",
        "bool",  "string", "array", "uint64", "int64", "float64",
    };
    return (unsigned)t < GGUF_TYPE_COUNT ? names[t] : "unknown";
}

const plume_tensor *gguf_tensor(const gguf_file *f, size_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const plume_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    size_t i = index_find(&f->tensor_index, f->tensor_names, name, strlen(name));
    return i == SIZE_MAX ? NULL : &f->tensors[i];
}
