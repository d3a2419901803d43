/* quant-gptq CUDA kernels against the CPU reference kernel.
 *
 * For bits 2/3/4/8 × sym/asym × zero format v1/v2 × desc_act off/on ×
 * group_size 32/128/−1 × two layer shapes, RTN makes the checkpoint tensors
 * (gptq_rtn_quantize, act-order from a random permutation), the CPU
 * reference layer (gptq_layer_build + gptq_forward_ref) and the CUDA layer
 * (gptq_cuda_layer_upload) are built from the same arrays, and every path
 * (auto, gemv, gemm-f32, gemm-tf32, gemm-f16, the GEMMs also with a scratch
 * limit that forces several column slabs) runs n_tok = 1, 3 and 64.
 *
 * Shapes: K = 416 (one 512-row tile, no split-K; a partial last group at
 * group 128) and K = 1568 (4 tiles, the last one 32 rows: split-K with the
 * second reduction pass); N = 200/208/224 (not a multiple of the 128-column
 * block, so the last block has idle threads; multiple of 32/b).
 *
 * Tolerances, per output element, with u = 2^-24, S = Σ_k |x_k|·|W_nk|,
 * γ_n = n·u/(1 − n·u) (Higham, dot products: |fl(xᵀw) − xᵀw| ≤ γ_n·|x|ᵀ|w|
 * for ANY summation order, which covers split-K, FMAs and cuBLAS'
 * blocking):
 *   f32 (gemv, gemm-f32): both sides compute the same dequantized weights
 *     (the GPU's scale·(q − zero) is bit-identical to the reference's) and
 *     differ only in summation order: |Δ| ≤ 2·γ_{K+1}·(S + |bias|).
 *   tf32: each operand is rounded (or truncated) to a 10-bit mantissa,
 *     relative error ≤ 2^-10 each, so each product is off by ≤ (2^-9 +
 *     2^-20)·|x||w|: |Δ| ≤ (2^-9 + 2^-19)·S + the f32 bound.
 *   f16: x and W are rounded to f16 (RN: ≤ 2^-11 relative, ≤ 2^-25
 *     absolute in the subnormal range); products are then exact in f32
 *     accumulation: |Δ| ≤ 2^-9·S + 2^-23·(Σ_k|x_k| + Σ_k|W_nk|) + the f32
 *     bound (2^-9 is twice the 2^-10 first-order term, covering the
 *     second-order and subnormal cross terms).
 * Values are O(1) (|x| ≤ 4, |W| ≲ 0.1), far from f16 overflow.
 *
 * Without a usable GPU the test prints why and exits 77 (skipped). */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gptq_cuda.h"
#include "gptq_linear.h"
#include "gptq_pack.h"
#include "gptq_rtn.h"
#include "../gptq_test_rng.h"

#define MAXT 64



static double gamma_n(double n)
{
    const double u = ldexp(1.0, -24);
    return n * u / (1.0 - n * u);
}

static int failures = 0, checks = 0;
static double worst[8]; /* max |Δ|/tol per path */

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            failures++;                                                                    \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                    \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
        }                                                                                  \
    } while (0)

typedef struct layer_case {
    int bits;
    bool sym, act, bias, pass_gidx;
    gptq_zero_format fmt;
    int64_t gs, K, N;
} layer_case;

static void describe(const layer_case *c, char *buf, size_t n)
{
    snprintf(buf, n, "bits=%d %s %s desc_act=%d group=%" PRId64 " K=%" PRId64 " N=%" PRId64
             " bias=%d g_idx=%s",
             c->bits, c->sym ? "sym" : "asym", c->fmt == GPTQ_ZERO_V1 ? "v1" : "v2", c->act,
             c->gs, c->K, c->N, c->bias, c->pass_gidx ? "given" : "NULL");
}

/* Compares y (GPU) against yr (reference) for T tokens with the path's
 * bound; returns the number of elements out of tolerance. */
