/* The draft-model proposer (plugins/spec-draft) on tiny models (made by
 * make_models.py into argv[1]): greedy output with a Q8_0 draft is token
 * for token the output without speculation — alone, batched with requests
 * that do not speculate, under preemption; sampled output with a poor draft
 * (mostly another seed: about 20% of its drafts accepted, so acceptances
 * and rejections both shape the output) and with a close one follows the
 * target's law (chi-square); a draft with
 * another vocabulary is refused naming the first differing token; draft,
 * ngram and off swap on a live engine without reloading the target. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "draft_proposer.h"
#include "ngram_proposer.h"
#include "plume/engine.h"
#include "plume/settings.h"

#include "../sample/oracle.h"
#include "../sample/target_law.h"
#include "../support/engine_fixture.h"

static char g_dir[1024];
static plume_engine_params g_ep; /* the defaults */

#define N_REQ 10
#define N_OUT 32

typedef struct fixture {
    plume_model *m;
    int32_t prompt[N_REQ][64];
    int32_t n_prompt[N_REQ];
    int32_t ref[N_REQ][N_OUT];
} fixture;
_Static_assert(offsetof(fixture, m) == 0, "test_free_model_fixture frees the first member");

static char *path_of(const char *name)
{
    static char buf[4][1200];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", g_dir, name);
    return buf[i];
}

static uint64_t rs = 7;
static int32_t rnd(int32_t n)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rs >> 33) % (uint64_t)n);
}

/* serves every request (no_spec[i]: request i does not speculate) */
static void serve(plume_engine *e, fixture *f, int32_t out[N_REQ][N_OUT], const bool *no_spec)
{
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        plume_request_params rp = test_request(N_OUT);
        rp.no_speculation = no_spec && no_spec[i];
        ids[i] = test_add_tokens(e, f->prompt[i], (size_t)f->n_prompt[i], &rp);
    }
    test_run_all(e);
    for (int i = 0; i < N_REQ; i++) {
        test_take_output(e, ids[i], N_OUT, out[i]);
        plume_engine_release(e, ids[i]);
    }
}

static plume_settings *draft_settings(const char *model)
{
    plume_settings *s;
    plume_error err = {0};
    assert_int_equal(plume_settings_new("speculative", &s, &err), 0);
    assert_int_equal(plume_settings_set(s, "model", model, &err), 0);
    return s;
}

static int set_draft(plume_engine *e, const char *model, int k, plume_error *err)
{
    plume_settings *s = draft_settings(model);
    int rc = plume_engine_set_proposer(e, plume_draft_proposer(), s, k, err);
    plume_settings_free(s);
    return rc;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (test_load_model(path_of("target.gguf"), &f->m))
        return -1;
    for (int i = 0; i < N_REQ; i++) {
        f->n_prompt[i] = 4 + rnd(40);
        for (int j = 0; j < f->n_prompt[i]; j++)
            f->prompt[i][j] = 32 + rnd(250);
    }
    plume_error err = {0};
    plume_engine *e;
    if (plume_engine_create(f->m, &g_ep, &e, &err))
        return -1;
    serve(e, f, f->ref, NULL);
    plume_engine_free(e);
    *state = f;
    return 0;
}

static void check_ref(fixture *f, int32_t out[N_REQ][N_OUT])
{
    for (int i = 0; i < N_REQ; i++)
        assert_memory_equal(out[i], f->ref[i], sizeof(int32_t) * N_OUT);
}

