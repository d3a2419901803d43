/* ggml element types: names, block sizes and dequantization to f32.
 *
 * Type ids, block sizes and block layouts follow formats.md §3.1/§3.2
 * (ggml-common.h static_asserts, gguf-py GGML_QUANT_SIZES, ggml-quants.c
 * dequantize_row_*).  The float arithmetic mirrors ggml-quants.c operation
 * by operation so that results match llama.cpp bit for bit. */
#include "plume/tensor.h"

#include <math.h>
#include <string.h>

#include "plume/fp16.h"

typedef struct dtype_info {
    const char *name;   /* NULL: id never assigned by ggml */
    uint16_t blck;      /* elements per block; 0 when the size is unknown */
    uint16_t bytes;     /* bytes per block */
} dtype_info;

/* Indexed by ggml type id.  Ids 4/5 (Q4_2/Q4_3), 31-33 (Q4_0_4_4 ...) and
 * 36-38 (IQ4_NL_4_4 ...) were assigned once and later removed; they keep
 * their names so old files can be described, with no size.
 * Sizes of the IQ/TQ/MXFP4 types are gguf-py's GGML_QUANT_SIZES.  Q8_1 is
 * 36 bytes as in ggml-common.h (gguf-py lists 40, a stale value from when its
 * d and s were f32); Q8_1 is an intermediate type never stored in files. */
static const dtype_info DTYPES[] = {
    [0] = {"F32", 1, 4},
    [1] = {"F16", 1, 2},
    [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},
    [4] = {"Q4_2", 0, 0},
    [5] = {"Q4_3", 0, 0},
    [6] = {"Q5_0", 32, 22},
    [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 32, 36},
    [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},
    [12] = {"Q4_K", 256, 144},
    [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},
    [15] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98},
    [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},
    [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136},
    [24] = {"I8", 1, 1},
    [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},
    [27] = {"I64", 1, 8},
    [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},
    [31] = {"Q4_0_4_4", 0, 0},
    [32] = {"Q4_0_4_8", 0, 0},
    [33] = {"Q4_0_8_8", 0, 0},
    [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},
    [36] = {"IQ4_NL_4_4", 0, 0},
    [37] = {"IQ4_NL_4_8", 0, 0},
    [38] = {"IQ4_NL_8_8", 0, 0},
    [39] = {"MXFP4", 32, 17},
};

#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

/* Table entry of a type id, or NULL for ids outside the table. */
static const dtype_info *dtype_lookup(uint32_t type)
{
    return type < N_DTYPES ? &DTYPES[type] : NULL;
}

int64_t plume_tensor_nelements(const plume_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < PLUME_MAX_DIMS; d++)
        n *= t->ne[d];
    return n;
}

const char *plume_dtype_supported_names(void)
{
    return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, "
           "IQ4_NL, IQ4_XS, MXFP4";
}

/* (plume_dtype_supported_names lists the same types) */
bool plume_dtype_supported(uint32_t type)
{
    switch (type) {
    case PLUME_DTYPE_F32:
    case PLUME_DTYPE_F16:
    case PLUME_DTYPE_BF16:
    case PLUME_DTYPE_Q8_0:
    case PLUME_DTYPE_Q4_0:
    case PLUME_DTYPE_Q4_1:
    case PLUME_DTYPE_Q5_0:
    case PLUME_DTYPE_Q5_1:
    case PLUME_DTYPE_Q2_K:
    case PLUME_DTYPE_Q3_K:
    case PLUME_DTYPE_Q4_K:
    case PLUME_DTYPE_Q5_K:
    case PLUME_DTYPE_Q6_K:
    case PLUME_DTYPE_Q8_K:
    case PLUME_DTYPE_IQ4_NL:
    case PLUME_DTYPE_IQ4_XS:
    case PLUME_DTYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

const char *plume_dtype_name(uint32_t type)
{
    const dtype_info *d = dtype_lookup(type);
    return d && d->name ? d->name : "unknown";
}

size_t plume_dtype_block_elems(uint32_t type)
{
    const dtype_info *d = dtype_lookup(type);
    return d ? d->blck : 0;
}

size_t plume_dtype_block_bytes(uint32_t type)
{
    const dtype_info *d = dtype_lookup(type);
    return d && d->blck ? d->bytes : 0;
}

size_t plume_dtype_row_bytes(uint32_t type, int64_t n)
{
    size_t blck = plume_dtype_block_elems(type);
    if (blck == 0 || n < 0 || (uint64_t)n % blck != 0)
        return 0;
    uint64_t nblocks = (uint64_t)n / blck;
    size_t bytes;
    if (__builtin_mul_overflow(nblocks, (uint64_t)plume_dtype_block_bytes(type), &bytes))
        return 0;
    return bytes;
}

/* Little-endian f16 at p (any alignment) as f32. */
static inline float load_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return plume_fp16_to_fp32(h);
}

static void dequant_f16(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = load_f16(src + 2 * i);
}

static void dequant_bf16(const uint8_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint16_t b;
        memcpy(&b, src + 2 * i, 2);
        dst[i] = plume_bf16_to_fp32(b);
    }
}

