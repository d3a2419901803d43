/* plume — AVX-512 VNNI building blocks of the core's int8 kernels, for a
 * plugin's kernels at PLUME_CPU_LEVEL_AVX512 or above (with the AVX2 ones
 * of plume/cpu_x86_avx2.h).  Include inside a
 * PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AVX512) region (plume/cpu_x86.h)
 * or a wider one; x86-64 only.  Header only. */
#ifndef PLUME_CPU_X86_AVX512_H
#define PLUME_CPU_X86_AVX512_H

#include "plume/cpu_x86_avx2.h"

/* acc + the dot of each 32-bit lane's 4 unsigned bytes of w with the 4
 * signed bytes at p (the same 4 for every lane): vpdpbusd with an embedded
 * {1to16} broadcast of its memory operand, which GCC does not form from
 * _mm512_set1_epi32 of a load by itself.  Exact int32 (no saturation). */
PLUME_X86_INLINE __m512i plume_x86_dpbusd_bcast(__m512i acc, __m512i w, const int8_t *p)
{
#if defined(__GNUC__)
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)p));
    return acc;
#else
    int v;
    memcpy(&v, p, 4);
    return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(v));
#endif
}

/* One 32-byte block's dot, 16 rows at once: W[g] holds the rows' unsigned
 * bytes 4g..4g+3 (a row per 32-bit lane), q the token's 32 signed bytes.
 * *lo += the sum over bytes 0-15, *hi += the sum over bytes 16-31, as two
 * interleaved chains of 4 vpdpbusd (a lone token waits on half the
 * latency of one chain of 8).  Exact int32. */
PLUME_X86_INLINE void plume_x86_dot32_halves(__m512i *lo, __m512i *hi, const __m512i W[8],
                                             const int8_t *q)
{
    __m512i i0 = *lo, i1 = *hi;
    i0 = plume_x86_dpbusd_bcast(i0, W[0], q + 0);
    i1 = plume_x86_dpbusd_bcast(i1, W[4], q + 16);
    i0 = plume_x86_dpbusd_bcast(i0, W[1], q + 4);
    i1 = plume_x86_dpbusd_bcast(i1, W[5], q + 20);
    i0 = plume_x86_dpbusd_bcast(i0, W[2], q + 8);
    i1 = plume_x86_dpbusd_bcast(i1, W[6], q + 24);
    i0 = plume_x86_dpbusd_bcast(i0, W[3], q + 12);
    i1 = plume_x86_dpbusd_bcast(i1, W[7], q + 28);
    *lo = i0;
    *hi = i1;
}

/* A zero int32 vector by the zero idiom (vpxord x, x, x, resolved at
 * register renaming; GCC otherwise copies a zero register, a vector uop). */
PLUME_X86_INLINE __m512i plume_x86_zero512(void)
{
#if defined(__GNUC__)
    __m512i z;
    __asm__("vpxord %0, %0, %0" : "=v"(z));
    return z;
#else
    return _mm512_setzero_si512();
#endif
}

#endif
