/* GGUF legacy block quantizers (32 weights a block): Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, as ggml-quants.c quantize_row_*_ref does them (formats.md
 * §3.2), and the dispatcher over every type of gguf_quant.h.  All in float
 * arithmetic in the reference's order, so that the bytes equal gguf-py's
 * numpy quantizers (which follow the same reference). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "plume/fp16.h"
#include "plume/tensor.h"
#include "quant/gguf_quant.h"

static void put_f16(uint8_t *p, float f)
{
    uint16_t h = plume_fp32_to_fp16(f);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

/* The value of largest magnitude (the first one on ties), with its sign. */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* Symmetric 4/5-bit: d = max / -2^(b-1) (the extreme weight lands on code
 * 0), q = min(2^b - 1, trunc(x/d + 2^(b-1) + 0.5)). */
static void sym_codes(const float *x, int bits, uint8_t q[32], float *d_out)
{
    const float half = (float)(1 << (bits - 1));
    const float d = signed_absmax(x, 32) / -half;
    const float id = d ? 1.0f / d : 0.0f;
    const int top = (1 << bits) - 1;
    for (int j = 0; j < 32; j++) {
        int v = (int8_t)(x[j] * id + (half + 0.5f));
        q[j] = (uint8_t)(v < top ? v : top);
    }
    *d_out = d;
}

/* Asymmetric 4/5-bit: d = (max - min) / (2^b - 1), m = min. */
static void asym_codes(const float *x, int bits, uint8_t q[32], float *d_out, float *m_out)
{
    float mn, mx;
    min_max(x, 32, &mn, &mx);
    const int top = (1 << bits) - 1;
    const float d = (mx - mn) / (float)top;
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        int v = (int8_t)((x[j] - mn) * id + 0.5f);
        q[j] = (uint8_t)(v < top ? v : top);
    }
    *d_out = d;
    *m_out = mn;
}

/* Low nibbles: byte j holds weight j (low) and j + 16 (high); the fifth
 * bits of Q5_* go to a little-endian u32, bit j for weight j. */
static void pack_nibbles(const uint8_t q[32], uint8_t *qs)
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
}

static void pack_high_bits(const uint8_t q[32], uint8_t *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < 32; j++)
        h |= (uint32_t)((q[j] >> 4) & 1) << j;
    for (int b = 0; b < 4; b++)
        qh[b] = (uint8_t)(h >> (8 * b));
}

/* One row of a legacy format of 32-value blocks, each: the f16 scale d,
 * with_min: the f16 minimum m, 5-bit codes: their 32 high bits, then the
 * low nibbles (q4_0: 18 bytes, q4_1: 20, q5_0: 22, q5_1: 24). */
static inline void legacy_row(const float *x, uint8_t *y, int64_t k, int bits, bool with_min)
{
    const int block_bytes = 2 + (with_min ? 2 : 0) + (bits == 5 ? 4 : 0) + 16;
    for (int64_t i = 0; i < k / 32; i++, x += 32, y += block_bytes) {
        uint8_t q[32], *p = y;
        float d, m;
        if (with_min)
            asym_codes(x, bits, q, &d, &m);
        else
            sym_codes(x, bits, q, &d);
        put_f16(p, d);
        p += 2;
        if (with_min) {
            put_f16(p, m);
            p += 2;
        }
        if (bits == 5) {
            pack_high_bits(q, p);
            p += 4;
        }
        pack_nibbles(q, p);
    }
}

void gq_row_q4_0(const float *x, uint8_t *y, int64_t k) { legacy_row(x, y, k, 4, false); }

void gq_row_q4_1(const float *x, uint8_t *y, int64_t k) { legacy_row(x, y, k, 4, true); }

void gq_row_q5_0(const float *x, uint8_t *y, int64_t k) { legacy_row(x, y, k, 5, false); }

void gq_row_q5_1(const float *x, uint8_t *y, int64_t k) { legacy_row(x, y, k, 5, true); }

void gq_row_q8_0(const float *x, uint8_t *y, int64_t k)
{
    for (int64_t i = 0; i < k / 32; i++, x += 32, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d ? 1.0f / d : 0.0f;
        put_f16(y, d);
        for (int j = 0; j < 32; j++)
            y[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id); /* ties away from zero */
    }
}

/* The row quantizer of each quantized type written here (F32 and F16 are
 * copied or converted in gguf_quantize_rows); NULL for any other type. */
typedef void (*gq_row_fn)(const float *, uint8_t *, int64_t);
static const gq_row_fn row_fn[] = {
    [GQ_Q4_0] = gq_row_q4_0, [GQ_Q4_1] = gq_row_q4_1, [GQ_Q5_0] = gq_row_q5_0,
    [GQ_Q5_1] = gq_row_q5_1, [GQ_Q8_0] = gq_row_q8_0, [GQ_Q2_K] = gq_row_q2_k,
    [GQ_Q3_K] = gq_row_q3_k, [GQ_Q4_K] = gq_row_q4_k, [GQ_Q5_K] = gq_row_q5_k,
    [GQ_Q6_K] = gq_row_q6_k, [GQ_IQ4_NL] = gq_row_iq4_nl, [GQ_IQ4_XS] = gq_row_iq4_xs,
    [GQ_MXFP4] = gq_row_mxfp4,
};

static gq_row_fn row_quantizer(uint32_t type)
{
    return type < sizeof row_fn / sizeof row_fn[0] ? row_fn[type] : NULL;
}

bool gguf_quant_supported(uint32_t type)
{
    return type == GQ_F32 || type == GQ_F16 || row_quantizer(type) != NULL;
}

size_t gguf_quantize_rows(uint32_t type, const float *src, void *dst, int64_t nrows,
                          int64_t n_per_row)
{
    size_t rb = plume_dtype_row_bytes(type, n_per_row);
    if (!rb || !gguf_quant_supported(type))
        return 0;
    gq_row_fn fn = row_quantizer(type);
    uint8_t *out = dst;
    for (int64_t r = 0; r < nrows; r++, src += n_per_row, out += rb) {
        if (type == GQ_F32) {
            memcpy(out, src, sizeof(float) * (size_t)n_per_row);
        } else if (type == GQ_F16) {
            for (int64_t j = 0; j < n_per_row; j++)
                put_f16(out + 2 * j, src[j]);
        } else {
            fn(src, out, n_per_row);
        }
    }
    return rb * (size_t)nrows;
}
