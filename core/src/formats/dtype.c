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

bool plume_dtype_supported(uint32_t type)
{
    switch (type) {
    case PLUME_DTYPE_F32:
    case PLUME_DTYPE_F16:
    case PLUME_DTYPE_BF16:
    case PLUME_DTYPE_Q8_0:
    case PLUME_DTYPE_Q4_0:
    case PLUME_DTYPE_Q4_1:
    case PLUME_DTYPE_Q4_K:
    case PLUME_DTYPE_Q6_K:
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
    }
}
