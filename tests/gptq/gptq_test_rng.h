/* The GPTQ tests' deterministic random numbers: xorshift64, floats in
 * [-1, 1), random permutations.  One state per test program. */
#ifndef PLUME_GPTQ_TEST_RNG_H
#define PLUME_GPTQ_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static inline void rng_seed(uint64_t s) { rng_state = s ? s : 0x9E3779B97F4A7C15ull; }

static inline uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static inline float rndf(void) { return (float)((rnd() & 0xffffff) / 16777216.0 * 2.0 - 1.0); }

/* a[0..n) = rndf() * scale each. */
static inline void rnd_fill(float *a, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        a[i] = rndf() * scale;
}

/* p = a uniformly random permutation of 0..n-1. */
static inline void shuffle(int32_t *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = rnd() % (uint32_t)(i + 1);
        int32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

#endif
