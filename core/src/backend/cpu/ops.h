/* CPU kernels of the forward pass.  Activations are f32, row-major
 * [tokens][features].  Reference implementations: portable C, written so the
 * compiler can vectorise the inner loops. */
#ifndef PLUME_CPU_OPS_H
#define PLUME_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/threadpool.h"
#include "plume/tensor.h"

/* y[t][n] = sum_k x[t][k] * W[n][k] for t < n_tok, where W is a supported
 * tensor with ne[0] = K (in) and ne[1] = N (out).  Rows of W are split over
 * the pool's threads; scratch holds nth * K floats. */
void plume_cpu_matmul(plume_pool *pool, const plume_tensor *w, const float *x, int n_tok,
                      float *y, float *scratch);

/* Copies row `row` of a 2-D tensor (ne[0] wide) to dst as f32. */
void plume_cpu_get_row(const plume_tensor *w, int64_t row, float *dst);

/* out = x / rms(x) * weight, over n features (out may alias x). */
void plume_cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps);

/* Rotates one head's vector of head_dim values at position pos in place.
 * adjacent: pairs (2i, 2i+1) (GGUF llama); otherwise (i, i + head_dim/2).
 * inv_freq holds head_dim/2 values theta^(-2i/head_dim). */
void plume_cpu_rope(float *v, int head_dim, int pos, const float *inv_freq, int adjacent);

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
