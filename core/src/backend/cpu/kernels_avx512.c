/* The avx512 level (AVX-512 F/BW/DQ/VL + VNNI): integer matmul on 512-bit
 * vectors with vpdpbusd (below), and the amx level, the same table with
 * the repacked matmuls of many tokens of the formats with one scale per 32
 * weights on AMX-INT8 tiles (kernels_amx.h,
 * when the compiler knows them: GCC 11, clang 12 on); the float and
 * element-wise kernels are the shared 256-bit ones (kernels_x86.h) compiled for this target, which lets
 * them use 32 vector registers.  The peaks are measured on 512-bit
 * registers so the roofline is the machine's, not the kernel's.  Only called after
 * cpu_features.c found those features. */
#if defined(__x86_64__)

#include "plume/cpu_x86.h"

#if PLUME_X86_HAVE_AMX_TARGET
/* amx-tile/amx-int8 only let the amx table's kernels (below) use the tile
 * intrinsics: compilers never emit tile instructions on their own. */
PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AMX)
#else
PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AVX512)
#endif

#define KX_VNNI 1
#define KX_ZMM 1 /* 512-bit attention kernels (attn_x86.h) */
#define KX_TR 4
#define KX_TT 4
#define KX_FR 4
#define KX_FT 4
#define KX_DR 4
#define KX_OWN_MM_Q 1
#include "backend/cpu/kernels_x86.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/repack_k.h"
#include "plume/cpu_x86_avx512.h"

/* ---- 512-bit integer matmul: two 32-weight sub-blocks per vector ----
 * The same arithmetic as kx_tile (kernels_x86.h) on zmm registers: one
 * vpdpbusd covers two sub-blocks (lanes 0-7 the first, 8-15 the second), so
 * each (row, token) pair costs half the instructions per weight.  Signed
 * formats (Q8_0, Q6_K) negate the activations under w's sign mask (AVX-512
 * has no vpsignb). */
#define Z_TR 4
#define Z_TT 3
#define Z_DR 4

typedef struct z_blk {
    __m512i u;
    __mmask64 neg;
    __m512 d, m;
} z_blk;

/* a in lanes 0-7, b in lanes 8-15 */
KX_INLINE __m512 z_bcast2(float a, float b)
{
    return _mm512_insertf32x8(_mm512_set1_ps(a), _mm256_set1_ps(b), 1);
}

/* p[0] in lanes 0-7, p[1] (or 0 when single) in lanes 8-15 */
KX_INLINE __m512 z_pair(const float *p, int single)
{
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128 v = single ? _mm_load_ss(p) : _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)p));
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

KX_INLINE int z_ld32(const uint8_t *p)
{
    int v;
    memcpy(&v, p, 4);
    return v;
}

/* The f16 at p0 in lanes 0-7 and the one at p1 (0 when single) in 8-15. */
KX_INLINE __m512 z_f16_pair(const uint8_t *p0, const uint8_t *p1, int single)
{
    uint16_t h0, h1 = 0;
    memcpy(&h0, p0, 2);
    if (!single)
        memcpy(&h1, p1, 2);
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h0 | ((uint32_t)h1 << 16))));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                 _mm512_castps128_ps512(f));
}

/* 16 packed-nibble bytes at p0 and p1 (p1 unused when single) → low then
 * high nibbles of each, as two 32-byte halves. */
KX_INLINE __m512i z_nibbles(const uint8_t *p0, const uint8_t *p1, int single)
{
    const __m128i a = _mm_loadu_si128((const __m128i *)p0);
    const __m256i y = single ? _mm256_zextsi128_si256(a)
                             : _mm256_inserti128_si256(_mm256_castsi128_si256(a),
                                                       _mm_loadu_si128((const __m128i *)p1), 1);
    const __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
    return _mm512_and_si512(_mm512_shuffle_i64x2(t, t, _MM_SHUFFLE(3, 1, 2, 0)),
                            _mm512_set1_epi8(0x0F));
}

