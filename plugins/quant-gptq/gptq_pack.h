/* quant-gptq: GPTQ tensor packing, zero-point conventions, g_idx and
 * dequantization.  Layout facts: formats.md §1 (/work/shared/reference/).
 *
 * Notation (formats.md §1): K = in_features, N = out_features, b = bits,
 * pf = 32/b codes per int32 word (2/4/8 bits; 3 bits below), G = number
 * of groups.
 *   qweight [K/pf][N]  int32, packed along the input dim (§1.2): word
 *                      qweight[r][n] holds codes q[r·pf + j][n] at bits
 *                      [b·j, b·j+b−1], j = 0 in the least-significant bits.
 *   qzeros  [G][N/pf]  int32, packed along the output dim (§1.2): word
 *                      qzeros[g][c] holds zero_stored[g][c·pf + j] at bits
 *                      [b·j, b·j+b−1].
 *   scales  [G][N], g_idx [K] (default k / group_size).
 * Zero points (§1.3): format "gptq" (v1) stores true_zero − 1, readers add
 * 1 back; "gptq_v2" stores the true zero.
 * Dequantization (§1.5): W[n][k] = scale[g_idx[k]][n] · (q[k][n] − zero[g_idx[k]][n]).
 *
 * Supported bits: 2, 3, 4, 8.  For every width the packing is one
 * little-endian bit stream along the packed dimension: code i sits at bit
 * b·i of the concatenated words (word b·i/32, bit b·i%32).  For 2/4/8 bits
 * no code crosses a word; for 3 bits this is exactly §1.2's 3-word layout
 * (word0: codes 0–9 at 3j, code 10 low 2 bits at 30–31; word1: code 10
 * bit 2 at bit 0, codes 11–20, code 21 bit 0 at bit 31; word2: code 21
 * bits 1–2 at bits 0–1, codes 22–31), so the packed dimension must be a
 * multiple of 32 there. */
#ifndef PLUME_GPTQ_PACK_H
#define PLUME_GPTQ_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/error.h"

typedef enum gptq_zero_format {
    GPTQ_ZERO_V1 = 1, /* checkpoint_format "gptq": stored = zero − 1 */
    GPTQ_ZERO_V2 = 2, /* checkpoint_format "gptq_v2": stored = zero */
} gptq_zero_format;

/* 0 when bits is one of 2, 3, 4, 8; otherwise -1 with a message naming
 * the field "bits". */
int gptq_check_bits(int bits, plume_error *err);

/* What the packed dimension must be a multiple of: 32/bits codes per word,
 * or 32 codes per 3 words for bits = 3. */
static inline int gptq_pack_align(int bits) { return bits == 3 ? 32 : 32 / bits; }
/* Words holding len codes (len a multiple of gptq_pack_align). */
static inline int64_t gptq_packed_len(int64_t len, int bits) { return len * bits / 32; }

/* Code i of a bit stream of words w[0], w[stride], w[2·stride], ... */
static inline unsigned gptq_get_field(const int32_t *w, int64_t stride, int bits, int64_t i)
{
    int64_t pos = (int64_t)bits * i, r = pos >> 5;
    int sh = (int)(pos & 31);
    uint32_t v = (uint32_t)w[r * stride] >> sh;
    if (sh + bits > 32)
        v |= (uint32_t)w[(r + 1) * stride] << (32 - sh);
    return v & ((1u << bits) - 1u);
}

/* ORs code c (< 2^bits) into position i of such a stream. */
static inline void gptq_put_field(int32_t *w, int64_t stride, int bits, int64_t i, uint32_t c)
{
    int64_t pos = (int64_t)bits * i, r = pos >> 5;
    int sh = (int)(pos & 31);
    w[r * stride] = (int32_t)((uint32_t)w[r * stride] | (c << sh));
    if (sh + bits > 32)
        w[(r + 1) * stride] = (int32_t)((uint32_t)w[(r + 1) * stride] | (c >> (32 - sh)));
}

/* codes: [K][N] (row k = input channel), each in [0, 2^bits).  qweight:
 * [K·bits/32][N].  K must be a multiple of gptq_pack_align(bits). */
int gptq_pack_qweight(const uint8_t *codes, int64_t K, int64_t N, int bits, int32_t *qweight,
                      plume_error *err);
int gptq_unpack_qweight(const int32_t *qweight, int64_t K, int64_t N, int bits, uint8_t *codes,
                        plume_error *err);

/* The code of input row k, output column n straight from a qweight. */
static inline unsigned gptq_qweight_code(const int32_t *qweight, int64_t N, int bits, int64_t k,
                                         int64_t n)
{
    return gptq_get_field(qweight + n, N, bits, k);
}

/* zeros: true zero points [G][N].  qzeros: [G][N·bits/32] in format fmt.  v1
 * stores zero − 1, so a true zero of 0 cannot be written (formats.md §1.3:
 * AutoGPTQ's pack would overflow into the neighbouring field): that is an
 * error (PLUME_ERR_RANGE) naming the format; v2 takes zeros in [0, 2^b). */
int gptq_pack_qzeros(const int32_t *zeros, int64_t G, int64_t N, int bits, gptq_zero_format fmt,
                     int32_t *qzeros, plume_error *err);
/* True zero points [G][N] from qzeros: the stored field, plus 1 for v1
 * (as AutoGPTQ and vLLM read it: mask, then +1, so a v1 field of 2^b − 1
 * reads as 2^b). */
int gptq_unpack_qzeros(const int32_t *qzeros, int64_t G, int64_t N, int bits,
                       gptq_zero_format fmt, int32_t *zeros, plume_error *err);

/* g_idx[k] = k / group_size (group_size <= 0 means one group: all 0). */
void gptq_default_g_idx(int64_t K, int64_t group_size, int32_t *g_idx);

/* Number of groups for K inputs (ceil(K / group_size); 1 when
 * group_size <= 0). */
int64_t gptq_n_groups(int64_t K, int64_t group_size);

/* 0 when a K-input, N-output layer of G groups fits bits and group_size: K
 * and N positive multiples of gptq_pack_align(bits), G =
 * gptq_n_groups(K, group_size); else -1 with PLUME_ERR_FORMAT, the message
 * starting "<who>: ". */
int gptq_check_layer_shape(const char *who, int64_t K, int64_t N, int64_t G, int bits,
                           int64_t group_size, plume_error *err);

/* 0 when every g_idx[k] lies in [0, G); else -1 naming the first bad k. */
int gptq_check_g_idx(const int32_t *g_idx, int64_t K, int64_t G, plume_error *err);

/* W[n][k] = scales[g][n] · (q[k][n] − zero[g][n]), g = g_idx[k] (formats.md
 * §1.5).  scales: [G][N] f32; g_idx: [K] (NULL: k / group_size with the
 * given group_size).  W: [N][K] (nn.Linear.weight order). */
int gptq_dequantize(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                    const int32_t *g_idx, int64_t K, int64_t N, int64_t G, int64_t group_size,
                    int bits, gptq_zero_format fmt, float *W, plume_error *err);

#endif
