/* Speculative decoding in the engine, on the generated tiny model (argv[1]):
 * greedy output with the ngram proposer, or with a proposer that drafts
 * garbage, is token for token the output without speculation — alone, in
 * mixed batches and under preemption; seeded sampling is reproducible with
 * speculation on; with a draft-model proposer's full q rows, sampled output
 * follows the target's law derived from the model's logits; the proposer is
 * swapped on a live engine.  The draft-model proposer uses the host context
 * of plume/proposer.h: it loads its draft through the host onto the
 * target's backend instance and drafts for all sequences at once with a
 * plume_seq_runner (plume/seq_runner.h), truncating after rejections. */
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
#include "plume/registry.h"
#include "plume/seq_runner.h"
#include "plume/settings.h"

#include "../sample/oracle.h"
#include "../sample/target_law.h"
#include "../support/engine_fixture.h"

static const char *g_model_path;

#define N_REQ 12

typedef struct fixture {
    plume_model *m;
    int32_t prompt[N_REQ][64];
    int32_t n_prompt[N_REQ];
    int32_t ref[N_REQ][48]; /* greedy outputs without speculation */
} fixture;
_Static_assert(offsetof(fixture, m) == 0, "test_free_model_fixture frees the first member");

/* ---- a fixture proposer that drafts pseudo-random ids ---- */
struct plume_proposer {
    uint64_t state;
    int32_t n_vocab;
    int64_t calls;
    /* the draft-model fixture below */
    plume_model *draft;
    plume_seq_runner *runner;
    float *logits;          /* max_seqs rows of n_vocab */
    plume_seq_run *runs;    /* max_seqs */
    int64_t *base_id;       /* max_seqs: a sequence's length when it was last drafted for */
    int32_t *base;
    int32_t max_seqs;
    plume_rng rng;
};

static int garbage_create(const plume_proposer_host *host, const plume_settings *settings,
                          plume_proposer **out, plume_error *err)
{
    (void)settings;
    (void)err;
    plume_proposer *p = calloc(1, sizeof *p);
    p->state = 42;
    p->n_vocab = host->n_vocab;
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
    garbage_create, garbage_destroy, garbage_propose, NULL, NULL, NULL,
};

static uint64_t rs = 99;
static int32_t rnd(int32_t n)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rs >> 33) % (uint64_t)n);
}

/* Serves all requests on e and returns outputs in out (N_REQ x 48). */
static void serve(plume_engine *e, fixture *f, int32_t out[N_REQ][48], plume_request_params rp)
{
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        ids[i] = test_add_tokens(e, f->prompt[i], (size_t)f->n_prompt[i], &rp);
    }
    test_run_all(e);
    for (int i = 0; i < N_REQ; i++) {
        test_take_output(e, ids[i], rp.max_tokens, out[i]);
        plume_engine_release(e, ids[i]);
    }
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (test_load_model(g_model_path, &f->m))
        return -1;
    /* repetitive prompts give prompt lookup something to find */
    for (int i = 0; i < N_REQ; i++) {
        int32_t period = 2 + rnd(6);
        f->n_prompt[i] = 8 + rnd(50);
        for (int j = 0; j < f->n_prompt[i]; j++)
            f->prompt[i][j] = j < period ? 32 + rnd(200) : f->prompt[i][j - period];
    }
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    serve(e, f, f->ref, test_request(40));
    plume_engine_free(e);
    *state = f;
    return 0;
}

