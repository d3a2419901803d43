/* Sampler tests: greedy, each filter's effect, seeded determinism, the
 * order of temperature and the filters and the repetition penalty's window
 * against numbers worked out by hand, plume_sampler_probs against an
 * independent oracle (oracle.h) over a grid of settings, and the sampled
 * frequencies against the oracle's distribution. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/sampler.h"

#include "oracle.h"

#define NV 8

static plume_sampling_params params(float temp, int top_k, float top_p, float min_p)
{
    plume_sampling_params p = plume_sampling_defaults();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repetition_penalty = 1.0f;
    p.seed = 1234;
    return p;
}

static plume_sampler *make(plume_sampling_params p)
{
    plume_sampler *s = NULL;
    plume_error err = {0};
    assert_int_equal(plume_sampler_create(&p, NV, &s, &err), 0);
    return s;
}

/* logits = log of these probabilities, so softmax gives them back */
static const double base_p[NV] = {0.30, 0.25, 0.15, 0.10, 0.08, 0.06, 0.04, 0.02};

static void base_logits(float *l)
{
    for (int i = 0; i < NV; i++)
        l[i] = (float)log(base_p[i]);
}

/* The probabilities a sampler made with sp gives logits l (no history),
 * into p; returns how many tokens it keeps. */
static int probs_of(plume_sampling_params sp, const float *l, float *p)
{
    plume_sampler *s = make(sp);
    int kept = plume_sampler_probs(s, l, NULL, 0, p);
    plume_sampler_free(s);
    return kept;
}

/* probs_of the base logits. */
static int base_probs(plume_sampling_params sp, float *p)
{
    float l[NV];
    base_logits(l);
    return probs_of(sp, l, p);
}

static void test_greedy_is_argmax(void **state)
{
    (void)state;
    float l[NV] = {0.1f, 2.0f, -1.0f, 3.5f, 3.4f, 0, 0, 0};
    plume_sampler *s = make(params(0, 0, 1, 0));
    for (int i = 0; i < 10; i++)
        assert_int_equal(plume_sampler_sample(s, l, NULL, 0), 3);
    plume_sampler_free(s);
}

/* A temperature so small that the scaled logits overflow (1e-40 is a
 * float denormal) or a repetition penalty that strong samples the argmax,
 * as the softmax's limit does, instead of dividing inf by inf. */
static void test_overflowing_scale_is_greedy(void **state)
{
    (void)state;
    float l[NV] = {0.1f, 2.0f, -1.0f, 3.5f, 3.4f, 0, 0, 0}, p[NV];
    plume_sampling_params sp = params(1e-40f, 0, 0.9f, 0.05f);
    assert_true(sp.temperature > 0.0f);
    assert_int_equal(probs_of(sp, l, p), 1);
    for (int i = 0; i < NV; i++)
        assert_true(p[i] == (i == 3 ? 1.0f : 0.0f));
    plume_sampler *s = make(sp);
    for (int i = 0; i < 10; i++)
        assert_int_equal(plume_sampler_sample(s, l, NULL, 0), 3);
    plume_sampler_free(s);
    /* every logit negative: each scaled one is -inf */
    float neg[NV] = {-3.0f, -0.5f, -2.0f, -0.25f, -0.3f, -9.0f, -1.0f, -4.0f};
    assert_int_equal(probs_of(sp, neg, p), 1);
    for (int i = 0; i < NV; i++)
        assert_true(p[i] == (i == 3 ? 1.0f : 0.0f));
    /* penalty 1e-40 on token 1 (positive logit / 1e-40 = inf): it wins */
    sp = params(0.7f, 0, 1, 0);
    sp.repetition_penalty = 1e-40f;
    const int32_t hist[] = {1};
    s = make(sp);
    assert_int_equal(plume_sampler_probs(s, l, hist, 1, p), 1);
    assert_true(p[1] == 1.0f);
    plume_sampler_free(s);
}

