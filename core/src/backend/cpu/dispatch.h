/* The CPU kernel table: one instance per dispatch level (kernels_scalar.c,
 * kernels_avx2.c, kernels_avx512.c), and the process-wide choice among them.
 *
 * The only global state is the active table pointer, chosen once (under
 * pthread_once) from the CPU's features and PLUME_CPU_FEATURES; afterwards it
 * is read-only. */
#ifndef PLUME_CPU_DISPATCH_H
#define PLUME_CPU_DISPATCH_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/cpu_features.h"

/* One token's block of 32 quantized activations with all that the AVX-512
 * repacked kernels read of it, in one cache line: the values, their scale
 * d, s = d * Σq, Σq, Σq per 16 values and d * that (the same numbers as the
 * row arrays of plume_q8_act). */
typedef struct plume_q8_blk {
    _Alignas(64) int8_t q[32];
    float d, s;
    int32_t isum;
    int32_t isum16[2];
    float s16[2];
} plume_q8_blk;
_Static_assert(sizeof(plume_q8_blk) == 64, "a block record is one cache line");

/* Where quantize_q8_sums writes one token's quantized values: the row
 * arrays of plume_q8_act (q[K], d and s [K/32], isum [K/32], isum16 and
 * s16 [K/16]) and, when blk is not NULL, block b's record at blk[b * ldb]. */
typedef struct plume_q8_out {
    int8_t *q;
    float *d, *s;
    int32_t *isum, *isum16;
    float *s16;
    plume_q8_blk *blk;
    int64_t ldb;
} plume_q8_out;

/* Block b's scalars in o, from its scale d and the sums s0 and s1 of its
 * first and last 16 values: d, s = d · (s0 + s1), isum, isum16 and s16 in
 * the row arrays and, when o->blk is set, in block b's record (the caller
 * stores the values themselves).  Every level's quantize_q8_sums ends each
 * block with it. */
static inline void plume_q8_out_sums(const plume_q8_out *o, int64_t b, float d, int32_t s0,
                                     int32_t s1)
{
    const float s = d * (float)(s0 + s1), h0 = d * (float)s0, h1 = d * (float)s1;
    o->d[b] = d;
    o->s[b] = s;
    o->isum[b] = s0 + s1;
    o->isum16[2 * b] = s0;
    o->isum16[2 * b + 1] = s1;
    o->s16[2 * b] = h0;
    o->s16[2 * b + 1] = h1;
    if (o->blk) {
        plume_q8_blk *r = o->blk + (size_t)b * (size_t)o->ldb;
        r->d = d;
        r->s = s;
        r->isum = s0 + s1;
        r->isum16[0] = s0;
        r->isum16[1] = s1;
        r->s16[0] = h0;
        r->s16[1] = h1;
    }
}

/* Activations quantized for integer dot products: per token, K values (a
 * multiple of 32) in blocks of 32, each with its own scale computed from
 * that block's values only: x ≈ d * q, q in [-127, 127].
 *   q: int8[n_tok][K]   d: float[n_tok][K/32]   s: float[n_tok][K/32] = d * Σq */
typedef struct plume_q8_act {
    const int8_t *q;
    const float *d;
    const float *s;
    int64_t K;
    /* int32[n_tok][K/32] = Σq per block; needed by the repacked kernels
     * (mm_r) of Q4_0 and Q8_0, and by the AVX-512 mm_r kernels of the
     * formats with one scale per 32 values and an offset correction (Q5_0,
     * IQ4_NL); may be NULL for the others. */
    const int32_t *isum;
    /* int32[n_tok][K/16] = Σq per 16 values and float[n_tok][K/16] =
     * d * that sum; needed by the mm_r kernels of the formats in
     * repack_k.h (PLUME_KR_Q5_0 and after), may be NULL for the others. */
    const int32_t *isum16;
    const float *s16;
    /* plume_q8_blk[K/32][ldb]: block j of token t at blk[j * ldb +
     * t], so that a tile of tokens is one base pointer and constant
     * offsets.  Needed by the AVX-512 mm_r kernels (which read nothing
     * else); may be NULL for the others. */
    const plume_q8_blk *blk;
    int64_t ldb;
} plume_q8_act;

