/* plume — IEEE binary16 and bfloat16 conversions (scalar, exact,
 * round-to-nearest-even), header-only: the core and plugins convert the
 * same way. */
#ifndef PLUME_FP16_H
#define PLUME_FP16_H

#include <stdint.h>
#include <string.h>

static inline float plume_bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t plume_f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* binary16 → float32, handling zeros, subnormals, infinities and NaN. */
static inline float plume_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { e++; man <<= 1; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return plume_bits_to_f32(bits);
}

/* float32 → binary16, round to nearest even, overflow to infinity. */
static inline uint16_t plume_fp32_to_fp16(float f)
{
    uint32_t x = plume_f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (absx < 0x33000000u) /* < 2^-25 rounds to zero */
            return (uint16_t)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((absx >> 13) - (112u << 10));
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

static inline float plume_bf16_to_fp32(uint16_t b) { return plume_bits_to_f32((uint32_t)b << 16); }

/* float32 → bfloat16, round to nearest even (NaN kept quiet). */
static inline uint16_t plume_fp32_to_bf16(float f)
{
    uint32_t x = plume_f32_to_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* The values of MXFP4's 16 e2m1 codes, doubled (gguf-py's MXFP4.kvalues,
 * ggml's kvalues_mxfp4): a code c stands for
 * PLUME_MXFP4_LEVELS[c] · plume_e8m0_half_to_fp32(e). */
static const int8_t PLUME_MXFP4_LEVELS[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* An E8M0 exponent byte (MXFP4's block scale) → 2^(e-128), the "half"
 * value ggml_e8m0_to_fp32_half (ggml-impl.h) and gguf-py's
 * MXFP4.e8m0_to_fp32_half build from its bits: e < 2 gives the subnormal
 * bits 0x00200000 << e, e >= 2 the normal (e - 1) << 23.  Exact for all e. */
static inline float plume_e8m0_half_to_fp32(uint8_t e)
{
    return plume_bits_to_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

#endif
