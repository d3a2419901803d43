/* GGUF K-quant block quantizers (256 weights a super-block): Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, as ggml-quants.c quantize_row_*_ref does them.  Each
 * sub-block gets a scale (and for Q2/Q4/Q5_K a min) from a small search
 * that minimises a weighted squared error (make_qx_quants, make_q3_quants,
 * make_qkx2_quants); the sub-block scales are then themselves quantized to
 * 4/6/8 bits against one f16 super-scale, and the weights are re-coded with
 * the scales as stored.  Layouts: formats.md §3.2 and ggml-common.h. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "plume/fp16.h"
#include "quant/gguf_quant.h"

#define QK 256
#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* f16 store and the value it reads back as. */
static float put_f16(uint8_t *p, float f)
{
    uint16_t h = plume_fp32_to_fp16(f);
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
    return plume_fp16_to_fp32(h);
}

/* The start both sub-block fits share: max, the value of largest magnitude
 * (0 when every |x| < GROUP_MAX_EPS: L is zeroed then), codes l =
 * round(-nmax/max · x) clamped to [-nmax, nmax-1], stored as l + offset,
 * and their weighted sums (w = x²) *sumlx = Σ w·x·l, *suml2 = Σ w·l². */
static float first_fit(int n, int nmax, const float *x, int8_t *L, int offset, float *sumlx_out,
                       float *suml2_out)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = imax(-nmax, imin(nmax - 1, gq_nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + offset);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
    return max;
}

/* Symmetric codes in [-nmax, nmax-1] (stored +nmax) for n weights, scale
 * chosen among iscale = -(nmax + 0.1·is)/max, is = -9..9, by the weighted
 * least-squares fit Σw·x·l / Σw·l², w = x² (rmse_type 1).  Returns the
 * scale. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L)
{
    float sumlx, suml2;
    const float max = first_fit(n, nmax, x, L, nmax, &sumlx, &suml2);
    if (max == 0.f)
        return 0.f;
    float iscale;
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0)
            continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = imax(-nmax, imin(nmax - 1, gq_nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, gq_nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's sub-block fit: start from iscale = -nmax/max, then up to 5 passes
 * that move single codes to where the weighted fit (w = x²) improves. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L)
{
    float sumlx, suml2;
    if (first_fit(n, nmax, x, L, 0, &sumlx, &suml2) == 0.f)
        return 0.f;
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = imax(-nmax, imin(nmax - 1, gq_nearest_int(x[i] * sl2 / slx)));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed)
            break;
    }
    for (int i = 0; i < n; ++i)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric codes in [0, nmax] with x ≈ scale·l - min: from the range
 * (min clamped to ≤ 0), then nstep+1 trial iscales (rmin + rdelta·is +
 * nmax)/(max - min), each refit by weighted least squares for scale and
 * min; the trial of least weighted error (|diff| with use_mad, else diff²)
 * wins.  Stores -min in *the_min and returns the scale. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = gq_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = imax(0, imin(nmax, gq_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Q2_K: 16 sub-blocks of 16, 2-bit codes, a 4-bit scale and a 4-bit min
 * each (scales[j] = scale | min << 4) against f16 d and dmin.
 * Layout: scales[16], qs[64], d, dmin (84 bytes). */
void gq_row_q2_k(const float *x, uint8_t *y, int64_t k)
{
    uint8_t L[QK], Laux[16];
    float weights[16], mins[QK / 16], scales[QK / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < k / QK; i++, x += QK, y += 84) {
        uint8_t *sc = y, *qs = y + 16;
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK / 16; ++j) {
            for (int l = 0; l < 16; ++l)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        float d, dmin;
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < QK / 16; ++j)
                sc[j] = (uint8_t)gq_nearest_int(iscale * scales[j]);
            d = put_f16(y + 80, max_scale / q4scale);
        } else {
            memset(sc, 0, 16);
            d = put_f16(y + 80, 0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < QK / 16; ++j)
                sc[j] |= (uint8_t)(gq_nearest_int(iscale * mins[j]) << 4);
            dmin = put_f16(y + 82, max_min / q4scale);
        } else {
            dmin = put_f16(y + 82, 0.f);
        }
        for (int j = 0; j < QK / 16; ++j) {
            const float dl = d * (sc[j] & 0xF);
            if (!dl)
                continue;
            const float dm = dmin * (sc[j] >> 4);
            for (int ii = 0; ii < 16; ++ii)
                L[16 * j + ii] =
                    (uint8_t)imax(0, imin(3, gq_nearest_int((x[16 * j + ii] + dm) / dl)));
        }
        for (int j = 0; j < QK; j += 128)
            for (int l = 0; l < 32; ++l)
                qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                          (L[j + l + 96] << 6));
    }
}

/* Q3_K: 16 sub-blocks of 16, 3-bit codes (2 low bits in qs, the third in
 * hmask), 6-bit signed sub-block scales (low 4 bits in scales[0..7], high 2
 * in scales[8..11]) against f16 d.  Layout: hmask[32], qs[64], scales[12],
 * d (110 bytes). */
