/* The portable scalar level: the reference every SIMD kernel is tested
 * against, and what runs on CPUs without AVX2. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/attn_tile.h"
#include "backend/cpu/blocks.h"
#include "backend/cpu/dispatch.h"
#include "plume/fp16.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/repack_k.h"

/* One block of 32 activations: returns d = amax/127 and writes q =
 * round-to-nearest-even(x * (1/d)), *s0 and *s1 the sums of the first and
 * the last 16 values of q. */
static float q8_block(const float *x, int8_t *q, int32_t *s0, int32_t *s1)
{
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(x[i]));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    int32_t h[2] = {0, 0};
    for (int i = 0; i < 32; i++) {
        q[i] = (int8_t)nearbyintf(x[i] * id);
        h[i / 16] += q[i];
    }
    *s0 = h[0];
    *s1 = h[1];
    return db;
}

static void quantize_q8(const float *x, int64_t K, int8_t *q, float *d, float *s)
{
    for (int64_t b = 0; b < K / 32; b++, x += 32, q += 32) {
        int32_t s0, s1;
        d[b] = q8_block(x, q, &s0, &s1);
        s[b] = d[b] * (float)(s0 + s1);
    }
}

static void quantize_q8_sums(const float *x, int64_t K, const plume_q8_out *o)
{
    for (int64_t b = 0; b < K / 32; b++, x += 32) {
        int32_t s0, s1;
        int8_t *q = o->q + 32 * b;
        const float db = q8_block(x, q, &s0, &s1);
        if (o->blk)
            memcpy(o->blk[(size_t)b * (size_t)o->ldb].q, q, 32);
        plume_q8_out_sums(o, b, db, s0, s1);
    }
}

static void mm_q(int kq, const uint8_t *w, size_t rb, int n_rows, const plume_q8_act *a,
                 int n_tok, float *y, int64_t ldy)
{
    const int64_t nb = a->K / 32;
    plume_sub32 sb;
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        for (int t = 0; t < n_tok; t++) {
            const int8_t *q = a->q + (size_t)t * a->K;
            const float *d = a->d + (size_t)t * nb, *s = a->s + (size_t)t * nb;
            float acc = 0.0f;
            for (int64_t j = 0; j < nb; j++) {
                plume_sub32_get(kq, row, j, &sb);
                int32_t i0 = 0, i1 = 0;
                for (int i = 0; i < 16; i++) {
                    i0 += sb.v[i] * q[32 * j + i];
                    i1 += sb.v[i + 16] * q[32 * j + i + 16];
                }
                acc += (sb.d0 * (float)i0 + sb.d1 * (float)i1) * d[j] + sb.m * s[j];
            }
            y[(size_t)t * ldy + r] = acc;
        }
    }
}

#define MM_Q(name, kq) PLUME_MM_Q_ENTRY(name, mm_q, kq)
MM_Q(mm_q4_0, PLUME_KQ_Q4_0)
MM_Q(mm_q4_1, PLUME_KQ_Q4_1)
MM_Q(mm_q8_0, PLUME_KQ_Q8_0)
MM_Q(mm_q4_k, PLUME_KQ_Q4_K)
MM_Q(mm_q6_k, PLUME_KQ_Q6_K)

/* Repacked weights (repack.h): per group, row lane r, token t. */
static void mm_r(int kr, const uint8_t *w, int n_rows, const plume_q8_act *a, int n_tok,
                 float *y, int64_t ldy)
{
    const int64_t K = a->K, nb = K / 32;
    const size_t bb = plume_rp_block_bytes(kr), doff = plume_rp_d_off(kr);
    const int32_t corr = plume_rp_corr(kr);
    for (int g0 = 0; g0 < n_rows; g0 += PLUME_RP_ROWS, w += bb * (size_t)nb) {
        const int nr = n_rows - g0 < PLUME_RP_ROWS ? n_rows - g0 : PLUME_RP_ROWS;
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < n_tok; t++) {
                const int8_t *q = a->q + (size_t)t * K;
                float acc = 0.0f, macc = 0.0f;
                for (int64_t j = 0; j < nb; j++) {
                    const uint8_t *b = w + (size_t)j * bb;
                    const int8_t *qj = q + 32 * j;
                    int32_t isum = corr ? corr * a->isum[(size_t)t * nb + j] : 0;
                    for (int g = 0; g < 8; g++)
                        for (int i = 0; i < 4; i++) {
                            int u;
                            if (kr == PLUME_KR_Q8_0)
                                u = b[64 * g + 4 * r + i];
                            else
                                u = (b[64 * (g & 3) + 4 * r + i] >> (g & 4)) & 0xF;
                            isum += u * qj[4 * g + i];
                        }
                    const float dw = plume_ld_f16(b + doff + 2 * r);
                    acc += (float)isum * (dw * a->d[(size_t)t * nb + j]);
                    if (kr == PLUME_KR_Q4_1)
                        macc += plume_ld_f16(b + doff + 32 + 2 * r) * a->s[(size_t)t * nb + j];
                }
                y[(size_t)t * ldy + g0 + r] = acc + macc;
            }
    }
}

