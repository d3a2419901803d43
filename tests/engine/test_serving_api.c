/* The engine's serving API (issue #13) on the generated tiny model (argv[1]):
 * presence and frequency penalties penalise the generated tokens only (each
 * greedy token is the argmax of its raw logits row, taken from first_logits
 * of the same context, minus the penalties over the output so far);
 * logprobs delivered through on_event are the log-softmax of that raw row
 * (before penalties and temperature), with the top alternatives sorted,
 * the same alone and batched, and with speculative decoding; a
 * no_speculation request gets no drafts and the same tokens; and
 * plume_engine_get_load counts requests, KV blocks and prefix-cache tokens. */
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

#include "ngram_proposer.h"
#include "plume/engine.h"

#include "../support/engine_fixture.h"

static const char *g_model_path;

#define N_REQ 6
#define MAX_OUT 24
#define MAX_PROMPT 48

typedef struct fixture {
    plume_model *m;
    int32_t nv;
    int32_t prompt[N_REQ][MAX_PROMPT];
    int32_t n_prompt[N_REQ];
    float *row; /* n_vocab scratch */
} fixture;

static uint64_t rs = 4242;
static int32_t rnd(int32_t n)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rs >> 33) % (uint64_t)n);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (test_load_model(g_model_path, &f->m)) {
        free(f);
        return -1;
    }
    f->nv = plume_model_n_vocab(f->m);
    f->row = malloc(sizeof(float) * (size_t)f->nv);
    /* repetitive prompts: the ngram proposer finds drafts in them */
    for (int i = 0; i < N_REQ; i++) {
        int32_t period = 2 + rnd(5);
        f->n_prompt[i] = 10 + rnd(MAX_PROMPT - 10);
        for (int j = 0; j < f->n_prompt[i]; j++)
            f->prompt[i][j] = j < period ? 32 + rnd(200) : f->prompt[i][j - period];
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (!f)
        return 0;
    plume_model_free(f->m);
    free(f->row);
    free(f);
    return 0;
}

/* The raw logits after ctx[0..n) (the last position's row), into f->row. */
static void raw_row(fixture *f, const int32_t *ctx, int32_t n)
{
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    plume_request_params p = test_request(1);
    p.first_logits = f->row;
    test_add_tokens(e, ctx, (size_t)n, &p);
    test_run_all(e);
    plume_engine_free(e);
}

/* ---- events ---- */

typedef struct rec {
    int32_t n_tok, n_final, n_on_token;
    int32_t tokens[MAX_OUT];
    plume_token_logprobs lp[MAX_OUT];
    bool had_lp[MAX_OUT];
    plume_finish_reason reason;
    bool lp_on_final;
} rec;

static void on_event(void *user, int64_t id, const plume_token_event *ev)
{
    (void)id;
    rec *r = user;
    if (ev->token < 0) {
        r->n_final++;
        r->reason = ev->reason;
        r->lp_on_final = ev->logprobs != NULL;
        return;
    }
    assert_int_equal(r->n_final, 0);
    assert_true(r->n_tok < MAX_OUT);
    r->tokens[r->n_tok] = ev->token;
    r->had_lp[r->n_tok] = ev->logprobs != NULL;
    if (ev->logprobs)
        r->lp[r->n_tok] = *ev->logprobs;
    r->n_tok++;
}

static void on_token(void *user, int64_t id, int32_t token, const char *text, size_t len,
                     plume_finish_reason reason)
{
    (void)id;
    (void)token;
    (void)text;
    (void)len;
    (void)reason;
    ((rec *)user)->n_on_token++;
}

/* Serves the N_REQ prompts with p (on_event into rec[i]) on e, all added at
 * once; writes each output to out. */
static void serve(plume_engine *e, fixture *f, plume_request_params p, rec *recs,
                  int32_t out[N_REQ][MAX_OUT], plume_request_result *res)
{
    int64_t ids[N_REQ];
    memset(recs, 0, sizeof(rec) * N_REQ);
    for (int i = 0; i < N_REQ; i++) {
        p.user = &recs[i];
        ids[i] = test_add_tokens(e, f->prompt[i], (size_t)f->n_prompt[i], &p);
    }
    test_run_all(e);
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r = test_take_output(e, ids[i], p.max_tokens, out[i]);
        if (res)
            res[i] = r;
        plume_engine_release(e, ids[i]);
    }
}