static void test_probs_unfiltered_match_softmax(void **state)
{
    (void)state;
    float p[NV];
    assert_int_equal(base_probs(params(1, 0, 1, 0), p), NV);
    for (int i = 0; i < NV; i++)
        assert_float_equal(p[i], base_p[i], 1e-6);
}

static void test_temperature_sharpens(void **state)
{
    (void)state;
    float p[NV];
    base_probs(params(0.5f, 0, 1, 0), p);
    /* T = 0.5 squares the probabilities before renormalising */
    double z = 0;
    for (int i = 0; i < NV; i++)
        z += base_p[i] * base_p[i];
    for (int i = 0; i < NV; i++)
        assert_float_equal(p[i], base_p[i] * base_p[i] / z, 1e-6);
}

static void test_top_k(void **state)
{
    (void)state;
    float p[NV];
    assert_int_equal(base_probs(params(1, 3, 1, 0), p), 3);
    assert_float_equal(p[0], 0.30 / 0.70, 1e-6);
    assert_float_equal(p[2], 0.15 / 0.70, 1e-6);
    assert_float_equal(p[3], 0.0, 0);
}

static void test_top_p(void **state)
{
    (void)state;
    float p[NV];
    /* 0.30 + 0.25 = 0.55 < 0.6 <= 0.70: the smallest set reaching 0.6 has 3 tokens */
    assert_int_equal(base_probs(params(1, 0, 0.6f, 0), p), 3);
    assert_float_equal(p[1], 0.25 / 0.70, 1e-6);
}

static void test_min_p(void **state)
{
    (void)state;
    float p[NV];
    /* min_p 0.3 keeps tokens with p >= 0.09: the first four */
    assert_int_equal(base_probs(params(1, 0, 1, 0.3f), p), 4);
    assert_float_equal(p[3], 0.10 / 0.80, 1e-6);
    assert_float_equal(p[4], 0.0, 0);
}

static void test_repetition_penalty(void **state)
{
    (void)state;
    float l[NV] = {2.0f, 1.9f, -1.0f, -1.0f, 0, 0, 0, 0};
    plume_sampling_params pp = params(0, 0, 1, 0);
    pp.repetition_penalty = 2.0f;
    plume_sampler *s = make(pp);
    int32_t hist[] = {0, 0, 2};
    /* 2.0 / 2 = 1.0 < 1.9: token 1 wins; the repeated 0 is penalised once */
    assert_int_equal(plume_sampler_sample(s, l, hist, 3), 1);
    float p[NV];
    plume_sampler_free(s);
    pp.temperature = 1.0f;
    s = make(pp);
    plume_sampler_probs(s, l, hist, 3, p);
    /* negative logit -1 of token 2 becomes -2; token 3 keeps -1 */
    assert_true(p[2] < p[3]);
    assert_float_equal(log(p[3] / p[2]), 1.0, 1e-5);
    plume_sampler_free(s);
}

static void test_same_seed_same_tokens(void **state)
{
    (void)state;
    float l[NV];
    base_logits(l);
    plume_sampler *a = make(params(1, 0, 1, 0)), *b = make(params(1, 0, 1, 0));
    int differs_from_first = 0, first = -1;
    for (int i = 0; i < 200; i++) {
        int32_t x = plume_sampler_sample(a, l, NULL, 0), y = plume_sampler_sample(b, l, NULL, 0);
        assert_int_equal(x, y);
        if (first < 0)
            first = x;
        differs_from_first |= x != first;
    }
    assert_true(differs_from_first); /* it is actually sampling */
    plume_sampler_free(a);
    plume_sampler_free(b);
}

/* Chi-square goodness of fit of 100k draws against the oracle's
 * distribution (tests/sample/oracle.h, not plume_sampler_probs), with the
 * repetition penalty over a history when one is given.  Fixed seed; each
 * case fails when the p-value is below 1e-5, so for a random seed the six
 * cases below would fail a correct sampler with probability < 6e-5 (union
 * bound); with the fixed seed the outcome is deterministic. */
