/* The attention kernels of the x86 levels (dispatch.h: attn_step,
 * attn_partial, attn_merge, attn_paged, attn_paged_tile), included by
 * kernels_x86.h once per level (AVX2, AVX-512) after its helpers (kx_hsum,
 * kx_hmax, kx_fdot, kx_exp, kx_exp_sum, kx_axpy, KX_INLINE). */
#ifndef PLUME_CPU_ATTN_X86_H
#define PLUME_CPU_ATTN_X86_H

#include "backend/cpu/attn_tile.h"

/* Keys per slice of the attention kernels (scores on the stack). */
#define KX_ATTN_SLICE 64

/* One query over the ns (<= KX_ATTN_SLICE) keys/values at kp[i] / vp[i]:
 * folds them into the running max *m, sum *l and unnormalized o[hd]. */
KX_INLINE void kx_attn_slice(const float *q, const float *const *kp, const float *const *vp,
                             int ns, int hd, float scale, float *m, float *l, float *o)
{
    _Alignas(32) float p[KX_ATTN_SLICE];
    float mx = *m;
    int i = 0;
    if ((hd & 7) == 0) { /* 8 keys at a time, their sums reduced together */
        const __m256 sv = _mm256_set1_ps(scale);
        __m256 mxv = _mm256_set1_ps(mx);
        for (; i + 8 <= ns; i += 8) {
            __m256 a[8], b[8]; /* two chains per key: columns 0-7 and 8-15 mod 16 */
            const __m256 q0 = _mm256_loadu_ps(q);
            for (int r = 0; r < 8; r++) {
                a[r] = _mm256_mul_ps(q0, _mm256_loadu_ps(kp[i + r]));
                b[r] = _mm256_setzero_ps();
            }
            int c = 8;
            for (; c + 16 <= hd; c += 16) {
                const __m256 qb = _mm256_loadu_ps(q + c), qa = _mm256_loadu_ps(q + c + 8);
                for (int r = 0; r < 8; r++) {
                    b[r] = _mm256_fmadd_ps(qb, _mm256_loadu_ps(kp[i + r] + c), b[r]);
                    a[r] = _mm256_fmadd_ps(qa, _mm256_loadu_ps(kp[i + r] + c + 8), a[r]);
                }
            }
            if (c < hd) {
                const __m256 qb = _mm256_loadu_ps(q + c);
                for (int r = 0; r < 8; r++)
                    b[r] = _mm256_fmadd_ps(qb, _mm256_loadu_ps(kp[i + r] + c), b[r]);
            }
            for (int r = 0; r < 8; r++)
                a[r] = _mm256_add_ps(a[r], b[r]);
            const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
            const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
            const __m256 sc = _mm256_mul_ps(_mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                                          _mm256_permute2f128_ps(u0, u1, 0x31)),
                                            sv);
            _mm256_store_ps(p + i, sc);
            mxv = _mm256_max_ps(mxv, sc);
        }
        mx = kx_hmax(mxv);
    }
    for (; i < ns; i++) {
        p[i] = kx_fdot(q, kp[i], hd) * scale;
        mx = p[i] > mx ? p[i] : mx;
    }
    const float c = expf(*m - mx); /* 0 on the first slice */
    if (c != 1.0f) {
        const __m256 cv = _mm256_set1_ps(c);
        int d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), cv));
        for (; d < hd; d++)
            o[d] *= c;
    }
    const float sum = kx_exp_sum(p, ns, mx, *l * c);
    if (hd == 64) { /* the common head size: o in registers, even and odd keys
                       * in separate chains (FMA latency) */
        __m256 acc[8], acc2[8];
        for (int d = 0; d < 8; d++) {
            acc[d] = _mm256_loadu_ps(o + 8 * d);
            acc2[d] = _mm256_setzero_ps();
        }
        for (i = 0; i + 2 <= ns; i += 2) {
            const __m256 pv = _mm256_set1_ps(p[i]), pw = _mm256_set1_ps(p[i + 1]);
            for (int d = 0; d < 8; d++) {
                acc[d] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vp[i] + 8 * d), acc[d]);
                acc2[d] = _mm256_fmadd_ps(pw, _mm256_loadu_ps(vp[i + 1] + 8 * d), acc2[d]);
            }
        }
        if (i < ns) {
            const __m256 pv = _mm256_set1_ps(p[i]);
            for (int d = 0; d < 8; d++)
                acc[d] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(vp[i] + 8 * d), acc[d]);
        }
        for (int d = 0; d < 8; d++)
            _mm256_storeu_ps(o + 8 * d, _mm256_add_ps(acc[d], acc2[d]));
    } else {
        for (i = 0; i < ns; i++)
            kx_axpy(o, p[i], vp[i], hd);
    }
    *m = mx;
    *l = sum;
}

