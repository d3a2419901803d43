/* The avx2 level: AVX2 + FMA + F16C, int8 dot products with
 * vpmaddubsw/vpmaddwd.  Compiled for that target whatever the build's
 * -march, and only called after cpu_features.c found those features. */
#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,fma,f16c")
#endif

#define KX_VNNI 0
#define KX_TR 2
#define KX_TT 3
#define KX_FR 2
#define KX_FT 4
#define KX_DR 4
#include "backend/cpu/kernels_x86.h"

/* Twelve independent 256-bit FMA chains (written in assembly so that the
 * accumulators stay in registers); operands are zero, so no denormals. */
static double fma_peak(long iters)
{
    __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1" ::: "xmm0", "xmm1");
    for (long it = 0; it < iters; it++)
        __asm__ volatile(
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm4\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm5\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm6\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm7\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm8\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm9\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm10\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm11\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm12\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm13\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm14\n\t"
            "vfmadd231ps %%ymm0, %%ymm1, %%ymm15\n\t"
            ::: "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
              "xmm13", "xmm14", "xmm15");
    return 2.0 * 8.0 * 12.0 * (double)iters;
}

/* The sequence the avx2 matmul uses per 32 u8×s8 products (vpmaddubsw,
 * vpmaddwd, vpaddd), six independent chains. */
static double int8_peak(long iters)
{
    __asm__ volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpxor %%ymm1, %%ymm1, %%ymm1\n\t"
                     "vpcmpeqw %%ymm2, %%ymm2, %%ymm2\n\tvpsrlw $15, %%ymm2, %%ymm2" ::: "xmm0", "xmm1", "xmm2");
    for (long it = 0; it < iters; it++)
        __asm__ volatile(
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm4\n\t"
            "vpmaddwd %%ymm2, %%ymm4, %%ymm4\n\t"
            "vpaddd %%ymm4, %%ymm10, %%ymm10\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm5\n\t"
            "vpmaddwd %%ymm2, %%ymm5, %%ymm5\n\t"
            "vpaddd %%ymm5, %%ymm11, %%ymm11\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm6\n\t"
            "vpmaddwd %%ymm2, %%ymm6, %%ymm6\n\t"
            "vpaddd %%ymm6, %%ymm12, %%ymm12\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm7\n\t"
            "vpmaddwd %%ymm2, %%ymm7, %%ymm7\n\t"
            "vpaddd %%ymm7, %%ymm13, %%ymm13\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm8\n\t"
            "vpmaddwd %%ymm2, %%ymm8, %%ymm8\n\t"
            "vpaddd %%ymm8, %%ymm14, %%ymm14\n\t"
            "vpmaddubsw %%ymm0, %%ymm1, %%ymm9\n\t"
            "vpmaddwd %%ymm2, %%ymm9, %%ymm9\n\t"
            "vpaddd %%ymm9, %%ymm15, %%ymm15\n\t"
            ::: "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
              "xmm13", "xmm14", "xmm15");
    return 2.0 * 32.0 * 6.0 * (double)iters;
}

static const plume_kernels K = {
    .level = PLUME_CPU_AVX2,
    .quantize_q8 = kx_quantize_q8,
    .mm_q = {kx_mm_q4_0, kx_mm_q4_1, kx_mm_q8_0, kx_mm_q4_k, kx_mm_q6_k},
    .mm_f = {kx_mm_f32, kx_mm_f16, kx_mm_bf16},
    .dot = kx_dotf,
    .axpy = kx_axpy,
    .rmsnorm = kx_rmsnorm,
    .rope = kx_rope,
    .swiglu = kx_swiglu,
    .softmax_exp = kx_softmax_exp,
    .read_sum = kx_read_sum,
    .fma_peak = fma_peak,
    .int8_peak = int8_peak,
};

#if defined(__clang__)
#pragma clang attribute pop
#endif

const plume_kernels *plume_kernels_avx2(void) { return &K; }

#else
#include <stddef.h>
#include "backend/cpu/dispatch.h"
const plume_kernels *plume_kernels_avx2(void) { return NULL; }
#endif
