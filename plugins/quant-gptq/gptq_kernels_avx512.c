/* quant-gptq: the avx512 level of the fast kernels (gptq_kernels.h):
 * AVX-512 F/BW/DQ/VL + VNNI.  One tile of 16 rows is one 512-bit vector
 * (a row per 32-bit lane); per block and token, 8 vpdpbusd of the block's
 * unsigned codes with the token's 4 activation bytes broadcast (two chains
 * of 4).  Byte blocks hold code − 128: xor 0x80 gives the unsigned code
 * back, and the 128·Σq that adds is subtracted from the chain's start.
 * Tokens are taken ZT at a time so that one unpacking of the weights serves
 * them all; each token's lane sees the same instructions in the same order
 * whatever the tile.  Compiled for this target whatever the build's -march
 * and only called after plume_cpu_can_run(PLUME_CPU_LEVEL_AVX512). */
#include "gptq_kernels.h"
#include "plume/cpu.h"

#if defined(__x86_64__)

#include "plume/cpu_x86.h"

PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AVX512)

#include "plume/cpu_x86_avx512.h"

#define ZT 6 /* tokens per tile of the prefill kernel */

/* The 8 operand vectors of one block: W[g] pairs with activation bytes
 * 4g..4g+3. */
PLUME_X86_INLINE void z_unpack(const int wide, const uint8_t *blk, __m512i W[8])
{
    if (wide) {
        const __m512i x80 = _mm512_set1_epi8((char)0x80);
        for (int g = 0; g < 8; g++)
            W[g] = _mm512_xor_si512(_mm512_loadu_si512(blk + 64 * g), x80);
    } else {
        const __m512i lo4 = _mm512_set1_epi8(0x0F);
        for (int h = 0; h < 4; h++) {
            const __m512i p = _mm512_loadu_si512(blk + 64 * h);
            W[h] = _mm512_and_si512(p, lo4);
            W[h + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), lo4);
        }
    }
}

/* Σ v·q of one block for the 16 rows (exact int32). */
PLUME_X86_INLINE __m512i z_block_dot(const int wide, const __m512i W[8], const int8_t *q,
                                     int32_t isum)
{
    __m512i i0 = wide ? _mm512_set1_epi32(-128 * isum) : _mm512_setzero_si512();
    __m512i i1 = _mm512_setzero_si512();
    plume_x86_dot32_halves(&i0, &i1, W, q);
    return _mm512_add_epi32(i0, i1);
}

/* Tokens t0 .. t0+T-1 of one tile (rows under mask). */
PLUME_X86_INLINE void z_tile(const int wide, const int T, const uint8_t *tw, const gptq_kgeom *g,
                             const gptq_kact *a, int t0, float *y, int64_t ldy, __mmask16 mask)
{
    const int64_t K = a->K, nb = K / 32;
    const size_t bb = wide ? GPTQ_BYTE_BLOCK : GPTQ_NIB_BLOCK;
    __m512 acc[ZT];
    for (int t = 0; t < T; t++)
        acc[t] = _mm512_setzero_ps();
    const uint8_t *p = tw;
    int64_t b0 = 0;
    for (int64_t s = 0; s < g->nseg; s++) {
        const __m512 sc = _mm512_loadu_ps(p), z = _mm512_loadu_ps(p + 64);
        const uint8_t *blk = p + GPTQ_HDR_BYTES;
        const int64_t n = g->seg_nb[s];
        __m512 f[ZT];
        for (int t = 0; t < T; t++)
            f[t] = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j++, blk += bb) {
            __m512i W[8];
            z_unpack(wide, blk, W);
            const int64_t b = b0 + j;
            for (int t = 0; t < T; t++) {
                const size_t tt = (size_t)(t0 + t);
                const int8_t *q = a->q + tt * (size_t)K + 32 * b;
                const __m512i v = z_block_dot(wide, W, q, wide ? a->isum[tt * (size_t)nb + b] : 0);
                f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(a->d[tt * (size_t)nb + b]),
                                       f[t]);
            }
        }
        for (int t = 0; t < T; t++) {
            const float S = a->S[(size_t)(t0 + t) * (size_t)a->nseg + (size_t)s];
            acc[t] = _mm512_fmadd_ps(sc, _mm512_fnmadd_ps(z, _mm512_set1_ps(S), f[t]), acc[t]);
        }
        p = blk;
        b0 += n;
    }
    for (int t = 0; t < T; t++)
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy, mask, acc[t]);
}

PLUME_X86_INLINE void z_mm(const int wide, const uint8_t *tiles, const gptq_kgeom *g, int64_t j0,
                           int64_t j1, int64_t n_rows, const gptq_kact *a, int n_tok, float *y,
                           int64_t ldy)
{
    for (int64_t j = j0; j < j1; j++) {
        const int64_t r0 = j * GPTQ_TILE_ROWS;
        const int nr = gptq_tile_nr(n_rows, r0);
        const __mmask16 mask = (__mmask16)((1u << nr) - 1u);
        const uint8_t *tw = tiles + (size_t)j * g->tile_bytes;
        float *yr = y + r0;
        int t = 0;
        for (; t + ZT <= n_tok; t += ZT)
            z_tile(wide, ZT, tw, g, a, t, yr, ldy, mask);
        switch (n_tok - t) {
        case 5: z_tile(wide, 5, tw, g, a, t, yr, ldy, mask); break;
        case 4: z_tile(wide, 4, tw, g, a, t, yr, ldy, mask); break;
        case 3: z_tile(wide, 3, tw, g, a, t, yr, ldy, mask); break;
        case 2: z_tile(wide, 2, tw, g, a, t, yr, ldy, mask); break;
        case 1: z_tile(wide, 1, tw, g, a, t, yr, ldy, mask); break;
        default: break;
        }
    }
}

static void z_mm4(const uint8_t *tiles, const gptq_kgeom *g, int64_t j0, int64_t j1,
                  int64_t n_rows, const gptq_kact *a, int n_tok, float *y, int64_t ldy)
{
    z_mm(0, tiles, g, j0, j1, n_rows, a, n_tok, y, ldy);
}

static void z_mm8(const uint8_t *tiles, const gptq_kgeom *g, int64_t j0, int64_t j1,
                  int64_t n_rows, const gptq_kact *a, int n_tok, float *y, int64_t ldy)
{
    z_mm(1, tiles, g, j0, j1, n_rows, a, n_tok, y, ldy);
}

static const gptq_kernels k_avx512 = {
    .level = PLUME_CPU_LEVEL_AVX512,
    .mm4 = z_mm4,
    .mm8 = z_mm8,
};

PLUME_X86_TARGET_END

const gptq_kernels *gptq_kernels_avx512(void) { return &k_avx512; }

#else
const gptq_kernels *gptq_kernels_avx512(void) { return NULL; }
#endif