/* Slice by slice, every query of the group in turn, so that the slice's
 * keys and values are read from memory once and from L1 for the others. */
static void kx_attn_step(const float *q, int nq, const float *k, const float *v, int64_t stride,
                         int n, int hd, float scale, float *m, float *l, float *o)
{
    const float *kp[KX_ATTN_SLICE], *vp[KX_ATTN_SLICE];
    for (int i0 = 0; i0 < n; i0 += KX_ATTN_SLICE) {
        const int ns = n - i0 < KX_ATTN_SLICE ? n - i0 : KX_ATTN_SLICE;
        for (int i = 0; i < ns; i++) {
            kp[i] = k + (size_t)(i0 + i) * stride;
            vp[i] = v + (size_t)(i0 + i) * stride;
        }
        for (int qi = 0; qi < nq; qi++)
            kx_attn_slice(q + (size_t)qi * hd, kp, vp, ns, hd, scale, m + qi, l + qi,
                          o + (size_t)qi * hd);
    }
}

/* f16 rows are converted a slice at a time into this many floats (K and V
 * each), so a slice holds min(KX_ATTN_SLICE, KX_ATTN_F16_BUF / hd) keys. */
#define KX_ATTN_F16_BUF 4096

/* Points kp[i] / vp[i] (i < ns) at the K/V rows of positions p0 .. p0+ns-1
 * of a paged cache, walking the block table block by block; f16 and int8
 * rows (dispatch.h: PLUME_KV_TYPE_*) are converted into kbuf / vbuf (ns * hd
 * floats each) first, int8 as value x the row's scale (one rounding). */
KX_INLINE void kx_gather_kv(const void *k, const void *v, int64_t stride, int kv_type,
                            const int32_t *block_table, int block_size, int p0, int ns, int hd,
                            float *kbuf, float *vbuf, const float **kp, const float **vp)
{
    for (int i = 0; i < ns;) { /* block by block */
        const int p = p0 + i, in = p % block_size;
        int cnt = block_size - in;
        if (cnt > ns - i)
            cnt = ns - i;
        const size_t slot = plume_attn_slot(block_table, block_size, p);
        for (int e = 0; e < cnt; e++, i++) {
            const size_t off = (slot + (size_t)e) * (size_t)stride;
            if (!kv_type) {
                kp[i] = (const float *)k + off;
                vp[i] = (const float *)v + off;
                continue;
            }
            float *kd = kbuf + (size_t)i * hd, *vd = vbuf + (size_t)i * hd;
            int d = 0;
            if (kv_type == PLUME_KV_TYPE_I8) {
                const int8_t *k8 = (const int8_t *)k + off, *v8 = (const int8_t *)v + off;
                float ks, vs;
                memcpy(&ks, k8 + PLUME_KV_I8_SCALE_AT(hd), sizeof ks);
                memcpy(&vs, v8 + PLUME_KV_I8_SCALE_AT(hd), sizeof vs);
                const __m256 ksv = _mm256_set1_ps(ks), vsv = _mm256_set1_ps(vs);
                for (; d + 8 <= hd; d += 8) {
                    const __m256i kq = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(k8 + d)));
                    const __m256i vq = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(v8 + d)));
                    _mm256_storeu_ps(kd + d, _mm256_mul_ps(_mm256_cvtepi32_ps(kq), ksv));
                    _mm256_storeu_ps(vd + d, _mm256_mul_ps(_mm256_cvtepi32_ps(vq), vsv));
                }
                for (; d < hd; d++) {
                    kd[d] = (float)k8[d] * ks;
                    vd[d] = (float)v8[d] * vs;
                }
                kp[i] = kd;
                vp[i] = vd;
                continue;
            }
            const uint16_t *k16 = (const uint16_t *)k + off, *v16 = (const uint16_t *)v + off;
            for (; d + 8 <= hd; d += 8) {
                _mm256_storeu_ps(kd + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k16 + d))));
                _mm256_storeu_ps(vd + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v16 + d))));
            }
            for (; d < hd; d++) {
                kd[d] = _cvtsh_ss(k16[d]);
                vd[d] = _cvtsh_ss(v16[d]);
            }
            kp[i] = kd;
            vp[i] = vd;
        }
    }
}

/* Keys per slice: KX_ATTN_SLICE, halved while a slice of f16 rows would not
 * fit the conversion buffers; always a power of two, so that slices tile
 * the split-K chunks (PLUME_ATTN_CHUNK) exactly. */
KX_INLINE int kx_attn_slice_len(int kv_type, int hd)
{
    int slice = KX_ATTN_SLICE;
    while (kv_type && slice > 1 && slice * hd > KX_ATTN_F16_BUF)
        slice >>= 1;
    return slice;
}

