/* quant-awq on a GPU: AWQ layers uploaded with awq_cuda_layer_upload and
 * run by quant-gptq's CUDA kernels on every path (GEMV, GEMM f32/tf32/f16),
 * against the same layer on the CPU reference kernel.  Without a usable GPU
 * it prints why and exits 77 (skipped).  Tolerances: |y − y_ref| ≤
 * tol · Σ_k |x_k · W_nk| (+ |bias|), tol 1e-5 for f32 paths, 4e-3 for tf32
 * and f16 (10-bit mantissas). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awq_cuda.h"
#include "awq_linear.h"
#include "awq_pack.h"
#include "gptq_test_rng.h"

#include "awq_random_layer.h"

static int failures = 0;

static void run(gptq_cuda_ctx *ctx, int64_t K, int64_t N, int64_t gs, bool with_bias)
{
    enum { T = 13 };
    const int64_t G = K / gs;
    int32_t *qw = malloc(sizeof *qw * (size_t)(K * N / 8)), *qz = malloc(sizeof *qz * (size_t)(G * N / 8));
    float *sc = malloc(sizeof *sc * (size_t)(G * N)), *bias = malloc(sizeof *bias * (size_t)N);
    float *Wd = malloc(sizeof *Wd * (size_t)(N * K)), *x = malloc(sizeof *x * (size_t)(T * K));
    float *yr = malloc(sizeof *yr * (size_t)(T * N)), *y = malloc(sizeof *y * (size_t)(T * N));
    awq_random_layer(qw, qz, sc, bias, K, N, G);
    rnd_fill(x, T * K, 1.0f);
    const float *bp = with_bias ? bias : NULL;
    plume_error err = {0};
    gptq_layer *ref = NULL;
    gptq_cuda_layer *gl = NULL;
    float *dx = NULL, *dy = NULL;
    if (awq_dequantize(qw, qz, sc, K, N, gs, Wd, &err) ||
        awq_layer_build(qw, qz, sc, bp, K, N, gs, NULL, &ref, &err) ||
        gptq_forward_ref(ref, x, T, yr, &err) ||
        awq_cuda_layer_upload(ctx, qw, qz, sc, bp, K, N, gs, &gl, &err) ||
        gptq_cuda_alloc(ctx, sizeof *x * (size_t)(T * K), (void **)&dx, &err) ||
        gptq_cuda_alloc(ctx, sizeof *y * (size_t)(T * N), (void **)&dy, &err) ||
        gptq_cuda_upload(ctx, dx, x, sizeof *x * (size_t)(T * K), &err)) {
        printf("FAIL K=%" PRId64 " N=%" PRId64 " g=%" PRId64 ": %s\n", K, N, gs, err.msg);
        failures++;
        goto done;
    }
    static const gptq_cuda_path paths[] = {GPTQ_CUDA_GEMV, GPTQ_CUDA_GEMM_F32, GPTQ_CUDA_GEMM_TF32,
                                           GPTQ_CUDA_GEMM_F16};
    for (size_t p = 0; p < 4; p++) {
        const int Ts[] = {1, T};
        for (int ti = 0; ti < 2; ti++) {
            if (gptq_cuda_forward_path(ctx, gl, dx, Ts[ti], dy, paths[p], &err) ||
                gptq_cuda_download(ctx, y, dy, sizeof *y * (size_t)(Ts[ti] * N), &err)) {
                printf("FAIL %s: %s\n", gptq_cuda_path_name(paths[p]), err.msg);
                failures++;
                continue;
            }
            const double tol = paths[p] == GPTQ_CUDA_GEMM_TF32 || paths[p] == GPTQ_CUDA_GEMM_F16 ? 4e-3 : 1e-5;
            int bad = 0;
            for (int t = 0; t < Ts[ti]; t++)
                for (int64_t n = 0; n < N; n++) {
                    double S = bp ? fabs(bp[n]) : 0;
                    for (int64_t k = 0; k < K; k++)
                        S += fabs((double)x[t * K + k] * Wd[n * K + k]);
                    if (!(fabs((double)y[t * N + n] - yr[t * N + n]) <= tol * S + 1e-30) && bad++ < 3)
                        printf("FAIL %s T=%d K=%" PRId64 " g=%" PRId64 ": y[%d][%" PRId64 "] %.9g vs %.9g\n",
                               gptq_cuda_path_name(paths[p]), Ts[ti], K, gs, t, n, y[t * N + n], yr[t * N + n]);
                }
            failures += bad > 0;
        }
    }
done:
    gptq_cuda_free(ctx, dx);
    gptq_cuda_free(ctx, dy);
    gptq_cuda_layer_free(gl);
    gptq_layer_free(ref);
    free(qw);
    free(qz);
    free(sc);
    free(bias);
    free(Wd);
    free(x);
    free(yr);
    free(y);
}

int main(void)
{
    char why[256];
    if (!gptq_cuda_available(why, sizeof why)) {
        printf("SKIP: no usable CUDA device: %s\n", why);
        return 77;
    }
    gptq_cuda_ctx *ctx = NULL;
    plume_error err = {0};
    if (gptq_cuda_ctx_create(0, &ctx, &err)) {
        printf("FAIL: gptq_cuda_ctx_create: %s\n", err.msg);
        return 1;
    }
    rng_seed(99);
    run(ctx, 576, 1536, 64, false);
    run(ctx, 1536, 576, 128, true);
    run(ctx, 256, 40, 32, true);
    gptq_cuda_ctx_destroy(ctx);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
