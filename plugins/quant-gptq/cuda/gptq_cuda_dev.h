/* quant-gptq CUDA: the device layout of an uploaded layer (see
 * gptq_cuda_internal.h for what each array holds), the kernels' launch
 * geometry, and the host-side preparation and planning every driver of
 * the kernels shares: gptq_cuda.c (its own context) and int4_linear.c (on
 * a backend's device through backend.h's device hooks).  Plain C, no CUDA
 * header: gptq_cuda_prep.c compiles everywhere, so the CPU emulation tests
 * use it as is. */
#ifndef PLUME_GPTQ_CUDA_DEV_H
#define PLUME_GPTQ_CUDA_DEV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPTQ_CUDA_UNIT_CODES(b) ((b) == 3 ? 32 : 32 / (b))
#define GPTQ_CUDA_UNIT_WORDS(b) ((b) == 3 ? 3 : 1)

/* GEMV (decode) geometry: a block is GEMV_NCOL output columns (one thread
 * each, so every packed row is read as NCOL consecutive int32, coalesced)
 * by GEMV_NSLICE slices of the input dim; the input dim is walked in tiles
 * of GEMV_KT rows whose activations are staged in shared memory.  A grid
 * row (blockIdx.y) is one split of the input dim: tiles_per_split tiles.
 * GEMV_MAXTOK tokens per launch. */
#define GPTQ_CUDA_GEMV_NCOL 128
#define GPTQ_CUDA_GEMV_NSLICE 2
#define GPTQ_CUDA_GEMV_KT 512
#define GPTQ_CUDA_GEMV_MAXTOK 8

typedef struct gptq_cuda_dev {
    const int32_t *qweight;
    const float *scales;
    const uint16_t *zeros;
    const int32_t *gs;
    const int32_t *gend;
    const int32_t *perm;
    const float *bias;
    int64_t K, N, G;
    int bits;
} gptq_cuda_dev;

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include "gptq_cuda.h"
/* Host arrays of the device layout (gptq_cuda_prep.c): qweight is NULL
 * when the checkpoint's can be used as is (no act-order permutation). */
typedef struct gptq_cuda_host_layout {
    int32_t *qweight; /* [K·b/32][N] sorted rows, or NULL */
    int32_t *perm;    /* [K] or NULL */
    int32_t *gs;      /* [K] */
    int32_t *gend;    /* [G] */
    uint16_t *zeros;  /* [G][N] */
} gptq_cuda_host_layout;

/* Checks d as gptq_layer_build does and builds the layout. */
int gptq_cuda_prepare(const gptq_cuda_layer_desc *d, gptq_cuda_host_layout *h, plume_error *err);
void gptq_cuda_host_layout_free(gptq_cuda_host_layout *h);

/* The decode GEMV's split of the input dim for a K x N layer on a device
 * of sm_count multiprocessors: about 4 blocks per SM, whole KT-row tiles
 * per split, none empty.  Sets *ksplit (1..1024) and *tiles_per_split;
 * the split-K partials then take ksplit * GEMV_MAXTOK * N floats. */
void gptq_cuda_gemv_plan(int64_t K, int64_t N, int sm_count, int64_t *ksplit,
                         int64_t *tiles_per_split);

/* Prefill slab width: all N columns when K*N*elt + reserved bytes fit
 * limit, else the widest multiple of GPTQ_CUDA_SLAB_ALIGN that does (at
 * least one, at most N). */
#define GPTQ_CUDA_SLAB_ALIGN 128
int64_t gptq_cuda_slab_cols(int64_t K, int64_t N, size_t elt, size_t reserved, size_t limit);

/* The kernels as a driver outside gptq_cuda.c runs them (int4_linear.c on
 * a backend's device): the launchers of gptq_cuda_internal.h with plume
 * errors and the stream as a void * (a cudaStream_t).  The plugin's table
 * (gptq_cuda_dev_kernels(), built with nvcc) launches the real kernels;
 * the tests' table runs the same kernel source emulated on the CPU. */
typedef struct gptq_dev_kernels {
    /* 0 when `device` can run the kernels, else -1 with why (n bytes) */
    int (*probe)(int device, char *why, size_t n);
    /* the device's multiprocessor count */
    int (*sm_count)(int device, int *out, plume_error *err);
    int (*gemv)(const gptq_cuda_dev *L, const float *x, int T, float *y, float *partial,
                int ksplit, int tiles_per_split, void *stream, plume_error *err);
    int (*dequant)(const gptq_cuda_dev *L, int64_t n0, int64_t nb, void *w, int f16,
                   void *stream, plume_error *err);
    int (*add_bias)(float *y, const float *bias, int64_t T, int64_t N, void *stream,
                    plume_error *err);
} gptq_dev_kernels;

/* The real kernels (cuda/gptq_cuda_devk.c); only in a build with nvcc. */
const gptq_dev_kernels *gptq_cuda_dev_kernels(void);
#endif
#endif
