/* x86 kernels on 256-bit vectors, shared by the avx2 and avx512 levels.
 *
 * Included once by kernels_avx2.c and once by kernels_avx512.c, after the
 * file has set the compiler's target (so these functions are compiled for
 * that level only) and defined:
 *   KX_VNNI   1: int8 dot products with vpdpbusd (AVX-512 VNNI, VL form);
 *             0: vpmaddubsw + vpmaddwd (AVX2)
 *   KX_TR, KX_TT  row × token tile of the batched (n_tok > 1) kernels
 *   KX_FR, KX_FT  the same for float weights
 *   KX_DR     rows per tile of the single-token (decode) kernels
 *   KX_OWN_MM_Q  (optional) 1: the file has its own integer matmul, so the
 *             256-bit kx_mm_q_* entry points are not emitted
 * Everything here is static; the including file builds its plume_kernels
 * table from these functions (KX_SHARED_KERNELS, at the end) plus its own
 * matmuls and microbenchmarks. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/blocks.h"
#include "backend/cpu/dispatch.h"

#define KX_INLINE static inline __attribute__((always_inline))
#define KX_MAXR 4
#define KX_MAXT 4

/* How far ahead of the block it is reading a repacked-matmul kernel asks
 * for weight bytes.  A decode step streams every weight once from DRAM, and
 * the hardware prefetchers alone leave each thread waiting on misses: the
 * out-of-order window covers only the next few blocks, fewer the more
 * instructions a format's block takes.  On a 2-core Zen 4, one thread
 * reading 24 weights of 2048 x 8192 (far larger than the cache) went from
 * 26 to 40 GB/s on Q4_K with 4 KiB, and from 34 to 38 on Q4_0; 1-3 KiB did
 * less.  A Llama-3.2-1B-shaped Q4_K_M file decoded 55.9 -> 81.4 tok/s with
 * it and the one-stream K-quant layout (2 threads, medians of 3 runs
 * alternating with the build before). */
#define KX_PF_AHEAD 4096

/* Prefetches the bytes KX_PF_AHEAD past the block at b (block bytes long)
 * into L1.  Prefetching past the end of the weights does not fault. */
KX_INLINE void kx_prefetch_ahead(const uint8_t *b, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)b + KX_PF_AHEAD + o, _MM_HINT_T0);
}

/* Σ over groups of 4 adjacent bytes of u (unsigned) × s (signed), as 8 int32. */
KX_INLINE __m256i kx_dot(__m256i u, __m256i s)
{
#if KX_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

KX_INLINE float kx_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

KX_INLINE float kx_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The largest of v's 8 lanes. */
KX_INLINE float kx_hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* 16 bytes of packed nibbles → 32 bytes: the low nibbles, then the high. */
KX_INLINE __m256i kx_nibbles(const uint8_t *p)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    const __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* One 32-weight sub-block as dot-product operands (see blocks.h):
 * u unsigned bytes; for signed formats (Q8_0, Q6_K) u = |w| and the
 * activations take w's sign; d per-lane weight scale (lanes 0-3 cover
 * weights 0-15); m = min term / 8 in every lane. */
typedef struct kx_blk {
    __m256i u, w;
    __m256 d, m;
} kx_blk;

KX_INLINE int kx_signed(int kq) { return kq == PLUME_KQ_Q8_0 || kq == PLUME_KQ_Q6_K; }