static int compare(const layer_case *c, gptq_cuda_path path, int T, const float *y,
                   const float *yr, const double *S, const double *SX, const double *SW,
                   const float *bias, const char *what)
{
    const int64_t K = c->K, N = c->N;
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            const int64_t i = (int64_t)t * N + n;
            const double s = S[i], b = bias ? fabs(bias[n]) : 0.0;
            double tol = 2.0 * gamma_n((double)K + 1) * (s + b);
            if (path == GPTQ_CUDA_GEMM_TF32)
                tol += (ldexp(1.0, -9) + ldexp(1.0, -19)) * s;
            else if (path == GPTQ_CUDA_GEMM_F16)
                tol += ldexp(1.0, -9) * s + ldexp(1.0, -23) * (SX[t] + SW[n]);
            tol += 1e-30;
            const double d = fabs((double)y[i] - (double)yr[i]);
            if (!(d <= tol)) { /* also catches NaN */
                if (bad < 3) {
                    char desc[256];
                    describe(c, desc, sizeof desc);
                    printf("FAIL %s %s n_tok=%d: y[%d][%" PRId64 "] = %.9g, reference %.9g, "
                           "|diff| %.3g > tol %.3g (%s)\n",
                           gptq_cuda_path_name(path), what, T, t, n, (double)y[i],
                           (double)yr[i], d, tol, desc);
                }
                bad++;
            }
            if (d / tol > worst[path])
                worst[path] = d / tol;
        }
    return bad;
}