/* Sub-blocks j and j+1 (only j when single) of a row. */
KX_INLINE z_blk z_get(const int kq, const uint8_t *row, int64_t j, int single)
{
    z_blk o;
    o.neg = 0;
    o.m = _mm512_setzero_ps();
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    switch (kq) {
    case PLUME_KQ_Q4_0: {
        const uint8_t *b = row + j * 18;
        o.u = z_nibbles(b + 2, b + 20, single);
        o.d = z_f16_pair(b, b + 18, single);
        o.m = _mm512_sub_ps(_mm512_setzero_ps(), o.d); /* -8d / 8 */
        break;
    }
    case PLUME_KQ_Q4_1: {
        const uint8_t *b = row + j * 20;
        o.u = z_nibbles(b + 4, b + 24, single);
        /* d and m are adjacent: one 32-bit load per block gives both */
        __m128i dm = _mm_cvtsi32_si128(z_ld32(b));
        if (!single)
            dm = _mm_insert_epi32(dm, z_ld32(b + 20), 1);
        const __m512 f = _mm512_castps128_ps512(_mm_cvtph_ps(dm)); /* d0 m0 d1 m1 */
        o.d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), f);
        o.m = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), f),
                            _mm512_set1_ps(0.125f));
        break;
    }
    case PLUME_KQ_Q8_0: {
        const uint8_t *b = row + j * 34;
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(b + 2));
        const __m512i w = single ? _mm512_zextsi256_si512(w0)
                                 : _mm512_inserti64x4(_mm512_castsi256_si512(w0),
                                                      _mm256_loadu_si256((const __m256i *)(b + 36)), 1);
        o.u = _mm512_abs_epi8(w);
        o.neg = _mm512_movepi8_mask(w);
        o.d = z_f16_pair(b, b + 34, single);
        break;
    }
    case PLUME_KQ_Q4_K: { /* j even: sub-blocks 2c, 2c+1 share 32 bytes of nibbles */
        const uint8_t *b = row + (j >> 3) * 144;
        const int sub = (int)(j & 7);
        int sc0, mn0, sc1, mn1;
        plume_q4k_scale_min(sub, b + 4, &sc0, &mn0);
        plume_q4k_scale_min(sub + 1, b + 4, &sc1, &mn1);
        const float d = kx_f16(b), dmin = kx_f16(b + 2) * -0.125f;
        const __m256i q = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * (sub >> 1)));
        o.u = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q, lo4)),
                                 _mm256_and_si256(_mm256_srli_epi16(q, 4), lo4), 1);
        o.d = z_bcast2(d * (float)sc0, d * (float)sc1);
        o.m = z_bcast2(dmin * (float)mn0, dmin * (float)mn1);
        break;
    }
    case PLUME_KQ_Q6_K: { /* j even: sub-blocks k, k+1 (k = 0 or 2) of one half */
        const uint8_t *b = row + (j >> 3) * 210;
        const int sub = (int)(j & 7), h = sub >> 2, k = sub & 3;
        const uint8_t *ql = b + h * 64;
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + h * 32));
        const __m128i sl = _mm_cvtsi32_si128(4 * (k >> 1));
        const __m256i lo0 = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)ql), sl), lo4);
        const __m256i lo1 = _mm256_and_si256(_mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)(ql + 32)), sl), lo4);
        const __m256i three = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
        const __m256i hi0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), three), 4);
        const __m256i hi1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k + 2)), three), 4);
        const __m512i w = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_sub_epi8(_mm256_or_si256(lo0, hi0), off)),
            _mm256_sub_epi8(_mm256_or_si256(lo1, hi1), off), 1);
        o.u = _mm512_abs_epi8(w);
        o.neg = _mm512_movepi8_mask(w);
        int32_t sc4;
        memcpy(&sc4, b + 192 + h * 8 + 2 * k, 4);
        const __m128 scf = _mm_mul_ps(_mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(sc4))),
                                      _mm_set1_ps(kx_f16(b + 208)));
        const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        o.d = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(scf));
        break;
    }
    }
    return o;
}