KX_INLINE kx_blk kx_get(const int kq, const uint8_t *row, int64_t j)
{
    kx_blk o;
    o.w = _mm256_setzero_si256();
    o.m = _mm256_setzero_ps();
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    switch (kq) {
    case PLUME_KQ_Q4_0: {
        const uint8_t *b = row + j * 18;
        const float d = kx_f16(b);
        o.d = _mm256_set1_ps(d);
        o.m = _mm256_set1_ps(-d); /* -8d / 8 */
        o.u = kx_nibbles(b + 2);
        break;
    }
    case PLUME_KQ_Q4_1: {
        const uint8_t *b = row + j * 20;
        o.d = _mm256_set1_ps(kx_f16(b));
        o.m = _mm256_set1_ps(kx_f16(b + 2) * 0.125f);
        o.u = kx_nibbles(b + 4);
        break;
    }
    case PLUME_KQ_Q8_0: {
        const uint8_t *b = row + j * 34;
        o.d = _mm256_set1_ps(kx_f16(b));
        o.w = _mm256_loadu_si256((const __m256i *)(b + 2));
        o.u = _mm256_abs_epi8(o.w);
        break;
    }
    case PLUME_KQ_Q4_K: {
        const uint8_t *b = row + (j >> 3) * 144;
        const int sub = (int)(j & 7);
        int sc, mn;
        plume_q4k_scale_min(sub, b + 4, &sc, &mn);
        o.d = _mm256_set1_ps(kx_f16(b) * (float)sc);
        o.m = _mm256_set1_ps(-kx_f16(b + 2) * (float)mn * 0.125f);
        __m256i q = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * (sub >> 1)));
        if (sub & 1)
            q = _mm256_srli_epi16(q, 4);
        o.u = _mm256_and_si256(q, lo4);
        break;
    }
    case PLUME_KQ_Q6_K: {
        const uint8_t *b = row + (j >> 3) * 210;
        const int sub = (int)(j & 7), h = sub >> 2, k = sub & 3;
        __m256i lo = _mm256_loadu_si256((const __m256i *)(b + h * 64 + (k & 1) * 32));
        __m256i hi = _mm256_loadu_si256((const __m256i *)(b + 128 + h * 32));
        lo = _mm256_and_si256(_mm256_srl_epi16(lo, _mm_cvtsi32_si128(4 * (k >> 1))), lo4);
        hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * k)),
                              _mm256_set1_epi8(3));
        hi = _mm256_slli_epi16(hi, 4);
        o.w = _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
        o.u = _mm256_abs_epi8(o.w);
        const int8_t *sc = (const int8_t *)(b + 192) + h * 8 + 2 * k;
        const float d = kx_f16(b + 208);
        o.d = _mm256_set_m128(_mm_set1_ps(d * sc[1]), _mm_set1_ps(d * sc[0]));
        break;
    }
    }
    return o;
}

/* One R × T tile: rows w .. w+(R-1)*rb against tokens t0 .. t0+T-1. */
KX_INLINE void kx_tile(const int kq, const int R, const int T, const uint8_t *w, size_t rb,
                       const plume_q8_act *a, int t0, float *y, int64_t ldy)
{
    const int64_t K = a->K, nb = K / 32;
    const int has_min = !kx_signed(kq);
    __m256 acc[KX_MAXR][KX_MAXT];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; j++) {
        kx_blk b[KX_MAXR];
        for (int r = 0; r < R; r++)
            b[r] = kx_get(kq, w + (size_t)r * rb, j);
        for (int t = 0; t < T; t++) {
            const size_t tt = (size_t)(t0 + t);
            const __m256i av = _mm256_loadu_si256((const __m256i *)(a->q + tt * K + 32 * j));
            const __m256 da = _mm256_set1_ps(a->d[tt * nb + j]);
            const __m256 sa = has_min ? _mm256_set1_ps(a->s[tt * nb + j]) : _mm256_setzero_ps();
            for (int r = 0; r < R; r++) {
                const __m256i p = kx_signed(kq) ? kx_dot(b[r].u, _mm256_sign_epi8(av, b[r].w))
                                                : kx_dot(b[r].u, av);
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(b[r].d, da),
                                            acc[r][t]);
                if (has_min)
                    acc[r][t] = _mm256_fmadd_ps(b[r].m, sa, acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            y[(size_t)(t0 + t) * ldy + r] = kx_hsum(acc[r][t]);
}

KX_INLINE void kx_mm_q(const int kq, const uint8_t *w, size_t rb, int n_rows,
                       const plume_q8_act *a, int n_tok, float *y, int64_t ldy)
{
    int r = 0;
    if (n_tok == 1) {
        for (; r + KX_DR <= n_rows; r += KX_DR)
            kx_tile(kq, KX_DR, 1, w + (size_t)r * rb, rb, a, 0, y + r, ldy);
        for (; r < n_rows; r++)
            kx_tile(kq, 1, 1, w + (size_t)r * rb, rb, a, 0, y + r, ldy);
        return;
    }
    for (; r + KX_TR <= n_rows; r += KX_TR) {
        int t = 0;
        for (; t + KX_TT <= n_tok; t += KX_TT)
            kx_tile(kq, KX_TR, KX_TT, w + (size_t)r * rb, rb, a, t, y + r, ldy);
        for (; t < n_tok; t++)
            kx_tile(kq, KX_TR, 1, w + (size_t)r * rb, rb, a, t, y + r, ldy);
    }
    for (; r < n_rows; r++) {
        int t = 0;
        for (; t + KX_TT <= n_tok; t += KX_TT)
            kx_tile(kq, 1, KX_TT, w + (size_t)r * rb, rb, a, t, y + r, ldy);
        for (; t < n_tok; t++)
            kx_tile(kq, 1, 1, w + (size_t)r * rb, rb, a, t, y + r, ldy);
    }
}

#if !defined(KX_OWN_MM_Q) || !KX_OWN_MM_Q
#define KX_MM_Q(name, kq) PLUME_MM_Q_ENTRY(name, kx_mm_q, kq)
KX_MM_Q(kx_mm_q4_0, PLUME_KQ_Q4_0)
KX_MM_Q(kx_mm_q4_1, PLUME_KQ_Q4_1)
KX_MM_Q(kx_mm_q8_0, PLUME_KQ_Q8_0)
KX_MM_Q(kx_mm_q4_k, PLUME_KQ_Q4_K)
KX_MM_Q(kx_mm_q6_k, PLUME_KQ_Q6_K)
#endif

/* One block of 32 activations, bit-identical to the scalar level: *db =
 * amax/127, the values round-to-nearest-even(x * (1/d)) (returned, in
 * order), *s0 and *s1 the sums of the first and the last 16 of them. */
KX_INLINE __m256i kx_q8_block(const float *x, float *db, int32_t *s0, int32_t *s1)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 v[4];
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[i]));
    }
    const float amax = kx_hmax(mx);
    *db = amax / 127.0f;
    const float id = *db != 0.0f ? 1.0f / *db : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i iv[4];
    for (int i = 0; i < 4; i++)
        iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));
    /* [Σ of the first 16, Σ of the last 16, ...] by two horizontal adds */
    const __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
    __m128i h4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    h4 = _mm_hadd_epi32(h4, h4);
    *s0 = _mm_cvtsi128_si32(h4);
    *s1 = _mm_extract_epi32(h4, 1);
    const __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]);
    const __m256i p23 = _mm256_packs_epi32(iv[2], iv[3]);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), perm);
}

