/* backend-cuda: the kernel launchers (cuda_kernels.cu), called by the host
 * side (cuda_backend.c).  Plain C: device pointers in, a cudaError_t out
 * (the launch's, from cudaGetLastError).  Every launch is on the stream
 * given; shapes are checked by the caller. */
#ifndef PLUME_CUDA_KERNELS_H
#define PLUME_CUDA_KERNELS_H

#include <cuda_runtime_api.h>

#include "cuda_bodies.h"

#ifdef __cplusplus
extern "C" {
#endif

/* n_rows x dim: x = rows of the table. */
cudaError_t ck_launch_embed(const ck_step *S, const ck_weight *T, float *x, int32_t n_rows,
                            int32_t dim, cudaStream_t st);
cudaError_t ck_launch_rmsnorm(float *out, const float *x, const float *w, int32_t n_rows,
                              int32_t dim, float eps, cudaStream_t st);
cudaError_t ck_launch_rope(const ck_step *S, float *x, int32_t n_rows, int32_t n_heads,
                           int32_t head_dim, const float *inv_freq, int adjacent, cudaStream_t st);
cudaError_t ck_launch_kv_store(const ck_step *S, void *k_layer, void *v_layer, int kv_f16,
                               int64_t slot_elems, const float *k, const float *v, int32_t n_rows,
                               int32_t kv_dim, cudaStream_t st);
/* One warp per (row, head); head_dim <= CK_HD_MAX. */
cudaError_t ck_launch_attention(const ck_step *S, const ck_attn *A, int32_t n_rows,
                                cudaStream_t st);
cudaError_t ck_launch_swiglu(float *gate, const float *up, int64_t n, cudaStream_t st);
/* gpt-oss's clamped SwiGLU over n elements, in place in gate. */
cudaError_t ck_launch_swiglu_oai(float *gate, const float *up, int64_t n, float alpha,
                                 float limit, cudaStream_t st);
/* dst[i] = src[idx[i]] for i < n, rows of dim floats (idx device memory). */
cudaError_t ck_launch_gather_rows(float *dst, const float *src, const int32_t *idx, int32_t n,
                                  int32_t dim, cudaStream_t st);
/* For each of n_dst destinations u: dst[row[u]] += w[i] · src[i] over the
 * i of list[start[u] .. start[u+1]) in order (ck_scatter_add; all device
 * memory). */
cudaError_t ck_launch_scatter_add(float *dst, const float *src, const int32_t *row,
                                  const int32_t *start, const int32_t *list, const float *w,
                                  int32_t n_dst, int32_t dim, cudaStream_t st);
/* The segmented row matmul for output j: every task's rows of x times
 * ws[task.a * n_w + j] into y (y's width that weight's N); max_n is the
 * widest such N; type is every such weight's type (a kernel compiled for
 * it), or -1 when they differ.  ws and tasks are device memory; X as for
 * ck_launch_gemv. */
cudaError_t ck_launch_gemv_seg(const ck_weight *ws, int n_w, int j, int type,
                               const ck_seg_task *tasks, int32_t n_tasks, int64_t max_n,
                               const ck_act *X, float *y, cudaStream_t st);
cudaError_t ck_launch_add(float *x, const float *y, int64_t n, cudaStream_t st);
cudaError_t ck_launch_add_bias(float *y, const float *bias, int32_t n_rows, int32_t dim,
                               cudaStream_t st);
cudaError_t ck_launch_gather(const ck_step *S, float *dst, const float *src, int32_t n_out,
                             int32_t dim, cudaStream_t st);
/* y[t][o] = Σ_i W[o][i] x[t][i], the row matmul (bits independent of
 * n_rows): over X->x in f32, or, when X->q is set, over x quantized by
 * ck_launch_quant_q8 (W then Q4_0, Q4_1 or Q8_0). */
cudaError_t ck_launch_gemv(const ck_weight *W, const ck_act *X, int32_t n_rows, float *y,
                           cudaStream_t st);
/* x (n_rows x K, K a multiple of 32) quantized per block of 32
 * (ck_quant_q8) into q, d and s. */
cudaError_t ck_launch_quant_q8(const float *x, int32_t n_rows, int64_t K, int8_t *q, float *d,
                               float *s, cudaStream_t st);
cudaError_t ck_launch_to_f16(const float *x, int64_t n, uint16_t *xh, cudaStream_t st);
/* Rows [o0, o0 + rows) of W as f16 into slab ([rows][K]). */
cudaError_t ck_launch_dequant_slab(const ck_weight *W, int64_t o0, int64_t rows, uint16_t *slab,
                                   cudaStream_t st);
/* n_rows rows of a dummy weight (ck_fill) into dst, rows row_bytes apart. */
cudaError_t ck_launch_fill(const plume_fill_spec *s, uint8_t *dst, int64_t row_bytes,
                           int64_t n_rows, cudaStream_t st);
/* Reads the whole of n bytes at p (for the bench's bandwidth probe):
 * sink gets one value per block so the reads are not optimized away. */
cudaError_t ck_launch_read_probe(const float4 *p, int64_t n4, float *sink, cudaStream_t st);
/* Checks that this device can run the kernels (a kernel image for its
 * architecture is present). */
cudaError_t ck_kernel_probe(void);

#ifdef __cplusplus
}
#endif
#endif