static void check_same_as_ref(fixture *f, plume_engine_params ep, const plume_proposer_vtable *vt,
                              int k, plume_engine_stats *st_out)
{
    plume_engine *e = test_engine_new(f->m, ep);
    plume_error err = {0};
    assert_int_equal(plume_engine_set_proposer(e, vt, NULL, k, &err), 0);
    int32_t out[N_REQ][48];
    serve(e, f, out, test_request(40));
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
    plume_request_params rp = test_request(30);
    rp.sampling.temperature = 1.0f;
    rp.sampling.top_k = 0;
    rp.sampling.top_p = 1.0f;
    rp.sampling.min_p = 0.0f;
    rp.sampling.seed = 1234;
    int32_t a[N_REQ][48], b[N_REQ][48];
    plume_error err = {0};
    for (int run = 0; run < 2; run++) {
        plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
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
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    int32_t out[N_REQ][48];
    const plume_proposer_vtable *seq[] = {NULL, plume_ngram_proposer(), &garbage_vt, NULL,
                                          plume_ngram_proposer()};
    for (size_t r = 0; r < sizeof seq / sizeof *seq; r++) {
        assert_int_equal(plume_engine_set_proposer(e, seq[r], NULL, 2 + (int)r, &err), 0);
        assert_true(seq[r] ? strcmp(plume_engine_proposer_name(e), seq[r]->name) == 0
                           : plume_engine_proposer_name(e) == NULL);
        serve(e, f, out, test_request(40));
        for (int i = 0; i < N_REQ; i++)
            assert_memory_equal(out[i], f->ref[i], sizeof(int32_t) * 40);
    }
    /* swapping while a request is in flight is refused */
    plume_request_params rp = test_request(5);
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
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
    assert_int_equal(plume_engine_set_proposer(e, plume_ngram_proposer(), NULL, 5, &err), 0);
    abort_ctx a = {e, 0, 0, false};
    plume_request_params rp = test_request(40);
    rp.on_token = abort_on_third;
    rp.user = &a;
    int64_t id = plume_engine_add_tokens(e, f->prompt[0], (size_t)f->n_prompt[0], &rp, &err);
    test_run_all(e);
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
    plume_engine *e = test_engine_new(f->m, plume_engine_defaults());
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
    /* a proposer of interface version 1 (create without the host) */
    plume_proposer_vtable v1 = garbage_vt;
    v1.interface_version = 1;
    assert_int_equal(plume_engine_set_proposer(e, &v1, NULL, 4, &err), -1);
    assert_string_equal(err.msg,
                        "proposer 'garbage' has interface version 1, older than this plume "
                        "accepts (2: create takes the host, plume_proposer_host, and each "
                        "plume_propose_seq carries the request's sampling parameters); port it to "
                        "the current plume/proposer.h and rebuild");
    assert_null(plume_engine_proposer_name(e));
    plume_engine_free(e);
}

/* ---- sampled speculation follows the target's law, end to end ----
 *
 * A draft-model proposer (the tiny model itself at temperature DM_TEMP, a
 * full q row per draft, has_probs set) drafts for LAW_REQ requests that
 * sample LAW_TOKENS tokens each (temperature 0.8, top-k 4, repetition
 * penalty 1.3 over the whole history, distinct seeds) through the engine:
 * batched, with drafts verified row by row.  The target's law at every
 * prefix of generated tokens comes from plume_decode's logits of the prompt
 * plus that prefix, shaped by oracle_probs (tests/sample/oracle.h), not by
 * plume's sampler.  For each position j = 0..3 the generated token given
 * the tokens before it is fitted against that law (chi-square, p-value >
 * 1e-5, four fits: a correct engine fails with probability < 4e-5 for a
 * random seed; the seeds are fixed). */

#define LAW_REQ 2000
#define LAW_TOKENS 4
#define DM_TEMP 1.7

/* What the draft-model proposer saw, for the test to check. */
static struct {
    const plume_model *target;
    plume_registry *registry;
    int hosts_ok;         /* creates whose host matched the engine */
    int64_t bad_sampling; /* sequences whose sampling params were not the request's */
    int64_t truncations;  /* accepted() calls that truncated rejected drafts */
    int64_t max_batch;    /* most sequences in one draft forward */
    int64_t stale;        /* first-draft logits unlike a fresh decode of the tokens */
    plume_context *check; /* the draft's logits recomputed from scratch */
    float *check_logits;
} g_dm;

static void dm_destroy(plume_proposer *p)
{
    plume_seq_runner_free(p->runner);
    plume_model_free(p->draft); /* before the target: it borrows its backend */
    free(p->logits);
    free(p->runs);
    free(p->base_id);
    free(p->base);
    free(p);
}

/* settings: `model` (the draft's path).  The draft goes through the host's
 * loader onto the target's backend instance. */
static int dm_create(const plume_proposer_host *host, const plume_settings *settings,
                     plume_proposer **out, plume_error *err)
{
    plume_backend *target_b;
    const plume_backend_vtable *target_bvt = plume_model_backend(g_dm.target, &target_b);
    if (host->struct_size == sizeof *host && host->target == g_dm.target &&
        host->registry == g_dm.registry && host->backend == target_b &&
        host->backend_vt == target_bvt && host->n_vocab == plume_model_n_vocab(g_dm.target) &&
        host->n_ctx_train == plume_model_n_ctx_train(g_dm.target) && host->k == 2 &&
        host->max_seqs == plume_engine_defaults().max_num_seqs &&
        host->max_tokens_per_step == plume_engine_defaults().max_batched_tokens &&
        host->max_seq_len > 0)
        g_dm.hosts_ok++;
    const char *path;
    if (plume_settings_string(settings, "model", NULL, &path, err))
        return -1;
    plume_proposer *p = calloc(1, sizeof *p);
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    p->n_vocab = host->n_vocab;
    p->max_seqs = host->max_seqs;
    plume_rng_seed(&p->rng, 4242);
    if (plume_proposer_host_load_model(host, path, &p->draft, err)) {
        dm_destroy(p);
        return -1;
    }
    plume_backend *draft_b;
    plume_model_backend(p->draft, &draft_b);
    if (draft_b != host->backend || plume_model_n_vocab(p->draft) != host->n_vocab) {
        dm_destroy(p);
        return plume_err(err, PLUME_ERR_INVALID, "the draft is not on the host's backend or "
                         "has another vocabulary");
    }
    plume_seq_runner_params rp = plume_seq_runner_defaults();
    rp.max_seqs = host->max_seqs;
    rp.kv_max_tokens = (int64_t)host->max_seqs * 64; /* prompts here are short */
    rp.max_batch_tokens = host->max_seqs * 64;
    rp.block_size = 8;
    rp.kv_dtype = PLUME_KV_F32; /* as g_dm.check's (a plume_context), to compare bits */
    p->logits = malloc(sizeof(float) * (size_t)host->max_seqs * (size_t)host->n_vocab);
    p->runs = malloc(sizeof *p->runs * (size_t)host->max_seqs);
    p->base_id = malloc(sizeof *p->base_id * (size_t)host->max_seqs);
    p->base = malloc(sizeof *p->base * (size_t)host->max_seqs);
    if (!p->logits || !p->runs || !p->base_id || !p->base ||
        plume_seq_runner_create(p->draft, &rp, &p->runner, err)) {
        dm_destroy(p);
        return -1;
    }
    for (int32_t i = 0; i < host->max_seqs; i++)
        p->base_id[i] = -1;
    *out = p;
    return 0;
}

/* q = softmax(logits / DM_TEMP); draws from it with the proposer's RNG */
static int32_t dm_draw(plume_proposer *p, const float *logits, float *q)
{
    double mx = logits[0], z = 0;
    for (int32_t v = 1; v < p->n_vocab; v++)
        if (logits[v] > mx)
            mx = logits[v];
    for (int32_t v = 0; v < p->n_vocab; v++)
        z += exp((logits[v] - mx) / DM_TEMP);
    for (int32_t v = 0; v < p->n_vocab; v++)
        q[v] = (float)(exp((logits[v] - mx) / DM_TEMP) / z);
    double u = plume_rng_uniform(&p->rng), cum = 0;
    for (int32_t v = 0; v < p->n_vocab; v++) {
        cum += q[v];
        if (u < cum)
            return v;
    }
    return p->n_vocab - 1;
}

static int32_t *dm_base(plume_proposer *p, int64_t seq_id, bool add)
{
    int32_t free_at = -1;
    for (int32_t i = 0; i < p->max_seqs; i++) {
        if (p->base_id[i] == seq_id)
            return &p->base[i];
        if (p->base_id[i] < 0 && free_at < 0)
            free_at = i;
    }
    if (!add || free_at < 0)
        return NULL;
    p->base_id[free_at] = seq_id;
    return &p->base[free_at];
}

/* One draft forward for every sequence's new tokens (what the draft's KV
 * lacks of its committed tokens), then one per further draft position. */
static int dm_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                      plume_draft *drafts, plume_error *err)
{
    p->calls++;
    if ((int64_t)n > g_dm.max_batch)
        g_dm.max_batch = (int64_t)n;
    for (size_t i = 0; i < n; i++) {
        const plume_sampling_params *sp = seqs[i].sampling;
        if (!sp || sp->temperature != 0.8f || sp->top_k != 4 || sp->seed < 90000)
            g_dm.bad_sampling++;
        int32_t len = plume_seq_runner_length(p->runner, seqs[i].seq_id);
        if (len > seqs[i].n_tokens - 1) { /* accepted() should have truncated it */
            g_dm.stale++;
            if (plume_seq_runner_truncate(p->runner, seqs[i].seq_id, seqs[i].n_tokens - 1, err))
                return -1;
            len = seqs[i].n_tokens - 1;
        }
        if (len < 0)
            len = 0;
        p->runs[i] = (plume_seq_run){seqs[i].seq_id, seqs[i].tokens + len,
                                     seqs[i].n_tokens - len, 1};
        int32_t *b = dm_base(p, seqs[i].seq_id, true);
        if (!b)
            return plume_err(err, PLUME_ERR_INTERNAL, "more live sequences than max_seqs");
        *b = seqs[i].n_tokens;
        drafts[i].n = 0;
        drafts[i].has_probs = 1;
    }
    if (plume_seq_runner_run(p->runner, p->runs, n, p->logits, err))
        return -1;
    /* the draft's KV after truncations holds exactly the committed tokens:
     * its logits are those of a fresh decode of them, bit for bit */
    for (size_t i = 0; i < n && g_dm.check; i++) {
        plume_context_reset(g_dm.check);
        if (plume_decode(g_dm.check, seqs[i].tokens, (size_t)seqs[i].n_tokens, g_dm.check_logits,
                         err))
            return -1;
        if (memcmp(g_dm.check_logits, p->logits + i * (size_t)p->n_vocab,
                   sizeof(float) * (size_t)p->n_vocab))
            g_dm.stale++;
    }
    for (int32_t t = 0;; t++) {
        /* logits rows: one per sequence at t = 0, then one per run of the
         * previous pass (the sequences that draft position t) */
        size_t m = 0, next = 0;
        for (size_t i = 0; i < n; i++) {
            if (t >= seqs[i].k)
                continue;
            const float *row = p->logits + (t == 0 ? i : m++) * (size_t)p->n_vocab;
            int32_t d = dm_draw(p, row, drafts[i].probs + (size_t)t * (size_t)p->n_vocab);
            drafts[i].tokens[t] = d;
            drafts[i].n = t + 1;
            if (t + 1 < seqs[i].k)
                p->runs[next++] = (plume_seq_run){seqs[i].seq_id, &drafts[i].tokens[t], 1, 1};
        }
        if (next == 0)
            break;
        if (plume_seq_runner_run(p->runner, p->runs, next, p->logits, err))
            return -1;
    }
    return 0;
}