/* Activation quantization, bit-identical to the scalar level: d = amax/127,
 * q = round-to-nearest-even(x * (1/d)). */
static void kx_quantize_q8(const float *x, int64_t K, int8_t *q, float *d, float *s)
{
    for (int64_t b = 0; b < K / 32; b++, x += 32, q += 32) {
        int32_t s0, s1;
        _mm256_storeu_si256((__m256i *)q, kx_q8_block(x, &d[b], &s0, &s1));
        s[b] = d[b] * (float)(s0 + s1);
    }
}

/* kx_quantize_q8 with the repacked kernels' sums and block records. */
static void kx_quantize_q8_sums(const float *x, int64_t K, const plume_q8_out *o)
{
    for (int64_t b = 0; b < K / 32; b++, x += 32) {
        float db;
        int32_t s0, s1;
        const __m256i p = kx_q8_block(x, &db, &s0, &s1);
        _mm256_storeu_si256((__m256i *)(o->q + 32 * b), p);
        if (o->blk)
            _mm256_store_si256((__m256i *)o->blk[(size_t)b * (size_t)o->ldb].q, p);
        plume_q8_out_sums(o, b, db, s0, s1);
    }
}

/* Float weights: 8 consecutive values of a row as f32. */
KX_INLINE __m256 kx_wload(const int kf, const uint8_t *row, int64_t k)
{
    switch (kf) {
    case PLUME_KF_F32: return _mm256_loadu_ps((const float *)(row + 4 * k));
    case PLUME_KF_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * k)));
    default:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * k))), 16));
    }
}

KX_INLINE float kx_wscalar(const int kf, const uint8_t *row, int64_t k)
{
    float f;
    uint16_t h;
    switch (kf) {
    case PLUME_KF_F32: memcpy(&f, row + 4 * k, 4); return f;
    case PLUME_KF_F16: memcpy(&h, row + 2 * k, 2); return _cvtsh_ss(h);
    default: memcpy(&h, row + 2 * k, 2); return plume_bf16_to_fp32(h);
    }
}

KX_INLINE void kx_ftile(const int kf, const int R, const int T, const uint8_t *w, size_t rb,
                        int64_t K, const float *x, int64_t ldx, int t0, float *y, int64_t ldy)
{
    __m256 acc[KX_MAXR][KX_MAXT];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[KX_MAXR];
        for (int r = 0; r < R; r++)
            wv[r] = kx_wload(kf, w + (size_t)r * rb, k);
        for (int t = 0; t < T; t++) {
            const __m256 xv = _mm256_loadu_ps(x + (size_t)(t0 + t) * ldx + k);
            for (int r = 0; r < R; r++)
                acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)(t0 + t) * ldx;
            float sum = kx_hsum(acc[r][t]);
            for (int64_t kk = k; kk < K; kk++)
                sum += kx_wscalar(kf, w + (size_t)r * rb, kk) * xt[kk];
            y[(size_t)(t0 + t) * ldy + r] = sum;
        }
}