/* The log-softmax of f->row at id, in double. */
static double log_softmax_at(const fixture *f, int32_t id, double *lse_out)
{
    double mx = f->row[0];
    for (int32_t i = 1; i < f->nv; i++)
        if (f->row[i] > mx)
            mx = f->row[i];
    double sum = 0.0;
    for (int32_t i = 0; i < f->nv; i++)
        sum += exp((double)f->row[i] - mx);
    double lse = mx + log(sum);
    if (lse_out)
        *lse_out = lse;
    return (double)f->row[id] - lse;
}

/* Checks one token's logprobs against the log-softmax of f->row. */
static void check_logprobs(const fixture *f, const plume_token_logprobs *lp, int32_t token,
                           int32_t n_top)
{
    double lse;
    double want = log_softmax_at(f, token, &lse);
    assert_true(fabs(lp->logprob - want) < 1e-4);
    assert_int_equal(lp->n_top, n_top);
    for (int32_t j = 0; j < n_top; j++) {
        int32_t id = lp->top_ids[j];
        assert_true(id >= 0 && id < f->nv);
        assert_true(fabs(lp->top_logprobs[j] - ((double)f->row[id] - lse)) < 1e-4);
        if (j > 0) { /* most likely first, ties by lower id */
            int32_t prev = lp->top_ids[j - 1];
            assert_true(f->row[prev] > f->row[id] || (f->row[prev] == f->row[id] && prev < id));
        }
        /* nothing outside the list beats its last entry */
        if (j == n_top - 1)
            for (int32_t v = 0; v < f->nv; v++) {
                bool listed = false;
                for (int32_t q = 0; q < n_top; q++)
                    listed |= lp->top_ids[q] == v;
                if (!listed)
                    assert_true(f->row[v] < f->row[id] || (f->row[v] == f->row[id] && v > id));
            }
    }
    if (n_top > 0)
        assert_true(lp->logprob <= lp->top_logprobs[0] + 1e-6f);
}

/* Greedy with penalties: each token is the argmax of its raw row minus
 * presence + frequency * count over the output so far (not the prompt),
 * and the logprobs are those of the raw row. */
static void test_penalties_and_logprobs_vs_raw_rows(void **state)
{
    fixture *f = *state;
    const float pres = 0.7f, freq = 0.9f;
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    plume_request_params p = test_request(MAX_OUT);
    p.sampling.presence_penalty = pres;
    p.sampling.frequency_penalty = freq;
    p.sampling.repetition_penalty = 1.0f;
    p.logprobs = 5;
    p.on_event = on_event;
    p.on_token = on_token; /* on_event replaces it */
    rec recs[N_REQ];
    int32_t out[N_REQ][MAX_OUT];
    serve(e, f, p, recs, out, NULL);
    plume_engine_free(e);
    int32_t ctx[MAX_PROMPT + MAX_OUT];
    int32_t *count = calloc((size_t)f->nv, sizeof *count);
    int differs = 0;
    for (int i = 0; i < N_REQ; i++) {
        const rec *r = &recs[i];
        assert_int_equal(r->n_on_token, 0);
        assert_int_equal(r->n_final, 1);
        assert_int_equal(r->reason, PLUME_FINISH_LENGTH);
        assert_false(r->lp_on_final);
        assert_int_equal(r->n_tok, MAX_OUT);
        memcpy(ctx, f->prompt[i], sizeof(int32_t) * (size_t)f->n_prompt[i]);
        memset(count, 0, sizeof *count * (size_t)f->nv);
        for (int t = 0; t < MAX_OUT; t++) {
            assert_int_equal(r->tokens[t], out[i][t]);
            raw_row(f, ctx, f->n_prompt[i] + t);
            int32_t best = 0, raw_best = 0;
            float bv = -INFINITY;
            for (int32_t v = 0; v < f->nv; v++) {
                float x = f->row[v] - (count[v] ? pres + freq * (float)count[v] : 0.0f);
                if (x > bv) {
                    bv = x;
                    best = v;
                }
                if (f->row[v] > f->row[raw_best])
                    raw_best = v;
            }
            assert_int_equal(out[i][t], best);
            differs += best != raw_best;
            assert_true(r->had_lp[t]);
            check_logprobs(f, &r->lp[t], out[i][t], 5);
            assert_int_equal(r->lp[t].top_ids[0], raw_best); /* raw, not penalised */
            ctx[f->n_prompt[i] + t] = out[i][t];
            count[out[i][t]]++;
        }
    }
    free(count);
    assert_true(differs > 0); /* the penalties changed some choices */
}

