/* quant-gptq: the avx2 level of the fast kernels (gptq_kernels.h): AVX2 +
 * FMA + F16C.  A tile of 16 rows is two 256-bit halves of 8 rows (a row per
 * 32-bit lane), both done in the same pass over the tile's blocks.
 * Nibble blocks: vpmaddubsw of the unsigned codes with the token's 4
 * activation bytes broadcast, the 8 products of a block summed in int16
 * (at most 8·2·15·127 = 30480, no saturation), then vpmaddwd to int32.
 * Byte blocks hold code − 128 as int8: |w| × sign(a, w) (the core's trick;
 * a pair is at most 2·128·127 = 32512), widened to int32 at once.
 * Tokens are taken YT at a time to share the weights' unpacking; each
 * token's lane sees the same instructions whatever the tile.  Compiled for
 * this target whatever the build's -march and only called after
 * plume_cpu_can_run(PLUME_CPU_LEVEL_AVX2). */
#include "gptq_kernels.h"
#include "plume/cpu.h"

#if defined(__x86_64__)

#include "plume/cpu_x86.h"

PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AVX2)

#include "plume/cpu_x86_avx2.h"

#define YT 2 /* tokens per tile of the prefill kernel */

/* Σ v·q of one block for the 8 rows of half `half`, for T tokens. */
PLUME_X86_INLINE void y_block_dot(const int wide, const int T, const uint8_t *blk, int half,
                                  const int8_t *const q[YT], __m256i out[YT])
{
    const __m256i ones = _mm256_set1_epi16(1);
    if (wide) {
        for (int t = 0; t < T; t++)
            out[t] = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 64 * g + 32 * half));
            const __m256i aw = _mm256_abs_epi8(w);
            for (int t = 0; t < T; t++) {
                const __m256i a4 = _mm256_sign_epi8(plume_x86_bcast4(q[t] + 4 * g), w);
                const __m256i p = _mm256_maddubs_epi16(aw, a4);
                out[t] = _mm256_add_epi32(out[t], _mm256_madd_epi16(p, ones));
            }
        }
        return;
    }
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    __m256i s16[YT];
    for (int t = 0; t < T; t++)
        s16[t] = _mm256_setzero_si256();
    for (int h = 0; h < 4; h++) {
        const __m256i pv = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32 * half));
        const __m256i lo = _mm256_and_si256(pv, lo4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(pv, 4), lo4);
        for (int t = 0; t < T; t++) {
            const __m256i alo = plume_x86_bcast4(q[t] + 4 * h);
            const __m256i ahi = plume_x86_bcast4(q[t] + 16 + 4 * h);
            s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(lo, alo));
            s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(hi, ahi));
        }
    }
    for (int t = 0; t < T; t++)
        out[t] = _mm256_madd_epi16(s16[t], ones);
}

/* Tokens t0 .. t0+T-1 of one tile (its first nr rows are stored). */
PLUME_X86_INLINE void y_tile(const int wide, const int T, const uint8_t *tw, const gptq_kgeom *g,
                             const gptq_kact *a, int t0, float *y, int64_t ldy, int nr)
{
    const int64_t K = a->K, nb = K / 32;
    const size_t bb = wide ? GPTQ_BYTE_BLOCK : GPTQ_NIB_BLOCK;
    __m256 acc[YT][2];
    for (int t = 0; t < T; t++)
        acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    const uint8_t *p = tw;
    int64_t b0 = 0;
    for (int64_t s = 0; s < g->nseg; s++) {
        const uint8_t *blk = p + GPTQ_HDR_BYTES;
        const int64_t n = g->seg_nb[s];
        __m256 f[YT][2];
        for (int t = 0; t < T; t++)
            f[t][0] = f[t][1] = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j++, blk += bb) {
            const int64_t b = b0 + j;
            const int8_t *q[YT];
            __m256 d[YT];
            for (int t = 0; t < T; t++) {
                const size_t tt = (size_t)(t0 + t);
                q[t] = a->q + tt * (size_t)K + 32 * b;
                d[t] = _mm256_set1_ps(a->d[tt * (size_t)nb + b]);
            }
            for (int half = 0; half < 2; half++) {
                __m256i v[YT];
                y_block_dot(wide, T, blk, half, q, v);
                for (int t = 0; t < T; t++)
                    f[t][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v[t]), d[t], f[t][half]);
            }
        }
        for (int half = 0; half < 2; half++) {
            const __m256 sc = _mm256_loadu_ps((const float *)p + 8 * half);
            const __m256 z = _mm256_loadu_ps((const float *)p + GPTQ_TILE_ROWS + 8 * half);
            for (int t = 0; t < T; t++) {
                const __m256 S = _mm256_set1_ps(a->S[(size_t)(t0 + t) * (size_t)a->nseg + (size_t)s]);
                acc[t][half] = _mm256_fmadd_ps(sc, _mm256_fnmadd_ps(z, S, f[t][half]), acc[t][half]);
            }
        }
        p = blk;
        b0 += n;
    }
    for (int t = 0; t < T; t++) {
        float *yt = y + (size_t)(t0 + t) * (size_t)ldy;
        plume_x86_store8(yt, acc[t][0], nr);
        plume_x86_store8(yt + 8, acc[t][1], nr - 8);
    }
}

PLUME_X86_INLINE void y_mm(const int wide, const uint8_t *tiles, const gptq_kgeom *g, int64_t j0,
                           int64_t j1, int64_t n_rows, const gptq_kact *a, int n_tok, float *y,
                           int64_t ldy)
{
    for (int64_t j = j0; j < j1; j++) {
        const int64_t r0 = j * GPTQ_TILE_ROWS;
        const int nr = gptq_tile_nr(n_rows, r0);
        const uint8_t *tw = tiles + (size_t)j * g->tile_bytes;
        int t = 0;
        for (; t + YT <= n_tok; t += YT)
            y_tile(wide, YT, tw, g, a, t, y + r0, ldy, nr);
        for (; t < n_tok; t++)
            y_tile(wide, 1, tw, g, a, t, y + r0, ldy, nr);
    }
}

static void y_mm4(const uint8_t *tiles, const gptq_kgeom *g, int64_t j0, int64_t j1,
                  int64_t n_rows, const gptq_kact *a, int n_tok, float *y, int64_t ldy)
{
    y_mm(0, tiles, g, j0, j1, n_rows, a, n_tok, y, ldy);
}

static void y_mm8(const uint8_t *tiles, const gptq_kgeom *g, int64_t j0, int64_t j1,
                  int64_t n_rows, const gptq_kact *a, int n_tok, float *y, int64_t ldy)
{
    y_mm(1, tiles, g, j0, j1, n_rows, a, n_tok, y, ldy);
}

static const gptq_kernels k_avx2 = {
    .level = PLUME_CPU_LEVEL_AVX2,
    .mm4 = y_mm4,
    .mm8 = y_mm8,
};

PLUME_X86_TARGET_END

const gptq_kernels *gptq_kernels_avx2(void) { return &k_avx2; }

#else
const gptq_kernels *gptq_kernels_avx2(void) { return NULL; }
#endif