KX_INLINE void z_tile(const int kq, const int R, const int T, const uint8_t *w, size_t rb,
                      const plume_q8_act *a, int t0, float *y, int64_t ldy)
{
    const int64_t K = a->K, nb = K / 32;
    const int has_min = !kx_signed(kq);
    __m512 acc[KX_MAXR][KX_MAXT];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; j += 2) {
        const int single = j + 1 == nb;
        z_blk b[KX_MAXR];
        for (int r = 0; r < R; r++)
            b[r] = z_get(kq, w + (size_t)r * rb, j, single);
        for (int t = 0; t < T; t++) {
            const size_t tt = (size_t)(t0 + t);
            const int8_t *aq = a->q + tt * K + 32 * j;
            const __m512i av = single ? _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)aq))
                                      : _mm512_loadu_si512(aq);
            const __m512 da = z_pair(a->d + tt * nb + j, single);
            const __m512 sa = has_min ? z_pair(a->s + tt * nb + j, single) : _mm512_setzero_ps();
            for (int r = 0; r < R; r++) {
                const __m512i as = kx_signed(kq) ? _mm512_mask_sub_epi8(av, b[r].neg, _mm512_setzero_si512(), av) : av;
                const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), b[r].u, as);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(b[r].d, da), acc[r][t]);
                if (has_min)
                    acc[r][t] = _mm512_fmadd_ps(b[r].m, sa, acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++)
            y[(size_t)(t0 + t) * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

KX_INLINE void z_mm_q(const int kq, const uint8_t *w, size_t rb, int n_rows, const plume_q8_act *a,
                      int n_tok, float *y, int64_t ldy)
{
    int r = 0;
    if (n_tok == 1) {
        for (; r + Z_DR <= n_rows; r += Z_DR)
            z_tile(kq, Z_DR, 1, w + (size_t)r * rb, rb, a, 0, y + r, ldy);
        for (; r < n_rows; r++)
            z_tile(kq, 1, 1, w + (size_t)r * rb, rb, a, 0, y + r, ldy);
        return;
    }
    for (; r + Z_TR <= n_rows; r += Z_TR) {
        int t = 0;
        for (; t + Z_TT <= n_tok; t += Z_TT)
            z_tile(kq, Z_TR, Z_TT, w + (size_t)r * rb, rb, a, t, y + r, ldy);
        for (; t < n_tok; t++)
            z_tile(kq, Z_TR, 1, w + (size_t)r * rb, rb, a, t, y + r, ldy);
    }
    for (; r < n_rows; r++) {
        int t = 0;
        for (; t + Z_TT <= n_tok; t += Z_TT)
            z_tile(kq, 1, Z_TT, w + (size_t)r * rb, rb, a, t, y + r, ldy);
        for (; t < n_tok; t++)
            z_tile(kq, 1, 1, w + (size_t)r * rb, rb, a, t, y + r, ldy);
    }
}

#define Z_MM_Q(name, kq) PLUME_MM_Q_ENTRY(name, z_mm_q, kq)
Z_MM_Q(z_mm_q4_0, PLUME_KQ_Q4_0)
Z_MM_Q(z_mm_q4_1, PLUME_KQ_Q4_1)
Z_MM_Q(z_mm_q8_0, PLUME_KQ_Q8_0)
Z_MM_Q(z_mm_q4_k, PLUME_KQ_Q4_K)
Z_MM_Q(z_mm_q6_k, PLUME_KQ_Q6_K)

/* ---- repacked weights (repack.h): 16 rows per vector, one row per lane ----
 * Per block and token: 8 vpdpbusd of the block's 8 weight vectors with the
 * token's 4-byte activation groups broadcast (two chains of 4), then one
 * convert and one FMA with the 16 rows' scales × the token's scale; Q4_1's
 * min term is a separate FMA chain (m · s), added at the end.  Tokens are
 * taken ZR_T at a time to reuse the unpacked weights, but each token's lane
 * sees the same instructions in the same order whatever the tile, so the
 * result does not depend on n_tok. */
#define ZR_T 6

/* I[t] += Σ of the block's 32 products for T tokens (token t's block
 * record r[t]): from 3 tokens on, one chain of 8 vpdpbusd per token, the
 * chains interleaved (step g of every token, then step g+1) so that the
 * out-of-order window holds independent work; for 1 or 2 tokens two
 * chains of 4 per token, which halves the latency a lone token waits on.
 * Integer sums are exact: the result is the same either way. */
KX_INLINE void zr_chains(const int T, __m512i *I, const __m512i *W, const plume_q8_blk *r)
{
    if (T >= 3) {
        for (int g = 0; g < 8; g++)
            for (int t = 0; t < T; t++)
                I[t] = plume_x86_dpbusd_bcast(I[t], W[g], r[t].q + 4 * g);
        return;
    }
    for (int t = 0; t < T; t++) {
        __m512i i1 = plume_x86_zero512();
        for (int g = 0; g < 8; g += 2) {
            I[t] = plume_x86_dpbusd_bcast(I[t], W[g], r[t].q + 4 * g);
            i1 = plume_x86_dpbusd_bcast(i1, W[g + 1], r[t].q + 4 * g + 4);
        }
        I[t] = _mm512_add_epi32(I[t], i1);
    }
}

/* I[t] = corr · Σq of the block (0 when corr is 0) plus the block's 32
 * products (zr_chains), for the T tokens whose records are r[0..T). */
KX_INLINE void zr_sums(const int T, __m512i *I, const __m512i *W, const plume_q8_blk *r,
                       int32_t corr)
{
    for (int t = 0; t < T; t++)
        I[t] = corr ? _mm512_set1_epi32(corr * r[t].isum) : plume_x86_zero512();
    zr_chains(T, I, W, r);
}

/* Block j's records of the tile's tokens t0 .. (one base pointer, the
 * tokens 64 bytes apart); a tile of several tokens asks for its records 4
 * blocks ahead: successive blocks' records are ldb x 64 bytes apart, a
 * stride the hardware prefetchers left to miss (without it AVX-512 Q4_K
 * at 96 tokens ran 17% slower than on the row arrays, with it 1% faster;
 * 2 blocks ahead and 8 were no better). */
KX_INLINE const plume_q8_blk *zr_recs(const int T, const plume_q8_act *a, int64_t j, int t0)
{
    const plume_q8_blk *r = a->blk + (size_t)j * (size_t)a->ldb + (size_t)t0;
    if (T > 1)
        for (int t = 0; t < T; t++)
            _mm_prefetch((const char *)(r + 4 * a->ldb + t), _MM_HINT_T0);
    return r;
}

/* The 8 weight vectors of a 4-bit block at b (4 slices of 64 bytes, the
 * low nibbles weights 4h.., the high ones 16 + 4h..): W[h] and W[h + 4]
 * the nibbles of slice h, one row per 32-bit lane. */
KX_INLINE void zr_nibbles(const uint8_t *b, __m512i *W)
{
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    for (int h = 0; h < 4; h++) {
        const __m512i p = _mm512_loadu_si512(b + 64 * h);
        W[h] = _mm512_and_si512(p, lo4);
        W[h + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), lo4);
    }
}

/* The float steps of one block and token (record r) of the repack.h
 * formats, in two independent chains: facc += convert(I) × (dw · d), and
 * Q4_1's min term macc += mw · s (shared with the amx level's tiles,
 * kernels_amx.h). */
KX_INLINE void zr_fstep(__m512i I, __m512 dw, const plume_q8_blk *r, __m512 *facc)
{
    const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(r->d));
    *facc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), sc, *facc);
}

KX_INLINE void zr_mstep(__m512 mw, const plume_q8_blk *r, __m512 *macc)
{
    *macc = _mm512_fmadd_ps(mw, _mm512_set1_ps(r->s), *macc);
}

