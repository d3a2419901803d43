/* plume — element types and read-only tensor views over checkpoint files. */
#ifndef PLUME_TENSOR_H
#define PLUME_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types.  The numeric values are ggml's type ids (formats.md §3.1),
 * so a GGUF tensor's type field maps to this enum without a table. Only the
 * types listed here can be read; plume_dtype_supported() tells. */
typedef enum plume_dtype {
    PLUME_DTYPE_F32 = 0,
    PLUME_DTYPE_F16 = 1,
    PLUME_DTYPE_Q4_0 = 2,
    PLUME_DTYPE_Q4_1 = 3,
    PLUME_DTYPE_Q5_0 = 6,
    PLUME_DTYPE_Q5_1 = 7,
    PLUME_DTYPE_Q8_0 = 8,
    PLUME_DTYPE_Q2_K = 10,
    PLUME_DTYPE_Q3_K = 11,
    PLUME_DTYPE_Q4_K = 12,
    PLUME_DTYPE_Q5_K = 13,
    PLUME_DTYPE_Q6_K = 14,
    PLUME_DTYPE_Q8_K = 15,
    PLUME_DTYPE_IQ4_NL = 20,
    PLUME_DTYPE_IQ4_XS = 23,
    PLUME_DTYPE_BF16 = 30,
    PLUME_DTYPE_MXFP4 = 39, /* gpt-oss's experts: 32 e2m1 values and an E8M0 scale (17 B) */
} plume_dtype;

#define PLUME_MAX_DIMS 4

/* A view of one tensor inside a mapped checkpoint.  `ne` is in ggml order:
 * ne[0] is the contiguous (innermost) dimension, so a PyTorch Linear weight
 * of shape [out, in] has ne[0] = in, ne[1] = out.  Unused dims are 1.
 * `data` points into the mapping and stays valid while the file is open.
 * `type` holds the raw ggml type id; it is a plume_dtype only when
 * plume_dtype_supported(type) is true. */
typedef struct plume_tensor {
    const char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[PLUME_MAX_DIMS];
    const void *data;
    size_t nbytes;
} plume_tensor;

/* Number of elements of a tensor view (product of ne). */
PLUME_API int64_t plume_tensor_nelements(const plume_tensor *t);

/* True when plume can dequantize and compute with this ggml type id. */
PLUME_API bool plume_dtype_supported(uint32_t type);
/* The names of the types plume_dtype_supported accepts, comma-separated,
 * for error messages. */
PLUME_API const char *plume_dtype_supported_names(void);

/* Name of a ggml type id ("F32", "Q4_K", ...), known to plume or not;
 * "unknown" for ids ggml never assigned. */
PLUME_API const char *plume_dtype_name(uint32_t type);

/* Elements per block (1 for F32/F16/BF16, 32 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/
 * IQ4_NL, 256 for the K-quants and IQ4_XS) and bytes per block, for any ggml type id whose size is
 * known (including types plume cannot compute with, so that files holding
 * them can still be listed).  Both are 0 for ids of unknown size. */
PLUME_API size_t plume_dtype_block_elems(uint32_t type);
PLUME_API size_t plume_dtype_block_bytes(uint32_t type);

/* Bytes of a row of n elements; 0 when n is not a multiple of the block size
 * or the type's size is unknown. */
PLUME_API size_t plume_dtype_row_bytes(uint32_t type, int64_t n);

/* Converts n elements (a multiple of the block size) of a supported type to
 * f32.  src holds plume_dtype_row_bytes(type, n) bytes. */
PLUME_API void plume_dequantize(plume_dtype type, const void *src, float *dst, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
