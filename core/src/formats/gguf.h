/* GGUF reader (v2 and v3, little-endian) over a read-only mmap.
 *
 * Layout facts: ../shared/reference/formats.md §3.1 (ggml docs/gguf.md).
 * Every read is bounds-checked against the file size; a truncated or corrupt
 * file is an error naming the file, the field and the byte offset. */
#ifndef PLUME_GGUF_H
#define PLUME_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/tensor.h"

typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

/* A string inside the mapping: not NUL-terminated. */
typedef struct gguf_str {
    const char *ptr;
    uint64_t len;
} gguf_str;

/* A metadata value.  Scalars are widened: unsigned ints in u, signed ints in
 * i, FLOAT32/FLOAT64 in f, BOOL in b.  An ARRAY holds `arr.n` values of
 * `arr.type` in `arr.items` (nested arrays allowed). */
typedef struct gguf_value {
    gguf_type type;
    union {
        uint64_t u;
        int64_t i;
        double f;
        bool b;
        gguf_str s;
        struct {
            gguf_type type;
            uint64_t n;
            struct gguf_value *items;
        } arr;
    };
} gguf_value;

/* The integer v holds (an unsigned one cast to int64_t), or def when v is
 * not of an integer type. */
static inline int64_t gguf_value_int(const gguf_value *v, int64_t def)
{
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        return (int64_t)v->u;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        return v->i;
    default:
        return def;
    }
}

typedef struct gguf_file gguf_file;

/* Maps and parses a GGUF file: header, every metadata pair and every tensor
 * info, validating all offsets and sizes.  Tensors of types whose block size
 * is unknown are an error; supported-or-not is left to the caller.  The
 * first shard of a split model (split.count > 1, PREFIX-00001-of-N.gguf)
 * opens the others beside it: the metadata is the first's, the tensors all
 * shards' (gguf_map, gguf_data_offset and gguf_file_size stay the
 * first's).  Another shard given alone is an error naming the first. */
int gguf_open(const char *path, gguf_file **out, plume_error *err);

/* Unmaps and frees; NULL is a no-op. */
void gguf_close(gguf_file *f);

const char *gguf_path(const gguf_file *f);
uint32_t gguf_version(const gguf_file *f);
uint32_t gguf_alignment(const gguf_file *f);
uint64_t gguf_file_size(const gguf_file *f);
/* The read-only mapping of the whole file (gguf_file_size bytes) and where
 * its data section starts; every tensor's data lies in [data_offset, size). */
const void *gguf_map(const gguf_file *f);
size_t gguf_data_offset(const gguf_file *f);

/* Metadata pairs in file order. */
size_t gguf_n_kv(const gguf_file *f);
gguf_str gguf_kv_key(const gguf_file *f, size_t i);
const gguf_value *gguf_kv_value(const gguf_file *f, size_t i);

/* Value of a key, or NULL when absent. */
const gguf_value *gguf_get(const gguf_file *f, const char *key);

/* Typed lookups: return true and store the value when the key exists and its
 * value converts exactly (any integer type that fits; float32/float64 for
 * floats; integers also convert to float).  False when absent or of an
 * incompatible type. */
bool gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
bool gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
bool gguf_get_f32(const gguf_file *f, const char *key, float *out);
bool gguf_get_bool(const gguf_file *f, const char *key, bool *out);
bool gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* An ARRAY value: its element type and count, items via *items. */
bool gguf_get_arr(const gguf_file *f, const char *key, gguf_type *elem_type, uint64_t *n,
                  const gguf_value **items);

/* Name of a value type ("uint32", "array", ...). */
const char *gguf_type_name(gguf_type t);

/* Tensors in file order; data pointers are into the mapping. */
size_t gguf_n_tensors(const gguf_file *f);
const plume_tensor *gguf_tensor(const gguf_file *f, size_t i);
/* Tensor by name, or NULL. */
const plume_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

#endif