/* The repack.h block at b: its 8 weight vectors W (Q8_0's bytes, or the
 * nibbles), the 16 rows' scales dw and Q4_1's min scales mw (else zero). */
KX_INLINE void zr_block(const int kr, const uint8_t *b, __m512i *W, __m512 *dw, __m512 *mw)
{
    const size_t doff = plume_rp_d_off(kr);
    if (kr == PLUME_KR_Q8_0) {
        for (int g = 0; g < 8; g++)
            W[g] = _mm512_loadu_si512(b + 64 * g);
    } else {
        zr_nibbles(b, W);
    }
    *dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + doff)));
    *mw = kr == PLUME_KR_Q4_1 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + doff + 32)))
                              : _mm512_setzero_ps();
}

KX_INLINE void zr_tile(const int kr, const int T, const uint8_t *wg, int64_t nb,
                       const plume_q8_act *a, int t0, float *y, int64_t ldy, __mmask16 mask)
{
    const size_t bb = plume_rp_block_bytes(kr);
    const int32_t corr = plume_rp_corr(kr);
    __m512 facc[ZR_T], macc[ZR_T];
    for (int t = 0; t < T; t++) {
        facc[t] = _mm512_setzero_ps();
        macc[t] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < nb; j++) {
        const uint8_t *b = wg + (size_t)j * bb;
        kx_prefetch_ahead(b, bb);
        __m512i W[8];
        __m512 dw, mw;
        zr_block(kr, b, W, &dw, &mw);
        const plume_q8_blk *r = zr_recs(T, a, j, t0);
        __m512i I[ZR_T];
        zr_sums(T, I, W, r, corr);
        for (int t = 0; t < T; t++) {
            zr_fstep(I[t], dw, r + t, facc + t);
            if (kr == PLUME_KR_Q4_1)
                zr_mstep(mw, r + t, macc + t);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m512 r = kr == PLUME_KR_Q4_1 ? _mm512_add_ps(facc[t], macc[t]) : facc[t];
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy, mask, r);
    }
}

/* ---- the repack_k.h formats on zmm: zr_tile's scheme (16 rows per
 * vector, tokens ZK_T at a time, per token the same instructions whatever
 * the tile), with the bits above the low 4 (or 2) merged in from their
 * packed slices (shift + vpternlogd), the IQ4 and MXFP4 levels looked up
 * with vpshufb (+128 so that they are unsigned, corrected by −128·Σq), two
 * integer sums per block (weights 0..15 and 16..31) for the per-16
 * corrections and scales, then the float steps listed in repack_k.h.  The
 * pieces (weights, scales, float steps) are shared with the amx level's
 * tiles (kernels_amx.h), which so compute the same bits. */
#define ZK_T 6

/* Tokens per tile of the formats with two scales a block (Q6_K, Q3_K,
 * Q2_K), in calls of at least that many: they take their tokens one at a
 * time (two integer sums live, not a tile's), so more accumulators fit,
 * and their costlier unpacking (the higher bits merged in) is shared by
 * more tokens.  The compiler keeps some of the 16 float sums in memory;
 * still, `bench_mm_r avx512 48 2048`, best of 8 alternating runs
 * (2026-12-07, a machine whose speed drifts by up to 2x): Q6_K 114-123 →
 * 135-142 Gweights/s, Q3_K 121-123 → 141-143, Q2_K 134-135 → 150-154,
 * with 12 tokens a tile in between (140, 128, 146).  Bits are unchanged:
 * each token's lane sees the same instructions whatever the tile. */
#define ZK_T2 16

/* v shifted left by s bits (right by −s) in 16-bit lanes. */
KX_INLINE __m512i zk_shift(__m512i v, int s)
{
    return s >= 0 ? _mm512_sll_epi16(v, _mm_cvtsi32_si128(s)) : _mm512_srl_epi16(v, _mm_cvtsi32_si128(-s));
}

/* The vpshufb table of a level format (its 16 levels + 128); zero otherwise. */
KX_INLINE __m512i zk_lut(const plume_rpk_fmt f)
{
    if (!f.lv)
        return _mm512_setzero_si512();
    int8_t l[16];
    for (int i = 0; i < 16; i++)
        l[i] = (int8_t)(f.lv[i] + 128);
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)l));
}

/* The integer correction of a format's Σ u·q: −128 for the level formats
 * (their looked-up bytes are level + 128), else the format's corr. */
KX_INLINE int zk_corr(const plume_rpk_fmt f) { return f.lv ? -128 : f.corr; }

/* The 8 weight vectors of the block at b: W[g] = the unsigned bytes of
 * weights 4g..4g+3 of the 16 rows, one row per 32-bit lane (u, or
 * level[u] + 128). */
