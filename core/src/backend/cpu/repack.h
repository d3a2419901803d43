/* Repacked weight layouts for the mm_r kernels (dispatch.h): rows are
 * interleaved in groups of PLUME_RP_ROWS = 16 so that one 32-bit lane of a
 * 512-bit vector holds 4 consecutive weights of one row.  An int8 dot
 * product (vpdpbusd) of such a vector with 4 activation bytes broadcast to
 * every lane then advances 16 rows at once, each in its own lane: no
 * horizontal sums, one activation load serves 16 rows, and the per-block
 * scales of the 16 rows are one vector.  The bytes are the same as the
 * GGUF blocks' (same size), only reordered; the last group is padded with
 * zero rows.
 *
 * A group is nb = K/32 blocks, one after the other; block j of a group
 * (32 weights of each of its 16 rows) is:
 *   Q4_0  288 bytes: nib[256], d f16[16]
 *   Q4_1  320 bytes: nib[256], d f16[16], m f16[16]
 *   Q8_0  544 bytes: u8[512], d f16[16]
 * nib: 4 slices of 64 bytes; slice h holds, at bytes 4r..4r+3, row r's
 * GGUF quant bytes 4h..4h+3 of that block, i.e. weights 4h+i in the low
 * nibble and 16+4h+i in the high one.  So slice h & 0xF is the operand for
 * weights 4h..4h+3 (the activations' bytes 4h..) and slice h >> 4 & 0xF
 * for weights 16+4h.. (activation bytes 16+4h..).
 * u8: 8 slices of 64 bytes; slice g holds at bytes 4r+i row r's weight
 * 4g+i plus 128 (as unsigned), so that unsigned×signed dot products apply;
 * the kernels subtract 128·Σq (plume_q8_act.isum).
 * Row r of the block: Q4_0 w = d·(n − 8), Q4_1 w = d·n + m, Q8_0 w = d·v. */
#ifndef PLUME_CPU_REPACK_H
#define PLUME_CPU_REPACK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/dispatch.h"

#define PLUME_RP_ROWS 16

/* Bytes of one block of a group (16 rows × 32 weights). */
static inline size_t plume_rp_block_bytes(int kr)
{
    switch (kr) {
    case PLUME_KR_Q4_0: return 288;
    case PLUME_KR_Q4_1: return 320;
    default: return 544;
    }
}

/* Offset of the d scales (f16[16]) inside a block; m follows for Q4_1. */
static inline size_t plume_rp_d_off(int kr) { return kr == PLUME_KR_Q8_0 ? 512 : 256; }

/* The integer correction c of each format: a block's integer dot product
 * is Σ u·q + c·Σq (Q4_0: the nibbles' offset 8; Q8_0: the 128 added). */
static inline int32_t plume_rp_corr(int kr)
{
    return kr == PLUME_KR_Q4_0 ? -8 : kr == PLUME_KR_Q8_0 ? -128 : 0;
}

/* GGUF block bytes of the format (32 weights of one row). */
static inline size_t plume_rp_src_block_bytes(int kr)
{
    return kr == PLUME_KR_Q4_0 ? 18 : kr == PLUME_KR_Q4_1 ? 20 : 34;
}

/* Repacks rows [16g, 16g + 16) ∩ [0, n_rows) of GGUF rows (rb bytes apart,
 * K = 32·nb values each) into group g at dst (nb block_bytes, zeroed
 * padding rows). */
static inline void plume_rp_pack_group(int kr, const uint8_t *src, size_t rb, int64_t n_rows,
                                       int64_t g, int64_t nb, uint8_t *dst)
{
    const size_t bb = plume_rp_block_bytes(kr), sb = plume_rp_src_block_bytes(kr);
    const size_t doff = plume_rp_d_off(kr);
    memset(dst, 0, bb * (size_t)nb);
    for (int r = 0; r < PLUME_RP_ROWS; r++) {
        const int64_t row = g * PLUME_RP_ROWS + r;
        if (row >= n_rows)
            break;
        const uint8_t *s = src + (size_t)row * rb;
        for (int64_t j = 0; j < nb; j++, s += sb) {
            uint8_t *b = dst + (size_t)j * bb;
            memcpy(b + doff + 2 * r, s, 2); /* d */
            if (kr == PLUME_KR_Q4_1)
                memcpy(b + doff + 32 + 2 * r, s + 2, 2); /* m */
            if (kr == PLUME_KR_Q8_0) {
                for (int gi = 0; gi < 8; gi++)
                    for (int i = 0; i < 4; i++)
                        b[64 * gi + 4 * r + i] = (uint8_t)(s[2 + 4 * gi + i] ^ 0x80);
            } else {
                const uint8_t *qs = s + (kr == PLUME_KR_Q4_1 ? 4 : 2);
                for (int h = 0; h < 4; h++)
                    memcpy(b + 64 * h + 4 * r, qs + 4 * h, 4);
            }
        }
    }
}

#endif
