/* quant-gptq: the fast CPU kernels of the "gptq" provider — the repacked
 * weight layout they read, the quantized activations they take, and one
 * table of kernels per dispatch level of the core (plume/cpu.h):
 * gptq_kernels_scalar.c, gptq_kernels_avx2.c, gptq_kernels_avx512.c.
 *
 * ---- weight layout (built by gptq_layer_build, gptq_linear.c) ----
 * Inputs are taken in the layer's (act-order permuted) input order and cut
 * into segments: maximal runs of inputs of one group.  The fast layout needs
 * every segment to be a whole number of 32-input blocks.
 * Output rows are taken GPTQ_TILE_ROWS = 16 at a time ("tiles"; the last one
 * padded with zero rows), so that one 32-bit lane of a 512-bit vector (or of
 * a 256-bit half) belongs to one row: an int8 dot product of 4 weight bytes
 * per lane with 4 activation bytes broadcast advances 16 rows at once, with
 * no horizontal sums.  Every tile has the same size (tile_bytes) and is, for
 * each segment s in input order:
 *   header (128 bytes): sc f32[16] then z f32[16], one per row of the tile;
 *   nb_s blocks of 32 inputs each, in input order:
 *     nibble blocks (bits 2, 3, 4; codes < 16): 256 bytes = 4 slices of 64;
 *       slice h holds at bytes 4r+i row r's code 4h+i in the low nibble and
 *       code 16+4h+i in the high nibble (the core's Q4 repack order, so
 *       slice h & 15 pairs with activation bytes 4h.., slice h >> 4 with
 *       16+4h..);
 *     byte blocks (bits 8): 512 bytes = 8 slices of 64; slice g holds at
 *       bytes 4r+i row r's code 4g+i minus 128, as int8 (so that AVX2's
 *       vpmaddubsw of |w| with sign(a, w) cannot saturate).
 * The weight of row r at a block position holding v is sc·(v − z): for
 * nibble layers v is the code and z the true zero point; for byte layers v
 * is code − 128 and z is zero − 128.
 *
 * ---- the product ----
 * y[t][n] = Σ_s sc_n,s · (Σ_{b∈s} d_tb · Σ_{i<32} v_n,i · q_t,i − z_n,s · S_ts)
 * where the activations of token t (permuted) are x ≈ d_tb · q per block b
 * (plume_cpu_quantize_q8) and S_ts = Σ_{b∈s} d_tb · Σ q over block b.  The
 * integer dot of a block is exact at every level; the float operations per
 * (row, token) are the same sequence at every level (the SIMD levels fuse
 * multiply-adds), so the levels agree to float rounding. */
#ifndef PLUME_GPTQ_KERNELS_H
#define PLUME_GPTQ_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GPTQ_TILE_ROWS 16
#define GPTQ_HDR_BYTES 128   /* sc[16] + z[16], f32 */
#define GPTQ_NIB_BLOCK 256   /* 16 rows × 32 nibble codes */
#define GPTQ_BYTE_BLOCK 512  /* 16 rows × 32 int8 codes */

/* The rows of the tile that starts at row r0 of a layer of n_rows rows:
 * GPTQ_TILE_ROWS, but fewer in a last tile padded with zero rows. */
static inline int gptq_tile_nr(int64_t n_rows, int64_t r0)
{
    return n_rows - r0 < GPTQ_TILE_ROWS ? (int)(n_rows - r0) : GPTQ_TILE_ROWS;
}

/* The shape of a repacked layer's tiles. */
typedef struct gptq_kgeom {
    int64_t nseg;          /* segments per tile */
    const int32_t *seg_nb; /* [nseg] blocks of 32 inputs in each segment */
    size_t tile_bytes;     /* bytes of one tile (a multiple of 64) */
    bool wide;             /* byte blocks (8-bit); else nibble blocks */
} gptq_kgeom;

/* n_tok tokens of quantized (permuted) activations. */
typedef struct gptq_kact {
    const int8_t *q;       /* [n_tok][K] */
    const float *d;        /* [n_tok][K/32] block scales */
    const int32_t *isum;   /* [n_tok][K/32] Σ q over each block */
    const float *S;        /* [n_tok][nseg] Σ over the segment's blocks of d·Σq */
    int64_t K, nseg;
} gptq_kact;

/* For tiles j in [j0, j1) of the layer at `tiles`: writes y[t·ldy + n] for
 * every row n = 16·j + r < n_rows and token t < n_tok, the product above
 * (no bias).  Rows of other tiles are not touched, and a row's result does
 * not depend on j0, j1 or n_tok. */
typedef void (*gptq_mm_fn)(const uint8_t *tiles, const gptq_kgeom *g, int64_t j0, int64_t j1,
                           int64_t n_rows, const gptq_kact *a, int n_tok, float *y, int64_t ldy);

/* One dispatch level's kernels. */
typedef struct gptq_kernels {
    int level;       /* PLUME_CPU_LEVEL_* */
    gptq_mm_fn mm4;  /* nibble blocks */
    gptq_mm_fn mm8;  /* byte blocks */
} gptq_kernels;

/* Per-level tables; avx2/avx512 return NULL when this build is not for
 * x86-64.  Only to be called on a CPU that supports the level. */
const gptq_kernels *gptq_kernels_scalar(void);
const gptq_kernels *gptq_kernels_avx2(void);
const gptq_kernels *gptq_kernels_avx512(void);

/* The table for a level, or NULL when this CPU or build cannot run it. */
const gptq_kernels *gptq_kernels_for(int level);

/* The table for the core's active level (plume_cpu_active_level(), so
 * PLUME_CPU_FEATURES applies), or the best level below it this build has.
 * Chosen once (pthread_once); never NULL. */
const gptq_kernels *gptq_kernels_active(void);

#endif
