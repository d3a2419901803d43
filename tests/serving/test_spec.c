/* Speculative decoding in the engine, on the generated tiny model (argv[1]):
 * greedy output with the ngram proposer, or with a proposer that drafts
 * garbage, is token for token the output without speculation — alone, in
 * mixed batches and under preemption; seeded sampling is reproducible with
 * speculation on; the proposer is swapped on a live engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ngram_proposer.h"
#include "plume/engine.h"
#include "plume/settings.h"

static const char *g_model_path;

#define N_REQ 12

typedef struct fixture {
    plume_model *m;
    int32_t prompt[N_REQ][64];
    int32_t n_prompt[N_REQ];
    int32_t ref[N_REQ][48]; /* greedy outputs without speculation */
} fixture;

/* ---- a fixture proposer that drafts pseudo-random ids ---- */
struct plume_proposer {
    uint64_t state;
    int32_t n_vocab;
    int64_t calls;
};

static int garbage_create(const plume_settings *settings, int32_t n_vocab, plume_proposer **out,
                          plume_error *err)
{
    (void)settings;
    (void)err;
    plume_proposer *p = calloc(1, sizeof *p);
    p->state = 42;
    p->n_vocab = n_vocab;
    *out = p;
    return 0;
}
static void garbage_destroy(plume_proposer *p) { free(p); }
static int garbage_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                           plume_draft *drafts, plume_error *err)
{
    (void)err;
    p->calls++;
    for (size_t i = 0; i < n; i++) {
        for (int32_t t = 0; t < seqs[i].k; t++) {
            p->state = p->state * 6364136223846793005ull + 1442695040888963407ull;
            drafts[i].tokens[t] = (int32_t)((p->state >> 33) % (uint64_t)p->n_vocab);
        }
        drafts[i].n = seqs[i].k;
    }
    return 0;
}
static const plume_proposer_vtable garbage_vt = {
    sizeof(plume_proposer_vtable), PLUME_PROPOSER_INTERFACE_VERSION, "garbage", NULL,
    garbage_create, garbage_destroy, garbage_propose, NULL, NULL,
};

static uint64_t rs = 99;
static int32_t rnd(int32_t n)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rs >> 33) % (uint64_t)n);
}

static plume_request_params req_params(int32_t max_tokens)
{
    plume_request_params p = plume_request_defaults();
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

/* Serves all requests on e and returns outputs in out (N_REQ x 48). */
static void serve(plume_engine *e, fixture *f, int32_t out[N_REQ][48], plume_request_params rp)
{
    plume_error err = {0};
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        ids[i] = plume_engine_add_tokens(e, f->prompt[i], (size_t)f->n_prompt[i], &rp, &err);
        assert_true(ids[i] >= 0);
    }
    while (plume_engine_has_work(e))
        assert_true(plume_engine_step(e, &err) >= 0);
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, ids[i], &r), 0);
        assert_int_equal((int)r.n_output, rp.max_tokens);
        memcpy(out[i], r.output_ids, sizeof(int32_t) * r.n_output);
        plume_engine_release(e, ids[i]);
    }
}

static plume_engine *engine(fixture *f, plume_engine_params ep)
{
    plume_engine *e;
    plume_error err = {0};
    ep.n_threads = 2;
    assert_int_equal(plume_engine_create(f->m, &ep, &e, &err), 0);
    return e;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    plume_error err = {0};
    if (plume_model_load(g_model_path, &f->m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    /* repetitive prompts give prompt lookup something to find */
    for (int i = 0; i < N_REQ; i++) {
        int32_t period = 2 + rnd(6);
        f->n_prompt[i] = 8 + rnd(50);
        for (int j = 0; j < f->n_prompt[i]; j++)
            f->prompt[i][j] = j < period ? 32 + rnd(200) : f->prompt[i][j - period];
    }
    plume_engine *e = engine(f, plume_engine_defaults());
    serve(e, f, f->ref, req_params(40));
    plume_engine_free(e);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    plume_model_free(f->m);
    free(f);
    return 0;
}

static void check_same_as_ref(fixture *f, plume_engine_params ep, const plume_proposer_vtable *vt,
                              int k, plume_engine_stats *st_out)
{
    plume_engine *e = engine(f, ep);
    plume_error err = {0};
    assert_int_equal(plume_engine_set_proposer(e, vt, NULL, k, &err), 0);
    int32_t out[N_REQ][48];
    serve(e, f, out, req_params(40));
    for (int i = 0; i < N_REQ; i++)
        assert_memory_equal(out[i], f->ref[i], sizeof(int32_t) * 40);
    if (st_out)
        *st_out = plume_engine_get_stats(e);
    plume_engine_free(e);
}

static void test_ngram_greedy_unchanged(void **state)
{
    plume_engine_stats st;
    check_same_as_ref(*state, plume_engine_defaults(), plume_ngram_proposer(), 5, &st);
    assert_true(st.spec_drafted > 0);
    assert_true(st.spec_accepted > 0); /* repetitive prompts: some drafts land */
    assert_true(st.spec_emitted > st.spec_forwards); /* more than one token per forward */
}

static void test_ngram_small_budget_and_preemption(void **state)
{
    plume_engine_params ep = plume_engine_defaults();
    ep.block_size = 8;
    ep.kv_max_tokens = 112; /* enough for one request (<= 98 positions + drafts) */
    ep.max_batched_tokens = 13;
    plume_engine_stats st;
    check_same_as_ref(*state, ep, plume_ngram_proposer(), 3, &st);
    assert_true(st.preemptions > 0);
}

static void test_garbage_drafts_change_nothing(void **state)
{
    plume_engine_stats st;
    check_same_as_ref(*state, plume_engine_defaults(), &garbage_vt, 4, &st);
    assert_true(st.spec_drafted > 100);
    assert_true(st.spec_accepted * 10 < st.spec_drafted); /* garbage is mostly rejected */
}

static void test_seeded_sampling_reproducible(void **state)
{
    fixture *f = *state;
    plume_request_params rp = req_params(30);
    rp.sampling.temperature = 1.0f;
    rp.sampling.top_k = 0;
    rp.sampling.top_p = 1.0f;
    rp.sampling.min_p = 0.0f;
    rp.sampling.seed = 1234;
    int32_t a[N_REQ][48], b[N_REQ][48];
    plume_error err = {0};
    for (int run = 0; run < 2; run++) {
        plume_engine *e = engine(f, plume_engine_defaults());
        assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 4, &err), 0);
        serve(e, f, run ? b : a, rp);
        plume_engine_free(e);
    }
    for (int i = 0; i < N_REQ; i++)
        assert_memory_equal(a[i], b[i], sizeof(int32_t) * 30);
}

