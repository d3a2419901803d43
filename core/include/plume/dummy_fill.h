/* plume — dummy weights (`load_format: dummy`, vLLM's name): the seeded
 * random contents of a weight, generated block by block in its own type,
 * with no f32 copy of the tensor.
 *
 * Counter-based: the bytes of block b of row r of a tensor depend only on
 * (seed, the tensor's HF name, r, b), through splitmix64 (integer
 * arithmetic only), so every block can be made independently, in any
 * order, on the host or by a device kernel, with the same bits.  The
 * loader (plume_model_load_ex with the "dummy" weight format), the GGUF
 * writer (`plume dummy-gguf`) and the cuda backend's fill kernel all call
 * plume_fill_block, so one seed gives one model whichever made it.
 *
 * Values (docs/dummy-weights.md): float types get an Irwin-Hall sum of
 * four 16-bit uniforms scaled to standard deviation `std` (bounded at
 * ±3.46 std; one f32 multiply, rounded to the type); block types get
 * uniformly random codes with a per-tensor scale chosen so that the values
 * have that standard deviation and mean ~0 (Q4_0/Q4_1: codes -7..7; Q8_0:
 * -127..127; Q4_K: sub-block scales 4..8 with matching mins; Q6_K: scales
 * 8..15).  Every block is a valid block of its type.
 *
 * The functions are static inline so that a plugin's device code can
 * compile them: define PLUME_FILL_FN (e.g. `static __device__ inline`)
 * before including this header.  Only plume_fill_block and what it calls
 * are needed on a device. */
#ifndef PLUME_DUMMY_FILL_H
#define PLUME_DUMMY_FILL_H

#include <stdint.h>
#include <string.h>

#ifndef PLUME_FILL_FN
#define PLUME_FILL_FN static inline
#endif

/* The default seed and standard deviation (HF's initializer_range). */
#define PLUME_DUMMY_SEED 0
#define PLUME_DUMMY_STD 0.02f

/* What plume_fill_block needs to make one tensor (plume_fill_spec_init). */
typedef struct plume_fill_spec {
    uint64_t key;      /* mixes the seed and the tensor's HF name */
    uint32_t type;     /* ggml type id: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K */
    uint32_t block;    /* elements per block (1 for the float types) */
    uint32_t block_bytes;
    int64_t ne0;       /* row length in elements, a multiple of block */
    float unit;        /* float types: the value of one step of the integer sum */
    uint16_t d, m;     /* f16 bits of the block scale and of Q4_1's min / Q4_K's dmin */
} plume_fill_spec;

/* splitmix64's finalizer: a bijection of 64-bit values with good avalanche. */
PLUME_FILL_FN uint64_t plume_fill_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The c-th 64 random bits of a tensor keyed key. */
PLUME_FILL_FN uint64_t plume_fill_rand(uint64_t key, uint64_t c)
{
    return plume_fill_mix(key ^ plume_fill_mix(c));
}

/* f32 -> IEEE binary16 bits, round to nearest even (finite inputs). */
PLUME_FILL_FN uint16_t plume_fill_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    int32_t e = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        const uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent, which is still right */
    return (uint16_t)(sign | h);
}

/* f32 -> bfloat16 bits, round to nearest even (finite inputs). */
PLUME_FILL_FN uint16_t plume_fill_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

PLUME_FILL_FN void plume_fill_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