static void chi_square_case_hist(plume_sampling_params pp, const int32_t *hist, size_t n_hist)
{
    float l[NV];
    double o[NV], margin;
    base_logits(l);
    plume_sampler *s = make(pp);
    oracle_probs(&pp, l, NV, hist, n_hist, o, &margin);
    assert_true(margin > 1e-4);
    const int draws = 100000;
    int hist_o[NV] = {0};
    for (int i = 0; i < draws; i++) {
        int32_t t = plume_sampler_sample(s, l, hist, n_hist);
        assert_true(t >= 0 && t < NV);
        hist_o[t]++;
    }
    double chi = 0;
    int dof = -1;
    for (int i = 0; i < NV; i++) {
        if (o[i] == 0.0) {
            assert_int_equal(hist_o[i], 0); /* filtered tokens never appear */
            continue;
        }
        double e = o[i] * draws;
        chi += (hist_o[i] - e) * (hist_o[i] - e) / e;
        dof++;
    }
    assert_true(dof >= 1);
    double pv = oracle_chi2_sf(chi, dof);
    if (!(pv > 1e-5))
        fprintf(stderr, "T %g top-k %d top-p %g min-p %g: chi2 %.1f, %d dof, p-value %.3g\n",
                pp.temperature, pp.top_k, pp.top_p, pp.min_p, chi, dof, pv);
    assert_true(pv > 1e-5);
    plume_sampler_free(s);
}

static void chi_square_case(plume_sampling_params pp) { chi_square_case_hist(pp, NULL, 0); }

static void test_frequencies_match(void **state)
{
    (void)state;
    chi_square_case(params(1, 0, 1, 0));
    chi_square_case(params(0.7f, 0, 1, 0));
    chi_square_case(params(1, 4, 1, 0));
    /* top-p 0.75, not 0.8: the first four tokens hold exactly 0.8, so at 0.8
     * float rounding alone decides whether the fifth stays */
    chi_square_case(params(1, 0, 0.75f, 0));
    chi_square_case(params(1.3f, 6, 0.9f, 0.1f));
    /* temperature != 1 with every filter and a windowed penalty */
    plume_sampling_params pp = params(0.6f, 6, 0.9f, 0.05f);
    pp.repetition_penalty = 1.5f;
    pp.repeat_last_n = 3;
    const int32_t hist[5] = {0, 0, 1, 4, 1}; /* window (1, 4, 1): tokens 1 and 4 */
    chi_square_case_hist(pp, hist, 5);
}

/* ---- an independent oracle (tests/sample/oracle.h) at temperature != 1 ---- */

static void expect_probs(const float *p, const double *want, int n, double tol)
{
    for (int i = 0; i < n; i++) {
        if (fabs(p[i] - want[i]) > tol)
            fprintf(stderr, "token %d: got %.7f, want %.7f\n", i, p[i], want[i]);
        assert_true(fabs(p[i] - want[i]) <= tol);
    }
}

/* plume and the oracle against numbers worked out by hand, in cases where
 * the order of temperature and the filters changes the answer (the order is
 * vLLM's: docs/engine.md, "Sampling"). */