/* Weight formats with a matmul kernel, indexing plume_kernels.mm_q/mm_f. */
enum { PLUME_KQ_Q4_0, PLUME_KQ_Q4_1, PLUME_KQ_Q8_0, PLUME_KQ_Q4_K, PLUME_KQ_Q6_K, PLUME_KQ_COUNT };
enum { PLUME_KF_F32, PLUME_KF_F16, PLUME_KF_BF16, PLUME_KF_COUNT };
/* Weight formats with a repacked (row-interleaved) kernel, indexing
 * plume_kernels.mm_r; layouts in repack.h. */
enum {
    PLUME_KR_Q4_0, PLUME_KR_Q4_1, PLUME_KR_Q8_0,  /* repack.h */
    PLUME_KR_Q5_0, PLUME_KR_Q5_1, PLUME_KR_IQ4_NL, PLUME_KR_Q4_K, PLUME_KR_Q5_K, /* repack_k.h */
    PLUME_KR_Q6_K, PLUME_KR_Q2_K, PLUME_KR_Q3_K, PLUME_KR_IQ4_XS, PLUME_KR_MXFP4,
    PLUME_KR_COUNT
};

/* y[t*ldy + r] = Σ_k W[r][k] · a[t][k] for r < n_rows, t < n_tok, with row r
 * of W at w + r*rb in its block format. */
typedef void (*plume_mm_q_fn)(const uint8_t *w, size_t rb, int n_rows, const plume_q8_act *a,
                              int n_tok, float *y, int64_t ldy);
/* The same for float weights (K values per row) and f32 activations
 * x[t*ldx + k]. */
typedef void (*plume_mm_f_fn)(const uint8_t *w, size_t rb, int64_t K, int n_rows, const float *x,
                              int64_t ldx, int n_tok, float *y, int64_t ldy);

/* The same on repacked weights (repack.h, repack_k.h): w holds
 * ceil(n_rows/16) groups of 16 interleaved rows of K = a->K values, each
 * group nb = K/32 blocks (plus, for the K-quants, one scale record per 256
 * values; plume_rp_group_bytes gives a group's size);
 * y[t*ldy + r] for r < n_rows (the padding rows of the last group are not
 * written).  Every row's result depends only on that row and that token:
 * not on n_rows, n_tok or where the call's rows start. */
typedef void (*plume_mm_r_fn)(const uint8_t *w, int n_rows, const plume_q8_act *a, int n_tok,
                              float *y, int64_t ldy);

/* Each defines `static void name`, a plume_mm_q_fn, plume_mm_f_fn or
 * plume_mm_r_fn that runs a level's impl(fmt, ...) for the one format fmt
 * (a PLUME_KQ_*, PLUME_KF_* or PLUME_KR_* constant): impl, inlined, is
 * compiled for that format alone. */
#define PLUME_MM_Q_ENTRY(name, impl, fmt)                                                       \
    static void name(const uint8_t *w, size_t rb, int n_rows, const plume_q8_act *a, int n_tok, \
                     float *y, int64_t ldy)                                                     \
    {                                                                                           \
        impl(fmt, w, rb, n_rows, a, n_tok, y, ldy);                                             \
    }
#define PLUME_MM_F_ENTRY(name, impl, fmt)                                                     \
    static void name(const uint8_t *w, size_t rb, int64_t K, int n_rows, const float *x,     \
                     int64_t ldx, int n_tok, float *y, int64_t ldy)                          \
    {                                                                                         \
        impl(fmt, w, rb, K, n_rows, x, ldx, n_tok, y, ldy);                                   \
    }
#define PLUME_MM_R_ENTRY(name, impl, fmt)                                                      \
    static void name(const uint8_t *w, int n_rows, const plume_q8_act *a, int n_tok, float *y, \
                     int64_t ldy)                                                              \
    {                                                                                          \
        impl(fmt, w, n_rows, a, n_tok, y, ldy);                                                \
    }

/* Keys per split-K chunk of the attention kernels: a row's result is the
 * in-order merge of its partials over chunks at absolute positions c *
 * PLUME_ATTN_CHUNK, however the work is divided. */
#define PLUME_ATTN_CHUNK 64

/* The attention kernels' kv_type (the values of plume_kv_dtype): a cache
 * of f32, IEEE f16, or int8 values each (slot, kv head) with its own f32
 * scale (x = q * scale) PLUME_KV_I8_SCALE_AT(hd) bytes after its first
 * value.  stride and the k/v pointers count elements (bytes for int8). */
