/* CPU kernels of the forward pass.  Activations are f32, row-major
 * [tokens][features].  Each call runs the kernels of the dispatch level
 * chosen once per process (dispatch.h: best the CPU has, or
 * PLUME_CPU_FEATURES). */
#ifndef PLUME_CPU_OPS_H
#define PLUME_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/threadpool.h"
#include "plume/tensor.h"

/* y[t][n] = sum_k x[t][k] * W[n][k] for t < n_tok, where W is a supported
 * tensor with ne[0] = K (in) and ne[1] = N (out).  Quantized W: activations
 * are quantized per token to int8 blocks of 32 (each block scaled by its
 * own max) and multiplied with integer dot products, so y matches
 * x · dequant(W)ᵀ to within that quantization (relative error ~1e-2 of
 * Σ|x·w| at worst, typically far less).  F32/F16/BF16 W: float FMAs.
 * Scratch space is the pool's own workspace. */
void plume_cpu_matmul(plume_pool *pool, const plume_tensor *w, const float *x, int n_tok,
                      float *y);

/* plume_cpu_matmul with an explicit kernel table (tests, benchmarks). */
void plume_cpu_matmul_with(const plume_kernels *k, plume_pool *pool, const plume_tensor *w,
                           const float *x, int n_tok, float *y);

/* A weight prepared once at load for the CPU matmul: quantized types with a
 * repacked kernel (Q4_0, Q4_1, Q8_0; K a multiple of 32) are copied into
 * the row-interleaved layout of repack.h; other types keep using the
 * tensor as it is.  The tensor must outlive the weight (the f32-activation
 * reference mode and the other types read it). */
typedef struct plume_cpu_weight {
    const plume_tensor *t;
    int kr;           /* PLUME_KR_*, or -1: not repacked */
    int64_t K, N;
    uint8_t *packed;  /* ceil(N/16) groups; 64-byte aligned; NULL when kr < 0 */
    size_t group_bytes;
} plume_cpu_weight;

/* Prepares w for t (2-D, ne[0] = K in, ne[1] = N out).  Fails only when
 * out of memory. */
int plume_cpu_weight_init(plume_cpu_weight *w, const plume_tensor *t, plume_error *err);

/* Frees what plume_cpu_weight_init allocated; a zeroed weight is a no-op. */
void plume_cpu_weight_release(plume_cpu_weight *w);

/* plume_cpu_matmul on a prepared weight.  Every output value depends only
 * on its weight row and its token's activations: the same bits whatever
 * n_tok, the thread count or how rows are split. */
void plume_cpu_matmul_w(plume_pool *pool, const plume_cpu_weight *w, const float *x, int n_tok,
                        float *y);

/* n (at most PLUME_CPU_MULTI_MAX) matmuls of the same activations x
 * (weights with equal K) into y[i]: x is quantized once and all of them
 * run in one pass of the pool.  Each y[i] is exactly what
 * plume_cpu_matmul_w(pool, w[i], x, n_tok, y[i]) gives. */
#define PLUME_CPU_MULTI_MAX 4
void plume_cpu_matmul_multi(plume_pool *pool, const plume_cpu_weight *const *w, int n,
                            const float *x, int n_tok, float *const *y);

/* Bytes of pool workspace plume_cpu_quantize_rows needs for n rows of K. */
size_t plume_cpu_act_bytes(int n, int64_t K);

/* Quantizes n rows of x (K values each, K % 32 == 0) into ws
 * (plume_cpu_act_bytes(n, K) bytes, 64-byte aligned) with every block sum
 * the repacked kernels read, on the pool's threads when the job is large,
 * and points *act at them: exactly what the prepared-weight matmuls do
 * before their kernels run. */
void plume_cpu_quantize_rows(const plume_kernels *k, plume_pool *pool, const float *x, int n,
                             int64_t K, uint8_t *ws, plume_q8_act *act);

/* act's tokens from t0 on: every array (and the block records) moved on
 * by t0 tokens. */