KX_INLINE void kx_mm_f(const int kf, const uint8_t *w, size_t rb, int64_t K, int n_rows,
                       const float *x, int64_t ldx, int n_tok, float *y, int64_t ldy)
{
    int r = 0;
    if (n_tok == 1) {
        for (; r + KX_DR <= n_rows; r += KX_DR)
            kx_ftile(kf, KX_DR, 1, w + (size_t)r * rb, rb, K, x, ldx, 0, y + r, ldy);
        for (; r < n_rows; r++)
            kx_ftile(kf, 1, 1, w + (size_t)r * rb, rb, K, x, ldx, 0, y + r, ldy);
        return;
    }
    for (; r + KX_FR <= n_rows; r += KX_FR) {
        int t = 0;
        for (; t + KX_FT <= n_tok; t += KX_FT)
            kx_ftile(kf, KX_FR, KX_FT, w + (size_t)r * rb, rb, K, x, ldx, t, y + r, ldy);
        for (; t < n_tok; t++)
            kx_ftile(kf, KX_FR, 1, w + (size_t)r * rb, rb, K, x, ldx, t, y + r, ldy);
    }
    for (; r < n_rows; r++) {
        int t = 0;
        for (; t + KX_FT <= n_tok; t += KX_FT)
            kx_ftile(kf, 1, KX_FT, w + (size_t)r * rb, rb, K, x, ldx, t, y + r, ldy);
        for (; t < n_tok; t++)
            kx_ftile(kf, 1, 1, w + (size_t)r * rb, rb, K, x, ldx, t, y + r, ldy);
    }
}

#define KX_MM_F(name, kf) PLUME_MM_F_ENTRY(name, kx_mm_f, kf)
KX_MM_F(kx_mm_f32, PLUME_KF_F32)
KX_MM_F(kx_mm_f16, PLUME_KF_F16)
KX_MM_F(kx_mm_bf16, PLUME_KF_BF16)

/* a·b for n values, 16 at a time in two chains, then 8, then a scalar
 * tail; inlined where the attention kernels take q·k. */
KX_INLINE float kx_fdot(const float *a, const float *b, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float sum = kx_hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

static float kx_dotf(const float *a, const float *b, int n) { return kx_fdot(a, b, n); }

static void kx_axpy(float *y, float a, const float *x, int n)
{
    const __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

static void kx_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    double ss = kx_hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        ss += (double)x[i] * x[i];
    const float scale = (float)(1.0 / sqrt(ss / n + eps));
    const __m256 sv = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv),
                                                _mm256_loadu_ps(w + i)));
    for (; i < n; i++)
        out[i] = x[i] * scale * w[i];
}

static void kx_rope(float *v, int head_dim, const float *c, const float *s, int adjacent)
{
    const int half = head_dim / 2;
    int i = 0;
    if (adjacent) {
        const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
        for (; i + 4 <= half; i += 4) {
            const __m256 x = _mm256_loadu_ps(v + 2 * i);
            const __m256 cd = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(c + i)), dup);
            const __m256 sd = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + i)), dup);
            const __m256 xs = _mm256_permute_ps(x, 0xB1); /* swap pairs */
            /* even lanes x0*c - x1*s, odd lanes x1*c + x0*s */
            _mm256_storeu_ps(v + 2 * i, _mm256_fmaddsub_ps(x, cd, _mm256_mul_ps(xs, sd)));
        }
    } else {
        for (; i + 8 <= half; i += 8) {
            const __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
            const __m256 cv = _mm256_loadu_ps(c + i), sv = _mm256_loadu_ps(s + i);
            _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, cv, _mm256_mul_ps(x1, sv)));
            _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(x0, sv, _mm256_mul_ps(x1, cv)));
        }
    }
    for (; i < half; i++) {
        const int a = adjacent ? 2 * i : i;
        const int b = adjacent ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c[i] - x1 * s[i];
        v[b] = x0 * s[i] + x1 * c[i];
    }
}

/* e^x, Cephes expf's range reduction and polynomial (about 1 ulp); inputs
 * are clamped to [-87.3, 88.3] (results 1e-38 .. 2e38). */