static void test_order_hand_cases(void **state)
{
    (void)state;
    float l[NV] = {0}, p[NV];
    double o[NV];
    /* A. Temperature before top-p.  p = (0.5, 0.3, 0.2), T = 0.5 squares them:
     * (0.25, 0.09, 0.04) / 0.38 = (0.6579, 0.2368, 0.1053); top-p 0.85 stops
     * at 0.8947 after two tokens: (0.25, 0.09) / 0.34.  Top-p on the
     * untempered p (llama.cpp's chain, temperature last) would keep all
     * three (0.5 + 0.3 = 0.8 < 0.85) and give (0.6579, 0.2368, 0.1053). */
    const double pa[3] = {0.5, 0.3, 0.2};
    for (int i = 0; i < NV; i++)
        l[i] = i < 3 ? (float)log(pa[i]) : -1e30f;
    const double want_a[NV] = {0.25 / 0.34, 0.09 / 0.34};
    probs_of(params(0.5f, 0, 0.85f, 0), l, p);
    expect_probs(p, want_a, NV, 1e-6);
    /* B. Temperature before min-p.  p = (0.6, 0.3, 0.1), T = 2 takes square
     * roots: (0.7746, 0.5477, 0.3162) / 1.6385 = (0.4727, 0.3343, 0.1930);
     * min-p 0.3 keeps p >= 0.3 x 0.4727 = 0.1418: all three.  On the
     * untempered p, 0.1 < 0.3 x 0.6 would drop the third. */
    const double pb[3] = {0.6, 0.3, 0.1};
    for (int i = 0; i < 3; i++)
        l[i] = (float)log(pb[i]);
    double zb = sqrt(0.6) + sqrt(0.3) + sqrt(0.1);
    const double want_b[NV] = {sqrt(0.6) / zb, sqrt(0.3) / zb, sqrt(0.1) / zb};
    probs_of(params(2.0f, 0, 1, 0.3f), l, p);
    expect_probs(p, want_b, NV, 1e-6);
    /* C. All four.  p = (0.35, 0.25, 0.15, 0.12, 0.08, 0.05), T = 0.7:
     * p^(1/0.7) normalised = (0.43166, 0.26693, 0.12867, 0.09355, 0.05242,
     * 0.02678); top-k 4 renormalises the first four to (0.46879, 0.28988,
     * 0.13973, 0.10159); min-p 0.25 drops the fourth (0.10159 / 0.46879 =
     * 0.2167 < 0.25); top-p 0.9 on the three left, renormalised (0.52180,
     * 0.32266, 0.15553), needs all three (0.84447 < 0.9):
     * (0.46879, 0.28988, 0.13973) / 0.89841.  In llama.cpp's order the
     * fourth stays (untempered ratio 0.12 / 0.35 = 0.343). */
    const double pc[6] = {0.35, 0.25, 0.15, 0.12, 0.08, 0.05};
    for (int i = 0; i < NV; i++)
        l[i] = i < 6 ? (float)log(pc[i]) : -1e30f;
    const double want_c[NV] = {0.46879138 / 0.89840891, 0.28988469 / 0.89840891,
                               0.13973284 / 0.89840891};
    probs_of(params(0.7f, 4, 0.9f, 0.25f), l, p);
    expect_probs(p, want_c, NV, 2e-6);
    /* D. Min-p before top-p (vLLM's order).  p = (0.4, 0.3, 0.2, 0.1), T = 1:
     * min-p 0.3 keeps p >= 0.12, the first three, renormalised (4, 3, 2) / 9;
     * top-p 0.75 then stops at 7/9 = 0.778 after two: (4, 3) / 7.  Top-p
     * first (HF's order) would stop at 0.9 after three (0.4 + 0.3 < 0.75)
     * and give (4, 3, 2) / 9. */
    const double pd[4] = {0.4, 0.3, 0.2, 0.1};
    for (int i = 0; i < NV; i++)
        l[i] = i < 4 ? (float)log(pd[i]) : -1e30f;
    const double want_d[NV] = {4.0 / 7, 3.0 / 7};
    probs_of(params(1.0f, 0, 0.75f, 0.3f), l, p);
    expect_probs(p, want_d, NV, 1e-6);
    for (int i = 0; i < NV; i++)
        l[i] = i < 6 ? (float)log(pc[i]) : -1e30f;
    /* the oracle agrees on C */
    plume_sampling_params pp = params(0.7f, 4, 0.9f, 0.25f);
    assert_int_equal(oracle_probs(&pp, l, NV, NULL, 0, o, NULL), 3);
    for (int i = 0; i < NV; i++)
        assert_true(fabs(o[i] - want_c[i]) < 1e-7);
}

