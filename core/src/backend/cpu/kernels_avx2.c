/* The avx2 level: AVX2 + FMA + F16C, int8 dot products with
 * vpmaddubsw/vpmaddwd.  Compiled for that target whatever the build's
 * -march, and only called after cpu_features.c found those features. */
#if defined(__x86_64__)

#include "plume/cpu_x86.h"

PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AVX2)

#define KX_VNNI 0
#define KX_TR 2
#define KX_TT 3
#define KX_FR 2
#define KX_FT 4
#define KX_DR 4
#include "backend/cpu/kernels_x86.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/repack_k.h"
#include "plume/cpu_x86_avx2.h"

/* ---- repacked weights (repack.h) on 256-bit vectors: a group of 16 rows
 * as two halves of 8 rows, one row per 32-bit lane.  Q4: vpmaddubsw of the
 * nibbles with the broadcast activation bytes, the 8 products summed in
 * int16 (at most 8·2·15·127 = 30480), then vpmaddwd to int32.  Q8_0: the
 * stored w+128 is turned back into w, and |w| × sign(a, w) as in the
 * unrepacked kernels, each vpmaddubsw widened at once (2·127² fits int16,
 * eight of them do not).  Per token the same instructions whatever the
 * tile (YR_T tokens share the weights' unpacking). */
#define YR_T 2

KX_INLINE void yr_tile(const int kr, const int T, const uint8_t *wg, int64_t nb, int half,
                       const plume_q8_act *a, int t0, float *y, int64_t ldy, int nr)
{
    const int64_t K = a->K;
    const size_t bb = plume_rp_block_bytes(kr), doff = plume_rp_d_off(kr);
    const __m256i lo4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    __m256 facc[YR_T], macc[YR_T];
    for (int t = 0; t < T; t++) {
        facc[t] = _mm256_setzero_ps();
        macc[t] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < nb; j++) {
        const uint8_t *b = wg + (size_t)j * bb + 32 * half;
        if (half == 0) /* the second half reads the lines the first brought in */
            kx_prefetch_ahead(wg + (size_t)j * bb, bb);
        __m256i W[8];
        if (kr == PLUME_KR_Q8_0) {
            for (int g = 0; g < 8; g++)
                W[g] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 64 * g)), x80);
        } else {
            for (int h = 0; h < 4; h++) {
                const __m256i p = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
                W[h] = _mm256_and_si256(p, lo4);
                W[h + 4] = _mm256_and_si256(_mm256_srli_epi16(p, 4), lo4);
            }
        }
        const uint8_t *sb = wg + (size_t)j * bb + doff + 16 * half;
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb));
        const __m256 mw = kr == PLUME_KR_Q4_1 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 32)))
                                              : _mm256_setzero_ps();
        for (int t = 0; t < T; t++) {
            const size_t tt = (size_t)(t0 + t);
            const int8_t *q = a->q + tt * (size_t)K + 32 * j;
            __m256i acc;
            if (kr == PLUME_KR_Q8_0) {
                acc = _mm256_setzero_si256();
                for (int g = 0; g < 8; g++) {
                    int v;
                    memcpy(&v, q + 4 * g, 4);
                    const __m256i av = _mm256_set1_epi32(v);
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(
                        _mm256_abs_epi8(W[g]), _mm256_sign_epi8(av, W[g])), ones));
                }
            } else {
                __m256i s16 = _mm256_setzero_si256();
                for (int g = 0; g < 8; g++) {
                    int v;
                    memcpy(&v, q + 4 * g, 4);
                    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(W[g], _mm256_set1_epi32(v)));
                }
                acc = _mm256_madd_epi16(s16, ones);
                if (kr == PLUME_KR_Q4_0)
                    acc = _mm256_add_epi32(acc, _mm256_set1_epi32(-8 * a->isum[tt * nb + j]));
            }
            const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(a->d[tt * nb + j]));
            facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), sc, facc[t]);
            if (kr == PLUME_KR_Q4_1)
                macc[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(a->s[tt * nb + j]), macc[t]);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m256 r = kr == PLUME_KR_Q4_1 ? _mm256_add_ps(facc[t], macc[t]) : facc[t];
        plume_x86_store8(y + (size_t)(t0 + t) * ldy + 8 * half, r, nr);
    }
}

