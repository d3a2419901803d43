/* What the tests that run an engine on a model file share: the model path
 * from the command line, loading it, a request of a fixed length, adding
 * requests, stepping an engine until it has no work, taking a request's
 * output; main itself.  Include after
 * cmocka.h. */
#ifndef PLUME_TEST_ENGINE_FIXTURE_H
#define PLUME_TEST_ENGINE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/engine.h"

/* argv[1], the file the test takes as its argument; NULL, after printing
 * "usage: USAGE" to stderr, when there is none (main returns 2 then). */
static inline const char *test_model_arg(int argc, char **argv, const char *usage)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s\n", usage);
        return NULL;
    }
    return argv[1];
}

/* The whole main of a test that takes a model file as its argument: sets
 * *path to argv[1] and runs the n tests as cmocka_run_group_tests does;
 * returns 2, after printing "usage: USAGE", when there is no argument. */
static inline int test_main_on_model(int argc, char **argv, const char *usage, const char **path,
                                     const struct CMUnitTest *tests, size_t n,
                                     CMFixtureFunction setup, CMFixtureFunction teardown)
{
    *path = test_model_arg(argc, argv, usage);
    if (!*path)
        return 2;
    return _cmocka_run_group_tests("tests", tests, n, setup, teardown);
}

/* Loads the model at path into *m: 0, or -1 after printing to stderr which
 * file did not load and why. */
static inline int test_load_model(const char *path, plume_model **m)
{
    plume_error err = {0};
    if (plume_model_load(path, m, &err)) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

/* The default request, generating exactly max_tokens tokens (EOS ignored). */
static inline plume_request_params test_request(int32_t max_tokens)
{
    plume_request_params p = plume_request_defaults();
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

/* The group teardown of a test whose fixture (*state, from malloc) has
 * its plume_model * as first member: frees the model, then the fixture.
 * The fixture's file asserts that layout (offsetof(fixture, m) == 0). */
static inline int test_free_model_fixture(void **state)
{
    plume_model **m = *state; /* a struct's address is its first member's */
    plume_model_free(*m);
    free(*state);
    return 0;
}

/* For a main that loads its model itself: sets *path to argv[1] and loads
 * it into *m.  0; or what main returns: 2 after printing "usage: USAGE"
 * when there is no argument, 1 after printing why the model did not load. */
static inline int test_load_model_arg(int argc, char **argv, const char *usage,
                                      const char **path, plume_model **m)
{
    *path = test_model_arg(argc, argv, usage);
    if (!*path)
        return 2;
    return test_load_model(*path, m) ? 1 : 0;
}

/* An engine on m with ep; fails the test with the engine's message if
 * there is none. */
static inline plume_engine *test_engine_new(const plume_model *m, plume_engine_params ep)
{
    plume_engine *e = NULL;
    plume_error err = {0};
    if (plume_engine_create(m, &ep, &e, &err))
        fail_msg("engine: %s", err.msg);
    return e;
}

/* Queues the n tokens at prompt as a request with p and returns its id;
 * fails the test with the engine's message if e refuses it. */
static inline int64_t test_add_tokens(plume_engine *e, const int32_t *prompt, size_t n,
                                      const plume_request_params *p)
{
    plume_error err = {0};
    int64_t id = plume_engine_add_tokens(e, prompt, n, p, &err);
    if (id < 0)
        fail_msg("add_tokens: %s", err.msg);
    return id;
}

/* Steps e until it has no work; fails the test with the engine's message if
 * a step fails, and if 100000 steps leave work (a livelock). */
static inline void test_run_all(plume_engine *e)
{
    plume_error err = {0};
    for (int guard = 0; plume_engine_has_work(e); guard++) {
        if (guard >= 100000)
            fail_msg("livelock: the engine still has work after 100000 steps");
        if (plume_engine_step(e, &err) < 0)
            fail_msg("step: %s", err.msg);
    }
}

/* The stats of e, after asserting that no step of e went past ep's limits
 * on batched tokens and sequences (ep: the parameters e was made with). */
static inline plume_engine_stats test_stats_within(const plume_engine *e,
                                                   const plume_engine_params *ep)
{
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_true(st.max_step_positions <= ep->max_batched_tokens);
    assert_true(st.max_step_seqs <= ep->max_num_seqs);
    return st;
}

/* The result of request id, which e must have, after asserting that it
 * generated exactly n_out tokens; copies them to out.  The request is not
 * released. */
static inline plume_request_result test_take_output(plume_engine *e, int64_t id, int32_t n_out,
                                                    int32_t *out)
{
    plume_request_result r;
    assert_int_equal(plume_engine_result(e, id, &r), 0);
    assert_int_equal((int)r.n_output, n_out);
    memcpy(out, r.output_ids, sizeof(int32_t) * r.n_output);
    return r;
}

#endif