KX_INLINE __m256 kx_exp(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n by building the exponent; n is in [-126, 127] */
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* silu(g) = g / (1 + e^-g) */
KX_INLINE __m256 kx_silu(__m256 g)
{
    const __m256 e = kx_exp(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
    return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* gelu_tanh(v) = v / (1 + e^(-2u)), u = sqrt(2/pi) (v + 0.044715 v^3) */
KX_INLINE __m256 kx_gelu(__m256 v)
{
    const __m256 u = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), v),
                                     _mm256_mul_ps(v, v), v);
    const __m256 e = kx_exp(_mm256_mul_ps(_mm256_set1_ps(-2.0f * 0.7978845608028654f), u));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* x[i] = act(x[i]) * y[i], 8 at a time; the last n % 8 through a padded
 * copy, so that every value gets the same arithmetic wherever it stands
 * (a row's bits do not depend on the batch around it). */
#define KX_GATED(name, act)                                                                       \
    static void name(float *x, const float *y, int n)                                             \
    {                                                                                             \
        int i = 0;                                                                                \
        for (; i + 8 <= n; i += 8)                                                                \
            _mm256_storeu_ps(x + i, _mm256_mul_ps(act(_mm256_loadu_ps(x + i)),                    \
                                                  _mm256_loadu_ps(y + i)));                       \
        if (i < n) {                                                                              \
            float xb[8] = {0}, yb[8] = {0};                                                       \
            memcpy(xb, x + i, sizeof(float) * (size_t)(n - i));                                   \
            memcpy(yb, y + i, sizeof(float) * (size_t)(n - i));                                   \
            _mm256_storeu_ps(xb, _mm256_mul_ps(act(_mm256_loadu_ps(xb)), _mm256_loadu_ps(yb)));   \
            memcpy(x + i, xb, sizeof(float) * (size_t)(n - i));                                   \
        }                                                                                         \
    }
KX_GATED(kx_swiglu, kx_silu)
KX_GATED(kx_geglu, kx_gelu)
#undef KX_GATED

/* s[i] = e^(s[i] - mx) for the n values (8 at a time by kx_exp, the last
 * n % 8 by expf); returns sum0 + the vectors' total, then plus each of the
 * last values in order. */
KX_INLINE float kx_exp_sum(float *s, int n, float mx, float sum0)
{
    const __m256 mv = _mm256_set1_ps(mx);
    __m256 sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = kx_exp(_mm256_sub_ps(_mm256_loadu_ps(s + i), mv));
        _mm256_storeu_ps(s + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    float total = sum0 + kx_hsum(sum);
    for (; i < n; i++) {
        s[i] = expf(s[i] - mx);
        total += s[i];
    }
    return total;
}

static float kx_softmax_exp(float *s, int n)
{
    float mx = -INFINITY;
    int i = 0;
    if (n >= 8) {
        __m256 m = _mm256_loadu_ps(s);
        for (i = 8; i + 8 <= n; i += 8)
            m = _mm256_max_ps(m, _mm256_loadu_ps(s + i));
        mx = kx_hmax(m);
    }
    for (; i < n; i++)
        mx = fmaxf(mx, s[i]);
    return kx_exp_sum(s, n, mx, 0.0f);
}

/* The attention kernels (kx_attn_*; KX_ZMM 1: also the 512-bit kz_attn_*). */
#ifndef KX_ZMM
#define KX_ZMM 0
#endif
#include "backend/cpu/attn_x86.h"

/* Streams bytes the way the matmul kernels stream weights: 256 bytes a
 * step, with kx_prefetch_ahead's software prefetch (without it this read
 * less than a decode step does). */
static float kx_read_sum(const void *buf, size_t bytes)
{
    const __m256i *p = buf;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < bytes / 32; i += 8) {
        kx_prefetch_ahead((const uint8_t *)(p + i), 256);
        a0 = _mm256_xor_si256(a0, _mm256_xor_si256(_mm256_load_si256(p + i), _mm256_load_si256(p + i + 1)));
        a1 = _mm256_xor_si256(a1, _mm256_xor_si256(_mm256_load_si256(p + i + 2), _mm256_load_si256(p + i + 3)));
        a2 = _mm256_xor_si256(a2, _mm256_xor_si256(_mm256_load_si256(p + i + 4), _mm256_load_si256(p + i + 5)));
        a3 = _mm256_xor_si256(a3, _mm256_xor_si256(_mm256_load_si256(p + i + 6), _mm256_load_si256(p + i + 7)));
    }
    const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (float)(uint32_t)_mm256_extract_epi32(a, 0);
}

/* plume_fp32_to_fp16 eight at a time: F16C's conversion rounds to
 * nearest even, overflows to infinity and rounds subnormals as the scalar
 * form does; only a NaN differs (F16C keeps its payload's top bits), so a
 * group of eight holding one goes through the scalar form. */
static void kx_f32_to_f16(const float *x, uint16_t *h, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int j = i; j < i + 8; j++)
                h[j] = plume_fp32_to_fp16(x[j]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        h[i] = plume_fp32_to_fp16(x[i]);
}

/* dispatch.h's kv_i8, 8 values at a time: the max ignores a NaN as the
 * scalar comparison does (maxps returns its second operand when either is
 * NaN), roundps rounds to nearest even as nearbyintf does by default, and
 * the clamp and the NaN-to-0 follow. */
static void kx_kv_i8(const float *x, int n, int8_t *q, float *d)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mx = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8)
        mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absm), mx);
    _Alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mx);
    float amax = 0.0f;
    for (int l = 0; l < 8; l++)
        amax = lanes[l] > amax ? lanes[l] : amax;
    for (int j = i; j < n; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id), hi = _mm256_set1_ps(127.0f);
    const __m256 lo = _mm256_set1_ps(-127.0f);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vid),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256 ok = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
        v = _mm256_and_ps(_mm256_max_ps(_mm256_min_ps(v, hi), lo), ok);
        const __m256i i32 = _mm256_cvtps_epi32(v);
        const __m128i i16 =
            _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
        _mm_storel_epi64((__m128i *)(q + i), _mm_packs_epi16(i16, i16));
    }
    for (; i < n; i++)
        q[i] = plume_kv_i8_value(x[i], id);
    *d = amax / 127.0f;
}