/* repeat_last_n is the penalty's window: only tokens among the last n of
 * the history are penalised, each once however often it occurs.  Logits
 * (2, 1, -1, 0.5, 0, -0.5, 0.25, -2), history (0, 2, 3, 3), penalty 2,
 * temperature 0.5; the penalised logits by hand: */
static void test_repeat_last_n_window(void **state)
{
    (void)state;
    const float l[NV] = {2.0f, 1.0f, -1.0f, 0.5f, 0.0f, -0.5f, 0.25f, -2.0f};
    const int32_t hist[4] = {0, 2, 3, 3};
    static const struct {
        int32_t last_n;
        float pen[NV];
    } cases[] = {
        {0, {2.0f, 1.0f, -1.0f, 0.5f, 0.0f, -0.5f, 0.25f, -2.0f}},   /* 0: off */
        {1, {2.0f, 1.0f, -1.0f, 0.25f, 0.0f, -0.5f, 0.25f, -2.0f}},  /* (3) */
        {2, {2.0f, 1.0f, -1.0f, 0.25f, 0.0f, -0.5f, 0.25f, -2.0f}},  /* (3, 3): 3 once */
        {3, {2.0f, 1.0f, -2.0f, 0.25f, 0.0f, -0.5f, 0.25f, -2.0f}},  /* (2, 3, 3) */
        {4, {1.0f, 1.0f, -2.0f, 0.25f, 0.0f, -0.5f, 0.25f, -2.0f}},  /* all four */
        {9, {1.0f, 1.0f, -2.0f, 0.25f, 0.0f, -0.5f, 0.25f, -2.0f}},  /* longer than the history */
        {-1, {1.0f, 1.0f, -2.0f, 0.25f, 0.0f, -0.5f, 0.25f, -2.0f}}, /* -1: all */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        plume_sampling_params pp = params(0.5f, 0, 1, 0);
        pp.repetition_penalty = 2.0f;
        pp.repeat_last_n = cases[c].last_n;
        double want[NV], z = 0;
        for (int i = 0; i < NV; i++)
            z += want[i] = exp(cases[c].pen[i] / 0.5);
        for (int i = 0; i < NV; i++)
            want[i] /= z;
        plume_sampler *s = make(pp);
        float p[NV];
        plume_sampler_probs(s, l, hist, 4, p);
        expect_probs(p, want, NV, 1e-6);
        plume_sampler_free(s);
        double o[NV];
        oracle_probs(&pp, l, NV, hist, 4, o, NULL);
        for (int i = 0; i < NV; i++)
            assert_true(fabs(o[i] - want[i]) < 1e-7);
    }
}

/* plume_sampler_probs against the oracle over a grid of settings and logit
 * vectors, skipping only cases where a token lies within 1e-5 of a cut. */
