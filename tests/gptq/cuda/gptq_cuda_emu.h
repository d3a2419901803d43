/* quant-gptq's CUDA kernels emulated on the CPU (see test_gptq_cuda_emu.c
 * for how): the kernel source (plugins/quant-gptq/cuda/gptq_cuda_kernels.cu)
 * compiled as C with CUDA shims, and launchers that repeat the real
 * launchers' geometry (emu_gemv, emu_dequant, emu_add_bias), plus the
 * column-major GEMM cuBLAS computes (colmajor_gemm).  Included by one
 * source file per test program (its statics are the emulated CUDA state);
 * needs -DGPTQ_CUDA_EMU. */
#ifndef PLUME_TEST_GPTQ_CUDA_EMU_H
#define PLUME_TEST_GPTQ_CUDA_EMU_H
#ifndef GPTQ_CUDA_EMU
#define GPTQ_CUDA_EMU 1
#endif

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- CUDA shims ---- */
typedef struct emu_uint3 {
    unsigned x, y, z;
} emu_uint3;
static _Thread_local emu_uint3 threadIdx, blockIdx;
static emu_uint3 blockDim, gridDim;
static pthread_barrier_t emu_bar;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __syncthreads() ((void)pthread_barrier_wait(&emu_bar))
#define min(a, b) ((a) < (b) ? (a) : (b))
typedef struct float4 {
    float x, y, z, w;
} __attribute__((aligned(16))) float4;
typedef _Float16 __half;
static inline float __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline __half __float2half_rn(float v) { return (__half)v; } /* RN-even, as on the GPU */

#include "cuda/gptq_cuda_kernels.cu"

#include "cuda/gptq_cuda_internal.h"

/* ---- emulated launches (geometry as in the launchers) ---- */

typedef struct gemv_thr {
    gemv_fn fn;
    const gptq_cuda_dev *L;
    const float *x;
    int T, tps;
    float *y, *partial;
    unsigned tid;
} gemv_thr;

static void *gemv_thread(void *p)
{
    const gemv_thr *a = p;
    threadIdx.x = a->tid % NCOL;
    threadIdx.y = a->tid / NCOL;
    threadIdx.z = 0;
    /* every thread walks the blocks in the same order; the barrier after
     * each block keeps the next block from reusing the shared arrays early */
    for (unsigned by = 0; by < gridDim.y; by++)
        for (unsigned bx = 0; bx < gridDim.x; bx++) {
            blockIdx = (emu_uint3){bx, by, 0};
            a->fn(*a->L, a->x, a->T, a->y, a->partial, a->tps);
            __syncthreads();
        }
    return NULL;
}

static int emu_gemv(const gptq_cuda_dev *L, const float *x, int T, float *y, float *partial,
                    int ksplit, int tps)
{
    const int ti = T <= 1 ? 0 : T <= 2 ? 1 : T <= 4 ? 2 : 3;
    const int b = L->bits, bi = b == 2 ? 0 : b == 3 ? 1 : b == 4 ? 2 : 3;
    gridDim = (emu_uint3){(unsigned)((L->N + NCOL - 1) / NCOL), (unsigned)ksplit, 1};
    blockDim = (emu_uint3){NCOL, NSL, 1};
    pthread_barrier_init(&emu_bar, NULL, GEMV_THREADS);
    static pthread_t th[GEMV_THREADS];
    static gemv_thr args[GEMV_THREADS];
    for (unsigned i = 0; i < GEMV_THREADS; i++) {
        args[i] = (gemv_thr){gemv_tab[bi][ti], L, x, T, tps, y, ksplit > 1 ? partial : NULL, i};
        if (pthread_create(&th[i], NULL, gemv_thread, &args[i])) {
            printf("FAIL: pthread_create\n");
            exit(1);
        }
    }
    for (unsigned i = 0; i < GEMV_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&emu_bar);
    if (ksplit > 1) { /* no barriers: threads one after another */
        const int64_t TN = (int64_t)T * L->N;
        int64_t nb = (TN + 255) / 256;
        if (nb > 4096)
            nb = 4096;
        gridDim = (emu_uint3){(unsigned)nb, 1, 1};
        blockDim = (emu_uint3){256, 1, 1};
        for (unsigned bx = 0; bx < gridDim.x; bx++) {
            blockIdx = (emu_uint3){bx, 0, 0};
            for (unsigned t = 0; t < 256; t++) {
                threadIdx = (emu_uint3){t, 0, 0};
                gptq_splitk_reduce(partial, ksplit, TN, L->N, L->bias, y);
            }
        }
    }
    return 0;
}

static void emu_dequant(const gptq_cuda_dev *L, int64_t n0, int64_t nb, void *w, int f16)
{
    static const dequant_fn tab[4][2] = {
        {gptq_dequant_b2_h0, gptq_dequant_b2_h1},
        {gptq_dequant_b3_h0, gptq_dequant_b3_h1},
        {gptq_dequant_b4_h0, gptq_dequant_b4_h1},
        {gptq_dequant_b8_h0, gptq_dequant_b8_h1},
    };
    const int b = L->bits, bi = b == 2 ? 0 : b == 3 ? 1 : b == 4 ? 2 : 3;
    const int64_t U = L->K / GPTQ_CUDA_UNIT_CODES(b);
    /* a smaller grid.y than the launcher's min(U, 65535) also exercises
     * the grid-stride loop over units */
    const int64_t gy = U < 7 ? U : 7;
    gridDim = (emu_uint3){(unsigned)((nb + DQ_THREADS - 1) / DQ_THREADS), (unsigned)gy, 1};
    blockDim = (emu_uint3){DQ_THREADS, 1, 1};
    for (unsigned by = 0; by < gridDim.y; by++)
        for (unsigned bx = 0; bx < gridDim.x; bx++) {
            blockIdx = (emu_uint3){bx, by, 0};
            for (unsigned t = 0; t < DQ_THREADS; t++) {
                threadIdx = (emu_uint3){t, 0, 0};
                tab[bi][f16 ? 1 : 0](*L, n0, nb, w);
            }
        }
}

/* cublasGemmEx(N, N, m, n, k, 1, A, lda, B, ldb, 0, C, ldc), column-major,
 * f32 accumulation; A is f32 or f16. */
static void colmajor_gemm(int m, int n, int k, const void *A, int a16, int lda, const float *B,
                          int ldb, float *C, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
                const float a = a16 ? (float)((const __half *)A)[i + (int64_t)p * lda]
                                    : ((const float *)A)[i + (int64_t)p * lda];
                s += (double)a * (double)B[p + (int64_t)j * ldb];
            }
            C[i + (int64_t)j * ldc] = (float)s;
        }
}

/* gptq_cuda_launch_add_bias's geometry (grid-stride, 256 threads) on a
 * smaller grid, through the kernel itself */
static inline void emu_add_bias(float *y, const float *bias, int64_t T, int64_t N)
{
    gridDim = (emu_uint3){3, 1, 1};
    blockDim = (emu_uint3){256, 1, 1};
    for (unsigned bx = 0; bx < gridDim.x; bx++) {
        blockIdx = (emu_uint3){bx, 0, 0};
        for (unsigned t = 0; t < 256; t++) {
            threadIdx = (emu_uint3){t, 0, 0};
            gptq_add_bias(y, bias, T * N, N);
        }
    }
}

#endif