KX_INLINE void zk_weights(const plume_rpk_fmt f, const uint8_t *b, __m512i lut, __m512i *W)
{
    const __m512i lo2 = _mm512_set1_epi8(3);
    const __m512i hmask = _mm512_set1_epi8((char)(f.hi_bits == 2 ? 0x30 : 1 << f.lo_bits));
    const size_t lob = plume_rpk_lo_bytes(f);
    if (f.lo_bits == 4) {
        zr_nibbles(b, W);
    } else {
        const __m512i S0 = _mm512_loadu_si512(b), S1 = _mm512_loadu_si512(b + 64);
        for (int g = 0; g < 8; g++)
            W[g] = _mm512_and_si512(zk_shift(g < 4 ? S0 : S1, -2 * (g & 3)), lo2);
    }
    if (f.hi_bits == 1) {
        const __m512i H = _mm512_loadu_si512(b + lob);
        for (int g = 0; g < 8; g++) /* W | (H shifted & mask) */
            W[g] = _mm512_ternarylogic_epi32(W[g], zk_shift(H, f.lo_bits - g), hmask, 0xF8);
    } else if (f.hi_bits == 2) {
        const __m512i H0 = _mm512_loadu_si512(b + lob), H1 = _mm512_loadu_si512(b + lob + 64);
        for (int g = 0; g < 8; g++)
            W[g] = _mm512_ternarylogic_epi32(W[g], zk_shift(g < 4 ? H0 : H1, 4 - 2 * (g & 3)),
                                             hmask, 0xF8);
    }
    if (f.lv)
        for (int g = 0; g < 8; g++)
            W[g] = _mm512_shuffle_epi8(lut, W[g]);
}

/* A block's 16 rows' float scales (repack_k.h): dd0 (and dd1, per 16), the
 * min terms mm0 (and mm1); unused ones zero. */
typedef struct zk_sc {
    __m512 dd0, dd1, mm0, mm1;
} zk_sc;

/* The scales of the block at b, given its super-block's d and dmin (dsb,
 * msb; K-quants only). */
KX_INLINE zk_sc zk_scales(const plume_rpk_fmt f, const uint8_t *b, __m512 dsb, __m512 msb)
{
    const uint8_t *sc = b + plume_rpk_sc_off(f);
    zk_sc s = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    switch (f.sk) {
    case PLUME_SK_D16: s.dd0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc)); break;
    case PLUME_SK_DM16:
        s.dd0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sc));
        s.mm0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32)));
        break;
    case PLUME_SK_K32M:
        s.dd0 = _mm512_mul_ps(dsb, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)sc))));
        s.mm0 = _mm512_mul_ps(msb, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sc + 16)))));
        break;
    case PLUME_SK_K16:
        s.dd0 = _mm512_mul_ps(dsb, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)sc))));
        s.dd1 = _mm512_mul_ps(dsb, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sc + 16)))));
        break;
    case PLUME_SK_K16M: {
        const __m512i x0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)sc));
        const __m512i x1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(sc + 16)));
        const __m512i m4 = _mm512_set1_epi32(15);
        s.dd0 = _mm512_mul_ps(dsb, _mm512_cvtepi32_ps(_mm512_and_si512(x0, m4)));
        s.dd1 = _mm512_mul_ps(dsb, _mm512_cvtepi32_ps(_mm512_and_si512(x1, m4)));
        s.mm0 = _mm512_mul_ps(msb, _mm512_cvtepi32_ps(_mm512_srli_epi32(x0, 4)));
        s.mm1 = _mm512_mul_ps(msb, _mm512_cvtepi32_ps(_mm512_srli_epi32(x1, 4)));
        break;
    }
    case PLUME_SK_E8: { /* plume_e8m0_half_to_fp32 on 16 lanes */
        const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)sc));
        const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        s.dd0 = _mm512_castsi512_ps(_mm512_mask_sllv_epi32(
            normal, _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), _mm512_set1_epi32(0x00200000), e));
        break;
    }
    default: /* K32 */
        s.dd0 = _mm512_mul_ps(dsb, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)sc))));
        break;
    }
    return s;
}

/* The float steps of one block and token (record r), repack_k.h's list,
 * in two independent chains: zk_fsteps the scaled integer sums, with i0
 * the sum over the block's 32 weights, or with two scales over weights
 * 0..15 and i1 over 16..31 (corrections included); zk_msteps the min
 * terms. */
KX_INLINE void zk_fsteps(const plume_rpk_fmt f, __m512i i0, __m512i i1, const zk_sc *s,
                         const plume_q8_blk *r, __m512 *facc)
{
    const __m512 da = _mm512_set1_ps(r->d);
    *facc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), _mm512_mul_ps(s->dd0, da), *facc);
    if (plume_rpk_two_scales(f))
        *facc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(s->dd1, da), *facc);
}

KX_INLINE void zk_msteps(const plume_rpk_fmt f, const zk_sc *s, const plume_q8_blk *r, __m512 *macc)
{
    const int mk = plume_rpk_min_kind(f);
    if (f.sk == PLUME_SK_DM16) {
        *macc = _mm512_fmadd_ps(s->mm0, _mm512_set1_ps(r->s), *macc);
    } else if (mk == 1) {
        *macc = _mm512_fnmadd_ps(s->mm0, _mm512_set1_ps(r->s), *macc);
    } else if (mk == 2) {
        *macc = _mm512_fnmadd_ps(s->mm0, _mm512_set1_ps(r->s16[0]), *macc);
        *macc = _mm512_fnmadd_ps(s->mm1, _mm512_set1_ps(r->s16[1]), *macc);
    }
}

/* The super-block d and dmin of block j of group wg (K-quants), reloaded
 * at each super-block's first block. */