/* Sampled with temperature and a penalty: logprobs are still the raw
 * row's; logprobs 0 gives the token's logprob alone; -1 gives none. */
static void test_logprobs_raw_under_sampling(void **state)
{
    fixture *f = *state;
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    plume_request_params p = test_request(8);
    p.sampling = plume_sampling_defaults();
    p.sampling.temperature = 1.3f;
    p.sampling.seed = 7;
    p.sampling.presence_penalty = -1.0f;
    p.logprobs = 0;
    p.on_event = on_event;
    rec recs[N_REQ];
    int32_t out[N_REQ][MAX_OUT];
    serve(e, f, p, recs, out, NULL);
    int32_t ctx[MAX_PROMPT + MAX_OUT];
    for (int i = 0; i < 2; i++) {
        memcpy(ctx, f->prompt[i], sizeof(int32_t) * (size_t)f->n_prompt[i]);
        for (int t = 0; t < 8; t++) {
            raw_row(f, ctx, f->n_prompt[i] + t);
            assert_true(recs[i].had_lp[t]);
            check_logprobs(f, &recs[i].lp[t], out[i][t], 0);
            ctx[f->n_prompt[i] + t] = out[i][t];
        }
    }
    p.logprobs = -1;
    serve(e, f, p, recs, out, NULL);
    for (int i = 0; i < N_REQ; i++)
        for (int t = 0; t < recs[i].n_tok; t++)
            assert_false(recs[i].had_lp[t]);
    plume_engine_free(e);
}

static void assert_same_events(const rec *a, const rec *b, float tol)
{
    assert_int_equal(a->n_tok, b->n_tok);
    for (int t = 0; t < a->n_tok; t++) {
        assert_int_equal(a->tokens[t], b->tokens[t]);
        assert_int_equal(a->lp[t].n_top, b->lp[t].n_top);
        assert_true(fabsf(a->lp[t].logprob - b->lp[t].logprob) <= tol);
        for (int j = 0; j < a->lp[t].n_top; j++) {
            assert_true(fabsf(a->lp[t].top_logprobs[j] - b->lp[t].top_logprobs[j]) <= tol);
            /* ids may swap only between (nearly) tied alternatives */
            if (a->lp[t].top_ids[j] != b->lp[t].top_ids[j])
                assert_true(tol > 0);
        }
    }
}

/* The same logprobs alone, batched with small budgets (chunked prefill,
 * mixed steps), and with ngram speculation (accepted drafts carry the row
 * that verified them). */
static void test_logprobs_batched_and_speculative(void **state)
{
    fixture *f = *state;
    plume_request_params p = test_request(MAX_OUT);
    p.logprobs = PLUME_MAX_TOP_LOGPROBS;
    p.on_event = on_event;
    rec solo[N_REQ], batched[N_REQ], spec[N_REQ], one;
    int32_t out[N_REQ][MAX_OUT];
    plume_error err = {0};
    for (int i = 0; i < N_REQ; i++) {
        plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
        memset(&one, 0, sizeof one);
        p.user = &one;
        assert_true(plume_engine_add_tokens(e, f->prompt[i], (size_t)f->n_prompt[i], &p, &err) >=
                    0);
        test_run_all(e);
        solo[i] = one;
        plume_engine_free(e);
    }
    plume_engine_params ep = plume_engine_defaults();
    ep.max_batched_tokens = 23;
    ep.block_size = 8;
    plume_engine *e = test_engine_new(f->m, ep);
    serve(e, f, p, batched, out, NULL);
    plume_engine_free(e);
    for (int i = 0; i < N_REQ; i++)
        assert_same_events(&solo[i], &batched[i], 0.0f);

    e = test_engine_new(f->m, plume_engine_defaults());
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 4, &err), 0);
    serve(e, f, p, spec, out, NULL);
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_true(st.spec_accepted > 0);
    plume_engine_free(e);
    /* a verification row scores several positions in one forward: equal up
     * to float rounding */
    for (int i = 0; i < N_REQ; i++)
        assert_same_events(&solo[i], &spec[i], 1e-4f);
}

