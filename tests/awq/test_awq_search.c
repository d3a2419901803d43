/* The AWQ searches (core/src/quant/awq_search.c) on synthetic calibration
 * data with outlier input channels, every error recomputed here straight
 * from the tokens (Σ_t |x_t·Dᵀ|² · 2/n), not through the Hessian the
 * searches use: the scale search beats plain rounding (s = 1) on the output
 * error and reports the errors the tokens give; the backend's f32 product
 * path agrees with the plain-C one; the clip search never raises a group's
 * error and reports what the tokens give; the core's quantizer is the
 * plugin's (awq_rtn) bit for bit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "awq_quantizer.h"
#include "gptq_test_rng.h"
#include "quant/awq_search.h"
#include "runtime/builtin.h"

enum { K = 256, N = 96, T = 1024, GS = 64 };

typedef struct data {
    float *x, *w, *xm;
    double *H;
} data;

/* Tokens whose channels 3, 77, 150, 201 are ~40x the others (the
 * activation outliers AWQ is about); weights uniform in [-0.1, 0.1). */
static void make_data(data *d)
{
    rng_seed(21);
    d->x = malloc(sizeof *d->x * T * K);
    d->w = malloc(sizeof *d->w * N * K);
    d->xm = calloc(K, sizeof *d->xm);
    d->H = calloc((size_t)K * K, sizeof *d->H);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            float big = (k == 3 || k == 77 || k == 150 || k == 201) ? 40.0f : 1.0f;
            d->x[t * K + k] = big * rndf();
        }
    for (int i = 0; i < N * K; i++)
        d->w[i] = 0.1f * rndf();
    for (int t = 0; t < T; t++)
        for (int a = 0; a < K; a++) {
            d->xm[a] += fabsf(d->x[t * K + a]) / T;
            for (int b = 0; b < K; b++)
                d->H[a * K + b] += 2.0 / T * d->x[t * K + a] * d->x[t * K + b];
        }
}

static void free_data(data *d)
{
    free(d->x);
    free(d->w);
    free(d->xm);
    free(d->H);
}

/* Σ_t |x_t · (w − wq)ᵀ|² · 2/T from the tokens. */
static double token_error(const data *d, const float *w, const float *wq, int64_t rows)
{
    double acc = 0;
    for (int t = 0; t < T; t++)
        for (int64_t n = 0; n < rows; n++) {
            double y = 0;
            for (int k = 0; k < K; k++)
                y += (double)d->x[t * K + k] * ((double)w[n * K + k] - (double)wq[n * K + k]);
            acc += y * y;
        }
    return acc * 2.0 / T;
}

/* What W computes after quantizing with scales s: Q(W·diag s)·diag(1/s). */
static void scaled_quant(const float *w, const float *s, float *out)
{
    float *ws = malloc(sizeof *ws * N * K);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            ws[n * K + k] = w[n * K + k] * s[k];
    awq_fake_quant(ws, N, K, GS, out);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            out[n * K + k] /= s[k];
    free(ws);
}

static void test_scale_search(void **st)
{
    (void)st;
    data d;
    make_data(&d);
    plume_error err = {0};
    awq_hess *h = NULL;
    assert_int_equal(awq_hess_create(d.H, K, NULL, NULL, &h, &err), 0);
    float s[K], one[K], *wq = malloc(sizeof *wq * N * K);
    awq_scale_result res;
    assert_int_equal(awq_search_scales(d.w, N, K, GS, d.xm, h, s, &res, &err), 0);
    for (int k = 0; k < K; k++)
        one[k] = 1;
    scaled_quant(d.w, one, wq);
    const double plain = token_error(&d, d.w, wq, N);
    scaled_quant(d.w, s, wq);
    const double awq = token_error(&d, d.w, wq, N);
    printf("output error: plain rounding %.6g, AWQ scales (alpha %.2f) %.6g\n", plain, res.ratio,
           awq);
    assert_true(res.ratio >= 0);      /* some α of the grid won */
    assert_true(awq < 0.8 * plain);   /* and clearly: the outliers' weights kept */
    assert_true(fabs(res.loss_plain - plain) <= 1e-6 * plain);
    assert_true(fabs(res.loss - awq) <= 1e-6 * awq);
    /* the outlier channels got the largest scales */
    for (int k = 0; k < K; k++)
        if (k != 3 && k != 77 && k != 150 && k != 201)
            assert_true(s[k] < s[77]);

    /* the backend's f32 products give the same errors to f32 rounding */
    plume_backend *b = NULL;
    assert_int_equal(plume_builtin_cpu.create(NULL, 2, &b, &err), 0);
    awq_hess *hb = NULL;
    float sb[K];
    awq_scale_result rb;
    assert_int_equal(awq_hess_create(d.H, K, &plume_builtin_cpu, b, &hb, &err), 0);
    assert_int_equal(awq_search_scales(d.w, N, K, GS, d.xm, hb, sb, &rb, &err), 0);
    assert_true(fabs(rb.loss_plain - res.loss_plain) <= 1e-3 * res.loss_plain);
    assert_true(rb.ratio == res.ratio || fabs(rb.loss - res.loss) <= 1e-3 * res.loss);
    awq_hess_free(hb);
    plume_builtin_cpu.destroy(b);
    awq_hess_free(h);
    free(wq);
    free_data(&d);
}

static void test_clip(void **st)
{
    (void)st;
    data d;
    make_data(&d);
    /* a few large weights per row make clipping worth it */
    for (int n = 0; n < N; n++)
        d.w[n * K + (n * 7) % K] = 0.9f;
    float *w = malloc(sizeof *w * N * K), *wq = malloc(sizeof *wq * N * K);
    memcpy(w, d.w, sizeof *w * N * K);
    double before, after;
    plume_error err = {0};
    assert_int_equal(awq_search_clip(w, N, K, GS, d.H, &before, &after, &err), 0);
    awq_fake_quant(d.w, N, K, GS, wq);
    const double e0 = token_error(&d, d.w, wq, N);
    awq_fake_quant(w, N, K, GS, wq);
    const double e1 = token_error(&d, d.w, wq, N); /* against the unclipped weights */
    printf("clip: group error %.6g -> %.6g; the layer's output error %.6g -> %.6g\n", before,
           after, e0, e1);
    assert_true(after <= before);
    assert_true(after < 0.99 * before);
    assert_true(fabs(before - e0) <= 0.5 * e0); /* groups' own errors: cross terms left out */
    assert_true(e1 < e0);
    free(w);
    free(wq);
    free_data(&d);
}

/* awq_fake_quant (core) and awq_rtn (the plugin's, which writes the
 * checkpoint) are one quantizer. */
static void test_same_quantizer(void **st)
{
    (void)st;
    rng_seed(3);
    enum { R = 8, C = 128 };
    float w[R * C], a[R * C], b[R * C], sc[R * C / 32];
    uint8_t codes[R * C], zeros[R * C / 32];
    for (int i = 0; i < R * C; i++)
        w[i] = rndf() * (i % 5 == 0 ? 3.0f : 0.2f);
    awq_fake_quant(w, R, C, 32, a);
    awq_rtn(w, R, C, 32, codes, zeros, sc, b);
    assert_memory_equal(a, b, sizeof a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_search),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_same_quantizer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
