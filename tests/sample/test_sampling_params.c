/* The one table of sampling parameters (plume/sampler.h), from its
 * promises: every entry is found by name, its default is what
 * plume_sampling_defaults sets, plume_sampling_validate accepts exactly the
 * values plume_sampling_param_ok accepts (the range's ends included, an
 * open end excluded, integers integral), store and load round-trip, and
 * the range text matches the bounds. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plume/sampler.h"

static void test_names_and_defaults(void **state)
{
    (void)state;
    size_t n;
    const plume_sampling_param *t = plume_sampling_param_list(&n);
    assert_int_equal(n, 8);
    plume_sampling_params d = plume_sampling_defaults();
    assert_int_equal(plume_sampling_validate(&d, NULL), 0);
    assert_int_equal(d.seed, 0);
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(plume_sampling_param_find(t[i].name), &t[i]);
        assert_true(plume_sampling_param_ok(&t[i], t[i].def));
        assert_true(plume_sampling_param_load(&d, &t[i]) == (double)(float)t[i].def ||
                    (t[i].integer && plume_sampling_param_load(&d, &t[i]) == t[i].def));
        assert_non_null(t[i].neutral);
    }
    assert_null(plume_sampling_param_find("seed"));
    assert_null(plume_sampling_param_find("repeat_penalty"));
    /* llama.cpp's CLI defaults */
    assert_true(d.temperature == 0.8f && d.top_k == 40 && d.top_p == 0.95f && d.min_p == 0.05f);
    assert_true(d.repetition_penalty == 1.0f && d.repeat_last_n == 64);
    assert_true(d.presence_penalty == 0.0f && d.frequency_penalty == 0.0f);
}

/* validate and param_ok agree on v for entry f (all else at defaults). */
static void agree(const plume_sampling_param *f, double v, bool want)
{
    plume_sampling_params p = plume_sampling_defaults();
    plume_sampling_param_store(&p, f, v);
    double back = plume_sampling_param_load(&p, f);
    bool ok = plume_sampling_param_ok(f, back);
    plume_error err = {0};
    int rc = plume_sampling_validate(&p, &err);
    if (ok != want || (rc == 0) != want)
        fail_msg("%s = %g: param_ok %d, validate %d (%s), wanted %s", f->name, v, ok, rc,
                 err.msg, want ? "accepted" : "refused");
    if (!want) {
        char range[64];
        plume_sampling_param_range(f, range, sizeof range);
        assert_non_null(strstr(err.msg, f->name));
        assert_non_null(strstr(err.msg, range));
    }
}

static void test_ranges(void **state)
{
    (void)state;
    size_t n;
    const plume_sampling_param *t = plume_sampling_param_list(&n);
    for (size_t i = 0; i < n; i++) {
        const plume_sampling_param *f = &t[i];
        double step = f->integer ? 1 : fmax(1e-3, 1e-3 * (f->hi - f->lo));
        agree(f, f->hi, true);
        agree(f, f->hi + step, false);
        agree(f, f->lo - step, false);
        agree(f, f->lo, !f->lo_open);
        agree(f, f->lo + step, true);
        char range[64];
        plume_sampling_param_range(f, range, sizeof range);
        assert_int_equal(range[0], f->lo_open ? '(' : '[');
        assert_int_equal(range[strlen(range) - 1], ']');
    }
    /* a real value inside the range stays inside once stored in single
     * precision: top_p 9e-127 (the fuzzer's find) would round to 0 */
    for (size_t i = 0; i < n; i++) {
        if (t[i].integer)
            continue;
        const double near[] = {nextafter(t[i].lo, t[i].hi), t[i].lo + 1e-60,
                               nextafter(t[i].hi, t[i].lo), t[i].hi - 1e-12};
        for (size_t j = 0; j < sizeof near / sizeof *near; j++)
            if (plume_sampling_param_ok(&t[i], near[j]))
                agree(&t[i], near[j], true);
    }
    plume_sampling_params p = plume_sampling_defaults();
    plume_sampling_param_store(&p, plume_sampling_param_find("top_p"), 9e-127);
    assert_true(p.top_p > 0.0f);
    /* an integer parameter refuses a fraction; a real one refuses NaN */
    assert_false(plume_sampling_param_ok(plume_sampling_param_find("top_k"), 1.5));
    assert_false(plume_sampling_param_ok(plume_sampling_param_find("temperature"), NAN));
    assert_false(plume_sampling_param_ok(plume_sampling_param_find("temperature"), INFINITY));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_defaults),
        cmocka_unit_test(test_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
