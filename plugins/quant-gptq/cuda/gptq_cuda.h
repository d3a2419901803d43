/* quant-gptq CUDA kernels: GPTQ linear layers on an NVIDIA GPU.
 *
 * Plain C API; callers need no CUDA header (device pointers are void * /
 * float *, the stream is a void * that is a cudaStream_t).  Every fallible
 * function returns 0 or -1 with a one-line message in err (plume
 * convention); CUDA failures carry cudaGetErrorString and the error name.
 * Nothing here exits or aborts.
 *
 * Tensors (formats.md §1, as gptq_layer_build takes them): qweight
 * [K·b/32][N] int32 packed along the input dim, qzeros [G][N·b/32] int32
 * (v1: stored zero − 1, v2: stored zero), scales [G][N] f32, g_idx [K] or
 * NULL (then k / group_size), bias [N] or NULL.  bits 2, 3, 4, 8.
 * y[t][n] = Σ_k x[t][k]·scale[g][n]·(q[k][n] − zero[g][n]) + bias[n],
 * g = g_idx[k].
 *
 * Act-order is handled at upload, exllama/vLLM style (formats.md §1.4):
 * when g_idx is not non-decreasing, qweight rows are reordered by a stable
 * argsort(g_idx) so that the groups are contiguous runs; the decode kernel
 * gathers activations x[perm[i]] into shared memory as it stages them, and
 * the prefill dequantizer writes row i of the sorted weight back to input
 * row perm[i], so the GEMM sees the original input order.  Scales/zeros are
 * then loaded once per run of a group instead of once per input row.
 *
 * Paths:
 *   GEMV  (decode; AUTO for n_tok ≤ gemv_max_tok, default 8): a dequantizing
 *         matrix-vector kernel for up to 8 tokens per launch (more tokens:
 *         chunks of 8).  Each packed word is read once per launch by one
 *         thread, coalesced along N; the input dim is split across the
 *         block's slices and, for small N, across blocks (split-K with a
 *         deterministic second reduction pass, no atomics).  Pure f32.
 *   GEMM_F32 / GEMM_TF32 / GEMM_F16 (prefill): dequantize a slab of output
 *         columns to a [K][nb] scratch weight (f32, or f16 with x converted
 *         to f16), then cublasGemmEx with f32 accumulation and f32 output
 *         (compute type 32F, 32F_FAST_TF32, 32F).  The scratch is bounded
 *         (gptq_cuda_ctx_set_scratch_limit, default 256 MiB); wider layers
 *         are done in column slabs.  AUTO uses the context's prefill path
 *         (default GEMM_TF32).  cuBLAS is dlopen-ed on first use (the
 *         plugin does not link it); if it cannot be loaded, AUTO falls back
 *         to GEMV, an explicit GEMM path fails with the dlopen message.
 *
 * Asynchrony: forward only enqueues work on the context's stream; launch
 * errors are reported at once, faults during execution by the next
 * synchronising call (gptq_cuda_sync, the copy helpers, layer free).
 * A context is not thread-safe; use one per thread / stream. */
#ifndef PLUME_GPTQ_CUDA_H
#define PLUME_GPTQ_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gptq_pack.h" /* gptq_zero_format, plume_error */