plume_q8_act plume_q8_act_from(const plume_q8_act *a, int64_t t0);

/* Bytes of the block records of n tokens of K (plume_cpu_act_blocks). */
size_t plume_cpu_act_blocks_bytes(int n, int64_t K);

/* Fills blk (plume_cpu_act_blocks_bytes(n, K) bytes, 64-byte aligned)
 * from act's row arrays (q, d, s, isum, isum16, s16 of n tokens) and
 * points act->blk and act->ldb at them, as plume_cpu_quantize_rows does:
 * for callers that quantize activations themselves (tests, benches)
 * before an AVX-512 mm_r kernel reads them. */
void plume_cpu_act_blocks(plume_q8_act *act, int n, plume_q8_blk *blk);

/* Segmented matmuls, the CPU side of the backend's matmul_segments: for
 * s < n_seg and j < n_w, rows off[s] .. off[s+1]-1 of y[j] (y[j]'s rows are
 * w[s * n_w + j]->N wide, the same for every s) = those rows of x times
 * w[s * n_w + j]ᵀ, all with equal K.  x is quantized once and every
 * (segment, weight) pair runs in one pass of the pool, long streams of
 * row groups first.  Each value is exactly what plume_cpu_matmul_w gives
 * for that weight and x row. */
void plume_cpu_matmul_segments(plume_pool *pool, const plume_cpu_weight *const *w, int n_w,
                               int32_t n_seg, const int32_t *off, const float *x,
                               float *const *y);

/* The same with an explicit kernel table (tests, benchmarks). */
void plume_cpu_matmul_multi_with(const plume_kernels *k, plume_pool *pool,
                                 const plume_cpu_weight *const *w, int n, const float *x,
                                 int n_tok, float *const *y);

/* Copies row `row` of a 2-D tensor (ne[0] wide) to dst as f32. */
void plume_cpu_get_row(const plume_tensor *w, int64_t row, float *dst);

/* out = x / rms(x) * weight, over n features (out may alias x). */
void plume_cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);

/* Rotates n_heads consecutive heads (v, v + head_dim, ...) of one token at
 * position pos in place, computing the angles' cos/sin once for all heads.
 * adjacent: pairs (2i, 2i+1) (GGUF llama); otherwise (i, i + head_dim/2).
 * inv_freq holds head_dim/2 values theta^(-2i/head_dim). */
void plume_cpu_rope_heads(float *v, int n_heads, int head_dim, int pos, const float *inv_freq,
                          int adjacent);

/* x[i] = silu(x[i]) * y[i]. */
void plume_cpu_swiglu(float *x, const float *y, int n);

/* x[i] = g sigmoid(alpha g) (u + 1) with g = min(x[i], limit), u =
 * clamp(y[i], -limit, limit): gpt-oss's clamped SwiGLU (backend.h
 * swiglu_oai), scalar code with expf, so the same bits at every SIMD level
 * and whatever n. */
void plume_cpu_swiglu_oai(float *x, const float *y, size_t n, float alpha, float limit);

/* x[i] = gelu_tanh(x[i]) * y[i] (PyTorch's gelu(approximate="tanh")) with
 * the active level's kernel (plume_kernels.geglu): like swiglu, the bits
 * depend on the level, never on n or where a row starts within 8 values. */
void plume_cpu_geglu(float *x, const float *y, size_t n);

/* dst[i] = src[idx[i]] for i < n, rows of dim floats. */
void plume_cpu_gather_rows(float *dst, const float *src, const int32_t *idx, int32_t n,
                           int32_t dim);

/* dst[idx[i]][j] += w[i] * src[i][j] for i < n in order, the product
 * rounded to f32 before the add: a row's bits depend only on its own
 * contributions and their order. */
void plume_cpu_scatter_add_rows(float *dst, const float *src, const int32_t *idx, const float *w,
                                int32_t n, int32_t dim);

#endif