/* Weight e (0..31) of row lane r in block b of a repack_k.h format: u. */
static inline int rpk_u(plume_rpk_fmt f, const uint8_t *b, int r, int e)
{
    const int g = e >> 2, i = e & 3;
    const size_t lob = plume_rpk_lo_bytes(f);
    int u = f.lo_bits == 4 ? (b[64 * (g & 3) + 4 * r + i] >> (4 * (g >> 2))) & 0xF
                           : (b[64 * (g >> 2) + 4 * r + i] >> (2 * (g & 3))) & 3;
    if (f.hi_bits == 1)
        u |= ((b[lob + 4 * r + i] >> g) & 1) << f.lo_bits;
    else if (f.hi_bits == 2)
        u |= ((b[lob + 64 * (g >> 2) + 4 * r + i] >> (2 * (g & 3))) & 3) << f.lo_bits;
    return u;
}

/* The repack_k.h formats, in the order of float steps given there. */
static void mm_rk(int kr, const uint8_t *w, int n_rows, const plume_q8_act *a, int n_tok,
                  float *y, int64_t ldy)
{
    const plume_rpk_fmt f = plume_rpk_fmt_of(kr);
    const int64_t K = a->K, nb = K / 32;
    const size_t gb = plume_rpk_group_bytes(f, nb);
    const int two = plume_rpk_two_scales(f), mk = plume_rpk_min_kind(f);
    for (int g0 = 0; g0 < n_rows; g0 += PLUME_RP_ROWS, w += gb) {
        const int nr = n_rows - g0 < PLUME_RP_ROWS ? n_rows - g0 : PLUME_RP_ROWS;
        for (int r = 0; r < nr; r++)
            for (int t = 0; t < n_tok; t++) {
                const int8_t *q = a->q + (size_t)t * K;
                const int32_t *is16 = a->isum16 + (size_t)t * 2 * nb;
                const float *s16 = a->s16 + (size_t)t * 2 * nb;
                float facc = 0.0f, macc = 0.0f;
                for (int64_t j = 0; j < nb; j++) {
                    const uint8_t *b = w + plume_rpk_block_off(f, j);
                    int32_t i0 = f.corr * is16[2 * j], i1 = f.corr * is16[2 * j + 1];
                    for (int e = 0; e < 32; e++) {
                        const int u = rpk_u(f, b, r, e);
                        const int v = f.lv ? f.lv[u] : u;
                        if (e < 16)
                            i0 += v * q[32 * j + e];
                        else
                            i1 += v * q[32 * j + e];
                    }
                    const plume_rpk_scales sc = plume_rpk_row_scales(f, w, j, r);
                    const float da = a->d[(size_t)t * nb + j];
                    if (two) {
                        facc += (float)i0 * (sc.dd0 * da);
                        facc += (float)i1 * (sc.dd1 * da);
                    } else {
                        facc += (float)(i0 + i1) * (sc.dd0 * da);
                    }
                    if (mk == 1) {
                        macc += sc.mm0 * a->s[(size_t)t * nb + j];
                    } else if (mk == 2) {
                        macc += sc.mm0 * s16[2 * j];
                        macc += sc.mm1 * s16[2 * j + 1];
                    }
                }
                y[(size_t)t * ldy + g0 + r] = facc + macc;
            }
    }
}

/* Either family of layouts (repack.h, repack_k.h). */
static inline void mm_r_any(int kr, const uint8_t *w, int n_rows, const plume_q8_act *a,
                            int n_tok, float *y, int64_t ldy)
{
    if (kr >= PLUME_KR_Q5_0)
        mm_rk(kr, w, n_rows, a, n_tok, y, ldy);
    else
        mm_r(kr, w, n_rows, a, n_tok, y, ldy);
}