KX_INLINE void zk_super(const plume_rpk_fmt f, const uint8_t *wg, int64_t j, __m512 *dsb, __m512 *msb)
{
    if (f.ksuper && (j & 7) == 0) {
        const uint8_t *rec = wg + plume_rpk_super_off(f, j);
        *dsb = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)rec));
        if (f.dmin)
            *msb = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 32)));
    }
}

KX_INLINE void zk_tile(const int kr, const int T, const uint8_t *wg, int64_t nb,
                       const plume_q8_act *a, int t0, float *y, int64_t ldy, __mmask16 mask)
{
    const plume_rpk_fmt f = plume_rpk_fmt_of(kr);
    const size_t bb = plume_rpk_block_bytes(f);
    const int two = plume_rpk_two_scales(f), mk = plume_rpk_min_kind(f), corr = zk_corr(f);
    const __m512i lut = zk_lut(f);
    __m512 facc[ZK_T2], macc[ZK_T2];
    for (int t = 0; t < T; t++) {
        facc[t] = _mm512_setzero_ps();
        macc[t] = _mm512_setzero_ps();
    }
    __m512 dsb = _mm512_setzero_ps(), msb = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; j++) {
        const uint8_t *b = wg + plume_rpk_block_off(f, j);
        kx_prefetch_ahead(b, bb);
        zk_super(f, wg, j, &dsb, &msb);
        __m512i W[8];
        zk_weights(f, b, lut, W);
        const zk_sc s = zk_scales(f, b, dsb, msb);
        const plume_q8_blk *r = zr_recs(T, a, j, t0);
        if (!two) { /* zr_tile's interleaved chains */
            __m512i I[ZK_T];
            zr_sums(T, I, W, r, corr);
            for (int t = 0; t < T; t++) {
                zk_fsteps(f, I[t], I[t], &s, r + t, facc + t);
                zk_msteps(f, &s, r + t, macc + t);
            }
            continue;
        }
        for (int t = 0; t < T; t++) {
            const int32_t *is16 = r[t].isum16;
            __m512i i0 = corr ? _mm512_set1_epi32(corr * is16[0]) : _mm512_setzero_si512();
            __m512i i1 = corr ? _mm512_set1_epi32(corr * is16[1]) : _mm512_setzero_si512();
            plume_x86_dot32_halves(&i0, &i1, W, r[t].q);
            zk_fsteps(f, i0, i1, &s, r + t, facc + t);
            zk_msteps(f, &s, r + t, macc + t);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m512 r = mk ? _mm512_add_ps(facc[t], macc[t]) : facc[t];
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy, mask, r);
    }
}

/* A tile of either family of layouts. */
KX_INLINE void zrk_tile(const int kr, const int T, const uint8_t *wg, int64_t nb,
                      const plume_q8_act *a, int t0, float *y, int64_t ldy, __mmask16 mask)
{
    if (kr >= PLUME_KR_Q5_0)
        zk_tile(kr, T, wg, nb, a, t0, y, ldy, mask);
    else
        zr_tile(kr, T, wg, nb, a, t0, y, ldy, mask);
}

KX_INLINE void zr_mm(const int kr, const uint8_t *w, int n_rows, const plume_q8_act *a,
                     int n_tok, float *y, int64_t ldy)
{
    const int64_t nb = a->K / 32;
    const size_t gb = plume_rp_group_bytes(kr, nb);
    for (int g0 = 0; g0 < n_rows; g0 += PLUME_RP_ROWS, w += gb) {
        const int nr = n_rows - g0 < PLUME_RP_ROWS ? n_rows - g0 : PLUME_RP_ROWS;
        const __mmask16 mask = (__mmask16)((1u << nr) - 1);
        int t = 0;
        if (kr >= PLUME_KR_Q5_0 && plume_rpk_two_scales(plume_rpk_fmt_of(kr)))
            for (; t + ZK_T2 <= n_tok; t += ZK_T2)
                zk_tile(kr, ZK_T2, w, nb, a, t, y + g0, ldy, mask);
        for (; t + ZR_T <= n_tok; t += ZR_T)
            zrk_tile(kr, ZR_T, w, nb, a, t, y + g0, ldy, mask);
        switch (n_tok - t) {
        case 5: zrk_tile(kr, 5, w, nb, a, t, y + g0, ldy, mask); break;
        case 4: zrk_tile(kr, 4, w, nb, a, t, y + g0, ldy, mask); break;
        case 3: zrk_tile(kr, 3, w, nb, a, t, y + g0, ldy, mask); break;
        case 2: zrk_tile(kr, 2, w, nb, a, t, y + g0, ldy, mask); break;
        case 1: zrk_tile(kr, 1, w, nb, a, t, y + g0, ldy, mask); break;
        default: break;
        }
    }
}

