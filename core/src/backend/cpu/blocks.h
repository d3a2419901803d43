/* Scalar access to GGUF weight blocks as integer dot-product operands.
 *
 * Every supported quantized format is read in sub-blocks of 32 weights:
 * 32 small integers v[i] plus float factors such that the sub-block's
 * contribution to a dot product with activations a ≈ da * qa is
 *     da * (d0 * Σ_{i<16} v[i]·qa[i] + d1 * Σ_{i>=16} v[i]·qa[i]) + m * (da * Σ qa)
 * (d0 == d1 except for Q6_K, whose scales cover 16 weights; m is the
 * offset/min term, 0 for Q8_0 and Q6_K whose v is signed).  Layouts:
 * formats.md §3.2 and core/src/formats/dtype.c. */
#ifndef PLUME_CPU_BLOCKS_H
#define PLUME_CPU_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "plume/fp16.h"

typedef struct plume_sub32 {
    int8_t v[32];
    float d0, d1, m;
} plume_sub32;

static inline float plume_ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return plume_fp16_to_fp32(h);
}

/* Scale and min of sub-block j (0..7) of a Q4_K block (ggml get_scale_min_k4). */
static inline void plume_q4k_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* The 32 nibbles of the 16 bytes at q: the low ones in v[0..15], the high
 * ones in v[16..31] (Q4_0's and Q4_1's order). */
static inline void plume_nibbles32(const uint8_t *q, int8_t *v)
{
    for (int i = 0; i < 16; i++) {
        v[i] = (int8_t)(q[i] & 0xF);
        v[i + 16] = (int8_t)(q[i] >> 4);
    }
}

/* Sub-block j (of 32 weights) of a row in format kq (PLUME_KQ_*). */
static inline void plume_sub32_get(int kq, const uint8_t *row, int64_t j, plume_sub32 *o)
{
    switch (kq) {
    case PLUME_KQ_Q4_0: {
        const uint8_t *b = row + j * 18;
        o->d0 = o->d1 = plume_ld_f16(b);
        o->m = -8.0f * o->d0;
        plume_nibbles32(b + 2, o->v);
        break;
    }
    case PLUME_KQ_Q4_1: {
        const uint8_t *b = row + j * 20;
        o->d0 = o->d1 = plume_ld_f16(b);
        o->m = plume_ld_f16(b + 2);
        plume_nibbles32(b + 4, o->v);
        break;
    }
    case PLUME_KQ_Q8_0: {
        const uint8_t *b = row + j * 34;
        o->d0 = o->d1 = plume_ld_f16(b);
        o->m = 0.0f;
        memcpy(o->v, b + 2, 32);
        break;
    }
    case PLUME_KQ_Q4_K: {
        const uint8_t *b = row + (j / 8) * 144;
        const int sub = (int)(j % 8);
        int sc, mn;
        plume_q4k_scale_min(sub, b + 4, &sc, &mn);
        o->d0 = o->d1 = plume_ld_f16(b) * (float)sc;
        o->m = -plume_ld_f16(b + 2) * (float)mn;
        const uint8_t *q = b + 16 + 32 * (sub / 2);
        const int shift = (sub & 1) * 4;
        for (int i = 0; i < 32; i++)
            o->v[i] = (int8_t)((q[i] >> shift) & 0xF);
        break;
    }
    case PLUME_KQ_Q6_K: {
        const uint8_t *b = row + (j / 8) * 210;
        const int sub = (int)(j % 8), h = sub / 4, k = sub % 4;
        const uint8_t *ql = b + h * 64 + (k & 1) * 32;
        const uint8_t *qh = b + 128 + h * 32;
        const int8_t *sc = (const int8_t *)(b + 192) + h * 8 + 2 * k;
        const float d = plume_ld_f16(b + 208);
        o->d0 = d * sc[0];
        o->d1 = d * sc[1];
        o->m = 0.0f;
        for (int i = 0; i < 32; i++) {
            int lo = (ql[i] >> (4 * (k >> 1))) & 0xF;
            int hi = (qh[i] >> (2 * k)) & 3;
            o->v[i] = (int8_t)((lo | (hi << 4)) - 32);
        }
        break;
    }
    }
}

#endif
