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
 * Scratch is the pool's own workspace; `scratch` is unused (may be NULL). */
void plume_cpu_matmul(plume_pool *pool, const plume_tensor *w, const float *x, int n_tok,
                      float *y, float *scratch);

/* plume_cpu_matmul with an explicit kernel table (tests, benchmarks). */
void plume_cpu_matmul_with(const plume_kernels *k, plume_pool *pool, const plume_tensor *w,
                           const float *x, int n_tok, float *y);

/* Copies row `row` of a 2-D tensor (ne[0] wide) to dst as f32. */
void plume_cpu_get_row(const plume_tensor *w, int64_t row, float *dst);

/* out = x / rms(x) * weight, over n features (out may alias x). */
void plume_cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);

/* Rotates one head's vector of head_dim values at position pos in place.
 * adjacent: pairs (2i, 2i+1) (GGUF llama); otherwise (i, i + head_dim/2).
 * inv_freq holds head_dim/2 values theta^(-2i/head_dim). */
void plume_cpu_rope(float *v, int head_dim, int pos, const float *inv_freq, int adjacent);

/* plume_cpu_rope on n_heads consecutive heads (v, v + head_dim, ...) of one
 * token, computing the angles' cos/sin once: the same result, a twelfth
 * of the trigonometry for a 12-head token. */
void plume_cpu_rope_heads(float *v, int n_heads, int head_dim, int pos, const float *inv_freq,
                          int adjacent);

/* x[i] = silu(x[i]) * y[i]. */
void plume_cpu_swiglu(float *x, const float *y, int n);

/* Dot product of two f32 vectors. */
float plume_cpu_dot(const float *a, const float *b, int n);

/* Causal grouped-query attention of n_tok queries at positions pos0.. over a
 * contiguous cache of K and V rows (kv_stride floats apart, each row holding
 * n_head_kv * head_dim values) covering positions 0 .. pos0 + n_tok - 1.
 * q: [n_tok][n_head * head_dim]; out: same shape.  scratch: nth * n_ctx floats. */
void plume_cpu_attention(plume_pool *pool, const float *q, const float *k_cache,
                         const float *v_cache, int kv_stride, int n_tok, int pos0, int n_head,
                         int n_head_kv, int head_dim, float *out, float *scratch, int n_ctx);

#endif