/* no_speculation: that request drafts nothing while the others do, and
 * every output equals the run without a proposer. */
static void test_no_speculation(void **state)
{
    fixture *f = *state;
    plume_request_params p = test_request(MAX_OUT);
    assert_false(p.no_speculation);
    rec recs[N_REQ];
    int32_t ref[N_REQ][MAX_OUT], out[N_REQ][MAX_OUT];
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    serve(e, f, p, recs, ref, NULL);
    plume_error err = {0};
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 4, &err), 0);
    /* every request opted out: not one draft */
    p.no_speculation = true;
    plume_request_result res[N_REQ];
    serve(e, f, p, recs, out, res);
    for (int i = 0; i < N_REQ; i++) {
        assert_memory_equal(out[i], ref[i], sizeof(int32_t) * MAX_OUT);
        assert_int_equal(res[i].n_drafted, 0);
    }
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_int_equal(st.spec_drafted, 0);
    assert_int_equal(st.spec_forwards, 0);
    /* mixed: odd requests opt out, even ones are speculated on */
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        p.no_speculation = i % 2 == 1;
        ids[i] = test_add_tokens(e, f->prompt[i], (size_t)f->n_prompt[i], &p);
    }
    test_run_all(e);
    int32_t drafted_even = 0;
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, ids[i], &r), 0);
        assert_memory_equal(r.output_ids, ref[i], sizeof(int32_t) * MAX_OUT);
        if (i % 2)
            assert_int_equal(r.n_drafted, 0);
        else
            drafted_even += r.n_drafted;
        plume_engine_release(e, ids[i]);
    }
    assert_true(drafted_even > 0);
    plume_engine_free(e);
}

static void test_load(void **state)
{
    fixture *f = *state;
    plume_engine_params ep = plume_engine_defaults();
    ep.block_size = 16;
    ep.kv_max_tokens = 1024;
    plume_engine *e = test_engine_new(f->m, ep);
    plume_engine_load l = plume_engine_get_load(e);
    assert_int_equal(l.running, 0);
    assert_int_equal(l.waiting, 0);
    assert_int_equal(l.kv_blocks_total, 64);
    assert_int_equal(l.kv_blocks_used, 0);
    assert_int_equal(l.prefix_queries, 0);
    assert_int_equal(l.prefix_hits, 0);
    /* a 40-token prompt: 2 full blocks can be shared, the rest is computed */
    int32_t prompt[40];
    for (int j = 0; j < 40; j++)
        prompt[j] = 40 + j;
    plume_request_params p = test_request(10);
    plume_error err = {0};
    int64_t a = plume_engine_add_tokens(e, prompt, 40, &p, &err);
    int64_t b = plume_engine_add_tokens(e, f->prompt[0], (size_t)f->n_prompt[0], &p, &err);
    assert_true(a >= 0 && b >= 0);
    l = plume_engine_get_load(e);
    assert_int_equal(l.waiting, 2);
    assert_int_equal(l.running, 0);
    assert_true(plume_engine_step(e, &err) >= 0);
    l = plume_engine_get_load(e);
    assert_int_equal(l.running, 2);
    assert_int_equal(l.waiting, 0);
    assert_int_equal(l.kv_blocks_used, 3 + (f->n_prompt[0] + 15) / 16);
    assert_int_equal(l.prefix_queries, 40 + f->n_prompt[0]);
    assert_int_equal(l.prefix_hits, 0);
    test_run_all(e);
    l = plume_engine_get_load(e);
    assert_int_equal(l.running, 0);
    assert_int_equal(l.waiting, 0);
    assert_int_equal(l.kv_blocks_used, 0); /* finished: only the prefix cache holds blocks */
    plume_engine_release(e, a);
    plume_engine_release(e, b);
    assert_int_equal(plume_engine_get_load(e).kv_blocks_used, 0);
    /* the same prompt again: its two full blocks come from the cache */
    a = plume_engine_add_tokens(e, prompt, 40, &p, &err);
    assert_true(plume_engine_step(e, &err) >= 0);
    l = plume_engine_get_load(e);
    assert_int_equal(l.prefix_queries, 80 + f->n_prompt[0]);
    assert_int_equal(l.prefix_hits, 32);
    assert_int_equal(l.kv_blocks_used, 3);
    test_run_all(e);
    plume_request_result r;
    assert_int_equal(plume_engine_result(e, a, &r), 0);
    assert_int_equal(r.n_cached_prompt, 32);
    plume_engine_release(e, a);
    assert_int_equal(plume_engine_get_load(e).kv_blocks_used, 0);
    plume_engine_free(e);
    /* without prefix caching nothing is looked up */
    ep.prefix_caching = false;
    e = test_engine_new(f->m, ep);
    for (int k = 0; k < 2; k++) {
        a = plume_engine_add_tokens(e, prompt, 40, &p, &err);
        test_run_all(e);
        plume_engine_release(e, a);
    }
    l = plume_engine_get_load(e);
    assert_int_equal(l.prefix_queries, 0);
    assert_int_equal(l.prefix_hits, 0);
    assert_int_equal(l.kv_blocks_used, 0);
    plume_engine_free(e);
}