/* ---- wide tiles of the formats with one scale a block (the repack.h
 * formats and the repack_k.h ones but Q6_K, Q3_K and Q2_K), for the amx
 * level's calls below its tile threshold (kernels_amx.h: am_mm) ----
 * zw_mm runs tiles of ZW_T tokens first, then the rest through zr_mm.  A
 * wide tile takes its tokens one at a time, each token's sums of a block
 * in one chain of 8 vpdpbusd whose latency the other tokens' chains fill
 * (no second chain to zero and add), so a block's unpacking (nibbles,
 * higher bits merged in, levels looked up, scales) serves 16 tokens, not
 * 6; the float sums live in memory.  `bench_mm_r avx512 32 2048`, best of
 * 4 alternating runs, 2026-12-07, Gweights/s against 6-token tiles: Q4_0
 * 181 → 203, Q8_0 178 → 201, Q5_0 155 → 181, Q4_K 182 → 188, Q5_K 157 →
 * 175.  The avx512 table keeps zr_mm: there a 1B Q4_K_M prefill ran about
 * 4% slower with wide tiles, though the kernels alone ran faster
 * (docs/cpu-backend.md, "Wide tiles below the AMX threshold").  They are
 * their own functions, not a case of zr_tile and zk_tile: a dead branch
 * added to zk_tile moved GCC's register allocation of the Q6_K kernel and
 * its speed by 7%.  Bits are unchanged: each token's lane sees the same
 * instructions whatever the tile, and integer sums are exact in any order
 * (test_cpu_repack). */
#define ZW_T 16

/* A token's sums of a block in a wide tile: corr · Σq plus its 32
 * products in one chain of 8 (the other tokens' chains fill its latency). */
KX_INLINE __m512i zw_sum(const __m512i *W, const plume_q8_blk *r, int32_t corr)
{
    __m512i I = corr ? _mm512_set1_epi32(corr * r->isum) : plume_x86_zero512();
    for (int g = 0; g < 8; g++)
        I = plume_x86_dpbusd_bcast(I, W[g], r->q + 4 * g);
    return I;
}

/* A wide tile of a repack_k.h format (zk_tile's steps, a token at a time). */
KX_INLINE void zwk_tile(const int kr, const uint8_t *wg, int64_t nb, const plume_q8_act *a,
                        int t0, float *y, int64_t ldy, __mmask16 mask)
{
    const plume_rpk_fmt f = plume_rpk_fmt_of(kr);
    const size_t bb = plume_rpk_block_bytes(f);
    const int mk = plume_rpk_min_kind(f), corr = zk_corr(f);
    const __m512i lut = zk_lut(f);
    __m512 facc[ZW_T], macc[ZW_T];
    for (int t = 0; t < ZW_T; t++) {
        facc[t] = _mm512_setzero_ps();
        macc[t] = _mm512_setzero_ps();
    }
    __m512 dsb = _mm512_setzero_ps(), msb = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; j++) {
        const uint8_t *b = wg + plume_rpk_block_off(f, j);
        kx_prefetch_ahead(b, bb);
        zk_super(f, wg, j, &dsb, &msb);
        __m512i W[8];
        zk_weights(f, b, lut, W);
        const zk_sc s = zk_scales(f, b, dsb, msb);
        const plume_q8_blk *r = zr_recs(ZW_T, a, j, t0);
        for (int t = 0; t < ZW_T; t++) {
            __m512i I = zw_sum(W, r + t, corr);
            zk_fsteps(f, I, I, &s, r + t, facc + t);
            zk_msteps(f, &s, r + t, macc + t);
        }
    }
    for (int t = 0; t < ZW_T; t++) {
        const __m512 v = mk ? _mm512_add_ps(facc[t], macc[t]) : facc[t];
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy, mask, v);
    }
}

/* A wide tile of a repack.h format (zr_tile's steps, a token at a time). */
KX_INLINE void zwr_tile(const int kr, const uint8_t *wg, int64_t nb, const plume_q8_act *a,
                        int t0, float *y, int64_t ldy, __mmask16 mask)
{
    const size_t bb = plume_rp_block_bytes(kr);
    const int32_t corr = plume_rp_corr(kr);
    __m512 facc[ZW_T], macc[ZW_T];
    for (int t = 0; t < ZW_T; t++) {
        facc[t] = _mm512_setzero_ps();
        macc[t] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < nb; j++) {
        const uint8_t *b = wg + (size_t)j * bb;
        kx_prefetch_ahead(b, bb);
        __m512i W[8];
        __m512 dw, mw;
        zr_block(kr, b, W, &dw, &mw);
        const plume_q8_blk *r = zr_recs(ZW_T, a, j, t0);
        for (int t = 0; t < ZW_T; t++) {
            __m512i I = zw_sum(W, r + t, corr);
            zr_fstep(I, dw, r + t, facc + t);
            if (kr == PLUME_KR_Q4_1)
                zr_mstep(mw, r + t, macc + t);
        }
    }
    for (int t = 0; t < ZW_T; t++) {
        const __m512 v = kr == PLUME_KR_Q4_1 ? _mm512_add_ps(facc[t], macc[t]) : facc[t];
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy, mask, v);
    }
}

/* The repacked matmul of a format with one scale a block: wide tiles, then
 * zr_mm for the tokens short of one. */
