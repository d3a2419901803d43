/* quant-awq: AutoAWQ GEMM tensor packing (formats.md §2, from
 * /work/shared/reference/), and its conversion into the GPTQ-layout arrays
 * of the shared repacked layer (plugins/quant-gptq/gptq_layer.h).
 *
 * Notation: K = in_features, N = out_features, g = group_size, G = K/g.
 * 4-bit only (AutoAWQ: "Only 4-bit are supported for now").
 *   qweight [K][N/8] int32, packed along the OUTPUT dim (§2.1): nibble i
 *           (bits 4i..4i+3) of qweight[k][c] holds the code of output
 *           column 8c + AWQ_ORDER[i], AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]
 *           (§2.2; AutoAWQ gemm.py order_map, packing_utils.py AWQ_ORDER).
 *           Reading it back, column 8c + j sits in nibble
 *           AWQ_REVERSE_ORDER[j] = [0, 4, 1, 5, 2, 6, 3, 7][j].
 *   qzeros  [G][N/8] int32, the same interleave along N; the TRUE zero
 *           points (no GPTQ v1 −1; §2.3).
 *   scales  [G][N] float.
 * Dequantization (§2.3): W[k][n] = (q[k][n] − z[k/g][n]) · s[k/g][n]. */
#ifndef PLUME_AWQ_PACK_H
#define PLUME_AWQ_PACK_H

#include <stdint.h>

#include "plume/error.h"

/* Nibble i of a word holds column 8c + awq_order[i] (§2.2). */
extern const int awq_order[8];
/* Column 8c + j sits in nibble awq_reverse_order[j]. */
extern const int awq_reverse_order[8];

/* codes [R][N] (each < 16) -> words [R][N/8] in AWQ's interleaved order
 * (qweight with R = K; qzeros with R = G).  N must be a positive multiple
 * of 8 and codes < 16: otherwise -1 with a message (PLUME_ERR_RANGE for a
 * code, PLUME_ERR_INVALID for N). */
int awq_pack(const uint8_t *codes, int64_t R, int64_t N, int32_t *words, plume_error *err);
/* words [R][N/8] -> codes [R][N]; N a positive multiple of 8. */
int awq_unpack(const int32_t *words, int64_t R, int64_t N, uint8_t *codes, plume_error *err);

/* The code of row r, column n straight from packed words [R][N/8]. */
static inline unsigned awq_code(const int32_t *words, int64_t N, int64_t r, int64_t n)
{
    return ((uint32_t)words[r * (N / 8) + n / 8] >> (4 * awq_reverse_order[n % 8])) & 15u;
}

/* W[n][k] (nn.Linear.weight order, [N][K]) from AWQ tensors (§2.3);
 * scales [G][N] f32, G = K / group_size. */
int awq_dequantize(const int32_t *qweight, const int32_t *qzeros, const float *scales, int64_t K,
                   int64_t N, int64_t group_size, float *W, plume_error *err);

/* AWQ qweight [K][N/8] / qzeros [G][N/8] -> the same codes and zero points
 * as a GPTQ 4-bit checkpoint in format gptq_v2 (true zeros): qweight
 * [K/8][N] packed along the input dim, qzeros [G][N/8] in sequential
 * order (formats.md §1.2).  K a multiple of 8 (and of group_size, checked by
 * the caller), N a multiple of 8. */
int awq_to_gptq(const int32_t *awq_qweight, const int32_t *awq_qzeros, int64_t K, int64_t N,
                int64_t G, int32_t *gptq_qweight, int32_t *gptq_qzeros, plume_error *err);

#endif