static void test_swap_on_live_engine(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine *e = engine(f, plume_engine_defaults());
    int32_t out[N_REQ][48];
    const plume_proposer_vtable *seq[] = {NULL, plume_ngram_proposer(), &garbage_vt, NULL,
                                          plume_ngram_proposer()};
    for (size_t r = 0; r < sizeof seq / sizeof *seq; r++) {
        assert_int_equal(plume_engine_set_proposer(e, seq[r], NULL, 2 + (int)r, &err), 0);
        assert_true(seq[r] ? strcmp(plume_engine_proposer_name(e), seq[r]->name) == 0
                           : plume_engine_proposer_name(e) == NULL);
        serve(e, f, out, req_params(40));
        for (int i = 0; i < N_REQ; i++)
            assert_memory_equal(out[i], f->ref[i], sizeof(int32_t) * 40);
    }
    /* swapping while a request is in flight is refused */
    plume_request_params rp = req_params(5);
    assert_true(plume_engine_add_tokens(e, f->prompt[0], (size_t)f->n_prompt[0], &rp, &err) >= 0);
    assert_int_equal(plume_engine_set_proposer(e, NULL, NULL, 0, &err), -1);
    assert_non_null(strstr(err.msg, "between runs"));
    plume_engine_free(e);
}

/* on_token may abort its own request mid-verification: nothing is appended
 * or reported after the final callback, and the proposer is told. */
typedef struct abort_ctx {
    plume_engine *e;
    int calls, after_final;
    bool finished;
} abort_ctx;

static void abort_on_third(void *user, int64_t id, int32_t token, const char *text, size_t len,
                           plume_finish_reason reason)
{
    (void)text;
    (void)len;
    abort_ctx *a = user;
    if (a->finished)
        a->after_final++;
    if (token < 0) {
        a->finished = true;
        assert_int_equal(reason, PLUME_FINISH_ABORT);
        return;
    }
    if (++a->calls == 3)
        plume_engine_abort(a->e, id);
}

static void test_abort_from_callback(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine *e = engine(f, plume_engine_defaults());
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 5, &err), 0);
    abort_ctx a = {e, 0, 0, false};
    plume_request_params rp = req_params(40);
    rp.on_token = abort_on_third;
    rp.user = &a;
    int64_t id = plume_engine_add_tokens(e, f->prompt[0], (size_t)f->n_prompt[0], &rp, &err);
    while (plume_engine_has_work(e))
        assert_true(plume_engine_step(e, &err) >= 0);
    plume_request_result r;
    assert_int_equal(plume_engine_result(e, id, &r), 0);
    assert_int_equal(r.finish, PLUME_FINISH_ABORT);
    assert_int_equal((int)r.n_output, 3);
    assert_memory_equal(r.output_ids, f->ref[0], sizeof(int32_t) * 3);
    assert_int_equal(a.after_final, 0);
    plume_engine_free(e);
}

static void test_bad_settings(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine *e = engine(f, plume_engine_defaults());
    plume_settings *s;
    assert_int_equal(plume_settings_new("speculative", &s, &err), 0);
    assert_int_equal(plume_settings_set(s, "prompt_lookup_min", "3", &err), 0);
    assert_int_equal(plume_settings_set(s, "prompt_lookup_max", "2", &err), 0);
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), s, 4, &err), -1);
    assert_non_null(strstr(err.msg, "prompt_lookup_min"));
    assert_int_equal(plume_settings_set(s, "prompt_lookup_maxx", "2", &err), 0);
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), s, 4, &err), -1);
    assert_non_null(strstr(err.msg, "prompt_lookup_maxx"));
    plume_settings_free(s);
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 0, &err), -1);
    assert_non_null(strstr(err.msg, "num_speculative_tokens"));
    assert_null(plume_engine_proposer_name(e));
    plume_engine_free(e);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_spec TINY_MODEL.gguf\n");
        return 2;
    }
    g_model_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_greedy_unchanged),
        cmocka_unit_test(test_ngram_small_budget_and_preemption),
        cmocka_unit_test(test_garbage_drafts_change_nothing),
        cmocka_unit_test(test_seeded_sampling_reproducible),
        cmocka_unit_test(test_swap_on_live_engine),
        cmocka_unit_test(test_abort_from_callback),
        cmocka_unit_test(test_bad_settings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