/* Writes block b of row r (s->block_bytes bytes at dst). */
PLUME_FILL_FN void plume_fill_block(const plume_fill_spec *s, int64_t r, int64_t b, uint8_t *dst)
{
    const int64_t nb = s->ne0 / s->block;
    const uint64_t c = (uint64_t)(r * nb + b) * 64u; /* 64 draws reserved per block */
    switch (s->type) {
    case 0: case 1: case 30: { /* F32, F16, BF16: one draw per element */
        const uint64_t u = plume_fill_rand(s->key, c);
        const int32_t sum = (int32_t)(u & 0xffff) + (int32_t)((u >> 16) & 0xffff) +
                            (int32_t)((u >> 32) & 0xffff) + (int32_t)(u >> 48) - 131070;
        const float v = (float)sum * s->unit;
        if (s->type == 0)
            memcpy(dst, &v, 4);
        else
            plume_fill_put16(dst, s->type == 1 ? plume_fill_f16(v) : plume_fill_bf16(v));
        return;
    }
    case 8: /* Q8_0: d, 32 int8 in -127..127 */
        plume_fill_put16(dst, s->d);
        for (int k = 0; k < 4; k++) {
            const uint64_t u = plume_fill_rand(s->key, c + (uint64_t)k);
            for (int j = 0; j < 8; j++)
                dst[2 + 8 * k + j] = (uint8_t)(int8_t)((int)(((u >> (8 * j)) & 0xff) * 255 >> 8) - 127);
        }
        return;
    case 2: case 3: { /* Q4_0 (d, qs) / Q4_1 (d, m, qs): codes 1..15, value (code - 8) d */
        uint8_t *qs = dst + (s->type == 2 ? 2 : 4);
        plume_fill_put16(dst, s->d);
        if (s->type == 3)
            plume_fill_put16(dst + 2, s->m);
        uint8_t code[32];
        for (int k = 0; k < 4; k++) {
            const uint64_t u = plume_fill_rand(s->key, c + (uint64_t)k);
            for (int j = 0; j < 8; j++)
                code[8 * k + j] = (uint8_t)(1 + (((u >> (8 * j)) & 0xff) * 15 >> 8));
        }
        for (int j = 0; j < 16; j++) /* element j low nibble, j + 16 high */
            qs[j] = (uint8_t)(code[j] | (code[j + 16] << 4));
        return;
    }
    case 12: { /* Q4_K: d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of codes */
        plume_fill_put16(dst, s->d);
        plume_fill_put16(dst + 2, s->m);
        const uint64_t u = plume_fill_rand(s->key, c);
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; j++) {
            sc[j] = (uint8_t)(4 + ((u >> (8 * j)) & 0xff) % 5);
            mn[j] = (uint8_t)((15 * sc[j] + 1) / 2); /* mean code 7.5: values centred */
        }
        uint8_t *q = dst + 4; /* ggml get_scale_min_k4's packing */
        for (int j = 0; j < 4; j++) {
            q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
            q[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
            q[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
        }
        for (int k = 0; k < 16; k++) {
            const uint64_t v = plume_fill_rand(s->key, c + 1 + (uint64_t)k);
            for (int j = 0; j < 8; j++)
                dst[16 + 8 * k + j] = (uint8_t)(v >> (8 * j));
        }
        return;
    }
    case 14: { /* Q6_K: ql[128], qh[64] (any bits are codes 0..63), scales[16], d */
        for (int k = 0; k < 24; k++) {
            const uint64_t v = plume_fill_rand(s->key, c + (uint64_t)k);
            for (int j = 0; j < 8; j++)
                dst[8 * k + j] = (uint8_t)(v >> (8 * j));
        }
        const uint64_t u = plume_fill_rand(s->key, c + 24);
        for (int j = 0; j < 16; j++)
            dst[192 + j] = (uint8_t)(8 + ((u >> (4 * j)) & 7));
        plume_fill_put16(dst + 208, s->d);
        return;
    }
    default:
        return;
    }
}

/* FNV-1a of the tensor's name, mixed with the seed. */
static inline uint64_t plume_fill_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return plume_fill_mix(seed ^ plume_fill_mix(h));
}

/* True when plume_fill_block can make blocks of ggml type id type. */
static inline int plume_fill_type_supported(uint32_t type)
{
    return type == 0 || type == 1 || type == 30 || type == 8 || type == 2 || type == 3 ||
           type == 12 || type == 14;
}

/* Fills *s for a tensor of type with rows of ne0 elements, the HF name
 * name, seed and standard deviation std.  Returns 0, or -1 when the type
 * cannot be generated or ne0 is not a whole number of its blocks. */
static inline int plume_fill_spec_init(plume_fill_spec *s, uint32_t type, int64_t ne0,
                                       const char *name, uint64_t seed, float std)
{
    memset(s, 0, sizeof *s);
    s->key = plume_fill_key(seed, name);
    s->type = type;
    s->ne0 = ne0;
    double sd_code = 1.0; /* standard deviation of the code times the sub-block scale */
    switch (type) {
    case 0: s->block = 1; s->block_bytes = 4; break;
    case 1: case 30: s->block = 1; s->block_bytes = 2; break;
    case 8: s->block = 32; s->block_bytes = 34; sd_code = 73.6115; break;   /* U{-127..127} */
    case 2: s->block = 32; s->block_bytes = 18; sd_code = 4.3205; break;    /* U{-7..7} */
    case 3: s->block = 32; s->block_bytes = 20; sd_code = 4.3205; break;
    case 12: s->block = 256; s->block_bytes = 144; sd_code = 6.0 * 4.6098; break; /* sc 4..8 x U{0..15} */
    case 14: s->block = 256; s->block_bytes = 210; sd_code = 11.5 * 18.4743; break; /* sc 8..15 x U{-32..31} */
    default: return -1;
    }
    if (ne0 <= 0 || ne0 % s->block != 0)
        return -1;
    s->unit = (float)((double)std / 37837.23); /* sd of the sum of four U{0..65535} */
    const float d = (float)((double)std / sd_code);
    s->d = plume_fill_f16(d);
    s->m = type == 3 ? plume_fill_f16(-8.0f * d) : type == 12 ? s->d : 0;
    return 0;
}

/* Row r of the tensor (ne0 elements: ne0 / block blocks) into dst. */
static inline void plume_fill_row(const plume_fill_spec *s, int64_t r, uint8_t *dst)
{
    for (int64_t b = 0, nb = s->ne0 / s->block; b < nb; b++)
        plume_fill_block(s, r, b, dst + (size_t)b * s->block_bytes);
}

#endif