/* MXFP4 (17 B / 32, ggml type 39, gpt-oss's experts): e u8 (an E8M0
 * exponent), qs u8[16] of e2m1 codes, nibbles ordered as Q4_0 (low nibble
 * of byte j is element j, high is j+16); y = d * PLUME_MXFP4_LEVELS[code]
 * (the doubled e2m1 values {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ..., -12}) and
 * d = 2^(e-128) (plume_e8m0_half_to_fp32, as gguf-py 0.19.0's quants.py
 * MXFP4.e8m0_to_fp32_half builds it).  Every product is exact in f32, so
 * the result equals gguf-py's bit for bit. */
static void dequant_mxfp4(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 17, dst += 32) {
        const float d = plume_e8m0_half_to_fp32(src[0]);
        const uint8_t *qs = src + 1;
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)PLUME_MXFP4_LEVELS[qs[j] & 0x0F];
            dst[j + 16] = d * (float)PLUME_MXFP4_LEVELS[qs[j] >> 4];
        }
    }
}

/* Q8_0 (34 B / 32): d f16, qs int8[32]; y = d*qs (formats.md §3.2). */
static void dequant_q8_0(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 34, dst += 32) {
        const float d = load_f16(src);
        const int8_t *qs = (const int8_t *)(src + 2);
        for (int j = 0; j < 32; j++)
            dst[j] = qs[j] * d;
    }
}

/* Q4_0 (18 B / 32): d f16, qs u8[16].  Low nibble of byte j is element j,
 * high nibble is element j+16 (not adjacent pairs); y = d*(q-8). */
static void dequant_q4_0(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 18, dst += 32) {
        const float d = load_f16(src);
        const uint8_t *qs = src + 2;
        for (int j = 0; j < 16; j++) {
            const int x0 = (qs[j] & 0x0F) - 8;
            const int x1 = (qs[j] >> 4) - 8;
            dst[j] = x0 * d;
            dst[j + 16] = x1 * d;
        }
    }
}

/* Q4_1 (20 B / 32): d f16, m f16, qs u8[16]; nibble order as Q4_0;
 * y = d*q + m. */
static void dequant_q4_1(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 20, dst += 32) {
        const float d = load_f16(src);
        const float m = load_f16(src + 2);
        const uint8_t *qs = src + 4;
        for (int j = 0; j < 16; j++) {
            const int x0 = qs[j] & 0x0F;
            const int x1 = qs[j] >> 4;
            dst[j] = x0 * d + m;
            dst[j + 16] = x1 * d + m;
        }
    }
}

/* 6-bit scale and min of sub-block j of a Q4_K block (ggml get_scale_min_k4,
 * formats.md §3.2). */
static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K (144 B / 256): d f16, dmin f16, scales u8[12], qs u8[128].  Four
 * chunks of 64 outputs; chunk c uses qs[32c..32c+31], low nibbles with
 * sub-block 2c, high nibbles with sub-block 2c+1; y = d*sc*q - dmin*m. */
