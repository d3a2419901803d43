/* Reference (importance-free) quantizers for GGUF block types: rows of
 * floats to the exact block bytes of formats.md §3.2, with the algorithms
 * of ggml-quants.c that llama-quantize runs when it has no importance
 * matrix (quantize_row_*_ref; IQ4_NL/IQ4_XS: the best-scale search with
 * x² weights; MXFP4: quantize_row_mxfp4_ref).  Written here from the
 * published algorithm descriptions; the legacy types and MXFP4 are
 * bit-identical to gguf-py's quantize (tests/quant). */
#ifndef PLUME_GGUF_QUANT_H
#define PLUME_GGUF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids (formats.md §3.1) of the types quantized here. */
enum {
    GQ_F32 = 0,
    GQ_F16 = 1,
    GQ_Q4_0 = 2,
    GQ_Q4_1 = 3,
    GQ_Q5_0 = 6,
    GQ_Q5_1 = 7,
    GQ_Q8_0 = 8,
    GQ_Q2_K = 10,
    GQ_Q3_K = 11,
    GQ_Q4_K = 12,
    GQ_Q5_K = 13,
    GQ_Q6_K = 14,
    GQ_IQ4_NL = 20,
    GQ_IQ4_XS = 23,
    GQ_MXFP4 = 39,
};

/* True when gguf_quantize_rows can write ggml type id `type` (the types
 * above, F32 and F16 included). */
bool gguf_quant_supported(uint32_t type);

/* Quantizes nrows rows of n_per_row floats (a multiple of the type's block
 * size; the caller checks) from src into dst, which holds
 * nrows * plume_dtype_row_bytes(type, n_per_row) bytes.  Rows are
 * independent: the same row always gives the same bytes.  Returns the bytes
 * written, 0 for an unsupported type. */
size_t gguf_quantize_rows(uint32_t type, const float *src, void *dst, int64_t nrows,
                          int64_t n_per_row);

/* Per-type row quantizers (k elements, a multiple of the block size). */
void gq_row_q4_0(const float *x, uint8_t *y, int64_t k);
void gq_row_q4_1(const float *x, uint8_t *y, int64_t k);
void gq_row_q5_0(const float *x, uint8_t *y, int64_t k);
void gq_row_q5_1(const float *x, uint8_t *y, int64_t k);
void gq_row_q8_0(const float *x, uint8_t *y, int64_t k);
void gq_row_q2_k(const float *x, uint8_t *y, int64_t k);
void gq_row_q3_k(const float *x, uint8_t *y, int64_t k);
void gq_row_q4_k(const float *x, uint8_t *y, int64_t k);
void gq_row_q5_k(const float *x, uint8_t *y, int64_t k);
void gq_row_q6_k(const float *x, uint8_t *y, int64_t k);
void gq_row_iq4_nl(const float *x, uint8_t *y, int64_t k);
void gq_row_iq4_xs(const float *x, uint8_t *y, int64_t k);
void gq_row_mxfp4(const float *x, uint8_t *y, int64_t k);

/* Round to nearest (ties to even, as the FPU rounds), for |f| < 2^22: the
 * magic-number trick ggml's K-quants use, so that codes match theirs. */
static inline int gq_nearest_int(float f)
{
    float v = f + 12582912.f;
    int32_t i;
    __builtin_memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

#endif
