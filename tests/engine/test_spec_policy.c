/* Speculation per request and the engine's adaptive speculation, on the
 * generated tiny model (argv[1]): requests with num_speculative_tokens 0 or
 * no_speculation share steps with speculating ones (alone and under
 * preemption) and get the same greedy output with no drafts; a per-request
 * cap bounds what the proposer is asked for; adaptive k drafts less for a
 * proposer that is always wrong and keeps k for one that is always right;
 * disable_above_batch N drafts nothing in steps of more than N decoding
 * sequences (auto keeps the output); swapping ngram <-> off on a live
 * engine keeps the output and loads no model. */
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
#include "plume/proposer.h"

#include "../support/engine_fixture.h"

static const char *g_model_path;

#define N_REQ 8
#define MAX_OUT 40

typedef struct fixture {
    plume_model *m;
    int32_t prompt[N_REQ][64];
    int32_t n_prompt[N_REQ];
    int32_t ref[N_REQ][MAX_OUT]; /* greedy outputs without speculation */
} fixture;

static fixture *g_f; /* for the test proposers */

static uint64_t rs = 7;
static int32_t rnd(int32_t n)
{
    rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (int32_t)((rs >> 33) % (uint64_t)n);
}

/* ---- test proposers: they know the greedy reference ---- */

static struct {
    bool wrong;              /* draft a token the target never picks */
    int32_t max_k[64];       /* by seq id: the most drafts asked for */
    int32_t calls[64];       /* by seq id: propose calls that included it */
    int32_t max_n;           /* most sequences in one propose call */
} g_rec;

struct plume_proposer {
    int unused;
};

static int ref_create(const plume_proposer_host *host, const plume_settings *s,
                      plume_proposer **out, plume_error *err)
{
    (void)host, (void)s, (void)err;
    *out = calloc(1, sizeof **out);
    return *out ? 0 : -1;
}

static void ref_destroy(plume_proposer *p) { free(p); }

/* The request whose prompt starts seq's tokens. */
static int which(const plume_propose_seq *q)
{
    for (int i = 0; i < N_REQ; i++)
        if (q->n_tokens >= g_f->n_prompt[i] &&
            memcmp(q->tokens, g_f->prompt[i], sizeof(int32_t) * (size_t)g_f->n_prompt[i]) == 0)
            return i;
    return -1;
}

static int ref_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                       plume_draft *drafts, plume_error *err)
{
    (void)p, (void)err;
    if ((int32_t)n > g_rec.max_n)
        g_rec.max_n = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        const plume_propose_seq *q = &seqs[i];
        if (q->seq_id < 64) {
            g_rec.calls[q->seq_id]++;
            if (q->k > g_rec.max_k[q->seq_id])
                g_rec.max_k[q->seq_id] = q->k;
        }
        int r = which(q);
        drafts[i].n = 0;
        if (r < 0)
            continue;
        int32_t at = q->n_tokens - g_f->n_prompt[r];
        for (int32_t t = 0; t < q->k && at + t < MAX_OUT; t++)
            drafts[i].tokens[drafts[i].n++] =
                g_rec.wrong ? (g_f->ref[r][at + t] + 1) % plume_model_n_vocab(g_f->m)
                            : g_f->ref[r][at + t];
    }
    return 0;
}

static const plume_proposer_vtable ref_vt = {
    sizeof(plume_proposer_vtable), PLUME_PROPOSER_INTERFACE_VERSION, "reference", NULL,
    ref_create, ref_destroy, ref_propose, NULL, NULL, NULL,
};

static void rec_reset(bool wrong)
{
    memset(&g_rec, 0, sizeof g_rec);
    g_rec.wrong = wrong;
}

/* ---- serving ---- */

/* Serves request i with rp[i] (ids 0..N_REQ-1 on a fresh engine), checks
 * each output against the reference prefix, returns results' drafted counts. */
static void serve(plume_engine *e, const plume_request_params *rp, int32_t drafted[N_REQ])
{
    plume_error err = {0};
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        ids[i] = plume_engine_add_tokens(e, g_f->prompt[i], (size_t)g_f->n_prompt[i], &rp[i],
                                         &err);
        assert_true(ids[i] >= 0);
    }
    test_run_all(e);
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, ids[i], &r), 0);
        assert_int_equal((int)r.n_output, rp[i].max_tokens);
        assert_memory_equal(r.output_ids, g_f->ref[i], sizeof(int32_t) * r.n_output);
        if (drafted)
            drafted[i] = r.n_drafted;
        plume_engine_release(e, ids[i]);
    }
}