#define MM_R(name, kr) PLUME_MM_R_ENTRY(name, mm_r_any, kr)
MM_R(mm_r_q4_0, PLUME_KR_Q4_0)
MM_R(mm_r_q4_1, PLUME_KR_Q4_1)
MM_R(mm_r_q8_0, PLUME_KR_Q8_0)
MM_R(mm_r_q5_0, PLUME_KR_Q5_0)
MM_R(mm_r_q5_1, PLUME_KR_Q5_1)
MM_R(mm_r_iq4_nl, PLUME_KR_IQ4_NL)
MM_R(mm_r_q4_k, PLUME_KR_Q4_K)
MM_R(mm_r_q5_k, PLUME_KR_Q5_K)
MM_R(mm_r_q6_k, PLUME_KR_Q6_K)
MM_R(mm_r_q2_k, PLUME_KR_Q2_K)
MM_R(mm_r_q3_k, PLUME_KR_Q3_K)
MM_R(mm_r_iq4_xs, PLUME_KR_IQ4_XS)
MM_R(mm_r_mxfp4, PLUME_KR_MXFP4)

static inline float wval(int kf, const uint8_t *row, int64_t k)
{
    float f;
    uint16_t h;
    switch (kf) {
    case PLUME_KF_F32: memcpy(&f, row + 4 * k, 4); return f;
    case PLUME_KF_F16: memcpy(&h, row + 2 * k, 2); return plume_fp16_to_fp32(h);
    default: memcpy(&h, row + 2 * k, 2); return plume_bf16_to_fp32(h);
    }
}

static void mm_f(int kf, const uint8_t *w, size_t rb, int64_t K, int n_rows, const float *x,
                 int64_t ldx, int n_tok, float *y, int64_t ldy)
{
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        for (int t = 0; t < n_tok; t++) {
            const float *xt = x + (size_t)t * ldx;
            float s[8] = {0};
            int64_t k = 0;
            for (; k + 8 <= K; k += 8)
                for (int i = 0; i < 8; i++)
                    s[i] += wval(kf, row, k + i) * xt[k + i];
            float sum = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
            for (; k < K; k++)
                sum += wval(kf, row, k) * xt[k];
            y[(size_t)t * ldy + r] = sum;
        }
    }
}

#define MM_F(name, kf) PLUME_MM_F_ENTRY(name, mm_f, kf)
MM_F(mm_f32, PLUME_KF_F32)
MM_F(mm_f16, PLUME_KF_F16)
MM_F(mm_bf16, PLUME_KF_BF16)

static float dot(const float *a, const float *b, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    float sum = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

static void axpy(float *y, float a, const float *x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float scale = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++)
        out[i] = x[i] * scale * w[i];
}

static void rope(float *v, int head_dim, const float *c, const float *s, int adjacent)
{
    const int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        const int a = adjacent ? 2 * i : i;
        const int b = adjacent ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c[i] - x1 * s[i];
        v[b] = x0 * s[i] + x1 * c[i];
    }
}

static void swiglu(float *x, const float *y, int n)
{
    for (int i = 0; i < n; i++) {
        const float g = x[i];
        x[i] = g / (1.0f + expf(-g)) * y[i];
    }
}

static void geglu(float *x, const float *y, int n)
{
    for (int i = 0; i < n; i++) {
        const float v = x[i], u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        x[i] = v / (1.0f + expf(-2.0f * u)) * y[i];
    }
}

/* Keys per slice of attn_step (scores on the stack). */
#define ATTN_SLICE 64

static void attn_slice(const float *q, const float *k, const float *v, int64_t stride, int i0,
                       int ns, int hd, float scale, float *m, float *l, float *o)
{
    float p[ATTN_SLICE];
    {
        float mx = *m;
        for (int i = 0; i < ns; i++) {
            p[i] = dot(q, k + (size_t)(i0 + i) * stride, hd) * scale;
            mx = fmaxf(mx, p[i]);
        }
        const float c = expf(*m - mx); /* 0 on the first slice */
        float sum = *l * c;
        for (int d = 0; d < hd; d++)
            o[d] *= c;
        for (int i = 0; i < ns; i++) {
            p[i] = expf(p[i] - mx);
            sum += p[i];
        }
        for (int i = 0; i < ns; i++)
            axpy(o, p[i], v + (size_t)(i0 + i) * stride, hd);
        *m = mx;
        *l = sum;
    }
}