/* attn_partial on 256-bit vectors.  Slices start at absolute multiples of
 * the slice length; each is gathered once for the tile and a row folds
 * only the keys of its own range. */
static void kx_attn_partial_ymm(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                            const void *v, int64_t stride, int kv_type,
                            const int32_t *block_table, int block_size, int n_pos0, int hd,
                            float scale, int window, int c0, float *m, float *l, float *o)
{
    const float *kp[KX_ATTN_SLICE], *vp[KX_ATTN_SLICE];
    _Alignas(32) float kbuf[KX_ATTN_F16_BUF], vbuf[KX_ATTN_F16_BUF];
    const int slice = kx_attn_slice_len(kv_type, hd);
    const plume_attn_range rg =
        plume_attn_partial_begin(nr, nq, hd, n_pos0, window, c0, slice, m, l, o);
    const int end = rg.end, lo0 = rg.lo0;
    for (int p0 = rg.p0; p0 < end; p0 += slice) {
        const int g = p0 > lo0 ? p0 : lo0; /* gathered: g .. e-1 */
        const int e = end - p0 < slice ? end : p0 + slice;
        kx_gather_kv(k, v, stride, kv_type, block_table, block_size, g, e - g, hd, kbuf, vbuf, kp, vp);
        for (int r = 0; r < nr; r++) {
            int a, er;
            if (!plume_attn_row_keys(n_pos0 + r, window, p0, e, &a, &er))
                continue;
            for (int qi = 0; qi < nq; qi++)
                kx_attn_slice(q + (size_t)r * q_stride + (size_t)qi * hd, kp + (a - g), vp + (a - g),
                              er - a, hd, scale, m + r * nq + qi, l + r * nq + qi,
                              o + (size_t)(r * nq + qi) * hd);
        }
    }
}

/* ---- Multi-query attention on the level's widest vectors (kz_*): 16
 * lanes at the avx512 level (KX_ZMM), 8 at avx2; head_dim a multiple of
 * the width ----
 * Per slice, each row's queries in blocks of up to KZ_NQ are folded
 * together: every key and value row is loaded (f16 converted, int8 times its
 * scale, in registers) once per block and used by each query of it.  A
 * query's score for a key is its product vector (an FMA chain over the
 * head's columns of KZ_W values) summed by a fixed shuffle tree that reduces
 * KZ_W keys' vectors at once (kz_scores), so no per-key horizontal add; the
 * softmax of the slice's scores is a vector exp; each value column is one
 * FMA chain over the keys.  All of it per (query, key) is the same
 * arithmetic whatever the block, tile, chunking or split: a row's bits
 * depend only on the row. */
#ifndef KZ_PF_HINT
#define KZ_PF_HINT _MM_HINT_T0
#endif

#if KX_ZMM
#define KZ_W 16
#define KZ_NQ 4 /* 4 queries x 4 columns of 16 accumulate in 16 of 32 registers */
/* value columns per pass for NQ queries: 8 x 16 for one or two (16 of 32
 * registers), else 4 */
#define KZ_VC(NQ) ((NQ) <= 2 ? 8 : 4)
typedef __m512 kz_v;
#define kz_load _mm512_loadu_ps
#define kz_loada _mm512_load_ps
#define kz_store _mm512_storeu_ps
#define kz_storea _mm512_store_ps
#define kz_set1 _mm512_set1_ps
#define kz_zero _mm512_setzero_ps
#define kz_mul _mm512_mul_ps
#define kz_add _mm512_add_ps
#define kz_sub _mm512_sub_ps
#define kz_fma _mm512_fmadd_ps
#define kz_max _mm512_max_ps

/* e^x on 16 lanes: kx_exp's Cephes reduction and polynomial. */
KX_INLINE __m512 kz_exp(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* 16 values of a K/V row from column c: f32, f16 (exact) or int8 x scale
 * (one rounding, as kx_gather_kv). */
KX_INLINE __m512 kz_row(const int kt, const char *row, int c, __m512 sc)
{
    if (kt == PLUME_KV_TYPE_F32)
        return _mm512_loadu_ps((const float *)row + c);
    if (kt == PLUME_KV_TYPE_F16)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + c)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                             _mm_loadu_si128((const __m128i *)((const int8_t *)row + c)))), sc);
}

/* x where lane < n (n <= 16), else y. */
KX_INLINE __m512 kz_select(__m512 x, __m512 y, int n)
{
    return _mm512_mask_mov_ps(y, (__mmask16)(n >= 16 ? 0xFFFF : (1u << n) - 1), x);
}
KX_INLINE float kz_hmax(__m512 v) { return _mm512_reduce_max_ps(v); }
KX_INLINE float kz_hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

