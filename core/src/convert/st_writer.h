/* safetensors writer, laid out as the reference Rust serializer does
 * (formats.md §4): 8-byte little-endian header length, compact JSON header
 * with "__metadata__" first and the tensors sorted by descending dtype
 * alignment then by name, padded with spaces to a multiple of 8 bytes, then
 * the tensor bytes back to back in that order.
 *
 * Tensors are registered with a fill callback and produced one at a time
 * while the file is written, so a checkpoint never has to fit in memory. */
#ifndef PLUME_ST_WRITER_H
#define PLUME_ST_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"

typedef struct st_writer st_writer;

/* Writes exactly nbytes of the tensor's little-endian, row-major data to
 * dst.  Returns 0, or -1 with err set. */
typedef int (*st_fill_fn)(void *user, void *dst, size_t nbytes, plume_error *err);

/* Called before each tensor is produced: index (0-based, in file order),
 * count, name and dtype. */
typedef void (*st_progress_fn)(void *user, size_t index, size_t count, const char *name,
                               const char *dtype);

/* A writer with no tensors; NULL when out of memory. */
st_writer *st_writer_new(void);
void st_writer_free(st_writer *w);

/* Adds a "__metadata__" string entry (copied). */
int st_writer_meta(st_writer *w, const char *key, const char *value, plume_error *err);

/* Registers a tensor: name (copied), safetensors dtype string ("F32", "F16",
 * "BF16", "I32", ... — whole-byte types only), shape in PyTorch order
 * (ndim 0..8) and the callback that produces its bytes (user must stay
 * valid until st_writer_write returns).  Duplicate names are an error. */
int st_writer_add(st_writer *w, const char *name, const char *dtype, const int64_t *shape,
                  int ndim, st_fill_fn fill, void *user, plume_error *err);

/* Number of tensors and total tensor bytes registered so far. */
size_t st_writer_count(const st_writer *w);
uint64_t st_writer_data_bytes(const st_writer *w);

/* The header exactly as it will be written (JSON plus padding, without the
 * 8-byte length), malloc'd and NUL-terminated; *len gets its length.  Sorts
 * the tensors into file order.  NULL with err set on failure. */
char *st_writer_header(st_writer *w, size_t *len, plume_error *err);

/* Writes the file to path (through path + ".tmp", renamed when complete, so
 * a failure never leaves a truncated file under the final name). */
int st_writer_write(st_writer *w, const char *path, st_progress_fn progress, void *user,
                    plume_error *err);

#endif
