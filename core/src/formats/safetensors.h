/* safetensors reader: a single file, or a sharded checkpoint through
 * model.safetensors.index.json.  Layout facts: formats.md §4.
 *
 * Tensors are exposed as plume_tensor views in ggml dimension order (ne[0]
 * is the last, contiguous PyTorch dimension).  F32, F16 and BF16 tensors map
 * to the plume dtypes; I32/I64/U8/I8/I16 and others keep a view with
 * `type = PLUME_ST_RAW_TYPE` so that plugins (GPTQ qweight, g_idx) can still
 * read them through safetensors_raw(). */
#ifndef PLUME_SAFETENSORS_H
#define PLUME_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/tensor.h"

/* plume_tensor.type for tensors whose dtype is not F32/F16/BF16. */
#define PLUME_ST_RAW_TYPE 0xffffffffu

typedef struct safetensors safetensors;

/* Opens `path`: a .safetensors file, a model.safetensors.index.json, or a
 * directory holding either (index preferred).  Validates headers against the
 * file sizes (offsets contiguous, no holes, within the buffer). */
int safetensors_open(const char *path, safetensors **out, plume_error *err);

/* Unmaps every shard and frees; NULL is a no-op. */
void safetensors_close(safetensors *st);

size_t safetensors_n_tensors(const safetensors *st);
const plume_tensor *safetensors_tensor(const safetensors *st, size_t i);
/* Tensor by its checkpoint name, or NULL. */
const plume_tensor *safetensors_find(const safetensors *st, const char *name);
/* The safetensors dtype string ("F16", "I32", ...) of a tensor view returned
 * by this reader. */
const char *safetensors_dtype(const safetensors *st, const plume_tensor *t);

#endif