/* The tree's levels: two vectors of partial sums of 2^k keys each -> one of
 * 2^(k+1) keys, each key's lanes halved by adding pairs. */
KX_INLINE __m512 kz_l1(__m512 a, __m512 b) /* lanes 0-7 of a key + 8-15 */
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
}
KX_INLINE __m512 kz_l2(__m512 a, __m512 b) /* 128-bit chunks 0+1, 2+3 */
{
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
}
KX_INLINE __m512 kz_l3(__m512 a, __m512 b) /* lanes 0+1, 2+3 of each chunk */
{
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}
/* Two quads' vectors (kz_l2 of pairs: keys 4u .. 4u+3, one per chunk) ->
 * 8 keys; two of those -> the 16 keys' sums, in key order. */
#define kz_lq kz_l2
KX_INLINE __m512 kz_oct(__m512 c0, __m512 c1) { return kz_l3(c0, c1); }
KX_INLINE __m512 kz_final(__m512 d0, __m512 d1)
{
    /* lane 4i + t holds key 4t + i */
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, kz_l3(d0, d1));
}
#else
#define KZ_W 8
#define KZ_NQ 2 /* 2 queries x 4 columns of 8 accumulate in 8 of 16 registers */
/* value columns per pass for NQ queries: 8 x 8 for one (8 of 16
 * registers), else 4 */
#define KZ_VC(NQ) ((NQ) == 1 ? 8 : 4)
typedef __m256 kz_v;
#define kz_load _mm256_loadu_ps
#define kz_loada _mm256_load_ps
#define kz_store _mm256_storeu_ps
#define kz_storea _mm256_store_ps
#define kz_set1 _mm256_set1_ps
#define kz_zero _mm256_setzero_ps
#define kz_mul _mm256_mul_ps
#define kz_add _mm256_add_ps
#define kz_sub _mm256_sub_ps
#define kz_fma _mm256_fmadd_ps
#define kz_max _mm256_max_ps
#define kz_exp kx_exp

/* 8 values of a K/V row from column c: f32, f16 (exact) or int8 x scale
 * (one rounding, as kx_gather_kv). */
KX_INLINE __m256 kz_row(const int kt, const char *row, int c, __m256 sc)
{
    if (kt == PLUME_KV_TYPE_F32)
        return _mm256_loadu_ps((const float *)row + c);
    if (kt == PLUME_KV_TYPE_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + c)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                             _mm_loadl_epi64((const __m128i *)((const int8_t *)row + c)))), sc);
}

/* x where lane < n (n <= 8), else y. */
KX_INLINE __m256 kz_select(__m256 x, __m256 y, int n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_blendv_ps(y, x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
}
#define kz_hmax kx_hmax
#define kz_hsum kx_hsum

/* The tree's levels (as the 512-bit ones, on 8 lanes). */
KX_INLINE __m256 kz_l1(__m256 a, __m256 b) /* lanes 0-3 of a key + 4-7 */
{
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
KX_INLINE __m256 kz_l3(__m256 a, __m256 b) /* lanes 0+1, 2+3 of each half */
{
    return _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xDD));
}
/* Two quads (kz_l3 of pairs: keys 4u .. 4u+3, half h lane i holding key
 * 2i + h's half sums) -> the 8 keys' sums, in key order. */
