/* The avx2 level: AVX2 + FMA + F16C, int8 dot products with
 * vpmaddubsw/vpmaddwd.  Compiled for that target whatever the build's
 * -march, and only called after cpu_features.c found those features. */
#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c")
#endif

#define KX_VNNI 0
#define KX_TR 2
#define KX_TT 3
#define KX_FR 2
#define KX_FT 4
#define KX_DR 4
#include "backend/cpu/kernels_x86.h"
#include "backend/cpu/repack.h"

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
        float *yt = y + (size_t)(t0 + t) * ldy + 8 * half;
        if (nr >= 8) {
            _mm256_storeu_ps(yt, r);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, r);
            memcpy(yt, tmp, sizeof(float) * (size_t)nr);
        }
    }
}

KX_INLINE void yr_mm(const int kr, const uint8_t *w, int n_rows, const plume_q8_act *a,
                     int n_tok, float *y, int64_t ldy)
{
    const int64_t nb = a->K / 32;
    const size_t gb = plume_rp_block_bytes(kr) * (size_t)nb;
    for (int g0 = 0; g0 < n_rows; g0 += PLUME_RP_ROWS, w += gb) {
        const int nr = n_rows - g0 < PLUME_RP_ROWS ? n_rows - g0 : PLUME_RP_ROWS;
        for (int half = 0; half < 2 && 8 * half < nr; half++) {
            const int hr = nr - 8 * half;
            int t = 0;
            for (; t + YR_T <= n_tok; t += YR_T)
                yr_tile(kr, YR_T, w, nb, half, a, t, y + g0, ldy, hr);
            for (; t < n_tok; t++)
                yr_tile(kr, 1, w, nb, half, a, t, y + g0, ldy, hr);
        }
    }
}

#define YR_MM(name, kr)                                                                        \
    static void name(const uint8_t *w, int n_rows, const plume_q8_act *a, int n_tok, float *y, \
                     int64_t ldy)                                                              \
    {                                                                                          \
        yr_mm(kr, w, n_rows, a, n_tok, y, ldy);                                                \
    }
YR_MM(yr_mm_q4_0, PLUME_KR_Q4_0)
YR_MM(yr_mm_q4_1, PLUME_KR_Q4_1)
YR_MM(yr_mm_q8_0, PLUME_KR_Q8_0)

/* Twelve independent 256-bit FMA chains (written in assembly so that the
 * accumulators stay in registers); operands are zero, so no denormals. */
static double fma_peak(long iters)
{
    __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1" ::: "xmm0", "xmm1");
    for (long it = 0; it < iters; it++)
        __asm__ volatile(
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm4\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm5\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm6\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm7\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm8\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm9\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm10\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm11\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm12\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm13\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm14\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm15\n\t"
            ::: "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
              "xmm13", "xmm14", "xmm15");
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
            ::: "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
              "xmm13", "xmm14", "xmm15");
    return 2.0 * 32.0 * 6.0 * (double)iters;
}

static const plume_kernels K = {
    .level = PLUME_CPU_AVX2,
    .quantize_q8 = kx_quantize_q8,
    .mm_q = {kx_mm_q4_0, kx_mm_q4_1, kx_mm_q8_0, kx_mm_q4_k, kx_mm_q6_k},
    .mm_f = {kx_mm_f32, kx_mm_f16, kx_mm_bf16},
    .mm_r = {yr_mm_q4_0, yr_mm_q4_1, yr_mm_q8_0},
    .dot = kx_dotf,
    .axpy = kx_axpy,
    .rmsnorm = kx_rmsnorm,
    .rope = kx_rope,
    .swiglu = kx_swiglu,
    .attn_step = kx_attn_step,
    .attn_partial = kx_attn_partial,
    .attn_merge = kx_attn_merge,
    .attn_paged = kx_attn_paged,
    .attn_paged_tile = kx_attn_paged_tile,
    .softmax_exp = kx_softmax_exp,
    .read_sum = kx_read_sum,
    .fma_peak = fma_peak,
    .int8_peak = int8_peak,
};

#if defined(__clang__)
#pragma clang attribute pop
#endif

const plume_kernels *plume_kernels_avx2(void) { return &K; }

#else
#include <stddef.h>
#include "backend/cpu/dispatch.h"
const plume_kernels *plume_kernels_avx2(void) { return NULL; }
#endif