static void test_probs_match_oracle_grid(void **state)
{
    (void)state;
    static const float vecs[3][NV] = {
        {3.1f, 2.2f, 1.4f, 0.9f, 0.1f, -0.6f, -1.5f, -2.7f},
        {0.3f, -0.2f, 0.25f, 0.1f, 0.05f, 0.0f, -0.1f, 0.2f},
        {-1.0f, 4.0f, 2.5f, 2.6f, -3.0f, 0.7f, 1.9f, 0.4f},
    };
    static const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f, 3.0f};
    static const int ks[] = {0, 2, 5};
    static const float tps[] = {1.0f, 0.95f, 0.7f, 0.4f};
    static const float mps[] = {0.0f, 0.05f, 0.3f};
    static const int32_t lastn[] = {-1, 0, 2, 4};
    const int32_t hist[5] = {1, 3, 3, 6, 0};
    int checked = 0, skipped = 0;
    for (int v = 0; v < 3; v++)
        for (size_t a = 0; a < sizeof temps / sizeof *temps; a++)
            for (size_t b = 0; b < sizeof ks / sizeof *ks; b++)
                for (size_t c = 0; c < sizeof tps / sizeof *tps; c++)
                    for (size_t d = 0; d < sizeof mps / sizeof *mps; d++)
                        for (size_t e = 0; e < sizeof lastn / sizeof *lastn; e++) {
                            plume_sampling_params pp = params(temps[a], ks[b], tps[c], mps[d]);
                            pp.repetition_penalty = e == 0 ? 1.0f : 1.6f;
                            pp.repeat_last_n = lastn[e];
                            double o[NV], margin;
                            int kept = oracle_probs(&pp, vecs[v], NV, hist, 5, o, &margin);
                            if (margin < 1e-5) {
                                skipped++;
                                continue;
                            }
                            plume_sampler *s = make(pp);
                            float p[NV];
                            assert_int_equal(plume_sampler_probs(s, vecs[v], hist, 5, p), kept);
                            for (int i = 0; i < NV; i++) {
                                if (o[i] == 0.0)
                                    assert_true(p[i] == 0.0f);
                                else if (fabs(p[i] - o[i]) > 2e-6)
                                    fprintf(stderr,
                                            "vec %d T %g k %d top-p %g min-p %g last_n %d: "
                                            "token %d: %.7f, oracle %.7f\n",
                                            v, temps[a], ks[b], tps[c], mps[d], lastn[e], i,
                                            p[i], o[i]);
                                assert_true(fabs(p[i] - o[i]) <= 2e-6);
                            }
                            plume_sampler_free(s);
                            checked++;
                        }
    assert_true(skipped * 20 < checked); /* the grid is not mostly borderline */
}

/* oracle_chi2_sf against tabulated critical values */
static void test_chi2_helper(void **state)
{
    (void)state;
    assert_true(fabs(oracle_chi2_sf(3.841, 1) - 0.05) < 1e-4);
    assert_true(fabs(oracle_chi2_sf(10.828, 1) - 0.001) < 1e-5);
    assert_true(fabs(oracle_chi2_sf(24.322, 7) - 0.001) < 1e-5);
    assert_true(fabs(oracle_chi2_sf(135.807, 100) - 0.01) < 1e-4);
    assert_true(fabs(oracle_chi2_sf(2.0, 2) - exp(-1.0)) < 1e-12); /* 2 dof: e^(-x/2) */
}

static void test_validation(void **state)
{
    (void)state;
    plume_error err = {0};
    plume_sampling_params p = params(-1, 0, 1, 0);
    assert_int_equal(plume_sampling_validate(&p, &err), -1);
    assert_non_null(strstr(err.msg, "temperature"));
    p = params(1, 0, 0, 0);
    assert_int_equal(plume_sampling_validate(&p, &err), -1);
    assert_non_null(strstr(err.msg, "top_p"));
    p = params(1, -2, 1, 0);
    assert_int_equal(plume_sampling_validate(&p, &err), -1);
    assert_non_null(strstr(err.msg, "top_k"));
    p = params(1, 0, 1, 1.5f);
    assert_int_equal(plume_sampling_validate(&p, &err), -1);
    assert_non_null(strstr(err.msg, "min_p"));
    p = params(1, 0, 1, 0);
    p.presence_penalty = 2.5f;
    assert_int_equal(plume_sampling_validate(&p, &err), -1);
    assert_non_null(strstr(err.msg, "presence_penalty must be in [-2, 2]"));
    p.presence_penalty = -2.0f;
    p.frequency_penalty = NAN;
    assert_int_equal(plume_sampling_validate(&p, &err), -1);
    assert_non_null(strstr(err.msg, "frequency_penalty must be in [-2, 2]"));
    p.frequency_penalty = 2.0f;
    assert_int_equal(plume_sampling_validate(&p, &err), 0);
    plume_sampling_params d = plume_sampling_defaults();
    assert_true(d.presence_penalty == 0.0f && d.frequency_penalty == 0.0f);
}

/* Presence and frequency penalties count the output only: the prompt part
 * of the history (plume_sampler_set_prompt_len) is not penalised. */
