/* Speculative decoding on SmolLM2 (skipped when the model is absent): with
 * greedy sampling, spec-ngram on gives token for token the output of spec
 * off — for each prompt alone, for a batch mixing speculating and
 * non-speculating sequences, and under preemption.  On the default int8
 * kernels this also proves the matmuls batch-invariant (verification runs
 * k+1 positions per sequence where plain decode runs one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ngram_proposer.h"
#include "../smollm2_path.h"
#include "plume/engine.h"

#include "../support/engine_fixture.h"

#define N_PROMPTS 6
#define MAX_OUT 48

static const char *prompts[N_PROMPTS] = {
    "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank.",
    "What is the capital of France?",
    "Rewrite the list, adding one to each number: 3, 8, 12, 20, 41, 57.",
    "Write a short poem about autumn leaves.",
    "Copy this code and rename x to y: def f(x):\n    return x * x + x\n",
    "Summarize: The museum is open from Tuesday to Sunday, from nine until five. It is closed on "
    "Mondays. Admission is free for children under twelve.",
};

static plume_model *g_model;
static int32_t g_ref[N_PROMPTS][MAX_OUT];
static size_t g_n_ref[N_PROMPTS];

static void serve(plume_engine *e, const int *which, int n, int32_t out[][MAX_OUT],
                  size_t *n_out)
{
    plume_error err = {0};
    const plume_tokenizer *tok = plume_model_tokenizer(g_model);
    int64_t ids[N_PROMPTS];
    for (int i = 0; i < n; i++) {
        plume_chat_msg msg = {"user", prompts[which[i]]};
        char *text;
        assert_int_equal(plume_chat_apply(tok, &msg, 1, true, &text, &err), 0);
        plume_request_params rp = plume_request_defaults();
        rp.max_tokens = MAX_OUT;
        ids[i] = plume_engine_add_text(e, text, &rp, &err);
        free(text);
        assert_true(ids[i] >= 0);
    }
    test_run_all(e);
    for (int i = 0; i < n; i++) {
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, ids[i], &r), 0);
        memcpy(out[which[i]], r.output_ids, sizeof(int32_t) * r.n_output);
        n_out[which[i]] = r.n_output;
        plume_engine_release(e, ids[i]);
    }
}

static plume_engine *engine(int64_t kv_tokens, int spec_k)
{
    plume_error err = {0};
    plume_engine_params ep = plume_engine_defaults();
    ep.kv_max_tokens = kv_tokens;
    plume_engine *e = test_engine_new(g_model, ep);
    if (spec_k)
        assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, spec_k, &err),
                         0);
    return e;
}

static void check_all(int32_t out[][MAX_OUT], size_t *n_out)
{
    for (int i = 0; i < N_PROMPTS; i++) {
        if (n_out[i] != g_n_ref[i] || memcmp(out[i], g_ref[i], sizeof(int32_t) * n_out[i])) {
            fprintf(stderr, "prompt %d differs (%zu vs %zu tokens)\n", i, n_out[i], g_n_ref[i]);
            fail();
        }
    }
}

static int setup(void **state)
{
    (void)state;
    int all[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++)
        all[i] = i;
    plume_engine *e = engine(4096, 0);
    for (int i = 0; i < N_PROMPTS; i++) /* one at a time: the reference */
        serve(e, &all[i], 1, g_ref, g_n_ref);
    plume_engine_free(e);
    return 0;
}

static void test_alone(void **state)
{
    (void)state;
    int32_t out[N_PROMPTS][MAX_OUT];
    size_t n_out[N_PROMPTS];
    plume_engine *e = engine(4096, 5);
    for (int i = 0; i < N_PROMPTS; i++)
        serve(e, &i, 1, out, n_out);
    check_all(out, n_out);
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_true(st.spec_accepted > 0);
    plume_engine_free(e);
}

/* Serves every prompt at once on e and checks the outputs (check_all). */
static void serve_all_and_check(plume_engine *e)
{
    int all[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++)
        all[i] = i;
    int32_t out[N_PROMPTS][MAX_OUT];
    size_t n_out[N_PROMPTS];
    serve(e, all, N_PROMPTS, out, n_out);
    check_all(out, n_out);
}

static void test_batched_mixed(void **state)
{
    (void)state;
    plume_engine *e = engine(4096, 4);
    serve_all_and_check(e);
    plume_engine_free(e);
    /* and without speculation, batched */
    e = engine(4096, 0);
    serve_all_and_check(e);
    plume_engine_free(e);
}

static void test_preemption(void **state)
{
    (void)state;
    plume_engine *e = engine(160, 3); /* ~2 requests' worth of KV */
    serve_all_and_check(e);
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_true(st.preemptions > 0);
    plume_engine_free(e);
}

int main(void)
{
    char path[4096];
    if (!smollm2_path(path, sizeof path))
        return 77;
    plume_error err = {0};
    if (plume_model_load(path, &g_model, &err)) {
        printf("FAIL: %s is present but does not load: %s\n", path, err.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone),
        cmocka_unit_test(test_batched_mixed),
        cmocka_unit_test(test_preemption),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    plume_model_free(g_model);
    return rc;
}