static void dequant_q4_k(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 144) {
        const float d = load_f16(src);
        const float dmin = load_f16(src + 2);
        const uint8_t *scales = src + 4;
        const uint8_t *q = src + 16;
        for (int c = 0; c < 4; c++, q += 32) {
            uint8_t sc, m;
            get_scale_min_k4(2 * c, scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            get_scale_min_k4(2 * c + 1, scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

/* Q6_K (210 B / 256): ql u8[128], qh u8[64], scales int8[16], d f16 LAST.
 * Two halves of 128 outputs (formats.md §3.2 gives the bit positions). */
static void dequant_q6_k(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 210) {
        const uint8_t *ql = src;
        const uint8_t *qh = src + 128;
        const int8_t *sc = (const int8_t *)(src + 192);
        const float d = load_f16(src + 208);
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * sc[is + 0] * q1;
                dst[l + 32] = d * sc[is + 2] * q2;
                dst[l + 64] = d * sc[is + 4] * q3;
                dst[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

/* Q5_0 (22 B / 32): d f16, qh u32 (LE), qs u8[16].  Element j (< 16) is
 * the low nibble of qs[j] with bit j of qh as bit 4; element j+16 the high
 * nibble with bit j+16; y = d*(q-16) (gguf-py quants.py Q5_0). */
static void dequant_q5_0(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 22, dst += 32) {
        const float d = load_f16(src);
        const uint32_t qh = (uint32_t)src[2] | (uint32_t)src[3] << 8 | (uint32_t)src[4] << 16 |
                            (uint32_t)src[5] << 24;
        const uint8_t *qs = src + 6;
        for (int j = 0; j < 16; j++) {
            const int x0 = (int)((qs[j] & 0x0F) | ((qh >> j) & 1) << 4) - 16;
            const int x1 = (int)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4) - 16;
            dst[j] = d * (float)x0;
            dst[j + 16] = d * (float)x1;
        }
    }
}

/* Q5_1 (24 B / 32): d f16, m f16, qh u32, qs u8[16]; bits as Q5_0;
 * y = d*q + m (the product rounded, then the sum: no fused multiply-add). */
static void dequant_q5_1(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 24, dst += 32) {
        const float d = load_f16(src), m = load_f16(src + 2);
        const uint32_t qh = (uint32_t)src[4] | (uint32_t)src[5] << 8 | (uint32_t)src[6] << 16 |
                            (uint32_t)src[7] << 24;
        const uint8_t *qs = src + 8;
        for (int j = 0; j < 16; j++) {
            const float p0 = d * (float)((qs[j] & 0x0F) | ((qh >> j) & 1) << 4);
            const float p1 = d * (float)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
            dst[j] = p0 + m;
            dst[j + 16] = p1 + m;
        }
    }
}

/* Q2_K (84 B / 256): scales u8[16] (low nibble scale, high nibble min of
 * each 16 outputs), qs u8[64], d f16, dmin f16.  Output e: half h = e/128,
 * shift 2*((e%128)/32), byte qs[32h + e%32]; y = (d*sc)*q - dmin*m
 * (gguf-py quants.py Q2_K). */
static void dequant_q2_k(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 84, dst += 256) {
        const uint8_t *sc = src, *qs = src + 16;
        const float d = load_f16(src + 80), dmin = load_f16(src + 82);
        for (int e = 0; e < 256; e++) {
            const int q = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const float dl = d * (float)(sc[e / 16] & 0xF), ml = dmin * (float)(sc[e / 16] >> 4);
            const float p = dl * (float)q;
            dst[e] = p - ml;
        }
    }
}

/* 6-bit signed scale i (0..15) of a Q3_K block (scales u8[12]): low 4 bits
 * from byte i%8 (nibble i/8), high 2 bits from byte 8 + i%4 (bits
 * 2*(i/4)), minus 32 (gguf-py quants.py Q3_K). */
static inline int q3k_scale(const uint8_t *s, int i)
{
    const int lo = (s[i % 8] >> (4 * (i / 8))) & 0xF;
    const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Q3_K (110 B / 256): hmask u8[32], qs u8[64], scales u8[12], d f16.
 * Output e: low 2 bits as Q2_K, bit e/32 of hmask[e%32] clear means -4;
 * y = (d*scale)*q with q in [-4, 3]. */
static void dequant_q3_k(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 110, dst += 256) {
        const uint8_t *hm = src, *qs = src + 32, *sc = src + 96;
        const float d = load_f16(src + 108);
        for (int e = 0; e < 256; e++) {
            const int lo = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int q = lo - (((hm[e % 32] >> (e / 32)) & 1) ? 0 : 4);
            const float dl = d * (float)q3k_scale(sc, e / 16);
            dst[e] = dl * (float)q;
        }
    }
}

/* Q5_K (176 B / 256): d f16, dmin f16, scales u8[12] (as Q4_K), qh u8[32],
 * qs u8[128].  Sub-block j (32 outputs) takes the low (j even) or high
 * nibble of qs[32*(j/2) + l] and bit j of qh[l] as bit 4;
 * y = (d*sc)*q - dmin*m. */
static void dequant_q5_k(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 176) {
        const float d = load_f16(src), dmin = load_f16(src + 2);
        const uint8_t *scales = src + 4, *qh = src + 16, *qs = src + 48;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            get_scale_min_k4(j, scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            const uint8_t *q = qs + 32 * (j / 2);
            for (int l = 0; l < 32; l++) {
                const int v = ((q[l] >> (4 * (j & 1))) & 0xF) | ((qh[l] >> j) & 1) << 4;
                const float p = d1 * (float)v;
                *dst++ = p - m1;
            }
        }
    }
}

/* Q8_K (292 B / 256): d f32, qs int8[256], bsums int16[16] (ggml-common.h
 * block_q8_K; gguf-py has no dequantizer for it); y = d*qs. */
static void dequant_q8_k(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 292, dst += 256) {
        float d;
        memcpy(&d, src, 4);
        const int8_t *qs = (const int8_t *)(src + 4);
        for (int j = 0; j < 256; j++)
            dst[j] = d * (float)qs[j];
    }
}