static void run_case(gptq_cuda_ctx *ctx, const layer_case *c, float *dx, float *dy)
{
    const int64_t K = c->K, N = c->N;
    char desc[256];
    describe(c, desc, sizeof desc);
    plume_error err = {0};

    float *W = malloc((size_t)(N * K) * sizeof *W);
    float *Wd = malloc((size_t)(N * K) * sizeof *Wd);
    float *bias = malloc((size_t)N * sizeof *bias);
    float *x = malloc((size_t)(MAXT * K) * sizeof *x);
    float *yr = malloc((size_t)(MAXT * N) * sizeof *yr);
    float *y = malloc((size_t)(MAXT * N) * sizeof *y);
    double *S = malloc((size_t)(MAXT * N) * sizeof *S);
    double *SX = malloc((size_t)MAXT * sizeof *SX), *SW = malloc((size_t)N * sizeof *SW);
    int32_t *perm = malloc((size_t)K * sizeof *perm);
    if (!W || !Wd || !bias || !x || !yr || !y || !S || !SX || !SW || !perm) {
        CHECK(0, "out of memory");
        goto out;
    }
    for (int64_t n = 0; n < N; n++) {
        const float row = 0.02f + 0.1f * (float)(rnd() % 100) / 100.0f;
        for (int64_t k = 0; k < K; k++)
            W[n * K + k] = row * rndf() + (c->sym ? 0.0f : 0.3f * row); /* asym: shifted */
        bias[n] = 0.5f * rndf();
    }
    for (int64_t i = 0; i < MAXT * K; i++)
        x[i] = (rnd() % 16 == 0) ? 4.0f * rndf() : rndf();
    shuffle(perm, K);

    gptq_qconfig qc = {.bits = c->bits, .group_size = c->gs, .sym = c->sym, .fmt = c->fmt};
    gptq_tensors t = {0};
    int rc = gptq_rtn_quantize(W, N, K, &qc, c->act ? perm : NULL, &t, &err);
    CHECK(rc == 0, "gptq_rtn_quantize (%s): %s", desc, err.msg);
    if (rc)
        goto out;
    const int32_t *gidx = c->pass_gidx ? t.g_idx : NULL;
    const float *bp = c->bias ? bias : NULL;

    gptq_load_config lc = {.bits = c->bits, .group_size = c->gs, .sym = c->sym,
                           .desc_act = c->act, .fmt = c->fmt};
    gptq_layer *ref = NULL;
    rc = gptq_layer_build(t.qweight, t.qzeros, t.scales, gidx, bp, K, N, t.G, &lc, &ref, &err);
    CHECK(rc == 0, "gptq_layer_build (%s): %s", desc, err.msg);
    if (rc)
        goto out_t;
    rc = gptq_forward_ref(ref, x, MAXT, yr, &err);
    CHECK(rc == 0, "gptq_forward_ref (%s): %s", desc, err.msg);
    rc |= gptq_dequantize(t.qweight, t.qzeros, t.scales, gidx, K, N, t.G, c->gs, c->bits, c->fmt,
                          Wd, &err);
    CHECK(rc == 0, "gptq_dequantize (%s): %s", desc, err.msg);
    if (rc)
        goto out_ref;
    for (int64_t n = 0; n < N; n++) {
        SW[n] = 0.0;
        for (int64_t k = 0; k < K; k++)
            SW[n] += fabs(Wd[n * K + k]);
    }
    for (int tt = 0; tt < MAXT; tt++) {
        SX[tt] = 0.0;
        for (int64_t k = 0; k < K; k++)
            SX[tt] += fabs(x[tt * K + k]);
        for (int64_t n = 0; n < N; n++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++)
                s += fabs((double)x[tt * K + k] * (double)Wd[n * K + k]);
            S[tt * N + n] = s;
        }
    }

    gptq_cuda_layer_desc d = {.qweight = t.qweight, .qzeros = t.qzeros, .scales = t.scales,
                              .g_idx = gidx, .bias = bp, .K = K, .N = N, .G = t.G,
                              .bits = c->bits, .group_size = c->gs, .fmt = c->fmt};
    gptq_cuda_layer *gl = NULL;
    rc = gptq_cuda_layer_upload(ctx, &d, &gl, &err);
    CHECK(rc == 0, "gptq_cuda_layer_upload (%s): %s", desc, err.msg);
    if (rc)
        goto out_ref;
    CHECK(gptq_cuda_layer_permuted(gl) == gptq_layer_permuted(ref),
          "permuted: cuda %d, reference %d (%s)", gptq_cuda_layer_permuted(gl),
          gptq_layer_permuted(ref), desc);
    rc = gptq_cuda_upload(ctx, dx, x, (size_t)(MAXT * K) * sizeof *x, &err);
    CHECK(rc == 0, "upload x: %s", err.msg);

    static const gptq_cuda_path paths[] = {GPTQ_CUDA_AUTO, GPTQ_CUDA_GEMV, GPTQ_CUDA_GEMM_F32,
                                           GPTQ_CUDA_GEMM_TF32, GPTQ_CUDA_GEMM_F16};
    static const int toks[] = {1, 3, MAXT};
    for (size_t pi = 0; pi < sizeof paths / sizeof paths[0]; pi++)
        for (int slab = 0; slab < 2; slab++) {
            const gptq_cuda_path p = paths[pi];
            const bool gemm = p == GPTQ_CUDA_GEMM_F32 || p == GPTQ_CUDA_GEMM_TF32 ||
                              p == GPTQ_CUDA_GEMM_F16;
            if (slab && !gemm)
                continue;
            /* slab: a 1-byte limit means 128-column slabs, so N = 200..224
             * takes two, the second partial */
            gptq_cuda_ctx_set_scratch_limit(ctx, slab ? 1 : (size_t)256 << 20);
            for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
                const int T = toks[ti];
                /* poison y so that unwritten outputs show up */
                for (int64_t i = 0; i < (int64_t)T * N; i++)
                    y[i] = NAN;
                rc = gptq_cuda_upload(ctx, dy, y, (size_t)T * (size_t)N * sizeof *y, &err);
                if (!rc)
                    rc = gptq_cuda_forward_path(ctx, gl, dx, T, dy, p, &err);
                if (!rc)
                    rc = gptq_cuda_sync(ctx, &err);
                if (!rc)
                    rc = gptq_cuda_download(ctx, y, dy, (size_t)T * (size_t)N * sizeof *y, &err);
                CHECK(rc == 0, "forward %s n_tok=%d (%s): %s", gptq_cuda_path_name(p), T, desc,
                      err.msg);
                if (rc)
                    continue;
                /* auto: gemv up to 8 tokens, else the default prefill (tf32) */
                gptq_cuda_path eff = p == GPTQ_CUDA_AUTO
                                         ? (T <= 8 ? GPTQ_CUDA_GEMV : GPTQ_CUDA_GEMM_TF32)
                                         : p;
                int bad = compare(c, eff, T, y, yr, S, SX, SW, bp, slab ? "slabs" : "");
                CHECK(bad == 0, "%d of %" PRId64 " outputs out of tolerance: %s n_tok=%d %s (%s)",
                      bad, (int64_t)T * N, gptq_cuda_path_name(p), T, slab ? "slabs" : "", desc);
            }
        }
    gptq_cuda_ctx_set_scratch_limit(ctx, (size_t)256 << 20);
    gptq_cuda_layer_free(gl);
out_ref:
    gptq_layer_free(ref);
out_t:
    gptq_tensors_free(&t);
out:
    free(W);
    free(Wd);
    free(bias);
    free(x);
    free(yr);
    free(y);
    free(S);
    free(SX);
    free(SW);
    free(perm);
}