/* ---- the repack_k.h formats on 256-bit vectors: yr_tile's two halves of
 * 8 rows, the bits above the low 4 (or 2) merged in from their packed
 * slices, the float steps of repack_k.h.  vpmaddubsw sums pairs in int16,
 * so products are summed in int16 only as far as they cannot saturate:
 * the 4 weight-groups of a half-block (weights 0..15 or 16..31) at once
 * for u < 32 (4·2·31·127 = 31496), each one widened alone for Q6_K's
 * u < 64 and for the level formats (IQ4, MXFP4), whose signed levels go
 * through |w| × sign(a, w) as Q8_0 does (so they need no correction). */
KX_INLINE __m256i yk_shift(__m256i v, int s)
{
    return s >= 0 ? _mm256_sll_epi16(v, _mm_cvtsi32_si128(s)) : _mm256_srl_epi16(v, _mm_cvtsi32_si128(-s));
}

KX_INLINE __m256 yk_f16(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
KX_INLINE __m256 yk_i8(const uint8_t *p)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
}
KX_INLINE __m256i yk_u8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
/* The bits of plume_e8m0_half_to_fp32(e) for 8 exponents e (int32 lanes). */
KX_INLINE __m256i yk_e8m0(__m256i e)
{
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e));
}

KX_INLINE void yk_tile(const int kr, const int T, const uint8_t *wg, int64_t nb, int half,
                       const plume_q8_act *a, int t0, float *y, int64_t ldy, int nr)
{
    const plume_rpk_fmt f = plume_rpk_fmt_of(kr);
    const int64_t K = a->K;
    const size_t so = plume_rpk_sc_off(f), lob = plume_rpk_lo_bytes(f);
    const int two = plume_rpk_two_scales(f), mk = plume_rpk_min_kind(f);
    const int corr = f.lv ? 0 : f.corr, wide = f.lv || f.hi_bits == 2;
    const __m256i lo4 = _mm256_set1_epi8(0x0F), lo2 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    const __m256i hmask = _mm256_set1_epi8((char)(f.hi_bits == 2 ? 0x30 : 1 << f.lo_bits));
    const __m256i lut = f.lv ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)f.lv))
                             : _mm256_setzero_si256();
    __m256 facc[YR_T], macc[YR_T];
    for (int t = 0; t < T; t++) {
        facc[t] = _mm256_setzero_ps();
        macc[t] = _mm256_setzero_ps();
    }
    __m256 dsb = _mm256_setzero_ps(), msb = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; j++) {
        const uint8_t *blk = wg + plume_rpk_block_off(f, j), *b = blk + 32 * half;
        if (half == 0)
            kx_prefetch_ahead(blk, plume_rpk_block_bytes(f));
        if (f.ksuper && (j & 7) == 0) {
            const uint8_t *rec = wg + plume_rpk_super_off(f, j) + 16 * half;
            dsb = yk_f16(rec);
            if (f.dmin)
                msb = yk_f16(rec + 32);
        }
        __m256i W[8];
        if (f.lo_bits == 4) {
            for (int h = 0; h < 4; h++) {
                const __m256i p = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
                W[h] = _mm256_and_si256(p, lo4);
                W[h + 4] = _mm256_and_si256(_mm256_srli_epi16(p, 4), lo4);
            }
        } else {
            const __m256i S0 = _mm256_loadu_si256((const __m256i *)b);
            const __m256i S1 = _mm256_loadu_si256((const __m256i *)(b + 64));
            for (int g = 0; g < 8; g++)
                W[g] = _mm256_and_si256(yk_shift(g < 4 ? S0 : S1, -2 * (g & 3)), lo2);
        }
        if (f.hi_bits == 1) {
            const __m256i H = _mm256_loadu_si256((const __m256i *)(b + lob));
            for (int g = 0; g < 8; g++)
                W[g] = _mm256_or_si256(W[g], _mm256_and_si256(yk_shift(H, f.lo_bits - g), hmask));
        } else if (f.hi_bits == 2) {
            const __m256i H0 = _mm256_loadu_si256((const __m256i *)(b + lob));
            const __m256i H1 = _mm256_loadu_si256((const __m256i *)(b + lob + 64));
            for (int g = 0; g < 8; g++)
                W[g] = _mm256_or_si256(W[g], _mm256_and_si256(yk_shift(g < 4 ? H0 : H1, 4 - 2 * (g & 3)), hmask));
        }
        __m256i U[8];
        for (int g = 0; g < 8; g++) {
            if (f.lv)
                W[g] = _mm256_shuffle_epi8(lut, W[g]);
            U[g] = f.lv ? _mm256_abs_epi8(W[g]) : W[g];
        }
        const uint8_t *sc = blk + so;
        __m256 dd0, dd1 = _mm256_setzero_ps(), mm0 = _mm256_setzero_ps(), mm1 = _mm256_setzero_ps();
        switch (f.sk) {
        case PLUME_SK_D16: dd0 = yk_f16(sc + 16 * half); break;
        case PLUME_SK_DM16:
            dd0 = yk_f16(sc + 16 * half);
            mm0 = yk_f16(sc + 32 + 16 * half);
            break;
        case PLUME_SK_K32M:
            dd0 = _mm256_mul_ps(dsb, _mm256_cvtepi32_ps(yk_u8(sc + 8 * half)));
            mm0 = _mm256_mul_ps(msb, _mm256_cvtepi32_ps(yk_u8(sc + 16 + 8 * half)));
            break;
        case PLUME_SK_K16:
            dd0 = _mm256_mul_ps(dsb, yk_i8(sc + 8 * half));
            dd1 = _mm256_mul_ps(dsb, yk_i8(sc + 16 + 8 * half));
            break;
        case PLUME_SK_K16M: {
            const __m256i x0 = yk_u8(sc + 8 * half), x1 = yk_u8(sc + 16 + 8 * half);
            const __m256i m4 = _mm256_set1_epi32(15);
            dd0 = _mm256_mul_ps(dsb, _mm256_cvtepi32_ps(_mm256_and_si256(x0, m4)));
            dd1 = _mm256_mul_ps(dsb, _mm256_cvtepi32_ps(_mm256_and_si256(x1, m4)));
            mm0 = _mm256_mul_ps(msb, _mm256_cvtepi32_ps(_mm256_srli_epi32(x0, 4)));
            mm1 = _mm256_mul_ps(msb, _mm256_cvtepi32_ps(_mm256_srli_epi32(x1, 4)));
            break;
        }
        case PLUME_SK_E8: dd0 = _mm256_castsi256_ps(yk_e8m0(yk_u8(sc + 8 * half))); break;
        default: dd0 = _mm256_mul_ps(dsb, yk_i8(sc + 8 * half)); break;
        }
        for (int t = 0; t < T; t++) {
            const size_t tt = (size_t)(t0 + t);
            const int8_t *q = a->q + tt * (size_t)K + 32 * j;
            const int32_t *is16 = a->isum16 + tt * 2 * (size_t)nb + 2 * j;
            __m256i ih[2];
            for (int hh = 0; hh < 2; hh++) {
                __m256i acc = corr ? _mm256_set1_epi32(corr * is16[hh]) : _mm256_setzero_si256();
                __m256i s16 = _mm256_setzero_si256();
                for (int g = 4 * hh; g < 4 * hh + 4; g++) {
                    int v;
                    memcpy(&v, q + 4 * g, 4);
                    __m256i av = _mm256_set1_epi32(v);
                    if (f.lv)
                        av = _mm256_sign_epi8(av, W[g]);
                    const __m256i p = _mm256_maddubs_epi16(U[g], av);
                    if (wide)
                        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
                    else
                        s16 = _mm256_add_epi16(s16, p);
                }
                ih[hh] = wide ? acc : _mm256_add_epi32(acc, _mm256_madd_epi16(s16, ones));
            }
            const __m256 da = _mm256_set1_ps(a->d[tt * nb + j]);
            if (two) {
                facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih[0]), _mm256_mul_ps(dd0, da), facc[t]);
                facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih[1]), _mm256_mul_ps(dd1, da), facc[t]);
            } else {
                facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(ih[0], ih[1])),
                                          _mm256_mul_ps(dd0, da), facc[t]);
            }
            if (f.sk == PLUME_SK_DM16) {
                macc[t] = _mm256_fmadd_ps(mm0, _mm256_set1_ps(a->s[tt * nb + j]), macc[t]);
            } else if (mk == 1) {
                macc[t] = _mm256_fnmadd_ps(mm0, _mm256_set1_ps(a->s[tt * nb + j]), macc[t]);
            } else if (mk == 2) {
                const float *s16 = a->s16 + tt * 2 * (size_t)nb + 2 * j;
                macc[t] = _mm256_fnmadd_ps(mm0, _mm256_set1_ps(s16[0]), macc[t]);
                macc[t] = _mm256_fnmadd_ps(mm1, _mm256_set1_ps(s16[1]), macc[t]);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        const __m256 r = mk ? _mm256_add_ps(facc[t], macc[t]) : facc[t];
        plume_x86_store8(y + (size_t)(t0 + t) * ldy + 8 * half, r, nr);
    }
}

