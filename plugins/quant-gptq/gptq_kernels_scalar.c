/* quant-gptq: the scalar level of the fast kernels (gptq_kernels.h), which
 * runs anywhere, and the choice of a level's table. */
#include <pthread.h>
#include <string.h>

#include "gptq_kernels.h"
#include "plume/cpu.h"

/* iv[r] = Σ_{i<32} v_r,i · q_i for the 16 rows of a nibble block (loops
 * over contiguous bytes, which compilers vectorize at any level). */
static void dot_nib(const uint8_t *blk, const int8_t *q, int32_t iv[GPTQ_TILE_ROWS])
{
    for (int r = 0; r < GPTQ_TILE_ROWS; r++)
        iv[r] = 0;
    for (int h = 0; h < 4; h++)
        for (int r = 0; r < GPTQ_TILE_ROWS; r++)
            for (int i = 0; i < 4; i++) {
                const uint8_t b = blk[64 * h + 4 * r + i];
                iv[r] += (int32_t)(b & 15) * q[4 * h + i] + (int32_t)(b >> 4) * q[16 + 4 * h + i];
            }
}

/* The same for a byte block (int8 values). */
static void dot_byte(const uint8_t *blk, const int8_t *q, int32_t iv[GPTQ_TILE_ROWS])
{
    for (int r = 0; r < GPTQ_TILE_ROWS; r++)
        iv[r] = 0;
    for (int g = 0; g < 8; g++)
        for (int r = 0; r < GPTQ_TILE_ROWS; r++)
            for (int i = 0; i < 4; i++)
                iv[r] += (int32_t)(int8_t)blk[64 * g + 4 * r + i] * q[4 * g + i];
}

/* One tile's rows r < nr for every token: the product of gptq_kernels.h,
 * with the same float steps per (row, token) as the SIMD levels. */
static void tile(const uint8_t *tw, const gptq_kgeom *g, int nr, const gptq_kact *a, int n_tok,
                 float *y, int64_t ldy)
{
    const int64_t K = a->K, nb = K / 32;
    const size_t bb = g->wide ? GPTQ_BYTE_BLOCK : GPTQ_NIB_BLOCK;
    for (int t = 0; t < n_tok; t++) {
        const int8_t *q = a->q + (size_t)t * (size_t)K;
        const float *d = a->d + (size_t)t * (size_t)nb, *S = a->S + (size_t)t * (size_t)a->nseg;
        float acc[GPTQ_TILE_ROWS] = {0};
        const uint8_t *p = tw;
        int64_t b0 = 0;
        for (int64_t s = 0; s < g->nseg; s++) {
            const float *sc = (const float *)p, *z = sc + GPTQ_TILE_ROWS;
            const uint8_t *blk = p + GPTQ_HDR_BYTES;
            const int64_t n = g->seg_nb[s];
            float f[GPTQ_TILE_ROWS] = {0};
            for (int64_t j = 0; j < n; j++, blk += bb) {
                int32_t iv[GPTQ_TILE_ROWS];
                if (g->wide)
                    dot_byte(blk, q + 32 * (b0 + j), iv);
                else
                    dot_nib(blk, q + 32 * (b0 + j), iv);
                for (int r = 0; r < GPTQ_TILE_ROWS; r++)
                    f[r] += (float)iv[r] * d[b0 + j];
            }
            for (int r = 0; r < GPTQ_TILE_ROWS; r++)
                acc[r] += sc[r] * (f[r] - z[r] * S[s]);
            p = blk;
            b0 += n;
        }
        for (int r = 0; r < nr; r++)
            y[(size_t)t * (size_t)ldy + (size_t)r] = acc[r];
    }
}

static void mm(const uint8_t *tiles, const gptq_kgeom *g, int64_t j0, int64_t j1, int64_t n_rows,
               const gptq_kact *a, int n_tok, float *y, int64_t ldy)
{
    for (int64_t j = j0; j < j1; j++) {
        const int64_t r0 = j * GPTQ_TILE_ROWS;
        const int nr = gptq_tile_nr(n_rows, r0);
        tile(tiles + (size_t)j * g->tile_bytes, g, nr, a, n_tok, y + r0, ldy);
    }
}

static const gptq_kernels k_scalar = {
    .level = PLUME_CPU_LEVEL_SCALAR,
    .mm4 = mm,
    .mm8 = mm,
};

const gptq_kernels *gptq_kernels_scalar(void) { return &k_scalar; }

/* ---- the choice of a level ---- */

const gptq_kernels *gptq_kernels_for(int level)
{
    if (!plume_cpu_can_run(level))
        return NULL;
    switch (level) {
    case PLUME_CPU_LEVEL_SCALAR: return gptq_kernels_scalar();
    case PLUME_CPU_LEVEL_AVX2: return gptq_kernels_avx2();
    case PLUME_CPU_LEVEL_AVX512: return gptq_kernels_avx512();
    default: return NULL;
    }
}

static const gptq_kernels *g_active; /* set once under g_once, then read-only */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    int level = plume_cpu_active_level();
    const gptq_kernels *k = gptq_kernels_for(level);
    while (!k && level > PLUME_CPU_LEVEL_SCALAR)
        k = gptq_kernels_for(--level);
    g_active = k ? k : gptq_kernels_scalar();
}

const gptq_kernels *gptq_kernels_active(void)
{
    pthread_once(&g_once, choose);
    return g_active;
}
