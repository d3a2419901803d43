/* How far a CPU matmul's output may lie from the exact dot product: the
 * bound test_cpu_matmul.c, test_cpu_repack.c and plugins/test_builtin.c
 * check every kernel against.  Include after cmocka.h. */
#ifndef PLUME_TEST_MATMUL_TOLERANCE_H
#define PLUME_TEST_MATMUL_TOLERANCE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "plume/tensor.h"

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

/* Checks y (n_tok x N) against x (n_tok x K) · dequant(w)ᵀ, w N rows of rb
 * bytes of type, each output within matmul_tolerance; a miss fails the
 * test naming the type, level, shape, output and both values. */
static inline void check_matmul_vs_dequant(uint32_t type, const char *level, const uint8_t *w,
                                           size_t rb, const float *x, const float *y, int64_t K,
                                           int64_t N, int n_tok, bool int8_act)
{
    float *deq = malloc(sizeof(float) * (size_t)K);
    assert_non_null(deq);
    for (int64_t r = 0; r < N; r++) {
        plume_dequantize((plume_dtype)type, w + r * rb, deq, K);
        for (int tk = 0; tk < n_tok; tk++) {
            const float *xt = x + tk * K;
            double exact;
            const double tol = matmul_tolerance(xt, deq, K, int8_act, &exact);
            const double err = fabs((double)y[tk * N + r] - exact);
            if (!(err <= tol))
                fail_msg("%s level %s K=%lld N=%lld n_tok=%d: y[%d][%lld] = %.7g, exact %.7g, "
                         "error %.3g > tolerance %.3g",
                         plume_dtype_name(type), level, (long long)K, (long long)N, n_tok, tk,
                         (long long)r, y[tk * N + r], exact, err, tol);
        }
    }
    free(deq);
}

#endif