static void greedy_case(fixture *f, plume_engine_params ep, int k, const bool *no_spec,
                        plume_engine_stats *st)
{
    plume_error err = {0};
    plume_engine *e = test_engine_new(f->m, ep);
    if (set_draft(e, path_of("draft-q8_0.gguf"), k, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(plume_engine_proposer_name(e), "draft");
    int32_t out[N_REQ][N_OUT];
    serve(e, f, out, no_spec);
    check_ref(f, out);
    *st = plume_engine_get_stats(e);
    plume_engine_free(e);
}

static void test_greedy_alone(void **state)
{
    plume_engine_stats st;
    greedy_case(*state, plume_engine_defaults(), 4, NULL, &st);
    assert_true(st.spec_drafted > 0);
    /* a Q8_0 copy of the target agrees with it almost always */
    assert_true(st.spec_accepted * 10 > st.spec_drafted * 8);
    assert_true(st.spec_emitted > 2 * st.spec_forwards);
}

static void test_greedy_mixed_with_non_speculating(void **state)
{
    bool no_spec[N_REQ];
    for (int i = 0; i < N_REQ; i++)
        no_spec[i] = i % 2;
    plume_engine_stats st;
    greedy_case(*state, plume_engine_defaults(), 3, no_spec, &st);
    assert_true(st.spec_drafted > 0);
}

static void test_greedy_preemption(void **state)
{
    plume_engine_params ep = plume_engine_defaults();
    ep.block_size = 8;
    ep.kv_max_tokens = 96;
    ep.max_batched_tokens = 16;
    plume_engine_stats st;
    greedy_case(*state, ep, 3, NULL, &st);
    assert_true(st.preemptions > 0);
    assert_true(st.spec_accepted > 0);
}

/* a draft cache too small for the prompts: nothing is drafted for what does
 * not fit, the output stays the target's */
static void test_small_draft_cache(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine *e = test_engine_new(f->m, g_ep);
    plume_settings *s = draft_settings(path_of("draft-q8_0.gguf"));
    assert_int_equal(plume_settings_set(s, "kv_max_tokens", "64", &err), 0);
    assert_int_equal(plume_settings_set(s, "max_batch_tokens", "16", &err), 0);
    assert_int_equal(plume_settings_set(s, "block_size", "4", &err), 0);
    assert_int_equal(plume_engine_set_proposer(e, plume_draft_proposer(), s, 4, &err), 0);
    plume_settings_free(s);
    int32_t out[N_REQ][N_OUT];
    serve(e, f, out, NULL);
    check_ref(f, out);
    plume_engine_free(e);
}

static void test_vocab_check_and_settings(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine *e = test_engine_new(f->m, g_ep);
    assert_int_equal(set_draft(e, path_of("altvocab.gguf"), 4, &err), -1);
    if (!strstr(err.msg, "another vocabulary") || !strstr(err.msg, "token 256 is") ||
        !strstr(err.msg, "altvocab.gguf"))
        fail_msg("unexpected message: %s", err.msg);
    assert_null(plume_engine_proposer_name(e));
    /* no model */
    assert_int_equal(plume_engine_set_proposer(e, plume_draft_proposer(), NULL, 4, &err), -1);
    assert_non_null(strstr(err.msg, "speculative.model"));
    plume_settings *s;
    assert_int_equal(plume_settings_new("speculative", &s, &err), 0);
    assert_int_equal(plume_engine_set_proposer(e, plume_draft_proposer(), s, 4, &err), -1);
    assert_non_null(strstr(err.msg, "model: PATH"));
    assert_int_equal(plume_settings_set(s, "model", path_of("draft-q8_0.gguf"), &err), 0);
    assert_int_equal(plume_settings_set(s, "kv_dtype", "int8", &err), 0);
    assert_int_equal(plume_engine_set_proposer(e, plume_draft_proposer(), s, 4, &err), -1);
    assert_non_null(strstr(err.msg, "kv_dtype"));
    plume_settings_free(s);
    assert_int_equal(set_draft(e, path_of("no-such-model.gguf"), 4, &err), -1);
    assert_non_null(strstr(err.msg, "no-such-model.gguf"));
    plume_engine_free(e);
}

static void test_swap_on_live_engine(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine *e = test_engine_new(f->m, g_ep);
    const char *seq[] = {"draft", "ngram", NULL, "draft", "poor", NULL, "ngram"};
    for (size_t r = 0; r < sizeof seq / sizeof *seq; r++) {
        int rc = !seq[r] ? plume_engine_set_proposer(e, NULL, NULL, 0, &err)
                 : !strcmp(seq[r], "ngram")
                     ? plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 3, &err)
                     : set_draft(e, path_of(strcmp(seq[r], "poor") ? "draft-q8_0.gguf"
                                                                   : "poor.gguf"), 2 + (int)r % 3,
                                 &err);
        if (rc)
            fail_msg("%s", err.msg);
        const char *name = plume_engine_proposer_name(e);
        assert_true(seq[r] ? name && strcmp(name, strcmp(seq[r], "poor") ? seq[r] : "draft") == 0
                           : name == NULL);
        int32_t out[N_REQ][N_OUT];
        serve(e, f, out, NULL);
        check_ref(f, out);
    }
    plume_engine_free(e);
}

/* ---- sampled output follows the target's law with a poor draft ----
 * As in tests/engine/test_spec.c: the law at every prefix of generated
 * tokens comes from plume_decode's logits shaped by oracle_probs; each
 * position's token given the ones before is fitted (chi-square, p > 1e-5). */
#define LAW_TOKENS 3

static void law_case(fixture *f, const char *draft, bool poor)
{
    const char *san = getenv("PLUME_TEST_SANITIZED");
    const int n_req = san && san[0] == '1' ? 600 : 2400; /* statistical power only */
    const int32_t nv = plume_model_n_vocab(f->m);
    const int n_prompt = 6;
    const int32_t *prompt = f->prompt[2];
    plume_request_params rp = law_request(LAW_TOKENS, 1.2f, 7);
    law_tree *t = law_tree_new(f->m, &rp.sampling, prompt, n_prompt, LAW_TOKENS);
    plume_error err = {0};

    plume_engine *e = test_engine_new(f->m, g_ep);
    if (set_draft(e, path_of(draft), 2, &err))
        fail_msg("%s", err.msg);
    law_sample(t, e, prompt, n_prompt, rp, n_req, 200, 5000, nv);
    plume_engine_stats st = plume_engine_get_stats(e);
    plume_engine_free(e);
    assert_true(st.spec_drafted > 0);
    if (getenv("PLUME_TEST_VERBOSE"))
        fprintf(stderr, "drafted %lld accepted %lld\n", (long long)st.spec_drafted, (long long)st.spec_accepted);
    if (poor) /* mostly another network: most drafts are rejected, some accepted, so
                 both branches of the rejection sampler shape the output */
        assert_true(st.spec_accepted * 20 > st.spec_drafted &&
                    st.spec_accepted * 2 < st.spec_drafted);
    else /* the Q8_0 copy: nearly all accepted, but not all (sampled, not argmax) */
        assert_true(st.spec_accepted * 10 > st.spec_drafted * 6 && st.spec_accepted < st.spec_drafted);
    char what[96];
    snprintf(what, sizeof what, "%s draft (drafted %lld, accepted %lld)", draft,
             (long long)st.spec_drafted, (long long)st.spec_accepted);
    law_check_and_free(t, nv, what);
}

static void test_sampled_poor_draft_follows_target_law(void **state)
{
    law_case(*state, "poor.gguf", true);
}

static void test_sampled_close_draft_follows_target_law(void **state)
{
    law_case(*state, "draft-q8_0.gguf", false);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_spec_draft FIXTURE_DIR (make_models.py's output)\n");
        return 2;
    }
    snprintf(g_dir, sizeof g_dir, "%s", argv[1]);
    g_ep = plume_engine_defaults();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_alone),
        cmocka_unit_test(test_greedy_mixed_with_non_speculating),
        cmocka_unit_test(test_greedy_preemption),
        cmocka_unit_test(test_small_draft_cache),
        cmocka_unit_test(test_vocab_check_and_settings),
        cmocka_unit_test(test_swap_on_live_engine),
        cmocka_unit_test(test_sampled_poor_draft_follows_target_law),
        cmocka_unit_test(test_sampled_close_draft_follows_target_law),
    };
    return cmocka_run_group_tests(tests, setup, test_free_model_fixture);
}
