/* The rejection sampler keeps the target distribution: over many draws with
 * drafts drawn from q, the first emitted token is distributed as p (the
 * target after temperature/top-k/top-p), for good, bad and point-mass
 * drafts.  Chi-square against p with a fixed seed; greedy acceptance is the
 * argmax rule. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/sampler.h"

#define NV 6
#define DRAWS 60000

static const double target_p[NV] = {0.35, 0.25, 0.15, 0.12, 0.08, 0.05};

static plume_sampler *make(float temp, int top_k, float top_p, uint64_t seed)
{
    plume_sampling_params p = plume_sampling_defaults();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = 0.0f;
    p.repetition_penalty = 1.0f;
    p.seed = seed;
    plume_sampler *s;
    plume_error err = {0};
    assert_int_equal(plume_sampler_create(&p, NV, &s, &err), 0);
    return s;
}

static int32_t draw_from(plume_rng *r, const float *q)
{
    double u = plume_rng_uniform(r), c = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < NV; i++) {
        if (q[i] <= 0)
            continue;
        c += q[i];
        last = i;
        if (u < c)
            return i;
    }
    return last;
}

/* q == NULL: point mass on token `point`. Checks the first emitted token. */
static void check_case(float temp, int top_k, float top_p, const float *q, int32_t point)
{
    float logits[2 * NV]; /* two rows: one draft */
    for (int i = 0; i < NV; i++)
        logits[i] = logits[NV + i] = (float)log(target_p[i]);
    plume_sampler *s = make(temp, top_k, top_p, 99);
    float p[NV], work[2 * NV];
    plume_sampler_probs(s, logits, NULL, 0, p); /* the distribution to reproduce */
    plume_rng drng;
    plume_rng_seed(&drng, 7);
    int hist[NV] = {0};
    int accepted = 0;
    float qrows[2 * NV];
    for (int it = 0; it < DRAWS; it++) {
        int32_t d = q ? draw_from(&drng, q) : point;
        if (q)
            memcpy(qrows, q, sizeof(float) * NV);
        int32_t history[4] = {0}, out[2], n_acc;
        int32_t n = plume_sampler_verify(s, logits, &d, 1, q ? qrows : NULL, history, 0, out,
                                         &n_acc, work);
        assert_true(n == 1 + n_acc && (n_acc == 0 || n_acc == 1));
        assert_true(out[0] >= 0 && out[0] < NV);
        if (n_acc)
            assert_int_equal(out[0], d);
        hist[out[0]]++;
        accepted += n_acc;
    }
    double chi = 0;
    int dof = -1;
    for (int i = 0; i < NV; i++) {
        if (p[i] == 0.0f) {
            assert_int_equal(hist[i], 0); /* filtered tokens never come out */
            continue;
        }
        double e = p[i] * DRAWS;
        chi += (hist[i] - e) * (hist[i] - e) / e;
        dof++;
    }
    static const double crit[6] = {0, 10.83, 13.82, 16.27, 18.47, 20.52}; /* p = 0.001 */
    assert_true(dof >= 1 && dof <= 5);
    assert_true(chi < crit[dof]);
    /* acceptance rate = sum min(p, q): a sanity check on the accept rule */
    double expect = 0;
    for (int i = 0; i < NV; i++)
        expect += fmin(p[i], q ? q[i] : (i == point ? 1.0 : 0.0));
    assert_true(fabs((double)accepted / DRAWS - expect) < 0.01);
    plume_sampler_free(s);
}

static void test_good_draft(void **state)
{
    (void)state;
    const float q[NV] = {0.33f, 0.27f, 0.14f, 0.12f, 0.09f, 0.05f};
    check_case(1.0f, 0, 1.0f, q, 0);
}

static void test_bad_draft(void **state)
{
    (void)state;
    const float q[NV] = {0.02f, 0.03f, 0.05f, 0.1f, 0.3f, 0.5f};
    check_case(1.0f, 0, 1.0f, q, 0);
}

static void test_point_mass_drafts(void **state)
{
    (void)state;
    check_case(1.0f, 0, 1.0f, NULL, 0);  /* likely token */
    check_case(1.0f, 0, 1.0f, NULL, 5);  /* unlikely token */
}

static void test_with_filters(void **state)
{
    (void)state;
    const float q[NV] = {0.1f, 0.1f, 0.2f, 0.2f, 0.2f, 0.2f};
    check_case(0.8f, 4, 1.0f, q, 0);       /* top-k: tokens 4, 5 filtered */
    check_case(1.2f, 0, 0.7f, q, 0);       /* top-p */
    check_case(1.0f, 3, 0.9f, NULL, 4);    /* point mass on a filtered token: always rejected */
}

static void test_greedy_accepts_argmax_prefix(void **state)
{
    (void)state;
    /* three rows: argmaxes 2, 4, 1 */
    float logits[4 * NV] = {0};
    logits[0 * NV + 2] = 5;
    logits[1 * NV + 4] = 5;
    logits[2 * NV + 1] = 5;
    logits[3 * NV + 3] = 5;
    plume_sampler *s = make(0.0f, 0, 1.0f, 1);
    float work[2 * NV];
    int32_t hist[8] = {0}, out[4], n_acc;
    int32_t good[3] = {2, 4, 1};
    assert_int_equal(plume_sampler_verify(s, logits, good, 3, NULL, hist, 0, out, &n_acc, work), 4);
    assert_int_equal(n_acc, 3);
    assert_int_equal(out[3], 3); /* bonus = argmax of the last row */
    int32_t bad[3] = {2, 0, 1};
    assert_int_equal(plume_sampler_verify(s, logits, bad, 3, NULL, hist, 0, out, &n_acc, work), 2);
    assert_int_equal(n_acc, 1);
    assert_int_equal(out[1], 4); /* the target's own choice replaces the rejected draft */
    plume_sampler_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_draft),
        cmocka_unit_test(test_bad_draft),
        cmocka_unit_test(test_point_mass_drafts),
        cmocka_unit_test(test_with_filters),
        cmocka_unit_test(test_greedy_accepts_argmax_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