#ifdef __cplusplus
extern "C" {
#endif

/* True when a CUDA device exists and these kernels can run on device 0.
 * Otherwise false with the reason in why (if non-NULL): the
 * cudaGetDeviceCount error (e.g. no driver), "no CUDA device", or the
 * device that has no kernel image (built for sm_80, sm_90 and compute_80
 * PTX). */
bool gptq_cuda_available(char *why, size_t why_size);

/* ---- context: device, stream, cuBLAS handle, scratch ---- */

typedef struct gptq_cuda_ctx gptq_cuda_ctx;

typedef enum gptq_cuda_path {
    GPTQ_CUDA_AUTO = 0,
    GPTQ_CUDA_GEMV,
    GPTQ_CUDA_GEMM_F32,
    GPTQ_CUDA_GEMM_TF32,
    GPTQ_CUDA_GEMM_F16,
} gptq_cuda_path;

/* A context on device `device` with its own non-blocking stream. */
int gptq_cuda_ctx_create(int device, gptq_cuda_ctx **out, plume_error *err);
/* Synchronises, then frees the scratch, the cuBLAS handle and the stream
 * (not an external stream set below). */
void gptq_cuda_ctx_destroy(gptq_cuda_ctx *ctx);
/* The stream work is enqueued on (a cudaStream_t). */
void *gptq_cuda_ctx_stream(const gptq_cuda_ctx *ctx);
/* Use the caller's stream (a cudaStream_t; NULL: the legacy default
 * stream) from now on; the context's own stream is kept until destroy. */
int gptq_cuda_ctx_set_stream(gptq_cuda_ctx *ctx, void *stream, plume_error *err);
/* AUTO: GEMV when n_tok ≤ gemv_max_tok (1..), else prefill (a GEMM path).
 * Defaults 8 and GPTQ_CUDA_GEMM_TF32. */
int gptq_cuda_ctx_set_auto(gptq_cuda_ctx *ctx, int32_t gemv_max_tok, gptq_cuda_path prefill,
                           plume_error *err);
/* Upper bound on the prefill scratch (dequantized slab + f16 activations);
 * at least one 128-column slab is always used.  Default 256 MiB. */
void gptq_cuda_ctx_set_scratch_limit(gptq_cuda_ctx *ctx, size_t bytes);
/* Waits for the context's stream; reports any asynchronous CUDA error. */
int gptq_cuda_sync(gptq_cuda_ctx *ctx, plume_error *err);

/* ---- device memory helpers (ordered on the context's stream) ---- */

int gptq_cuda_alloc(gptq_cuda_ctx *ctx, size_t bytes, void **dptr, plume_error *err);
void gptq_cuda_free(gptq_cuda_ctx *ctx, void *dptr);
/* Copies and waits for the copy (and everything before it on the stream). */
int gptq_cuda_upload(gptq_cuda_ctx *ctx, void *dst, const void *src, size_t bytes,
                     plume_error *err);
int gptq_cuda_download(gptq_cuda_ctx *ctx, void *dst, const void *src, size_t bytes,
                       plume_error *err);

/* ---- layers ---- */

typedef struct gptq_cuda_layer_desc {
    const int32_t *qweight; /* [K·bits/32][N] */
    const int32_t *qzeros;  /* [G][N·bits/32] */
    const float *scales;    /* [G][N] */
    const int32_t *g_idx;   /* [K] or NULL: k / group_size */
    const float *bias;      /* [N] or NULL */
    int64_t K, N, G;        /* in_features, out_features, groups */
    int bits;               /* 2, 3, 4, 8 */
    int64_t group_size;     /* -1 (or 0): one group */
    gptq_zero_format fmt;   /* GPTQ_ZERO_V1 / GPTQ_ZERO_V2 */
} gptq_cuda_layer_desc;

typedef struct gptq_cuda_layer gptq_cuda_layer;

/* Checks the shapes as gptq_layer_build does (K, N positive multiples of
 * gptq_pack_align(bits); G = ceil(K / group_size) or 1; g_idx in [0, G)),
 * repacks on the host where act-order needs it, and copies to the
 * context's device.  The host arrays may be freed on return. */
int gptq_cuda_layer_upload(gptq_cuda_ctx *ctx, const gptq_cuda_layer_desc *d,
                           gptq_cuda_layer **out, plume_error *err);
void gptq_cuda_layer_free(gptq_cuda_layer *l);
bool gptq_cuda_layer_permuted(const gptq_cuda_layer *l);
/* Device bytes held by the layer. */
size_t gptq_cuda_layer_bytes(const gptq_cuda_layer *l);

/* ---- forward ----
 * x: device [n_tok][K] f32, y: device [n_tok][N] f32 (must not overlap x).
 * n_tok = 0 does nothing. */
int gptq_cuda_forward(gptq_cuda_ctx *ctx, const gptq_cuda_layer *l, const float *x,
                      int32_t n_tok, float *y, plume_error *err);
int gptq_cuda_forward_path(gptq_cuda_ctx *ctx, const gptq_cuda_layer *l, const float *x,
                           int32_t n_tok, float *y, gptq_cuda_path path, plume_error *err);
/* "auto", "gemv", "gemm-f32", "gemm-tf32", "gemm-f16". */
const char *gptq_cuda_path_name(gptq_cuda_path path);

#ifdef __cplusplus
}
#endif
#endif
