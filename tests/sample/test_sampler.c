/* Sampler tests: greedy, each filter's effect, seeded determinism, and the
 * sampled frequencies against the distribution the filters define. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/sampler.h"

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

static void test_greedy_is_argmax(void **state)
{
    (void)state;
    float l[NV] = {0.1f, 2.0f, -1.0f, 3.5f, 3.4f, 0, 0, 0};
    plume_sampler *s = make(params(0, 0, 1, 0));
    for (int i = 0; i < 10; i++)
        assert_int_equal(plume_sampler_sample(s, l, NULL, 0), 3);
    plume_sampler_free(s);
}

static void test_probs_unfiltered_match_softmax(void **state)
{
    (void)state;
    float l[NV], p[NV];
    base_logits(l);
    plume_sampler *s = make(params(1, 0, 1, 0));
    assert_int_equal(plume_sampler_probs(s, l, NULL, 0, p), NV);
    for (int i = 0; i < NV; i++)
        assert_float_equal(p[i], base_p[i], 1e-6);
    plume_sampler_free(s);
}

static void test_temperature_sharpens(void **state)
{
    (void)state;
    float l[NV], p[NV];
    base_logits(l);
    plume_sampler *s = make(params(0.5f, 0, 1, 0));
    plume_sampler_probs(s, l, NULL, 0, p);
    /* T = 0.5 squares the probabilities before renormalising */
    double z = 0;
    for (int i = 0; i < NV; i++)
        z += base_p[i] * base_p[i];
    for (int i = 0; i < NV; i++)
        assert_float_equal(p[i], base_p[i] * base_p[i] / z, 1e-6);
    plume_sampler_free(s);
}

static void test_top_k(void **state)
{
    (void)state;
    float l[NV], p[NV];
    base_logits(l);
    plume_sampler *s = make(params(1, 3, 1, 0));
    assert_int_equal(plume_sampler_probs(s, l, NULL, 0, p), 3);
    assert_float_equal(p[0], 0.30 / 0.70, 1e-6);
    assert_float_equal(p[2], 0.15 / 0.70, 1e-6);
    assert_float_equal(p[3], 0.0, 0);
    plume_sampler_free(s);
}

static void test_top_p(void **state)
{
    (void)state;
    float l[NV], p[NV];
    base_logits(l);
    /* 0.30 + 0.25 = 0.55 < 0.6 <= 0.70: the smallest set reaching 0.6 has 3 tokens */
    plume_sampler *s = make(params(1, 0, 0.6f, 0));
    assert_int_equal(plume_sampler_probs(s, l, NULL, 0, p), 3);
    assert_float_equal(p[1], 0.25 / 0.70, 1e-6);
    plume_sampler_free(s);
}

static void test_min_p(void **state)
{
    (void)state;
    float l[NV], p[NV];
    base_logits(l);
    /* min_p 0.3 keeps tokens with p >= 0.09: the first four */
    plume_sampler *s = make(params(1, 0, 1, 0.3f));
    assert_int_equal(plume_sampler_probs(s, l, NULL, 0, p), 4);
    assert_float_equal(p[3], 0.10 / 0.80, 1e-6);
    assert_float_equal(p[4], 0.0, 0);
    plume_sampler_free(s);
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

/* Chi-square goodness of fit of 100k draws against the filtered
 * distribution.  Fixed seed; the critical value for 7 degrees of freedom at
 * p = 0.001 is 24.32, so a correct sampler fails with probability 0.1%
 * for a random seed and never for this fixed one. */
static void chi_square_case(plume_sampling_params pp)
{
    float l[NV], p[NV];
    base_logits(l);
    plume_sampler *s = make(pp);
    plume_sampler_probs(s, l, NULL, 0, p);
    const int draws = 100000;
    int hist[NV] = {0};
    for (int i = 0; i < draws; i++) {
        int32_t t = plume_sampler_sample(s, l, NULL, 0);
        assert_true(t >= 0 && t < NV);
        hist[t]++;
    }
    double chi = 0;
    int dof = -1;
    for (int i = 0; i < NV; i++) {
        if (p[i] == 0.0f) {
            assert_int_equal(hist[i], 0); /* filtered tokens never appear */
            continue;
        }
        double e = p[i] * draws;
        chi += (hist[i] - e) * (hist[i] - e) / e;
        dof++;
    }
    /* critical values at p = 0.001 for dof 1..7 */
    static const double crit[8] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
    assert_true(dof >= 1 && dof <= 7);
    assert_true(chi < crit[dof]);
    plume_sampler_free(s);
}

static void test_frequencies_match(void **state)
{
    (void)state;
    chi_square_case(params(1, 0, 1, 0));
    chi_square_case(params(0.7f, 0, 1, 0));
    chi_square_case(params(1, 4, 1, 0));
    chi_square_case(params(1, 0, 0.8f, 0));
    chi_square_case(params(1.3f, 6, 0.9f, 0.1f));
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_probs_unfiltered_match_softmax),
        cmocka_unit_test(test_temperature_sharpens),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_repetition_penalty),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_frequencies_match),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