/* The draft's KV holds base + n_drafted - 1 positions; the first
 * base + n_accepted of them are the committed tokens. */
static void dm_accepted(plume_proposer *p, int64_t seq_id, int32_t n_drafted, int32_t n_accepted)
{
    (void)n_drafted;
    int32_t *b = dm_base(p, seq_id, false);
    int32_t len = plume_seq_runner_length(p->runner, seq_id);
    if (!b || len < 0)
        return;
    if (*b + n_accepted < len) {
        plume_error err = {0};
        if (plume_seq_runner_truncate(p->runner, seq_id, *b + n_accepted, &err) == 0)
            g_dm.truncations++;
    }
}

static void dm_release(plume_proposer *p, int64_t seq_id)
{
    for (int32_t i = 0; i < p->max_seqs; i++)
        if (p->base_id[i] == seq_id)
            p->base_id[i] = -1;
    plume_seq_runner_release(p->runner, seq_id, NULL);
}

static const plume_proposer_vtable draft_model_vt = {
    sizeof(plume_proposer_vtable), PLUME_PROPOSER_INTERFACE_VERSION, "draft-model-fixture", NULL,
    dm_create, dm_destroy, dm_propose, dm_accepted, dm_release, NULL,
};

static void test_sampled_drafts_follow_target_law(void **state)
{
    fixture *f = *state;
    const int32_t nv = plume_model_n_vocab(f->m);
    const int n_prompt = 6;
    const int32_t *prompt = f->prompt[3];
    plume_request_params rp = law_request(LAW_TOKENS, 0.8f, 4);

    law_tree *t = law_tree_new(f->m, &rp.sampling, prompt, n_prompt, LAW_TOKENS);
    plume_error err = {0};

    /* the engine hands its registry to the proposer's host, which loads
     * the draft (the tiny model again) with it onto the target's backend */
    plume_registry *reg;
    assert_int_equal(plume_registry_create(&reg, &err), 0);
    memset(&g_dm, 0, sizeof g_dm);
    g_dm.target = f->m;
    g_dm.registry = reg;
    assert_int_equal(plume_context_create(f->m, 64, &g_dm.check, &err), 0);
    g_dm.check_logits = malloc(sizeof(float) * (size_t)nv);
    plume_engine_params ep = plume_engine_defaults();
    ep.registry = reg;
    plume_engine *e = test_engine_new(f->m, ep);
    plume_settings *ds;
    assert_int_equal(plume_settings_new("speculative", &ds, &err), 0);
    assert_int_equal(plume_settings_set(ds, "model", g_model_path, &err), 0);
    assert_int_equal(plume_engine_set_proposer(e, &draft_model_vt, ds, 2, &err), 0);
    plume_settings_free(ds);
    assert_int_equal(g_dm.hosts_ok, 1);
    law_sample(t, e, prompt, n_prompt, rp, LAW_REQ, 250, 90000, nv);
    plume_engine_stats st = plume_engine_get_stats(e);
    plume_engine_free(e);
    plume_registry_free(reg);
    plume_context_free(g_dm.check);
    free(g_dm.check_logits);
    assert_int_equal(g_dm.stale, 0);
    assert_int_equal(g_dm.bad_sampling, 0);
    assert_true(g_dm.truncations > 0);  /* rejected drafts were cut from the draft's KV */
    assert_true(g_dm.max_batch > 1);    /* several sequences per draft forward */
    assert_true(st.spec_drafted > 0);
    assert_true(st.spec_accepted > 0 && st.spec_accepted < st.spec_drafted);

    char what[96];
    snprintf(what, sizeof what, "draft-model fixture (drafted %lld, accepted %lld)",
             (long long)st.spec_drafted, (long long)st.spec_accepted);
    law_check_and_free(t, nv, what);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ngram_greedy_unchanged),
        cmocka_unit_test(test_ngram_small_budget_and_preemption),
        cmocka_unit_test(test_garbage_drafts_change_nothing),
        cmocka_unit_test(test_seeded_sampling_reproducible),
        cmocka_unit_test(test_sampled_drafts_follow_target_law),
        cmocka_unit_test(test_swap_on_live_engine),
        cmocka_unit_test(test_abort_from_callback),
        cmocka_unit_test(test_bad_settings),
    };
    return test_main_on_model(argc, argv, "test_spec TINY_MODEL.gguf", &g_model_path, tests,
                              sizeof tests / sizeof *tests, setup, test_free_model_fixture);
}