/* A tile of either family of layouts. */
KX_INLINE void y_tile(const int kr, const int T, const uint8_t *wg, int64_t nb, int half,
                      const plume_q8_act *a, int t0, float *y, int64_t ldy, int nr)
{
    if (kr >= PLUME_KR_Q5_0)
        yk_tile(kr, T, wg, nb, half, a, t0, y, ldy, nr);
    else
        yr_tile(kr, T, wg, nb, half, a, t0, y, ldy, nr);
}

KX_INLINE void yr_mm(const int kr, const uint8_t *w, int n_rows, const plume_q8_act *a,
                     int n_tok, float *y, int64_t ldy)
{
    const int64_t nb = a->K / 32;
    const size_t gb = plume_rp_group_bytes(kr, nb);
    for (int g0 = 0; g0 < n_rows; g0 += PLUME_RP_ROWS, w += gb) {
        const int nr = n_rows - g0 < PLUME_RP_ROWS ? n_rows - g0 : PLUME_RP_ROWS;
        for (int half = 0; half < 2 && 8 * half < nr; half++) {
            const int hr = nr - 8 * half;
            int t = 0;
            for (; t + YR_T <= n_tok; t += YR_T)
                y_tile(kr, YR_T, w, nb, half, a, t, y + g0, ldy, hr);
            for (; t < n_tok; t++)
                y_tile(kr, 1, w, nb, half, a, t, y + g0, ldy, hr);
        }
    }
}