/* A preempted request is counted again when it is re-admitted. */
static void test_load_counts_readmission(void **state)
{
    fixture *f = *state;
    plume_engine_params ep = plume_engine_defaults();
    ep.block_size = 8;
    ep.kv_max_tokens = 96; /* 12 blocks: two requests of up to 72 positions collide */
    plume_engine *e = test_engine_new(f->m, ep);
    plume_request_params p = test_request(MAX_OUT);
    int64_t total = 0;
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        ids[i] = test_add_tokens(e, f->prompt[i], (size_t)f->n_prompt[i], &p);
        total += f->n_prompt[i];
    }
    test_run_all(e);
    plume_engine_stats st = plume_engine_get_stats(e);
    assert_true(st.preemptions > 0);
    plume_engine_load l = plume_engine_get_load(e);
    assert_true(l.prefix_queries > total); /* re-admissions looked up again */
    assert_true(l.prefix_hits > 0);        /* and found their own committed blocks */
    assert_true(l.prefix_hits < l.prefix_queries);
    assert_int_equal(l.kv_blocks_used, 0);
    for (int i = 0; i < N_REQ; i++)
        plume_engine_release(e, ids[i]);
    plume_engine_free(e);
}

static void test_rejects_bad_requests(void **state)
{
    fixture *f = *state;
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    plume_error err = {0};
    plume_request_params p = test_request(4);
    assert_int_equal(p.logprobs, -1);
    assert_null(p.on_event);
    p.logprobs = PLUME_MAX_TOP_LOGPROBS + 1;
    assert_int_equal(plume_engine_add_tokens(e, f->prompt[0], 4, &p, &err), -1);
    assert_non_null(strstr(err.msg, "logprobs must be -1 (none) or 0..20"));
    assert_non_null(strstr(err.msg, "got 21"));
    p.logprobs = -2;
    assert_int_equal(plume_engine_add_tokens(e, f->prompt[0], 4, &p, &err), -1);
    assert_non_null(strstr(err.msg, "got -2"));
    p.logprobs = 0;
    p.sampling.frequency_penalty = -2.5f;
    assert_int_equal(plume_engine_add_tokens(e, f->prompt[0], 4, &p, &err), -1);
    assert_non_null(strstr(err.msg, "frequency_penalty must be in [-2, 2]"));
    assert_false(plume_engine_has_work(e));
    plume_engine_free(e);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_penalties_and_logprobs_vs_raw_rows),
        cmocka_unit_test(test_logprobs_raw_under_sampling),
        cmocka_unit_test(test_logprobs_batched_and_speculative),
        cmocka_unit_test(test_no_speculation),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_counts_readmission),
        cmocka_unit_test(test_rejects_bad_requests),
    };
    return test_main_on_model(argc, argv, "test_serving_api TINY_MODEL.gguf", &g_model_path, tests,
                              sizeof tests / sizeof *tests, setup, teardown);
}
