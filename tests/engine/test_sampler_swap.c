/* Sampler providers in the engine (tiny model, argv[1]): swapping the
 * default sampler between runs on one engine gives the outputs of fresh
 * engines; a provider without probs() still gets exact speculative
 * verification (draw-and-match); the model is loaded once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ngram_proposer.h"
#include "plume/engine.h"
#include "plume/sampler_provider.h"

#include "../support/engine_fixture.h"

static const char *g_model_path;
static plume_model *g_model;

/* "second": deterministically picks the second most likely token — a
 * sampler visibly different from greedy, with or without probs(). */
struct plume_sampler_state {
    int32_t n_vocab;
};

static int second_create(const plume_settings *s, int32_t n_vocab, uint64_t seed,
                         plume_sampler_state **out, plume_error *err)
{
    (void)s;
    (void)seed;
    (void)err;
    *out = malloc(sizeof **out);
    (*out)->n_vocab = n_vocab;
    return 0;
}
static void second_destroy(plume_sampler_state *st) { free(st); }
static int32_t second_pick(const plume_sampler_state *st, const float *l)
{
    int32_t a = 0, b = 1;
    if (l[b] > l[a]) {
        a = 1;
        b = 0;
    }
    for (int32_t i = 2; i < st->n_vocab; i++) {
        if (l[i] > l[a]) {
            b = a;
            a = i;
        } else if (l[i] > l[b]) {
            b = i;
        }
    }
    return b;
}
static int32_t second_sample(plume_sampler_state *st, const float *l, const int32_t *h, size_t n)
{
    (void)h;
    (void)n;
    return second_pick(st, l);
}
static int32_t second_probs(plume_sampler_state *st, const float *l, const int32_t *h, size_t n,
                            float *p)
{
    (void)h;
    (void)n;
    memset(p, 0, sizeof(float) * (size_t)st->n_vocab);
    p[second_pick(st, l)] = 1.0f;
    return 1;
}

static const plume_sampler_vtable second_vt = {
    .struct_size = sizeof(plume_sampler_vtable), .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = "second", .create = second_create, .destroy = second_destroy, .sample = second_sample,
    .probs = second_probs,
};
static const plume_sampler_vtable second_noprobs_vt = {
    .struct_size = sizeof(plume_sampler_vtable), .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = "second-noprobs", .create = second_create, .destroy = second_destroy,
    .sample = second_sample,
};

static const int32_t prompt[] = {40, 41, 42, 43, 40, 41, 42, 43, 40, 41};
#define N_OUT 24

static void run(plume_engine *e, int32_t *out)
{
    plume_request_params rp = test_request(N_OUT);
    int64_t id = test_add_tokens(e, prompt, sizeof prompt / sizeof *prompt, &rp);
    test_run_all(e);
    plume_request_result r;
    assert_int_equal(plume_engine_result(e, id, &r), 0);
    assert_int_equal((int)r.n_output, N_OUT);
    memcpy(out, r.output_ids, sizeof(int32_t) * N_OUT);
    plume_engine_release(e, id);
}

static void fresh(const plume_sampler_vtable *vt, int32_t *out)
{
    plume_error err = {0};
    plume_engine *e = test_engine_new(g_model, plume_engine_defaults());
    assert_int_equal(plume_engine_set_sampler(e, vt, NULL, &err), 0);
    run(e, out);
    plume_engine_free(e);
}

static void test_swap_equals_fresh(void **state)
{
    (void)state;
    int32_t greedy[N_OUT], second[N_OUT], out[N_OUT];
    fresh(NULL, greedy);
    fresh(&second_vt, second);
    assert_memory_not_equal(greedy, second, sizeof greedy); /* the samplers differ */
    plume_error err = {0};
    plume_engine *e = test_engine_new(g_model, plume_engine_defaults());
    const plume_sampler_vtable *order[] = {NULL, &second_vt, NULL, &second_noprobs_vt, &second_vt};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        assert_int_equal(plume_engine_set_sampler(e, order[i], NULL, &err), 0);
        assert_string_equal(plume_engine_sampler_name(e), order[i] ? order[i]->name : "standard");
        run(e, out);
        assert_memory_equal(out, order[i] ? second : greedy, sizeof out);
    }
    plume_engine_free(e);
}

static void test_spec_with_provider_sampler(void **state)
{
    (void)state;
    int32_t second[N_OUT], out[N_OUT];
    fresh(&second_vt, second);
    const plume_sampler_vtable *vts[] = {&second_vt, &second_noprobs_vt};
    for (int i = 0; i < 2; i++) {
        plume_error err = {0};
        plume_engine *e = test_engine_new(g_model, plume_engine_defaults());
        assert_int_equal(plume_engine_set_sampler(e, vts[i], NULL, &err), 0);
        assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 4, &err), 0);
        run(e, out);
        assert_memory_equal(out, second, sizeof out);
        plume_engine_stats st = plume_engine_get_stats(e);
        assert_true(st.spec_drafted > 0);
        plume_engine_free(e);
    }
}

int main(int argc, char **argv)
{
    int load_rc = test_load_model_arg(argc, argv, "test_sampler_swap TINY_MODEL.gguf", &g_model_path,
                                      &g_model);
    if (load_rc)
        return load_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swap_equals_fresh),
        cmocka_unit_test(test_spec_with_provider_sampler),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    plume_model_free(g_model);
    return rc;
}