static void test_output_penalties_skip_prompt(void **state)
{
    (void)state;
    plume_error err = {0};
    plume_sampling_params p = params(0, 0, 1, 0);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 1.0f;
    plume_sampler *s;
    assert_int_equal(plume_sampler_create(&p, 4, &s, &err), 0);
    const float logits[4] = {3.0f, 2.9f, 1.0f, 0.0f};
    /* by default the whole history is output: 0 three times, 3 - 0.5 - 3 */
    const int32_t hist[5] = {0, 0, 0, 1, 0};
    assert_int_equal(plume_sampler_sample(s, logits, hist, 3), 1);
    plume_sampler_set_prompt_len(s, 3);
    assert_int_equal(plume_sampler_sample(s, logits, hist, 3), 0); /* no output yet */
    /* output {1, 0}: 0 at 3 - 1.5 = 1.5, 1 at 2.9 - 1.5 = 1.4 */
    assert_int_equal(plume_sampler_sample(s, logits, hist, 5), 0);
    /* output {0, 0}: 0 at 3 - 0.5 - 2 = 0.5; 1 only in the prompt: 2.9 */
    const int32_t hist2[5] = {1, 1, 1, 0, 0};
    assert_int_equal(plume_sampler_sample(s, logits, hist2, 5), 1);
    /* the probabilities path agrees */
    float probs[4];
    assert_int_equal(plume_sampler_probs(s, logits, hist2, 5, probs), 1);
    assert_true(probs[1] == 1.0f);
    plume_sampler_free(s);
}

/* top_k over a large vocabulary with many tied logits: the kept set is the
 * first k of the order (higher logit first, lower id first among ties), and
 * the probabilities are the softmax over exactly that set, whatever the
 * vocabulary's order (the selection must equal a full sort's prefix). */
static void test_top_k_ties_large_vocab(void **state)
{
    (void)state;
    enum { V = 5000, K = 37 };
    static float l[V], p[V];
    static int rank_of[V];
    plume_sampling_params pp = params(1, K, 1, 0);
    plume_sampler *s = NULL;
    plume_error err = {0};
    assert_int_equal(plume_sampler_create(&pp, V, &s, &err), 0);
    for (int rep = 0; rep < 3; rep++) {
        /* 13 distinct values, each shared by ~385 ids, spread unevenly */
        for (int i = 0; i < V; i++)
            l[i] = (float)((i * 7 + rep * 3) % 13) * 0.25f;
        /* expected: ids of the top value in increasing order, then the next... */
        int n_kept = 0;
        for (int i = 0; i < V; i++)
            rank_of[i] = -1;
        for (int v = 12; v >= 0 && n_kept < K; v--)
            for (int i = 0; i < V && n_kept < K; i++)
                if (l[i] == (float)v * 0.25f && (i * 7 + rep * 3) % 13 == v)
                    rank_of[i] = n_kept++;
        assert_int_equal(plume_sampler_probs(s, l, NULL, 0, p), K);
        double z = 0.0, maxl = -1e30;
        for (int i = 0; i < V; i++)
            if (rank_of[i] >= 0 && l[i] > maxl)
                maxl = l[i];
        for (int i = 0; i < V; i++)
            if (rank_of[i] >= 0)
                z += exp(l[i] - maxl);
        for (int i = 0; i < V; i++) {
            if (rank_of[i] < 0)
                assert_true(p[i] == 0.0f);
            else
                assert_float_equal(p[i], exp(l[i] - maxl) / z, 1e-6);
        }
    }
    plume_sampler_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_overflowing_scale_is_greedy),
        cmocka_unit_test(test_probs_unfiltered_match_softmax),
        cmocka_unit_test(test_temperature_sharpens),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_k_ties_large_vocab),
        cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_frequencies_match),
        cmocka_unit_test(test_order_hand_cases),
        cmocka_unit_test(test_repeat_last_n_window),
        cmocka_unit_test(test_probs_match_oracle_grid),
        cmocka_unit_test(test_chi2_helper),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_output_penalties_skip_prompt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