/* ---- what each level's plume_kernels table takes from here ---- */

/* The asm text of a peak microbenchmark's loop body: twelve independent
 * instructions `insn %reg0, %reg1, %regN`, N = 4 .. 15 (reg "ymm" or
 * "zmm"), each accumulating into its own register; KX_CHAINS12_CLOBBERS
 * names those registers for the asm statement. */
#define KX_CHAINS12(insn, reg)                                                                     \
    insn " %%" reg "0, %%" reg "1, %%" reg "4\n\t"                                                 \
    insn " %%" reg "0, %%" reg "1, %%" reg "5\n\t"                                                 \
    insn " %%" reg "0, %%" reg "1, %%" reg "6\n\t"                                                 \
    insn " %%" reg "0, %%" reg "1, %%" reg "7\n\t"                                                 \
    insn " %%" reg "0, %%" reg "1, %%" reg "8\n\t"                                                 \
    insn " %%" reg "0, %%" reg "1, %%" reg "9\n\t"                                                 \
    insn " %%" reg "0, %%" reg "1, %%" reg "10\n\t"                                                \
    insn " %%" reg "0, %%" reg "1, %%" reg "11\n\t"                                                \
    insn " %%" reg "0, %%" reg "1, %%" reg "12\n\t"                                                \
    insn " %%" reg "0, %%" reg "1, %%" reg "13\n\t"                                                \
    insn " %%" reg "0, %%" reg "1, %%" reg "14\n\t"                                                \
    insn " %%" reg "0, %%" reg "1, %%" reg "15\n\t"
#define KX_CHAINS12_CLOBBERS                                                                       \
    "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",  \
        "xmm15"

/* The plume_kernels entries every x86 level takes from this file, for its
 * table's initializer; the including file adds .level, .mm_q, .mm_r and
 * its peaks. */
#define KX_SHARED_KERNELS                                                                          \
    .quantize_q8 = kx_quantize_q8, .quantize_q8_sums = kx_quantize_q8_sums,                        \
    .mm_f = {kx_mm_f32, kx_mm_f16, kx_mm_bf16}, .dot = kx_dotf,                                    \
    .axpy = kx_axpy, .rmsnorm = kx_rmsnorm, .rope = kx_rope, .swiglu = kx_swiglu, .geglu = kx_geglu,\
    .attn_step = kx_attn_step, .attn_partial = kx_attn_partial, .attn_merge = kx_attn_merge,       \
    .attn_paged = kx_attn_paged, .attn_paged_tile = kx_attn_paged_tile,                            \
    .softmax_exp = kx_softmax_exp, .f32_to_f16 = kx_f32_to_f16, .kv_i8 = kx_kv_i8,                 \
    .read_sum = kx_read_sum