enum { PLUME_KV_TYPE_F32 = 0, PLUME_KV_TYPE_F16 = 1, PLUME_KV_TYPE_I8 = 2 };
#define PLUME_KV_I8_SCALE_AT(hd) (((size_t)(hd) + 3) / 4 * 4)

/* One value of kv_i8 (below): x · id rounded to nearest even, clamped to
 * [-127, 127], 0 when the product is a NaN. */
static inline int8_t plume_kv_i8_value(float x, float id)
{
    const float v = nearbyintf(x * id);
    return v != v ? 0 : v >= 127.0f ? 127 : v <= -127.0f ? -127 : (int8_t)v;
}

typedef struct plume_kernels {
    plume_cpu_level level;
    /* Quantizes one token's K values (K % 32 == 0) into q[K], d[K/32],
     * s[K/32].  Every level produces bit-identical output. */
    void (*quantize_q8)(const float *x, int64_t K, int8_t *q, float *d, float *s);
    /* quantize_q8 with the sums the repacked kernels read, in one pass:
     * isum = Σq per block, isum16 = Σq per half block, s16 = d · isum16,
     * and the block records when o->blk is set.  q, d and s are
     * quantize_q8's bits; every level produces bit-identical output. */
    void (*quantize_q8_sums)(const float *x, int64_t K, const plume_q8_out *o);
    plume_mm_q_fn mm_q[PLUME_KQ_COUNT];
    plume_mm_f_fn mm_f[PLUME_KF_COUNT];
    plume_mm_r_fn mm_r[PLUME_KR_COUNT];
    float (*dot)(const float *a, const float *b, int n);
    /* y[i] += a * x[i] */
    void (*axpy)(float *y, float a, const float *x, int n);
    /* out = x / rms(x) * w; out may alias x. */
    void (*rmsnorm)(float *out, const float *x, const float *w, int n, float eps);
    /* Rotates head_dim values by the angles whose cos/sin are given
     * (head_dim/2 each); pairs as in plume_cpu_rope_heads. */
    void (*rope)(float *v, int head_dim, const float *cos_t, const float *sin_t, int adjacent);
    /* x[i] = silu(x[i]) * y[i] */
    void (*swiglu)(float *x, const float *y, int n);
    /* x[i] = gelu_tanh(x[i]) * y[i], computed as x / (1 + e^(-2u)) with
     * u = sqrt(2/pi) (x + 0.044715 x^3) (0.5 (1 + tanh u) is the logistic
     * of 2u): PyTorch's gelu(approximate="tanh") within a few ulp. */
    void (*geglu)(float *x, const float *y, int n);
    /* One step of online-softmax attention for nq queries that attend to
     * the same keys (the heads of one GQA group; q and o are [nq][hd]):
     * folds n keys/values (key i at k + i*stride, value i at v + i*stride,
     * hd floats each) with scores q·k_i·scale into each query's running max
     * m[qi], sum l[qi] and unnormalized output o[qi] (start from
     * -INFINITY, 0, zeros; the result is o / l).  A query's result does not
     * depend on nq. */
    void (*attn_step)(const float *q, int nq, const float *k, const float *v, int64_t stride,
                      int n, int hd, float scale, float *m, float *l, float *o);
    /* softmax(q·Kᵀ·scale)·V for nq queries q[nq][hd] (one GQA group) over
     * positions 0 .. n_pos-1 of a paged cache of kv_type (f32, f16 or
     * int8, PLUME_KV_TYPE_*) values: position p's key starts stride values
     * after k for each slot, at slot block_table[p / block_size] *
     * block_size + p % block_size (v likewise); writes the normalized
     * o[nq][hd].  window > 0: only positions max(0, n_pos - window) ..
     * n_pos-1 (a sliding window); slices keep their absolute boundaries.  Online softmax over slices of keys that may span blocks
     * (f16 rows converted once per slice for the whole group); a query's
     * result does not depend on nq, nor on anything but its row. */
    void (*attn_paged)(const float *q, int nq, const void *k, const void *v, int64_t stride,
                       int kv_type, const int32_t *block_table, int block_size, int n_pos, int hd,
                       float scale, int window, float *o);
    /* attn_paged for nr consecutive query rows of one sequence: row r
     * (0 <= r < nr) has its nq queries at q + r*q_stride, attends to
     * positions 0 .. n_pos0+r-1 (window > 0: the last window of them) and
     * writes o + r*o_stride.  Each slice of
     * keys is gathered (f16: converted) once for the whole tile.  Every
     * row's result is bit-identical to attn_paged's for that row alone: it
     * does not depend on nr, on where the tile starts, nor on other rows. */
    void (*attn_paged_tile)(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                            const void *v, int64_t stride, int kv_type,
                            const int32_t *block_table, int block_size, int n_pos0, int hd,
                            float scale, int window, float *o, int64_t o_stride);
    /* The split-K pieces of attn_paged_tile.  attn_partial: for nr rows as
     * in attn_paged_tile (nq queries each at q + r*q_stride), the
     * unnormalized online-softmax state over the keys of the chunk c0 ..
     * c0+PLUME_ATTN_CHUNK-1 (c0 a multiple of it) within each row's own
     * range: m[r*nq+qi], l[r*nq+qi] and o[(r*nq+qi)*hd ..] (m = -INFINITY,
     * l = 0, o = 0 for a row with no key there).  attn_merge: folds n such
     * states (m[i], l[i], o + i*hd) into running ones (M[i], L[i],
     * O + i*O_stride; start from M = -INFINITY: the first state is copied).
     * attn_paged_tile is, for every pass of rows, attn_partial of each chunk
     * from the first row's first key, merged in chunk order, then O / L:
     * merging the same partials in the same order elsewhere (the threads of
     * paged_attention.c) gives the same bits. */
    void (*attn_partial)(const float *q, int64_t q_stride, int nr, int nq, const void *k,
                         const void *v, int64_t stride, int kv_type, const int32_t *block_table,
                         int block_size, int n_pos0, int hd, float scale, int window, int c0,
                         float *m, float *l, float *o);
    void (*attn_merge)(float *M, float *L, float *O, const float *m, const float *l,
                       const float *o, int n, int hd, int64_t O_stride);
    /* Subtracts the max of s[0..n), exponentiates in place, returns the sum. */
    float (*softmax_exp)(float *s, int n);
    /* h[i] = plume_fp32_to_fp16(x[i]) for i < n, the same bits at every
     * level (NaN included): the f16 KV cache's store. */
    void (*f32_to_f16)(const float *x, uint16_t *h, int n);
    /* One kv head of an int8 cache: d = max|x| / 127 over the n values
     * (NaNs left out; all zeros: d = 0) and q[i] = x[i] · (127 / max|x|)
     * rounded to nearest even and clamped to [-127, 127] (0 for a NaN
     * product): the same bits at every level, and the same whenever and
     * with whatever else the token is stored. */
    void (*kv_i8)(const float *x, int n, int8_t *q, float *d);
    /* Microbenchmarks for `plume bench`: read_sum streams bytes (a multiple
     * of 256, 64-byte aligned) and returns a value depending on all of
     * them; fma_peak and int8_peak run iters iterations of independent
     * multiply-adds and return the operation count (2 per multiply-add). */
    float (*read_sum)(const void *buf, size_t bytes);
    double (*fma_peak)(long iters);
    double (*int8_peak)(long iters);
} plume_kernels;

/* Per-level tables; avx2/avx512/amx return NULL when not compiled for this
 * architecture.  They must only be used when the CPU supports the level. */
const plume_kernels *plume_kernels_scalar(void);
const plume_kernels *plume_kernels_avx2(void);
const plume_kernels *plume_kernels_avx512(void);
const plume_kernels *plume_kernels_amx(void);

/* The table for a level, or NULL when this CPU (or build) cannot run it. */
const plume_kernels *plume_kernels_for(plume_cpu_level level);

/* The active table: the best level the CPU supports, or the one that
 * PLUME_CPU_FEATURES names (an unknown or unsupported value is reported on
 * stderr once and the best level is used). */
const plume_kernels *plume_kernels_active(void);

/* True when PLUME_CPU_ACTIVATIONS=f32 asks quantized matmuls to dequantize
 * weights and keep activations in f32 (a slower reference mode for checking
 * the model against an f32 oracle); the default, int8, quantizes
 * activations per token in blocks of 32 for integer dot products. */
bool plume_cpu_f32_activations(void);

#endif