static void attn_step(const float *q, int nq, const float *k, const float *v, int64_t stride,
                      int n, int hd, float scale, float *m, float *l, float *o)
{
    for (int i0 = 0; i0 < n; i0 += ATTN_SLICE) {
        const int ns = n - i0 < ATTN_SLICE ? n - i0 : ATTN_SLICE;
        for (int qi = 0; qi < nq; qi++)
            attn_slice(q + (size_t)qi * hd, k, v, stride, i0, ns, hd, scale, m + qi, l + qi,
                       o + (size_t)qi * hd);
    }
}

/* Keys and values of a slice copied (f32) or converted (f16) into buffers
 * of this many floats each, then attn_step. */
#define ATTN_BUF 4096

/* Keys p0 .. p0+ns-1 of a paged cache copied (f32) or converted (f16;
 * int8: value x the row's scale) into kb / vb (hd floats per key). */
static void attn_gather(const void *k, const void *v, int64_t stride, int kv_type,
                        const int32_t *block_table, int block_size, int p0, int ns, int hd,
                        float *kb, float *vb)
{
    for (int i = 0; i < ns; i++) {
        const int p = p0 + i;
        const size_t off = plume_attn_slot(block_table, block_size, p) * (size_t)stride;
        if (kv_type == PLUME_KV_TYPE_I8) {
            const int8_t *k8 = (const int8_t *)k + off, *v8 = (const int8_t *)v + off;
            float ks, vs;
            memcpy(&ks, k8 + PLUME_KV_I8_SCALE_AT(hd), sizeof ks);
            memcpy(&vs, v8 + PLUME_KV_I8_SCALE_AT(hd), sizeof vs);
            for (int d = 0; d < hd; d++) {
                kb[i * hd + d] = (float)k8[d] * ks;
                vb[i * hd + d] = (float)v8[d] * vs;
            }
            continue;
        }
        for (int d = 0; d < hd; d++) {
            if (kv_type) {
                kb[i * hd + d] = plume_fp16_to_fp32(((const uint16_t *)k)[off + d]);
                vb[i * hd + d] = plume_fp16_to_fp32(((const uint16_t *)v)[off + d]);
            } else {
                kb[i * hd + d] = ((const float *)k)[off + d];
                vb[i * hd + d] = ((const float *)v)[off + d];
            }
        }
    }
}

/* Keys per slice: ATTN_SLICE, halved while a slice would not fit the
 * buffers; a power of two, so slices tile the chunks exactly. */
static int attn_slice_len(int hd)
{
    int slice = ATTN_SLICE;
    while (slice > 1 && slice * hd > ATTN_BUF)
        slice >>= 1;
    return slice;
}

/* dispatch.h: attn_partial.  Slices start at absolute multiples of the
 * slice length; a row folds only the keys of its own range. */
static void attn_partial(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                         const void *v, int64_t stride, int kv_type, const int32_t *block_table,
                         int block_size, int n_pos0, int hd, float scale, int window, int c0,
                         float *m, float *l, float *o)
{
    float kb[ATTN_BUF], vb[ATTN_BUF];
    const int slice = attn_slice_len(hd);
    const plume_attn_range rg =
        plume_attn_partial_begin(nr, nq, hd, n_pos0, window, c0, slice, m, l, o);
    const int end = rg.end, lo0 = rg.lo0;
    for (int p0 = rg.p0; p0 < end; p0 += slice) {
        const int g = p0 > lo0 ? p0 : lo0; /* gathered: g .. e-1 */
        const int e = end - p0 < slice ? end : p0 + slice;
        attn_gather(k, v, stride, kv_type, block_table, block_size, g, e - g, hd, kb, vb);
        for (int r = 0; r < nr; r++) {
            int a, er;
            if (!plume_attn_row_keys(n_pos0 + r, window, p0, e, &a, &er))
                continue;
            for (int qi = 0; qi < nq; qi++)
                attn_step(q + (size_t)r * q_stride + (size_t)qi * hd, 1, kb + (size_t)(a - g) * hd,
                          vb + (size_t)(a - g) * hd, hd, er - a, hd, scale, m + r * nq + qi,
                          l + r * nq + qi, o + (size_t)(r * nq + qi) * hd);
        }
    }
}