#define kz_lq kz_l3
KX_INLINE __m256 kz_final8(__m256 c0, __m256 c1)
{
    /* half h, lane i holds key 2i + h */
    return _mm256_permutevar8x32_ps(kz_l3(c0, c1), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
#endif

/* The product vectors a[qi] of NQ queries (q[qi*hd]) and one key row (an
 * FMA chain over its columns), each column converted once for all the
 * queries. */
KX_INLINE void kz_qk(const int kt, const int NQ, const int hd, const float *q, const char *k,
                     kz_v ks, kz_v *a)
{
    for (int c = 0; c < hd; c += KZ_W) {
        const kz_v kc = kz_row(kt, k, c, ks);
        for (int qi = 0; qi < NQ; qi++)
            a[qi] = c == 0 ? kz_mul(kz_load(q + (size_t)qi * hd), kc)
                           : kz_fma(kz_load(q + (size_t)qi * hd + c), kc, a[qi]);
    }
}

/* Rows to prefetch while a slice is folded: the next slice's K rows pk[j]
 * and V rows pv[j] (j < n), each rb bytes. */
typedef struct kz_pf {
    const char *const *pk, *const *pv;
    int n, rb;
} kz_pf;

/* Asks for the lines of one rb-byte row at p. */
KX_INLINE void kz_prefetch_row(const char *p, int rb)
{
    const uintptr_t a = (uintptr_t)p;
    for (uintptr_t b = 0; b < (a & 63) + (uintptr_t)rb; b += 64)
        _mm_prefetch((const char *)((a & ~(uintptr_t)63) + b), KZ_PF_HINT);
}

/* Asks for pf's K and V rows from..n-1 at once. */
KX_INLINE void kz_prefetch_rest(const kz_pf *pf, int from)
{
    for (int j = from; j < pf->n; j++) {
        kz_prefetch_row(pf->pk[j], pf->rb);
        kz_prefetch_row(pf->pv[j], pf->rb);
    }
}

/* kz_l1 of keys j and j+1's product vectors (0 for a key >= nk), per
 * query; the K rows j and j+1 of pf (if any) are prefetched. */
KX_INLINE void kz_pair(const int kt, const int NQ, const int hd, const float *q,
                       const char *const *kp, const float *ksc, int nk, int j, kz_v *b,
                       const kz_pf *pf)
{
    kz_v a0[KZ_NQ], a1[KZ_NQ];
    for (int qi = 0; qi < NQ; qi++)
        a0[qi] = a1[qi] = kz_zero();
    if (j < pf->n)
        kz_prefetch_row(pf->pk[j], pf->rb);
    if (j + 1 < pf->n)
        kz_prefetch_row(pf->pk[j + 1], pf->rb);
    if (j < nk)
        kz_qk(kt, NQ, hd, q, kp[j], kt == PLUME_KV_TYPE_I8 ? kz_set1(ksc[j]) : kz_zero(), a0);
    if (j + 1 < nk)
        kz_qk(kt, NQ, hd, q, kp[j + 1], kt == PLUME_KV_TYPE_I8 ? kz_set1(ksc[j + 1]) : kz_zero(), a1);
    for (int qi = 0; qi < NQ; qi++)
        b[qi] = kz_l1(a0[qi], a1[qi]);
}

/* Keys j .. j+3 reduced to one vector per query (kz_lq of two pairs). */
KX_INLINE void kz_quad(const int kt, const int NQ, const int hd, const float *q,
                       const char *const *kp, const float *ksc, int nk, int j, kz_v *c,
                       const kz_pf *pf)
{
    kz_v b0[KZ_NQ], b1[KZ_NQ];
    kz_pair(kt, NQ, hd, q, kp, ksc, nk, j, b0, pf);
    kz_pair(kt, NQ, hd, q, kp, ksc, nk, j + 2, b1, pf);
    for (int qi = 0; qi < NQ; qi++)
        c[qi] = kz_lq(b0[qi], b1[qi]);
}

/* Scores (unscaled) of NQ queries q[qi*hd] against keys kp[0..nk) (nk <=
 * KZ_W; missing keys score 0) into s[qi*sstride + j]: per key its product
 * vector, reduced KZ_W keys at once by the tree (pairs, quads, ...), each
 * level as soon as its inputs exist.  pf's K rows 0..KZ_W-1 are prefetched
 * on the way. */
KX_INLINE void kz_scores(const int kt, const int NQ, const int hd, const float *q,
                         const char *const *kp, const float *ksc, int nk, float *s, int sstride,
                         const kz_pf *pf)
{
    kz_v c0[KZ_NQ], c1[KZ_NQ];
#if KX_ZMM
    kz_v d0[KZ_NQ];
    kz_quad(kt, NQ, hd, q, kp, ksc, nk, 0, c0, pf);
    kz_quad(kt, NQ, hd, q, kp, ksc, nk, 4, c1, pf);
    for (int qi = 0; qi < NQ; qi++)
        d0[qi] = kz_oct(c0[qi], c1[qi]);
    kz_quad(kt, NQ, hd, q, kp, ksc, nk, 8, c0, pf);
    kz_quad(kt, NQ, hd, q, kp, ksc, nk, 12, c1, pf);
    for (int qi = 0; qi < NQ; qi++)
        kz_storea(s + (size_t)qi * sstride, kz_final(d0[qi], kz_oct(c0[qi], c1[qi])));
#else
    kz_quad(kt, NQ, hd, q, kp, ksc, nk, 0, c0, pf);
    kz_quad(kt, NQ, hd, q, kp, ksc, nk, 4, c1, pf);
    for (int qi = 0; qi < NQ; qi++)
        kz_storea(s + (size_t)qi * sstride, kz_final8(c0[qi], c1[qi]));
#endif
}

/* Folds keys/values kp[j] / vp[j] (j < n <= KX_ATTN_SLICE; int8 rows
 * with scales ksc[j] / vsc[j]) into NQ queries' running max m, sum l and
 * unnormalized output o ([NQ][hd]); q is [NQ][hd].  The rows of pf (the
 * next slice's, or none) are prefetched a key or two at a time along the
 * way, K rows with the scores and V rows with the values, so that the
 * memory works while the arithmetic does (asked all at once, they filled
 * the core's line fill buffers and the kernel waited on them, then folded
 * with no read in flight). */
KX_INLINE void kz_fold(const int kt, const int NQ, const int hd, const float *q,
                       const char *const *kp, const char *const *vp, const float *ksc,
                       const float *vsc, int n, float scale, float *m, float *l, float *o,
                       const kz_pf *pf)
{
    _Alignas(64) float s[KZ_NQ][KX_ATTN_SLICE];
    for (int j0 = 0; j0 < n; j0 += KZ_W) {
        const kz_pf pj = {pf->pk + j0, pf->pv + j0, pf->n - j0, pf->rb};
        kz_scores(kt, NQ, hd, q, kp + j0, ksc + j0, n - j0 < KZ_W ? n - j0 : KZ_W, &s[0][j0],
                  KX_ATTN_SLICE, &pj);
    }
    const kz_v sv = kz_set1(scale);
    for (int qi = 0; qi < NQ; qi++) {
        kz_v mv = kz_set1(m[qi]);
        for (int j0 = 0; j0 < n; j0 += KZ_W) {
            const kz_v x = kz_mul(kz_loada(&s[qi][j0]), sv);
            kz_storea(&s[qi][j0], x);
            mv = kz_select(kz_max(mv, x), mv, n - j0);
        }
        const float mx = kz_hmax(mv);
        const float c = expf(m[qi] - mx); /* 0 on the first slice */
        mv = kz_set1(mx);
        kz_v sum = kz_zero();
        for (int j0 = 0; j0 < n; j0 += KZ_W) {
            const kz_v e = kz_select(kz_exp(kz_sub(kz_loada(&s[qi][j0]), mv)), kz_zero(), n - j0);
            kz_storea(&s[qi][j0], e);
            sum = kz_add(sum, e);
        }
        l[qi] = l[qi] * c + kz_hsum(sum);
        m[qi] = mx;
        if (c != 1.0f) {
            float *oq = o + (size_t)qi * hd;
            for (int d = 0; d < hd; d += KZ_W)
                kz_store(oq + d, kz_mul(kz_load(oq + d), kz_set1(c)));
        }
    }
    /* o[qi] += p[qi][j] v_j, KZ_VC(NQ) columns at a time, every value row
     * converted once per block for all its queries.  Each column is one FMA
     * chain over the keys, so with one query and 4 columns a key waited on
     * the FMA latency (128-wide heads in cache: 8 ns a key, against 3.3
     * per query with 4 queries); the columns taken together do not change
     * any value's arithmetic. */
    for (int d0 = 0; d0 < hd; d0 += KZ_VC(NQ) * KZ_W) {
        const int nc = hd - d0 < KZ_VC(NQ) * KZ_W ? (hd - d0) / KZ_W : KZ_VC(NQ);
        kz_v acc[KZ_NQ][8];
        for (int qi = 0; qi < NQ; qi++)
            for (int c = 0; c < nc; c++)
                acc[qi][c] = kz_load(o + (size_t)qi * hd + d0 + KZ_W * c);
        for (int j = 0; j < n; j++) {
            if (d0 == 0 && j < pf->n)
                kz_prefetch_row(pf->pv[j], pf->rb);
            const kz_v vs = kt == PLUME_KV_TYPE_I8 ? kz_set1(vsc[j]) : kz_zero();
            kz_v vr[8];
            for (int c = 0; c < nc; c++)
                vr[c] = kz_row(kt, vp[j], d0 + KZ_W * c, vs);
            for (int qi = 0; qi < NQ; qi++) {
                const kz_v p = kz_set1(s[qi][j]);
                for (int c = 0; c < nc; c++)
                    acc[qi][c] = kz_fma(p, vr[c], acc[qi][c]);
            }
        }
        for (int qi = 0; qi < NQ; qi++)
            for (int c = 0; c < nc; c++)
                kz_store(o + (size_t)qi * hd + d0 + KZ_W * c, acc[qi][c]);
    }
    kz_prefetch_rest(pf, n); /* a short slice: the next one's rows beyond it */
}

/* kz_fold with the block size, cache type and (64 or 128, the common head
 * sizes: unrolled) head size as constants. */
#define KZ_FOLD_NQ(kt, hd)                                                                      \
    switch (nq) {                                                                               \
    case 1: kz_fold(kt, 1, hd, q, kp, vp, ksc, vsc, n, scale, m, l, o, pf); break;             \
    case 2: kz_fold(kt, 2, hd, q, kp, vp, ksc, vsc, n, scale, m, l, o, pf); break;             \
    case 3:                                                                                     \
        kz_fold(kt, 3 < KZ_NQ ? 3 : KZ_NQ, hd, q, kp, vp, ksc, vsc, n, scale, m, l, o, pf);     \
        break;                                                                                  \
    default: kz_fold(kt, KZ_NQ, hd, q, kp, vp, ksc, vsc, n, scale, m, l, o, pf); break;        \
    }
#define KZ_FOLD_HD(kt)                                                                        \
    if (hd == 64) {                                                                           \
        KZ_FOLD_NQ(kt, 64)                                                                    \
    } else if (hd == 128) {                                                                   \
        KZ_FOLD_NQ(kt, 128)                                                                   \
    } else if (hd == 256) {                                                                   \
        KZ_FOLD_NQ(kt, 256)                                                                   \
    } else {                                                                                  \
        KZ_FOLD_NQ(kt, hd)                                                                    \
    }
static void kz_fold_any(int kt, int nq, int hd, const float *q, const char *const *kp,
                        const char *const *vp, const float *ksc, const float *vsc, int n,
                        float scale, float *m, float *l, float *o, const kz_pf *pf)
{
    if (kt == PLUME_KV_TYPE_F16) {
        KZ_FOLD_HD(PLUME_KV_TYPE_F16)
    } else if (kt == PLUME_KV_TYPE_I8) {
        KZ_FOLD_HD(PLUME_KV_TYPE_I8)
    } else {
        KZ_FOLD_HD(PLUME_KV_TYPE_F32)
    }
}
#undef KZ_FOLD_HD
#undef KZ_FOLD_NQ

/* dispatch.h: attn_partial on KZ_W-lane vectors (head_dim % KZ_W == 0): slices
 * of KX_ATTN_SLICE keys at absolute multiples of it; each slice's row
 * pointers (and int8 scales) are looked up once for the tile, and each row
 * folds the keys of its own range, its queries KZ_NQ at a time. */
static void kz_attn_partial(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                            const void *v, int64_t stride, int kv_type,
                            const int32_t *block_table, int block_size, int n_pos0, int hd,
                            float scale, int window, int c0, float *m, float *l, float *o)
{
    /* this slice's rows and the next one's (looked up a slice ahead, for
     * the prefetch, then taken over) */
    const char *rows[4][KX_ATTN_SLICE];
    const char **kp = rows[0], **vp = rows[1], **nkp = rows[2], **nvp = rows[3];
    int next_at = -1, next_n = 0; /* what nkp / nvp hold: next_n rows from next_at */
    float ksc[KX_ATTN_SLICE], vsc[KX_ATTN_SLICE];
    _Alignas(64) float kbuf[KX_ATTN_F16_BUF], vbuf[KX_ATTN_F16_BUF];
    const size_t esz = kv_type == PLUME_KV_TYPE_F32 ? 4 : kv_type == PLUME_KV_TYPE_F16 ? 2 : 1;
    const size_t slot_bytes = (size_t)stride * esz;
    const int row_bytes = hd * (int)esz + (kv_type == PLUME_KV_TYPE_I8 ? 4 : 0);
    const plume_attn_range rg =
        plume_attn_partial_begin(nr, nq, hd, n_pos0, window, c0, KX_ATTN_SLICE, m, l, o);
    const int n_max = rg.n_max, end = rg.end, lo0 = rg.lo0;
    for (int p0 = rg.p0; p0 < end; p0 += KX_ATTN_SLICE) {
        const int g = p0 > lo0 ? p0 : lo0; /* looked up: g .. e-1 */
        const int e = end - p0 < KX_ATTN_SLICE ? end : p0 + KX_ATTN_SLICE;
        if (next_at == g && next_n >= e - g) { /* the last slice looked these up */
            const char **t = kp;
            kp = nkp, nkp = t;
            t = vp, vp = nvp, nvp = t;
        } else {
            plume_attn_rows(k, v, slot_bytes, block_table, block_size, g, e - g, kp, vp);
        }
        if (kv_type == PLUME_KV_TYPE_I8)
            for (int i = 0; i < e - g; i++) {
                memcpy(&ksc[i], kp[i] + PLUME_KV_I8_SCALE_AT(hd), sizeof(float));
                memcpy(&vsc[i], vp[i] + PLUME_KV_I8_SCALE_AT(hd), sizeof(float));
            }
        /* the next slice's rows are strided and in blocks anywhere: the
         * first fold of this slice asks for them as it goes (kz_fold) */
        const int pe = n_max - e < KX_ATTN_SLICE ? n_max : e + KX_ATTN_SLICE;
        next_at = e;
        next_n = pe > e ? pe - e : 0;
        plume_attn_rows(k, v, slot_bytes, block_table, block_size, e, next_n, nkp, nvp);
        kz_pf pf = {nkp, nvp, next_n, row_bytes};
        int kt = kv_type;
        if (nr > 1 && kv_type != PLUME_KV_TYPE_F32 && hd * KX_ATTN_SLICE <= KX_ATTN_F16_BUF) {
            /* several rows: convert the slice once for all of them (f16
             * exactly, int8 with kz_row's rounding: the same bits) */
            const float *fk[KX_ATTN_SLICE], *fv[KX_ATTN_SLICE];
            kx_gather_kv(k, v, stride, kv_type, block_table, block_size, g, e - g, hd, kbuf, vbuf,
                         fk, fv);
            for (int i = 0; i < e - g; i++) {
                kp[i] = (const char *)fk[i];
                vp[i] = (const char *)fv[i];
            }
            kt = PLUME_KV_TYPE_F32;
        }
        for (int r = 0; r < nr; r++) {
            int a, er;
            if (!plume_attn_row_keys(n_pos0 + r, window, p0, e, &a, &er))
                continue;
            for (int q0 = 0; q0 < nq; q0 += KZ_NQ) {
                const int i = r * nq + q0;
                kz_fold_any(kt, nq - q0 < KZ_NQ ? nq - q0 : KZ_NQ, hd,
                            q + (size_t)r * q_stride + (size_t)q0 * hd, kp + (a - g), vp + (a - g),
                            ksc + (a - g), vsc + (a - g), er - a, scale, m + i, l + i,
                            o + (size_t)i * hd, &pf);
                pf.n = 0; /* asked for once */
            }
        }
        kz_prefetch_rest(&pf, 0); /* no row folded this slice */
    }
}
/* dispatch.h: attn_partial: the multi-query kernel (kz_attn_partial) where
 * head_dim is a multiple of the level's width, else the one-query 256-bit
 * one; the choice depends only on the level and head_dim, never on the
 * tile or chunk. */
static void kx_attn_partial(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                            const void *v, int64_t stride, int kv_type,
                            const int32_t *block_table, int block_size, int n_pos0, int hd,
                            float scale, int window, int c0, float *m, float *l, float *o)
{
    if (hd % KZ_W == 0) {
        kz_attn_partial(q, q_stride, nr, nq, k, v, stride, kv_type, block_table, block_size,
                        n_pos0, hd, scale, window, c0, m, l, o);
        return;
    }
    kx_attn_partial_ymm(q, q_stride, nr, nq, k, v, stride, kv_type, block_table, block_size,
                        n_pos0, hd, scale, window, c0, m, l, o);
}

/* dispatch.h: attn_merge. */
static void kx_attn_merge(float *M, float *L, float *O, const float *m, const float *l,
                          const float *o, int n, int hd, int64_t O_stride)
{
    for (int i = 0; i < n; i++) {
        float *Oi = O + (size_t)i * O_stride;
        const float *oi = o + (size_t)i * hd;
        float a, b;
        if (!plume_attn_merge_begin(&M[i], &L[i], Oi, m[i], l[i], oi, hd, &a, &b))
            continue;
        const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
        int d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(Oi + d, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(Oi + d), av),
                                                   _mm256_mul_ps(_mm256_loadu_ps(oi + d), bv)));
        plume_attn_merge_blend(Oi, oi, a, b, d, hd);
    }
}