#define YR_MM(name, kr) PLUME_MM_R_ENTRY(name, yr_mm, kr)
YR_MM(yr_mm_q4_0, PLUME_KR_Q4_0)
YR_MM(yr_mm_q4_1, PLUME_KR_Q4_1)
YR_MM(yr_mm_q8_0, PLUME_KR_Q8_0)

YR_MM(yk_mm_q5_0, PLUME_KR_Q5_0)
YR_MM(yk_mm_q5_1, PLUME_KR_Q5_1)
YR_MM(yk_mm_iq4_nl, PLUME_KR_IQ4_NL)
YR_MM(yk_mm_q4_k, PLUME_KR_Q4_K)
YR_MM(yk_mm_q5_k, PLUME_KR_Q5_K)
YR_MM(yk_mm_q6_k, PLUME_KR_Q6_K)
YR_MM(yk_mm_q2_k, PLUME_KR_Q2_K)
YR_MM(yk_mm_q3_k, PLUME_KR_Q3_K)
YR_MM(yk_mm_iq4_xs, PLUME_KR_IQ4_XS)
YR_MM(yk_mm_mxfp4, PLUME_KR_MXFP4)

/* Twelve independent 256-bit FMA chains (written in assembly so that the
 * accumulators stay in registers); operands are zero, so no denormals. */
