/* The attention kernels of the x86 levels (dispatch.h: attn_step,
 * attn_partial, attn_merge, attn_paged, attn_paged_tile), included by
 * kernels_x86.h once per level (AVX2, AVX-512) after its helpers (kx_hsum,
 * kx_exp, kx_axpy, KX_INLINE). */
#ifndef PLUME_CPU_ATTN_X86_H
#define PLUME_CPU_ATTN_X86_H

#include "backend/cpu/attn_tile.h"

/* Keys per slice of the attention kernels (scores on the stack). */
#define KX_ATTN_SLICE 64

/* q·k for hd values, 8 at a time with a scalar tail (as kx_dotf, inlined). */
KX_INLINE float kx_qk(const float *q, const float *k, int hd)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= hd; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(k + i + 8), s1);
    }
    for (; i + 8 <= hd; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), s0);
    float sum = kx_hsum(_mm256_add_ps(s0, s1));
    for (; i < hd; i++)
        sum += q[i] * k[i];
    return sum;
}

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
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(mxv), _mm256_extractf128_ps(mxv, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        mx = _mm_cvtss_f32(h);
    }
    for (; i < ns; i++) {
        p[i] = kx_qk(q, kp[i], hd) * scale;
        mx = p[i] > mx ? p[i] : mx;
    }
    const float c = expf(*m - mx); /* 0 on the first slice */
    float sum = *l * c;
    if (c != 1.0f) {
        const __m256 cv = _mm256_set1_ps(c);
        int d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), cv));
        for (; d < hd; d++)
            o[d] *= c;
    }
    const __m256 mv = _mm256_set1_ps(mx);
    __m256 sumv = _mm256_setzero_ps();
    for (i = 0; i + 8 <= ns; i += 8) {
        const __m256 e = kx_exp(_mm256_sub_ps(_mm256_load_ps(p + i), mv));
        _mm256_store_ps(p + i, e);
        sumv = _mm256_add_ps(sumv, e);
    }
    sum += kx_hsum(sumv);
    for (; i < ns; i++) {
        p[i] = expf(p[i] - mx);
        sum += p[i];
    }
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
        const size_t slot = (size_t)block_table[p / block_size] * (size_t)block_size +
                            (size_t)in;
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

/* dispatch.h: attn_partial.  Slices start at absolute multiples of the
 * slice length; each is gathered once for the tile and a row folds only
 * the keys of its own range. */
static void kx_attn_partial(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                            const void *v, int64_t stride, int kv_type,
                            const int32_t *block_table, int block_size, int n_pos0, int hd,
                            float scale, int window, int c0, float *m, float *l, float *o)
{
    const float *kp[KX_ATTN_SLICE], *vp[KX_ATTN_SLICE];
    _Alignas(32) float kbuf[KX_ATTN_F16_BUF], vbuf[KX_ATTN_F16_BUF];
    const int slice = kx_attn_slice_len(kv_type, hd);
    for (int i = 0; i < nr * nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    memset(o, 0, sizeof(float) * (size_t)nr * (size_t)nq * (size_t)hd);
    const int n_max = n_pos0 + nr - 1; /* keys of the last row */
    const int end = n_max < c0 + PLUME_ATTN_CHUNK ? n_max : c0 + PLUME_ATTN_CHUNK;
    const int lo0 = plume_attn_lo(n_pos0, window); /* the first row's first key */
    int p0 = lo0 / slice * slice;
    if (p0 < c0)
        p0 = c0;
    for (; p0 < end; p0 += slice) {
        const int g = p0 > lo0 ? p0 : lo0; /* gathered: g .. e-1 */
        const int e = end - p0 < slice ? end : p0 + slice;
        kx_gather_kv(k, v, stride, kv_type, block_table, block_size, g, e - g, hd, kbuf, vbuf, kp, vp);
        for (int r = 0; r < nr; r++) {
            const int n_pos = n_pos0 + r, lo = plume_attn_lo(n_pos, window);
            const int a = p0 > lo ? p0 : lo, er = n_pos < e ? n_pos : e;
            if (er <= a)
                continue;
            for (int qi = 0; qi < nq; qi++)
                kx_attn_slice(q + (size_t)r * q_stride + (size_t)qi * hd, kp + (a - g), vp + (a - g),
                              er - a, hd, scale, m + r * nq + qi, l + r * nq + qi,
                              o + (size_t)(r * nq + qi) * hd);
        }
    }
}

/* dispatch.h: attn_merge. */
static void kx_attn_merge(float *M, float *L, float *O, const float *m, const float *l,
                          const float *o, int n, int hd, int64_t O_stride)
{
    for (int i = 0; i < n; i++) {
        float *Oi = O + (size_t)i * O_stride;
        const float *oi = o + (size_t)i * hd;
        if (m[i] == -INFINITY) /* no key in this chunk */
            continue;
        if (M[i] == -INFINITY) {
            M[i] = m[i];
            L[i] = l[i];
            memcpy(Oi, oi, sizeof(float) * (size_t)hd);
            continue;
        }
        const float mx = M[i] > m[i] ? M[i] : m[i];
        const float a = expf(M[i] - mx), b = expf(m[i] - mx);
        const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
        int d = 0;
        for (; d + 8 <= hd; d += 8)
            _mm256_storeu_ps(Oi + d, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(Oi + d), av),
                                                   _mm256_mul_ps(_mm256_loadu_ps(oi + d), bv)));
        for (; d < hd; d++) { /* two products, then the sum: never fused */
            const float x = Oi[d] * a, y = oi[d] * b;
            Oi[d] = x + y;
        }
        const float x = L[i] * a, y = l[i] * b;
        L[i] = x + y;
        M[i] = mx;
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
                        stride, kv_type, block_table, block_size, n_pos0, hd, scale, window, o,
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
