/* How far a CPU matmul's output may lie from the exact dot product: the
 * bound test_cpu_matmul.c, test_cpu_repack.c and plugins/test_builtin.c
 * check every kernel against. */
#ifndef PLUME_TEST_MATMUL_TOLERANCE_H
#define PLUME_TEST_MATMUL_TOLERANCE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* The tolerance of one output y = x·w over k inputs: float rounding (1e-5
 * of the sum of |x_i w_i|, plus 1e-6) and, with int8 activations (for
 * block-quantized weights), what those can move: each x by at most d_b/2,
 * d_b = its 32-block's amax/127.  Writes the exact dot product, in double,
 * to *exact. */
static inline double matmul_tolerance(const float *x, const float *w, int64_t k, bool int8_act,
                                      double *exact)
{
    double dot = 0, mag = 0, bound = 0;
    for (int64_t i = 0; i < k; i++) {
        dot += (double)w[i] * x[i];
        mag += fabs((double)w[i] * x[i]);
    }
    if (int8_act)
        for (int64_t b = 0; b < k / 32; b++) {
            double amax = 0, wsum = 0;
            for (int i = 0; i < 32; i++) {
                amax = fmax(amax, fabs(x[32 * b + i]));
                wsum += fabs(w[32 * b + i]);
            }
            bound += amax / 127.0 / 2.0 * wsum;
        }
    *exact = dot;
    return bound * 1.001 + 1e-5 * mag + 1e-6;
}

#endif