static double fma_peak(long iters)
{
    __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1" ::: "xmm0", "xmm1");
    for (long it = 0; it < iters; it++)
        __asm__ volatile(KX_CHAINS12("vfmadd231ps", "ymm") ::: KX_CHAINS12_CLOBBERS);
    return 2.0 * 8.0 * 12.0 * (double)iters;
}

/* The sequence the avx2 matmul uses per 32 u8×s8 products (vpmaddubsw,
 * vpmaddwd, vpaddd), six independent chains. */
static double int8_peak(long iters)
{
    __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1\n\t"
                     "vpcmpeqw %%ymm2, %%ymm2, %%ymm2\n\tvpsrlw $15, %%ymm2, %%ymm2" ::: "xmm0", "xmm1", "xmm2");
    for (long it = 0; it < iters; it++)
        __asm__ volatile(
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm4\n\t"
            "vpmaddwd %%ymm2, %%ymm4, %%ymm4\n\t"
            "vpaddd %%ymm4, %%ymm10, %%ymm10\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm5\n\t"
            "vpmaddwd %%ymm2, %%ymm5, %%ymm5\n\t"
            "vpaddd %%ymm5, %%ymm11, %%ymm11\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm6\n\t"
            "vpmaddwd %%ymm2, %%ymm6, %%ymm6\n\t"
            "vpaddd %%ymm6, %%ymm12, %%ymm12\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm7\n\t"
            "vpmaddwd %%ymm2, %%ymm7, %%ymm7\n\t"
            "vpaddd %%ymm7, %%ymm13, %%ymm13\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm8\n\t"
            "vpmaddwd %%ymm2, %%ymm8, %%ymm8\n\t"
            "vpaddd %%ymm8, %%ymm14, %%ymm14\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm9\n\t"
            "vpmaddwd %%ymm2, %%ymm9, %%ymm9\n\t"
            "vpaddd %%ymm9, %%ymm15, %%ymm15\n\t"
            ::: KX_CHAINS12_CLOBBERS);
    return 2.0 * 32.0 * 6.0 * (double)iters;
}

static const plume_kernels K = {
    .level = PLUME_CPU_AVX2,
    .mm_q = {kx_mm_q4_0, kx_mm_q4_1, kx_mm_q8_0, kx_mm_q4_k, kx_mm_q6_k},
    .mm_r = {yr_mm_q4_0, yr_mm_q4_1, yr_mm_q8_0, yk_mm_q5_0, yk_mm_q5_1, yk_mm_iq4_nl,
             yk_mm_q4_k, yk_mm_q5_k, yk_mm_q6_k, yk_mm_q2_k, yk_mm_q3_k, yk_mm_iq4_xs,
             yk_mm_mxfp4},
    KX_SHARED_KERNELS,
    .fma_peak = fma_peak,
    .int8_peak = int8_peak,
};

PLUME_X86_TARGET_END

const plume_kernels *plume_kernels_avx2(void) { return &K; }

#else
#include <stddef.h>
#include "backend/cpu/dispatch.h"
const plume_kernels *plume_kernels_avx2(void) { return NULL; }
#endif
