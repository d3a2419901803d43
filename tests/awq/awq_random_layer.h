/* A random AWQ layer for the tests of quant-awq's CUDA path (test_awq_cuda,
 * test_awq_cuda_emu), drawn from gptq_test_rng.h's generator: include
 * after it. */
#ifndef PLUME_TEST_AWQ_RANDOM_LAYER_H
#define PLUME_TEST_AWQ_RANDOM_LAYER_H

#include <math.h>
#include <stdint.h>

/* Fills K x N weights of G groups: packed words qw (K*N/8) and zero points
 * qz (G*N/8) of any bits, scales sc (G*N) in [0.002, 0.012], bias (N) in
 * [-1, 1). */
static inline void awq_random_layer(int32_t *qw, int32_t *qz, float *sc, float *bias, int64_t K,
                                    int64_t N, int64_t G)
{
    for (int64_t i = 0; i < K * N / 8; i++)
        qw[i] = (int32_t)(rnd() ^ (rnd() << 16));
    for (int64_t i = 0; i < G * N / 8; i++)
        qz[i] = (int32_t)(rnd() ^ (rnd() << 16));
    for (int64_t i = 0; i < G * N; i++)
        sc[i] = 0.002f + 0.01f * fabsf(rndf());
    for (int64_t i = 0; i < N; i++)
        bias[i] = rndf();
}

#endif