KX_INLINE void zw_mm(const int kr, const uint8_t *w, int n_rows, const plume_q8_act *a,
                     int n_tok, float *y, int64_t ldy)
{
    const int n_wide = n_tok / ZW_T * ZW_T;
    if (n_wide > 0) {
        const int64_t nb = a->K / 32;
        const size_t gb = plume_rp_group_bytes(kr, nb);
        const uint8_t *wg = w;
        for (int g0 = 0; g0 < n_rows; g0 += PLUME_RP_ROWS, wg += gb) {
            const int nr = n_rows - g0 < PLUME_RP_ROWS ? n_rows - g0 : PLUME_RP_ROWS;
            const __mmask16 mask = (__mmask16)((1u << nr) - 1);
            for (int t = 0; t < n_wide; t += ZW_T) {
                if (kr >= PLUME_KR_Q5_0)
                    zwk_tile(kr, wg, nb, a, t, y + g0, ldy, mask);
                else
                    zwr_tile(kr, wg, nb, a, t, y + g0, ldy, mask);
            }
        }
    }
    if (n_wide < n_tok) {
        plume_q8_act rest = *a;
        rest.blk += n_wide; /* zr_tile and zk_tile read the records only */
        zr_mm(kr, w, n_rows, &rest, n_tok - n_wide, y + (size_t)n_wide * (size_t)ldy, ldy);
    }
}

#define ZR_MM(name, kr) PLUME_MM_R_ENTRY(name, zr_mm, kr)
ZR_MM(zr_mm_q4_0, PLUME_KR_Q4_0)
ZR_MM(zr_mm_q4_1, PLUME_KR_Q4_1)
ZR_MM(zr_mm_q8_0, PLUME_KR_Q8_0)

ZR_MM(zk_mm_q5_0, PLUME_KR_Q5_0)
ZR_MM(zk_mm_q5_1, PLUME_KR_Q5_1)
ZR_MM(zk_mm_iq4_nl, PLUME_KR_IQ4_NL)
ZR_MM(zk_mm_q4_k, PLUME_KR_Q4_K)
ZR_MM(zk_mm_q5_k, PLUME_KR_Q5_K)
ZR_MM(zk_mm_q6_k, PLUME_KR_Q6_K)
ZR_MM(zk_mm_q2_k, PLUME_KR_Q2_K)
ZR_MM(zk_mm_q3_k, PLUME_KR_Q3_K)
ZR_MM(zk_mm_iq4_xs, PLUME_KR_IQ4_XS)
ZR_MM(zk_mm_mxfp4, PLUME_KR_MXFP4)

/* Twelve independent 512-bit FMA chains (written in assembly so that the
 * accumulators stay in registers); operands are zero, so no denormals. */
static double fma_peak(long iters)
{
    __asm__ volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n\tvpxord %%zmm1, %%zmm1, %%zmm1" ::: "xmm0", "xmm1");
    for (long it = 0; it < iters; it++)
        __asm__ volatile(KX_CHAINS12("vfmadd231ps", "zmm") ::: KX_CHAINS12_CLOBBERS);
    return 2.0 * 16.0 * 12.0 * (double)iters;
}

/* Twelve independent 512-bit vpdpbusd chains (64 u8×s8 products each). */
static double int8_peak(long iters)
{
    __asm__ volatile("vpxord %%zmm0, %%zmm0, %%zmm0\n\tvpxord %%zmm1, %%zmm1, %%zmm1" ::: "xmm0", "xmm1");
    for (long it = 0; it < iters; it++)
        __asm__ volatile(KX_CHAINS12("vpdpbusd", "zmm") ::: KX_CHAINS12_CLOBBERS);
    return 2.0 * 64.0 * 12.0 * (double)iters;
}

/* The table of a level of this file: its repacked matmuls (the 13 mm_r
 * entries, PLUME_KR_* order) and its int8 peak; the rest is avx512's. */
#define Z_TABLE(lvl, i8_peak, ...)                                                            \
    {                                                                                         \
        .level = (lvl), .mm_q = {z_mm_q4_0, z_mm_q4_1, z_mm_q8_0, z_mm_q4_k, z_mm_q6_k},      \
        .mm_r = {__VA_ARGS__}, KX_SHARED_KERNELS, .fma_peak = fma_peak, .int8_peak = (i8_peak), \
    }

static const plume_kernels K =
    Z_TABLE(PLUME_CPU_AVX512, int8_peak, zr_mm_q4_0, zr_mm_q4_1, zr_mm_q8_0, zk_mm_q5_0, zk_mm_q5_1,
            zk_mm_iq4_nl, zk_mm_q4_k, zk_mm_q5_k, zk_mm_q6_k, zk_mm_q2_k, zk_mm_q3_k, zk_mm_iq4_xs,
            zk_mm_mxfp4);

#if PLUME_X86_HAVE_AMX_TARGET
#include "backend/cpu/kernels_amx.h"
static const plume_kernels K_AMX =
    Z_TABLE(PLUME_CPU_AMX, amx_int8_peak, am_mm_q4_0, am_mm_q4_1, am_mm_q8_0, am_mm_q5_0, am_mm_q5_1,
            am_mm_iq4_nl, am_mm_q4_k, am_mm_q5_k, zk_mm_q6_k, zk_mm_q2_k, zk_mm_q3_k, am_mm_iq4_xs,
            am_mm_mxfp4);
#endif

PLUME_X86_TARGET_END

const plume_kernels *plume_kernels_avx512(void) { return &K; }
#if PLUME_X86_HAVE_AMX_TARGET
const plume_kernels *plume_kernels_amx(void) { return &K_AMX; }
#else
const plume_kernels *plume_kernels_amx(void) { return NULL; }
#endif

#else
#include <stddef.h>
#include "backend/cpu/dispatch.h"
const plume_kernels *plume_kernels_avx512(void) { return NULL; }
const plume_kernels *plume_kernels_amx(void) { return NULL; }
#endif