/* Bad arguments come back as errors, not crashes. */
static void error_paths(gptq_cuda_ctx *ctx, float *dx, float *dy)
{
    plume_error err = {0};
    int32_t qw[64] = {0}, qz[8] = {0};
    float sc[64] = {0};
    gptq_cuda_layer_desc d = {.qweight = qw, .qzeros = qz, .scales = sc, .K = 32, .N = 8,
                              .G = 1, .bits = 5, .group_size = -1, .fmt = GPTQ_ZERO_V2};
    gptq_cuda_layer *gl = NULL;
    int rc = gptq_cuda_layer_upload(ctx, &d, &gl, &err);
    CHECK(rc == -1 && strstr(err.msg, "bits"), "bits = 5 accepted or unclear: %s", err.msg);
    d.bits = 4;
    d.G = 2; /* group_size -1 needs 1 group */
    rc = gptq_cuda_layer_upload(ctx, &d, &gl, &err);
    CHECK(rc == -1 && strstr(err.msg, "groups"), "wrong G accepted or unclear: %s", err.msg);
    d.G = 1;
    int32_t gi[32] = {0};
    gi[3] = 7; /* out of range */
    d.g_idx = gi;
    rc = gptq_cuda_layer_upload(ctx, &d, &gl, &err);
    CHECK(rc == -1, "g_idx out of range accepted");
    d.g_idx = NULL;
    rc = gptq_cuda_layer_upload(ctx, &d, &gl, &err);
    CHECK(rc == 0, "a valid 8x32 layer: %s", err.msg);
    if (rc)
        return;
    rc = gptq_cuda_forward(ctx, gl, dx, -1, dy, &err);
    CHECK(rc == -1 && strstr(err.msg, "n_tok"), "n_tok = -1 accepted or unclear: %s", err.msg);
    rc = gptq_cuda_forward(ctx, gl, dx, 0, dy, &err);
    CHECK(rc == 0, "n_tok = 0: %s", err.msg);
    rc = gptq_cuda_ctx_set_auto(ctx, 0, GPTQ_CUDA_GEMM_F16, &err);
    CHECK(rc == -1, "gemv_max_tok = 0 accepted");
    gptq_cuda_layer_free(gl);
}

int main(void)
{
    char why[512];
    if (!gptq_cuda_available(why, sizeof why)) {
        printf("SKIP: no usable CUDA device: %s\n", why);
        return 77;
    }
    plume_error err = {0};
    gptq_cuda_ctx *ctx = NULL;
    if (gptq_cuda_ctx_create(0, &ctx, &err)) {
        printf("FAIL: gptq_cuda_ctx_create: %s\n", err.msg);
        return 1;
    }
    const int64_t Kmax = 1568, Nmax = 224;
    float *dx = NULL, *dy = NULL;
    if (gptq_cuda_alloc(ctx, (size_t)(MAXT * Kmax) * sizeof(float), (void **)&dx, &err) ||
        gptq_cuda_alloc(ctx, (size_t)(MAXT * Nmax) * sizeof(float), (void **)&dy, &err)) {
        printf("FAIL: gptq_cuda_alloc: %s\n", err.msg);
        return 1;
    }
    static const int bitss[] = {2, 3, 4, 8};
    static const int64_t groups[] = {32, 128, -1};
    static const int64_t Ks[] = {416, 1568};
    int ncase = 0;
    for (size_t bi = 0; bi < 4; bi++)
        for (int sym = 0; sym < 2; sym++)
            for (int v = 1; v <= 2; v++)
                for (int act = 0; act < 2; act++)
                    for (size_t gi = 0; gi < 3; gi++)
                        for (size_t ki = 0; ki < 2; ki++) {
                            const int bits = bitss[bi];
                            layer_case c = {
                                .bits = bits, .sym = sym, .act = act,
                                .fmt = v == 1 ? GPTQ_ZERO_V1 : GPTQ_ZERO_V2, .gs = groups[gi],
                                .K = Ks[ki], .N = bits == 3 ? 224 : bits == 2 ? 208 : 200,
                                .bias = (ncase % 2) == 0,
                                /* without act-order, alternate a given monotone g_idx
                                 * and the default k / group_size */
                                .pass_gidx = act || (ncase % 3) == 1};
                            run_case(ctx, &c, dx, dy);
                            ncase++;
                        }
    error_paths(ctx, dx, dy);
    gptq_cuda_free(ctx, dx);
    gptq_cuda_free(ctx, dy);
    gptq_cuda_ctx_destroy(ctx);
    printf("%d layers, %d checks, %d failures; worst |diff|/tol: gemv %.3g, gemm-f32 %.3g, "
           "gemm-tf32 %.3g, gemm-f16 %.3g\n",
           ncase, checks, failures, worst[GPTQ_CUDA_GEMV], worst[GPTQ_CUDA_GEMM_F32],
           worst[GPTQ_CUDA_GEMM_TF32], worst[GPTQ_CUDA_GEMM_F16]);
    return failures ? 1 : 0;
}