static int setup(void **state)
{
    static fixture f;
    if (test_load_model(g_model_path, &f.m))
        return -1;
    for (int i = 0; i < N_REQ; i++) { /* repetitive: prompt lookup finds something */
        int32_t period = 2 + rnd(6);
        f.n_prompt[i] = 8 + rnd(50);
        for (int j = 0; j < f.n_prompt[i]; j++)
            f.prompt[i][j] = j < period ? 32 + rnd(200) : f.prompt[i][j - period];
    }
    g_f = &f;
    plume_engine *e = test_engine_new(g_f->m, plume_engine_defaults());
    plume_error e2 = {0};
    int64_t ids[N_REQ];
    plume_request_params rp = test_request(MAX_OUT);
    for (int i = 0; i < N_REQ; i++)
        ids[i] = plume_engine_add_tokens(e, f.prompt[i], (size_t)f.n_prompt[i], &rp, &e2);
    while (plume_engine_has_work(e))
        if (plume_engine_step(e, &e2) < 0)
            return -1;
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r;
        plume_engine_result(e, ids[i], &r);
        memcpy(f.ref[i], r.output_ids, sizeof(int32_t) * MAX_OUT);
    }
    plume_engine_free(e);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    plume_model_free(f->m);
    return 0;
}

/* Requests 0, 4: no_speculation; 1, 5: num_speculative_tokens 0; 2, 6: the
 * engine's k; 3, 7: a cap of 2.  The reference proposer drafts for all it
 * is asked about, so only the policy keeps drafts away. */
static void check_mixed(plume_engine_params ep, bool expect_preemption)
{
    rec_reset(false);
    plume_engine *e = test_engine_new(g_f->m, ep);
    plume_error err = {0};
    assert_int_equal(plume_engine_set_proposer(e, &ref_vt, NULL, 4, &err), 0);
    plume_request_params rp[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        rp[i] = test_request(MAX_OUT - 2 * i);
        if (i % 4 == 0)
            rp[i].no_speculation = true;
        else if (i % 4 == 1)
            rp[i].num_speculative_tokens = 0;
        else if (i % 4 == 3)
            rp[i].num_speculative_tokens = 2;
    }
    int32_t drafted[N_REQ];
    serve(e, rp, drafted);
    for (int i = 0; i < N_REQ; i++) {
        if (i % 4 <= 1) {
            assert_int_equal(drafted[i], 0);
            assert_int_equal(g_rec.calls[i], 0); /* never even asked */
        } else {
            assert_true(drafted[i] > 0);
            assert_true(g_rec.max_k[i] <= (i % 4 == 3 ? 2 : 4));
        }
    }
    assert_int_equal(g_rec.max_k[2], 4);
    assert_int_equal(g_rec.max_k[3], 2);
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_true(st.max_step_seqs >= 4); /* speculating and not in the same steps */
    if (expect_preemption)
        assert_true(st.preemptions > 0);
    plume_engine_free(e);
}

static void test_per_request_mixed(void **state)
{
    (void)state;
    check_mixed(plume_engine_defaults(), false);
}

static void test_per_request_mixed_preemption(void **state)
{
    (void)state;
    plume_engine_params ep = plume_engine_defaults();
    ep.block_size = 4;
    ep.kv_max_tokens = 160; /* less than the batch needs at once */
    ep.max_batched_tokens = 48;
    check_mixed(ep, true);
}

static void test_per_request_validation(void **state)
{
    (void)state;
    plume_engine *e = test_engine_new(g_f->m, plume_engine_defaults());
    plume_error err = {0};
    plume_request_params rp = test_request(4);
    rp.num_speculative_tokens = -2;
    assert_true(plume_engine_add_tokens(e, g_f->prompt[0], 4, &rp, &err) < 0);
    assert_non_null(strstr(err.msg, "num_speculative_tokens must be -1"));
    rp.num_speculative_tokens = 9; /* no proposer: nothing to cap, accepted */
    int64_t id = test_add_tokens(e, g_f->prompt[0], 4, &rp);
    plume_engine_release(e, id);
    assert_int_equal(plume_engine_set_proposer(e, &ref_vt, NULL, 4, &err), 0);
    rp.num_speculative_tokens = 5;
    assert_true(plume_engine_add_tokens(e, g_f->prompt[0], 4, &rp, &err) < 0);
    assert_string_equal(err.msg, "num_speculative_tokens must be -1 (the engine's k), 0 (no "
                                 "speculation) or 1..4 (the engine's num_speculative_tokens), "
                                 "got 5");
    assert_int_equal(plume_engine_set_spec_policy(e, false, -2, &err), -1);
    assert_non_null(strstr(err.msg, "disable_above_batch must be -1 (auto)"));
    plume_engine_free(e);
    plume_engine_params ep = plume_engine_defaults();
    ep.spec_disable_above_batch = -3;
    assert_int_equal(plume_engine_create(g_f->m, &ep, &e, &err), -1);
    assert_non_null(strstr(err.msg, "disable_above_batch"));
}

