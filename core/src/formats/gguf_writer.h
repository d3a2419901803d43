/* GGUF v3 writer (little-endian; formats.md §3.1): metadata and tensor
 * infos are collected in memory, then the file is written in one pass with
 * the tensor data streamed in the order the tensors were added, each padded
 * to the alignment (32, GGUF_DEFAULT_ALIGNMENT).  The reader (gguf.h) and
 * gguf-py read what it writes. */
#ifndef PLUME_GGUF_WRITER_H
#define PLUME_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"
#include "plume/error.h"

typedef struct gguf_writer gguf_writer;

/* A new empty writer; NULL when out of memory. */
gguf_writer *gguf_writer_new(void);
/* Closes the file if open (a partial file stays; the caller removes it). */
void gguf_writer_free(gguf_writer *w);

/* Metadata pairs, in the order added.  Keys must be unique (the caller
 * checks gguf_writer_has_key when copying from another file).  Failures
 * (out of memory) are reported by gguf_writer_open. */
bool gguf_writer_has_key(const gguf_writer *w, const char *key);
void gguf_writer_kv_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_kv_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_kv_bool(gguf_writer *w, const char *key, bool v);
void gguf_writer_kv_str(gguf_writer *w, const char *key, const char *s, size_t len);
/* A value read by gguf.h (any type, arrays nested), copied as it was. */
void gguf_writer_kv_value(gguf_writer *w, const char *key, size_t key_len, const gguf_value *v);
/* An array of n elements of elem type; the caller then appends exactly n
 * elements with gguf_writer_arr_str / _i32. */
void gguf_writer_kv_arr(gguf_writer *w, const char *key, gguf_type elem, uint64_t n);
void gguf_writer_arr_str(gguf_writer *w, const char *s, size_t len);
void gguf_writer_arr_i32(gguf_writer *w, int32_t v);
void gguf_writer_arr_f32(gguf_writer *w, float v);

/* Declares a tensor (ne in ggml order, ggml type id); its data must later
 * be written with gguf_writer_tensor_data, in declaration order.  Errors
 * for a name over 64 bytes, a duplicate name, or a row length that is not a
 * multiple of the type's block. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, int n_dims, const int64_t *ne,
                           uint32_t type, plume_error *err);
/* Bytes of the data of the i-th declared tensor. */
size_t gguf_writer_tensor_bytes(const gguf_writer *w, size_t i);

/* Creates path and writes the header, metadata and tensor infos. */
int gguf_writer_open(gguf_writer *w, const char *path, plume_error *err);
/* Appends the next tensor's data (exactly gguf_writer_tensor_bytes). */
int gguf_writer_tensor_data(gguf_writer *w, const void *data, size_t nbytes, plume_error *err);
/* Appends nbytes more of the next tensor's data: a tensor may be written
 * in parts (bounded memory); the part that completes it moves on to the
 * next tensor. */
int gguf_writer_tensor_part(gguf_writer *w, const void *data, size_t nbytes, plume_error *err);
/* Checks that every tensor was written, flushes and closes; returns the
 * file size in *size (may be NULL). */
int gguf_writer_close(gguf_writer *w, uint64_t *size, plume_error *err);

#endif