/* dispatch.h: attn_merge. */
static void attn_merge(float *M, float *L, float *O, const float *m, const float *l,
                       const float *o, int n, int hd, int64_t O_stride)
{
    for (int i = 0; i < n; i++) {
        float *Oi = O + (size_t)i * O_stride;
        const float *oi = o + (size_t)i * hd;
        float a, b;
        if (!plume_attn_merge_begin(&M[i], &L[i], Oi, m[i], l[i], oi, hd, &a, &b))
            continue;
        plume_attn_merge_blend(Oi, oi, a, b, 0, hd);
    }
}

/* attn_paged for a tile of consecutive rows (dispatch.h): attn_tile.h's
 * driver over attn_partial and attn_merge. */
static void attn_paged_tile(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                            const void *v, int64_t stride, int kv_type,
                            const int32_t *block_table, int block_size, int n_pos0, int hd,
                            float scale, int window, float *o, int64_t o_stride)
{
    float po[ATTN_BUF * 2];
    plume_attn_tile_run(attn_partial, attn_merge, po, ATTN_BUF * 2, q, q_stride, nr, nq, k, v,
                        stride, kv_type, block_table, block_size, n_pos0, hd, scale, window, NULL,
                        o,
                        o_stride);
}

/* One row: a tile of one. */
static void attn_paged(const float *q, int nq, const void *k, const void *v, int64_t stride,
                       int kv_type, const int32_t *block_table, int block_size, int n_pos, int hd,
                       float scale, int window, float *o)
{
    attn_paged_tile(q, 0, 1, nq, k, v, stride, kv_type, block_table, block_size, n_pos, hd, scale,
                    window, o, 0);
}

static float softmax_exp(float *s, int n)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        mx = fmaxf(mx, s[i]);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum += s[i];
    }
    return sum;
}

static void f32_to_f16(const float *x, uint16_t *h, int n)
{
    for (int i = 0; i < n; i++)
        h[i] = plume_fp32_to_fp16(x[i]);
}

static void kv_i8(const float *x, int n, int8_t *q, float *d)
{
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int i = 0; i < n; i++)
        q[i] = plume_kv_i8_value(x[i], id);
    *d = amax / 127.0f;
}

static float read_sum(const void *buf, size_t bytes)
{
    const uint64_t *p = buf;
    uint64_t acc[4] = {0};
    for (size_t i = 0; i < bytes / 8; i += 4)
        for (int j = 0; j < 4; j++)
            acc[j] ^= p[i + j];
    return (float)(acc[0] ^ acc[1] ^ acc[2] ^ acc[3]);
}

static double fma_peak(long iters)
{
    float a[16], b = 0.999f, c = 1e-3f;
    for (int i = 0; i < 16; i++)
        a[i] = (float)i;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 16; i++)
            a[i] = a[i] * b + c;
    volatile float sink = a[0] + a[15];
    (void)sink;
    return 2.0 * 16.0 * (double)iters;
}

static double int8_peak(long iters)
{
    int32_t acc[16] = {0};
    volatile int8_t src = 3;
    int8_t x = src;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 16; i++)
            acc[i] += (int8_t)(x + i) * (uint8_t)(x + 2 * i);
    volatile int32_t sink = acc[0] + acc[15];
    (void)sink;
    return 2.0 * 16.0 * (double)iters;
}

static const plume_kernels K = {
    .level = PLUME_CPU_SCALAR,
    .quantize_q8 = quantize_q8,
    .quantize_q8_sums = quantize_q8_sums,
    .mm_q = {mm_q4_0, mm_q4_1, mm_q8_0, mm_q4_k, mm_q6_k},
    .mm_f = {mm_f32, mm_f16, mm_bf16},
    .mm_r = {mm_r_q4_0, mm_r_q4_1, mm_r_q8_0, mm_r_q5_0, mm_r_q5_1, mm_r_iq4_nl, mm_r_q4_k,
             mm_r_q5_k, mm_r_q6_k, mm_r_q2_k, mm_r_q3_k, mm_r_iq4_xs, mm_r_mxfp4},
    .dot = dot,
    .axpy = axpy,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .swiglu = swiglu,
    .geglu = geglu,
    .attn_step = attn_step,
    .attn_partial = attn_partial,
    .attn_merge = attn_merge,
    .attn_paged = attn_paged,
    .attn_paged_tile = attn_paged_tile,
    .softmax_exp = softmax_exp,
    .f32_to_f16 = f32_to_f16,
    .kv_i8 = kv_i8,
    .read_sum = read_sum,
    .fma_peak = fma_peak,
    .int8_peak = int8_peak,
};

const plume_kernels *plume_kernels_scalar(void) { return &K; }