/* Floats of partial output kx_attn_paged_tile keeps on the stack. */
#define KX_PART_BUF 8192

/* A tile of nr consecutive query rows of one sequence (dispatch.h:
 * attn_paged_tile): attn_tile.h's driver over kx_attn_partial and
 * kx_attn_merge, so each row's result is that of the row alone, and that of
 * the split-K path of paged_attention.c which merges the same partials in
 * the same order. */
static void kx_attn_paged_tile(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                               const void *v, int64_t stride, int kv_type,
                               const int32_t *block_table, int block_size, int n_pos0, int hd,
                               float scale, int window, float *o, int64_t o_stride)
{
    _Alignas(32) float po[KX_PART_BUF];
    plume_attn_tile_run(kx_attn_partial, kx_attn_merge, po, KX_PART_BUF, q, q_stride, nr, nq, k, v,
                        stride, kv_type, block_table, block_size, n_pos0, hd, scale, window, NULL,
                        o,
                        o_stride);
}

/* Whole rows over a paged cache (dispatch.h: attn_paged): a tile of one. */
static void kx_attn_paged(const float *q, int nq, const void *k, const void *v, int64_t stride,
                          int kv_type, const int32_t *block_table, int block_size, int n_pos,
                          int hd, float scale, int window, float *o)
{
    kx_attn_paged_tile(q, 0, 1, nq, k, v, stride, kv_type, block_table, block_size, n_pos, hd,
                       scale, window, o, 0);
}

#endif
