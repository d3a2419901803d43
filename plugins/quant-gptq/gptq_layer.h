/* The repacked GPTQ-layout layer both quant plugins run (gptq_layer.c):
 * built from GPTQ checkpoint arrays, run by the fast kernels
 * (gptq_kernels.h) or the reference kernel.  quant-gptq loads GPTQ tensors
 * into it; quant-awq unpacks AWQ tensors into the same arrays first. */
#ifndef PLUME_GPTQ_LAYER_H
#define PLUME_GPTQ_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gptq_pack.h"
#include "plume/backend.h"
#include "plume/error.h"

/* The quantization config a layer is loaded with (formats.md §1.6). */
typedef struct gptq_load_config {
    int bits;             /* 2, 3, 4, 8 */
    int64_t group_size;   /* -1: one group */
    bool sym;
    bool desc_act;
    gptq_zero_format fmt; /* checkpoint_format gptq (v1) / gptq_v2 */
} gptq_load_config;

/* A layer repacked for the kernels (opaque outside gptq_layer.c). */
typedef struct gptq_layer gptq_layer;

/* Builds a layer from checkpoint-layout arrays (formats.md §1.1): qweight
 * [K/pf][N], qzeros [G][N/pf], scales [G][N] (f32), g_idx [K] or NULL,
 * bias [N] or NULL.  Checks shapes against cfg and g_idx; act-order
 * (a g_idx that is not non-decreasing) becomes an input permutation
 * perm = argsort(g_idx) applied to activations, as vLLM's exllama path
 * (formats.md §1.4).
 * Repacks into the fast kernels' tiles (gptq_kernels.h) when K % 32 == 0
 * and every run of one group in the (permuted) input order is a multiple
 * of 32 long; otherwise keeps a plain row-major layout that only the
 * reference kernel reads, and says so once on stderr. */
int gptq_layer_build(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                     const int32_t *g_idx, const float *bias, int64_t K, int64_t N, int64_t G,
                     const gptq_load_config *cfg, gptq_layer **out, plume_error *err);
/* The same, naming the layer (a checkpoint prefix; NULL: unnamed) in the
 * stderr note about the reference layout. */
int gptq_layer_build_named(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                           const int32_t *g_idx, const float *bias, int64_t K, int64_t N,
                           int64_t G, const gptq_load_config *cfg, const char *name,
                           gptq_layer **out, plume_error *err);
void gptq_layer_free(gptq_layer *l);
void gptq_layer_shape(const gptq_layer *l, int64_t *K, int64_t *N);
/* True when the layer applies an input permutation (act-order). */
bool gptq_layer_permuted(const gptq_layer *l);
/* True when the layer is in the fast kernels' layout (see gptq_layer_build). */
bool gptq_layer_fast(const gptq_layer *l);
/* Bytes of repacked weights (codes, scales, zeros) one forward reads. */
size_t gptq_layer_weight_bytes(const gptq_layer *l);

/* The fast path: y[t] = x[t]·Wᵀ (+ bias) with the kernels of a dispatch
 * level (PLUME_CPU_LEVEL_*, or GPTQ_LEVEL_ACTIVE for the one chosen by
 * plume_cpu_active_level()).  Each token's (permuted) activations are
 * quantized on the calling thread with plume_cpu_quantize_q8; output rows
 * are then split over bvt->parallel_for(b, ...) when b is non-NULL and the
 * backend has that slot, else computed on the calling thread.  Layers not in
 * the fast layout, and PLUME_CPU_ACTIVATIONS=f32 (plume_cpu_float_
 * activations()), use gptq_forward_ref.  A level this CPU cannot run is an
 * error (PLUME_ERR_UNSUPPORTED). */
#define GPTQ_LEVEL_ACTIVE (-1)
int gptq_forward_level(const gptq_layer *l, int level, const plume_backend_vtable *bvt,
                       plume_backend *b, const float *x, int32_t n_tok, float *y,
                       plume_error *err);

/* The reference kernel: y[t] = x[t]·Wᵀ (+ bias) for t < n_tok, scalar C,
 * dequantizing one (row, group) segment at a time into f32 (from either
 * layout) and dotting it with every token in float.  Correct, not fast;
 * single-threaded. */
int gptq_forward_ref(const gptq_layer *l, const float *x, int32_t n_tok, float *y,
                     plume_error *err);

#endif