/* The 16 non-linear levels of IQ4_NL / IQ4_XS (gguf-py IQ4_NL.kvalues,
 * ggml-common.h kvalues_iq4nl). */
static const int8_t IQ4_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

/* IQ4_NL (18 B / 32): d f16, qs u8[16]; nibble order as Q4_0;
 * y = d*levels[n]. */
static void dequant_iq4_nl(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 18, dst += 32) {
        const float d = load_f16(src);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)IQ4_LEVELS[src[2 + j] & 0xF];
            dst[j + 16] = d * (float)IQ4_LEVELS[src[2 + j] >> 4];
        }
    }
}

/* IQ4_XS (136 B / 256): d f16, scales_h u16 (LE), scales_l u8[4], qs
 * u8[128].  Sub-block j (32 outputs): scale ls = (nibble j%2 of
 * scales_l[j/2]) | (bits 2j.. of scales_h) << 4, dl = d*(ls-32); its 16
 * bytes qs[16j..] hold outputs l (low nibble) and l+16 (high);
 * y = dl*levels[n] (gguf-py quants.py IQ4_XS). */
static void dequant_iq4_xs(const uint8_t *src, float *dst, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++, src += 136) {
        const float d = load_f16(src);
        const unsigned sh = (unsigned)src[2] | (unsigned)src[3] << 8;
        const uint8_t *sl = src + 4, *qs = src + 8;
        for (int j = 0; j < 8; j++, dst += 32) {
            const int ls = ((sl[j / 2] >> (4 * (j & 1))) & 0xF) | (int)((sh >> (2 * j)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            for (int l = 0; l < 16; l++) {
                dst[l] = dl * (float)IQ4_LEVELS[qs[16 * j + l] & 0xF];
                dst[l + 16] = dl * (float)IQ4_LEVELS[qs[16 * j + l] >> 4];
            }
        }
    }
}

/* Converts n elements of a supported type to f32.  The caller guarantees
 * a supported type and n a multiple of its block size; anything else is a
 * caller bug, answered with NaN output so that it cannot pass unnoticed. */
void plume_dequantize(plume_dtype type, const void *src, float *dst, int64_t n)
{
    const uint8_t *s = src;
    const size_t blck = plume_dtype_block_elems(type);
    if (n <= 0)
        return;
    if (!plume_dtype_supported(type) || (uint64_t)n % blck != 0) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = NAN;
        return;
    }
    const int64_t nb = n / (int64_t)blck;
    switch (type) {
    case PLUME_DTYPE_F32: memcpy(dst, s, (size_t)n * sizeof(float)); break;
    case PLUME_DTYPE_F16: dequant_f16(s, dst, n); break;
    case PLUME_DTYPE_BF16: dequant_bf16(s, dst, n); break;
    case PLUME_DTYPE_Q8_0: dequant_q8_0(s, dst, nb); break;
    case PLUME_DTYPE_Q4_0: dequant_q4_0(s, dst, nb); break;
    case PLUME_DTYPE_Q4_1: dequant_q4_1(s, dst, nb); break;
    case PLUME_DTYPE_Q4_K: dequant_q4_k(s, dst, nb); break;
    case PLUME_DTYPE_Q6_K: dequant_q6_k(s, dst, nb); break;
    case PLUME_DTYPE_Q5_0: dequant_q5_0(s, dst, nb); break;
    case PLUME_DTYPE_Q5_1: dequant_q5_1(s, dst, nb); break;
    case PLUME_DTYPE_Q2_K: dequant_q2_k(s, dst, nb); break;
    case PLUME_DTYPE_Q3_K: dequant_q3_k(s, dst, nb); break;
    case PLUME_DTYPE_Q5_K: dequant_q5_k(s, dst, nb); break;
    case PLUME_DTYPE_Q8_K: dequant_q8_k(s, dst, nb); break;
    case PLUME_DTYPE_IQ4_NL: dequant_iq4_nl(s, dst, nb); break;
    case PLUME_DTYPE_IQ4_XS: dequant_iq4_xs(s, dst, nb); break;
    case PLUME_DTYPE_MXFP4: dequant_mxfp4(s, dst, nb); break;
    }
}
