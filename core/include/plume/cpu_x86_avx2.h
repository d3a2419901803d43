/* plume — AVX2 building blocks of the core's int8 kernels, for a plugin's
 * kernels at PLUME_CPU_LEVEL_AVX2 or above.  Include inside a
 * PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AVX2) region (plume/cpu_x86.h)
 * or a wider one; x86-64 only.  Header only. */
#ifndef PLUME_CPU_X86_AVX2_H
#define PLUME_CPU_X86_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define PLUME_X86_INLINE static inline __attribute__((always_inline))

/* The 4 bytes at p (any alignment) in every 32-bit lane: one token's
 * activation group, for vpmaddubsw or vpdpbusd against 8 or 16 rows. */
PLUME_X86_INLINE __m256i plume_x86_bcast4(const int8_t *p)
{
    int v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Stores the first nr lanes of v at y: all 8 when nr >= 8, none when
 * nr <= 0 (a tile's last rows past the matrix are not written). */
PLUME_X86_INLINE void plume_x86_store8(float *y, __m256 v, int nr)
{
    if (nr >= 8) {
        _mm256_storeu_ps(y, v);
    } else if (nr > 0) {
        float tmp[8];
        _mm256_storeu_ps(tmp, v);
        memcpy(y, tmp, sizeof(float) * (size_t)nr);
    }
}

#endif