/* Total drafted with the reference proposer (right or wrong), k 4. */
static int64_t drafted_with(bool wrong, bool adaptive)
{
    rec_reset(wrong);
    plume_engine_params ep = plume_engine_defaults();
    ep.spec_adaptive = adaptive;
    plume_engine *e = test_engine_new(g_f->m, ep);
    plume_error err = {0};
    assert_int_equal(plume_engine_set_proposer(e, &ref_vt, NULL, 4, &err), 0);
    plume_request_params rp[N_REQ];
    for (int i = 0; i < N_REQ; i++)
        rp[i] = test_request(MAX_OUT);
    serve(e, rp, NULL);
    int64_t d = plume_engine_get_stats(e).spec_drafted;
    plume_engine_free(e);
    return d;
}

static void test_adaptive_k(void **state)
{
    (void)state;
    int64_t wrong_fixed = drafted_with(true, false), wrong_adaptive = drafted_with(true, true);
    /* always rejected: k falls to 1 within a few steps */
    assert_true(wrong_adaptive * 2 < wrong_fixed);
    int64_t right_fixed = drafted_with(false, false), right_adaptive = drafted_with(false, true);
    /* always accepted: k stays 4, the same steps draft the same */
    assert_int_equal(right_adaptive, right_fixed);
}

static void test_disable_above_batch(void **state)
{
    (void)state;
    rec_reset(false);
    plume_engine_params ep = plume_engine_defaults();
    ep.spec_disable_above_batch = 2;
    plume_engine *e = test_engine_new(g_f->m, ep);
    plume_error err = {0};
    assert_int_equal(plume_engine_set_proposer(e, &ref_vt, NULL, 4, &err), 0);
    plume_request_params rp[N_REQ];
    for (int i = 0; i < N_REQ; i++)
        rp[i] = test_request(8 + 4 * i); /* the batch shrinks as they finish */
    serve(e, rp, NULL);
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_true(g_rec.max_n <= 2); /* a step of more than 2 decoding sequences drafts nothing */
    assert_true(st.spec_steps_skipped > 0);
    assert_true(st.spec_drafted > 0); /* the last two draft */
    /* auto: whatever the timings decide, the output stays the reference */
    assert_int_equal(plume_engine_set_spec_policy(e, true, -1, &err), 0);
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 4, &err), 0);
    for (int r = 0; r < 3; r++)
        serve(e, rp, NULL);
    plume_engine_free(e);
}

static void test_swap_keeps_model(void **state)
{
    (void)state;
    plume_engine *e = test_engine_new(g_f->m, plume_engine_defaults());
    plume_error err = {0};
    plume_request_params rp[N_REQ];
    for (int i = 0; i < N_REQ; i++)
        rp[i] = test_request(MAX_OUT);
    const plume_proposer_vtable *seq[] = {plume_ngram_proposer(), NULL, plume_ngram_proposer(),
                                          NULL};
    for (int r = 0; r < 4; r++) {
        assert_int_equal(plume_engine_set_proposer(e, seq[r], NULL, 3, &err), 0);
        serve(e, rp, NULL);
    }
    /* the engine keeps its model (it has no way to load another); nothing
     * was loaded for the proposers either */
    assert_int_equal(plume_engine_get_stats(e).proposer_model_loads, 0);
    assert_true(plume_engine_get_stats(e).spec_drafted > 0);
    plume_engine_free(e);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_request_mixed),
        cmocka_unit_test(test_per_request_mixed_preemption),
        cmocka_unit_test(test_per_request_validation),
        cmocka_unit_test(test_adaptive_k),
        cmocka_unit_test(test_disable_above_batch),
        cmocka_unit_test(test_swap_keeps_model),
    };
    return test_main_on_model(argc, argv, "test_spec_policy TINY_MODEL.gguf", &g_model_path, tests,
                              sizeof tests / sizeof *tests, setup, teardown);
}
