/* GGUF non-linear 4-bit quantizers: IQ4_NL (blocks of 32) and IQ4_XS
 * (super-blocks of 256 with 6-bit sub-block scales), as llama-quantize runs
 * ggml-quants.c's quantize_row_iq4_nl_impl without an importance matrix:
 * weights x², the sub-block scale chosen among 15 trial scales around
 * max/values[0] by weighted least squares (ntry = 7), codes the nearest of
 * the 16 kvalues_iq4nl levels.  Layouts: IQ4_NL d, qs[16] (18 bytes);
 * IQ4_XS d, scales_h (u16), scales_l[4], qs[128] (136 bytes); nibbles as
 * Q4_0 (byte j of a 32-block: weight j low, j + 16 high). */
#include <math.h>
#include <string.h>

#include "plume/fp16.h"
#include "quant/gguf_quant.h"

#define GROUP_MAX_EPS 1e-15f
#define NTRY 7

static const int8_t IQ4NL_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

/* Index of the level nearest to x (ties to the upper level). */
static int best_index(float x)
{
    const float x2 = x + x;
    int idx = 0;
    for (int step = 8; step > 0; step >>= 1) {
        const int j = idx + step;
        if (x2 >= (float)(IQ4NL_VALUES[j - 1] + IQ4NL_VALUES[j]))
            idx = j;
    }
    return idx;
}

static float put_f16(uint8_t *p, float f)
{
    uint16_t h = plume_fp32_to_fp16(f);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
    return plume_fp16_to_fp32(h);
}

/* The scale of one block of 32 (0 for an all-zero block), its codes in L. */
static float block_scale(const float *xb, uint8_t *L)
{
    float weight[32], amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        weight[j] = xb[j] * xb[j];
        if (fabsf(xb[j]) > amax) {
            amax = fabsf(xb[j]);
            max = xb[j];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, 32);
        return 0;
    }
    float d = -max / IQ4NL_VALUES[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
        int l = best_index(id * xb[j]);
        L[j] = (uint8_t)l;
        float q = IQ4NL_VALUES[l];
        sumqx += weight[j] * q * xb[j];
        sumq2 += weight[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -NTRY; itry <= NTRY; ++itry) {
        id = (itry + IQ4NL_VALUES[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            float q = IQ4NL_VALUES[best_index(id * xb[j])];
            sumqx += weight[j] * q * xb[j];
            sumq2 += weight[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void pack32(const uint8_t *L, uint8_t *q)
{
    for (int j = 0; j < 16; ++j)
        q[j] = (uint8_t)(L[j] | (L[16 + j] << 4));
}

void gq_row_iq4_nl(const float *x, uint8_t *y, int64_t k)
{
    uint8_t L[32];
    for (int64_t i = 0; i < k / 32; i++, x += 32, y += 18) {
        float d = block_scale(x, L);
        put_f16(y, d);
        /* codes again with the final scale (as the reference does for a
         * single-block super-block) */
        float id = d ? 1 / d : 0;
        for (int j = 0; j < 32; ++j)
            L[j] = (uint8_t)best_index(id * x[j]);
        pack32(L, y + 2);
    }
}

void gq_row_iq4_xs(const float *x, uint8_t *y, int64_t k)
{
    uint8_t L[256];
    float scales[8];
    for (int64_t i = 0; i < k / 256; i++, x += 256, y += 136) {
        float max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < 8; ++ib) {
            scales[ib] = block_scale(x + 32 * ib, L + 32 * ib);
            if (fabsf(scales[ib]) > amax_scale) {
                amax_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        uint16_t scales_h = 0;
        uint8_t *scales_l = y + 4;
        memset(scales_l, 0, 4);
        const float d = max_scale / -32;
        const float dq = put_f16(y, d);
        (void)dq; /* the reference re-codes with the unrounded d, as here */
        const float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < 8; ++ib) {
            int l = gq_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; ++j)
                L[32 * ib + j] = (uint8_t)best_index(idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0)
                scales_l[ib / 2] = (uint8_t)(l & 0xf);
            else
                scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4);
            scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
        y[2] = (uint8_t)(scales_h & 0xff);
        y[3] = (uint8_t)(scales_h >> 8);
        for (int b = 0; b < 8; ++b)
            pack32(L + 32 * b, y + 8 + 16 * b);
    }
}

/* MXFP4 (17 bytes per 32: an E8M0 exponent e, then 16 bytes of e2m1 codes,
 * nibbles as Q4_0), as ggml-quants.c's quantize_row_mxfp4_ref: e =
 * floor(log2(max |x|)) − 2 + 127 (0 for an all-zero block), the scale
 * d = 2^(e−128) (plume_e8m0_half_to_fp32), and each weight's code the first
 * of the 16 doubled e2m1 levels nearest x / d (|level·d − x| in f32, ties to
 * the lower code).  gguf-py 0.19.0's MXFP4.quantize_blocks gives the same
 * bytes.  One difference, where ggml's C converts a negative or infinite
 * float to uint8 (undefined): e is clamped to 0..255, so a block whose max
 * is below 2^-125 gets e = 0. */
static uint8_t mxfp4_code(float x, float d)
{
    int best = 0;
    float best_err = fabsf((float)PLUME_MXFP4_LEVELS[0] * d - x);
    for (int i = 1; i < 16; i++) {
        const float err = fabsf((float)PLUME_MXFP4_LEVELS[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

void gq_row_mxfp4(const float *x, uint8_t *y, int64_t k)
{
    uint8_t L[32];
    for (int64_t i = 0; i < k / 32; i++, x += 32, y += 17) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j]))
                amax = fabsf(x[j]);
        float ef = amax > 0.0f ? floorf(log2f(amax)) - 2 + 127 : 0.0f;
        ef = ef < 0.0f ? 0.0f : ef > 255.0f ? 255.0f : ef;
        y[0] = (uint8_t)ef;
        const float d = plume_e8m0_half_to_fp32(y[0]);
        for (int j = 0; j < 32; j++)
            L[j] = mxfp4_code(x[j], d);
        pack32(L, y + 1);
    }
}