void gq_row_q3_k(const float *x, uint8_t *y, int64_t k)
{
    int8_t L[QK];
    float scales[QK / 16];
    for (int64_t i = 0; i < k / QK; i++, x += QK, y += 110) {
        uint8_t *hmask = y, *qs = y + 32, *sc = y + 96;
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(sc, 0, 12);
        float d;
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < QK / 16; ++j) {
                int8_t l = (int8_t)gq_nearest_int(iscale * scales[j]);
                l = (int8_t)(imax(-32, imin(31, l)) + 32);
                if (j < 8)
                    sc[j] = (uint8_t)(l & 0xF);
                else
                    sc[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                sc[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            d = put_f16(y + 108, 1 / iscale);
        } else {
            d = put_f16(y + 108, 0.f);
        }
        for (int j = 0; j < QK / 16; ++j) {
            int s = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
            s = (s | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            float dl = d * s;
            if (!dl)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = imax(-4, imin(3, gq_nearest_int(x[16 * j + ii] / dl)));
                L[16 * j + ii] = (int8_t)(l + 4);
            }
        }
        memset(hmask, 0, QK / 8);
        /* the high bit of weights 0..31 goes to bit 0 of hmask[0..31], of
         * weights 32..63 to bit 1, and so on */
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < QK; ++j) {
            if (L[j] > 3) {
                hmask[m] |= hm;
                L[j] = (int8_t)(L[j] - 4);
            }
            if (++m == QK / 8) {
                m = 0;
                hm = (uint8_t)(hm << 1);
            }
        }
        for (int j = 0; j < QK; j += 128)
            for (int l = 0; l < 32; ++l)
                qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                          (L[j + l + 96] << 6));
    }
}

/* The 6-bit scale and min of sub-block j in Q4_K/Q5_K's 12 scale bytes
 * (formats.md §3.2 get_scale_min_k4). */
static void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K and Q5_K share everything but the code width (nmax 15 / 31) and
 * the search: 8 sub-blocks of 32, each fitted by make_qkx2_quants with
 * weights av_x + |x| (av_x = the sub-block's rms), the 8 scales and mins
 * quantized to 6 bits against d = max_scale/63 and dmin = max_min/63, then
 * every weight re-coded with the stored scale and min.  Writes d, dmin and
 * scales[12] at y and the codes into L. */
static void kx_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *y, uint8_t L[QK])
{
    uint8_t Laux[32];
    float weights[32], mins[QK / 32], scales[QK / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l)
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    uint8_t *sc = y + 4;
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK / 32; ++j) {
        uint8_t ls = (uint8_t)gq_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)gq_nearest_int(inv_min * mins[j]);
        ls = (uint8_t)imin(63, ls);
        lm = (uint8_t)imin(63, lm);
        if (j < 4) {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            sc[j - 4] |= (uint8_t)((ls >> 4) << 6);
            sc[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    float d = put_f16(y, max_scale / 63.f);
    float dmin = put_f16(y + 2, max_min / 63.f);
    for (int j = 0; j < QK / 32; ++j) {
        uint8_t s, m;
        get_scale_min_k4(j, sc, &s, &m);
        const float dl = d * s;
        if (!dl)
            continue;
        const float dm = dmin * m;
        for (int ii = 0; ii < 32; ++ii)
            L[32 * j + ii] =
                (uint8_t)imax(0, imin(nmax, gq_nearest_int((x[32 * j + ii] + dm) / dl)));
    }
}

/* Q4_K layout: d, dmin, scales[12], qs[128] (144 bytes); qs[32c + l] holds
 * weight 64c + l (low nibble) and 64c + 32 + l (high). */
void gq_row_q4_k(const float *x, uint8_t *y, int64_t k)
{
    uint8_t L[QK];
    for (int64_t i = 0; i < k / QK; i++, x += QK, y += 144) {
        kx_scales(x, 15, -1.f, 20, y, L);
        uint8_t *q = y + 16;
        for (int j = 0; j < QK; j += 64, q += 32)
            for (int l = 0; l < 32; ++l)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* Q5_K layout: d, dmin, scales[12], qh[32], qs[128] (176 bytes): Q4_K's
 * nibbles plus the fifth bit of weight 64c + l in bit 2c of qh[l] and of
 * 64c + 32 + l in bit 2c + 1. */
void gq_row_q5_k(const float *x, uint8_t *y, int64_t k)
{
    uint8_t L[QK];
    for (int64_t i = 0; i < k / QK; i++, x += QK, y += 176) {
        kx_scales(x, 31, -0.5f, 15, y, L);
        uint8_t *qh = y + 16, *ql = y + 48;
        memset(qh, 0, QK / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < QK; n += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

/* Q6_K: 16 sub-blocks of 16, 6-bit codes (stored +32), int8 sub-block
 * scales against f16 d.  Layout: ql[128], qh[64], scales[16], d (210
 * bytes), codes placed as formats.md §3.2 reads them. */
void gq_row_q6_k(const float *x, uint8_t *y, int64_t k)
{
    int8_t L[QK];
    float scales[QK / 16];
    for (int64_t i = 0; i < k / QK; i++, x += QK, y += 210) {
        uint8_t *ql = y, *qh = y + 128;
        int8_t *sc = (int8_t *)(y + 192);
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            if (fabsf(scale) > max_abs_scale) {
                max_abs_scale = fabsf(scale);
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, 210);
            continue;
        }
        float iscale = -128.f / max_scale;
        float d = put_f16(y + 208, 1 / iscale);
        for (int ib = 0; ib < QK / 16; ++ib)
            sc[ib] = (int8_t)imin(127, gq_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK / 16; ++j) {
            float dl = d * sc[j];
            if (!dl)
                continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = imax(-32, imin(31, gq_nearest_int(x[16 * j + ii] / dl)));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        for (int j = 0; j < QK; j += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
    }
}
