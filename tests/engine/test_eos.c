/* Stopping at end-of-generation, on the tiny model the test suite generates
 * (argv[1]).  Every other engine test sets ignore_eos; this one finds, by
 * running candidate prompts once with ignore_eos, prompts whose greedy
 * continuation produces an end-of-generation token (the tiny model's
 * <|endoftext|> or <|im_end|>) at step n, then checks that without
 * ignore_eos such a request
 *   - alone: finishes with reason STOP after exactly n + 1 tokens (the EOG id
 *     last), its text and its stream being the text of the n tokens before
 *     it (no EOG text, nothing after), and streams no token after the EOG;
 *   - in a batch: stops there while the other sequences (including the same
 *     prompt with ignore_eos) continue to max_tokens with their solo outputs,
 *     no position being computed twice;
 *   - with speculation: a fixture proposer drafts the known greedy
 *     continuation, so the EOG lands inside a draft that verification accepts
 *     in full with tokens after it; none of those may be emitted, and the
 *     engine serves later requests (sharing the stopped one's prefix)
 *     correctly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/engine.h"
#include "plume/proposer.h"
#include "plume/tokenizer.h"

#include "../support/engine_fixture.h"

#define N_CAND 160  /* candidate prompts; ~10% produce an EOG within N_GEN */
#define N_GEN 40    /* tokens generated per candidate */
#define MAX_PROMPT 32

typedef struct cand {
    int32_t prompt[MAX_PROMPT];
    int32_t n_prompt;
    int32_t gen[N_GEN]; /* greedy continuation with ignore_eos */
    int32_t eog_at;     /* index of the first EOG token in gen, -1 if none */
} cand;

typedef struct fixture {
    plume_model *m;
    const plume_tokenizer *tok;
    cand c[N_CAND];
    int eos_idx[N_CAND], n_eos;   /* candidates with an EOG at step >= 1 */
    int plain_idx[N_CAND], n_plain; /* candidates without an EOG */
} fixture;
_Static_assert(offsetof(fixture, m) == 0, "test_free_model_fixture frees the first member");

static const char *g_model_path;
static fixture *g_fixture; /* for the fixture proposer */

static uint64_t rng_state = 0x5eed0e05;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

/* Everything the stream said about one request. */
typedef struct stream {
    int64_t id;
    int32_t tokens[N_GEN + 8];
    int32_t n_tokens;
    char text[4096];
    size_t text_len;
    int n_final;
    plume_finish_reason reason;
} stream;

static void on_token(void *user, int64_t id, int32_t token, const char *text, size_t len,
                     plume_finish_reason reason)
{
    stream *st = user;
    assert_int_equal(id, st->id);
    assert_int_equal(st->n_final, 0); /* nothing after the final callback */
    if (token >= 0) {
        assert_true(st->n_tokens < N_GEN + 8);
        st->tokens[st->n_tokens++] = token;
    }
    assert_true(st->text_len + len < sizeof st->text);
    memcpy(st->text + st->text_len, text, len);
    st->text_len += len;
    st->text[st->text_len] = '\0';
    if (reason != PLUME_FINISH_NONE) {
        assert_int_equal(token, -1);
        st->n_final++;
        st->reason = reason;
    }
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (test_load_model(g_model_path, &f->m)) {
        free(f);
        return -1;
    }
    plume_error err = {0};
    f->tok = plume_model_tokenizer(f->m);
    plume_engine_params ep = plume_engine_defaults();
    ep.kv_max_tokens = 4096;
    plume_engine *e;
    if (plume_engine_create(f->m, &ep, &e, &err)) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return -1;
    }
    int64_t ids[N_CAND];
    for (int i = 0; i < N_CAND; i++) {
        cand *c = &f->c[i];
        c->n_prompt = 1 + (int32_t)rnd(MAX_PROMPT);
        for (int j = 0; j < c->n_prompt; j++)
            c->prompt[j] = (int32_t)(32 + rnd(200));
        plume_request_params rp = test_request(N_GEN);
        ids[i] = plume_engine_add_tokens(e, c->prompt, (size_t)c->n_prompt, &rp, &err);
        if (ids[i] < 0)
            return -1;
    }
    while (plume_engine_has_work(e))
        if (plume_engine_step(e, &err) < 0)
            return -1;
    for (int i = 0; i < N_CAND; i++) {
        cand *c = &f->c[i];
        plume_request_result r;
        if (plume_engine_result(e, ids[i], &r) || r.n_output != N_GEN ||
            r.finish != PLUME_FINISH_LENGTH)
            return -1;
        memcpy(c->gen, r.output_ids, sizeof c->gen);
        c->eog_at = -1;
        for (int t = 0; t < N_GEN && c->eog_at < 0; t++)
            if (plume_tokenizer_is_eog(f->tok, c->gen[t]))
                c->eog_at = t;
        if (c->eog_at >= 1)
            f->eos_idx[f->n_eos++] = i;
        else if (c->eog_at < 0)
            f->plain_idx[f->n_plain++] = i;
    }
    plume_engine_free(e);
    fprintf(stderr, "%d of %d candidate prompts produce an end-of-generation token at steps",
            f->n_eos, N_CAND);
    for (int k = 0; k < f->n_eos; k++)
        fprintf(stderr, " %d", f->c[f->eos_idx[k]].eog_at);
    fprintf(stderr, "\n");
    g_fixture = f;
    *state = f;
    return 0;
}

/* The checks for a request that must have stopped at candidate c's EOG. */
static void check_stopped(const fixture *f, plume_engine *e, int64_t id, const cand *c,
                          const stream *st)
{
    plume_request_result r;
    assert_int_equal(plume_engine_result(e, id, &r), 0);
    const int32_t n = c->eog_at;
    assert_int_equal(r.finish, PLUME_FINISH_STOP);
    assert_string_equal(plume_finish_reason_name(r.finish), "stop");
    /* the tokens before the EOG, then the EOG itself, and nothing after it */
    assert_int_equal((int)r.n_output, n + 1);
    assert_memory_equal(r.output_ids, c->gen, sizeof(int32_t) * (size_t)(n + 1));
    assert_true(plume_tokenizer_is_eog(f->tok, r.output_ids[n]));
    /* the text is that of the n tokens before it: no EOG text */
    char *want;
    plume_error err = {0};
    assert_int_equal(plume_detokenize(f->tok, c->gen, (size_t)n, false, &want, &err), 0);
    assert_int_equal(r.text_len, strlen(want));
    assert_string_equal(r.text, want);
    free(want);
    assert_null(strstr(r.text, "<|im_end|>"));
    assert_null(strstr(r.text, "<|endoftext|>"));
    /* the stream: the same text, the EOG as its last token, one final STOP */
    if (st) {
        assert_int_equal(st->n_final, 1);
        assert_int_equal(st->reason, PLUME_FINISH_STOP);
        assert_int_equal(st->text_len, r.text_len);
        assert_memory_equal(st->text, r.text, r.text_len);
        assert_true(st->n_tokens <= n + 1);
        for (int32_t t = 0; t < st->n_tokens; t++)
            assert_int_equal(st->tokens[t], c->gen[t]);
    }
}

/* The checks for a request that ran all N_GEN tokens: candidate c's greedy
 * continuation. */
static void check_full_length(plume_engine *e, int64_t id, const cand *c)
{
    plume_request_result r;
    assert_int_equal(plume_engine_result(e, id, &r), 0);
    assert_int_equal(r.finish, PLUME_FINISH_LENGTH);
    assert_int_equal((int)r.n_output, N_GEN);
    assert_memory_equal(r.output_ids, c->gen, sizeof c->gen);
}

/* Serves candidate c on e, streaming into st, and checks that it stopped at
 * its EOG (check_stopped). */
static void serve_streamed(const fixture *f, plume_engine *e, const cand *c, stream *st)
{
    plume_error err = {0};
    plume_request_params rp = plume_request_defaults();
    rp.max_tokens = N_GEN;
    rp.on_token = on_token;
    rp.user = st;
    st->id = plume_engine_add_tokens(e, c->prompt, (size_t)c->n_prompt, &rp, &err);
    assert_true(st->id >= 0);
    test_run_all(e);
    check_stopped(f, e, st->id, c, st);
}

static void test_found_cases(void **state)
{
    fixture *f = *state;
    /* the fixture must give the other tests something to check */
    assert_true(f->n_eos >= 3);
    assert_true(f->n_plain >= 3);
}

/* One request alone stops at the EOG. */
static void test_single(void **state)
{
    fixture *f = *state;
    for (int k = 0; k < f->n_eos; k++) {
        const cand *c = &f->c[f->eos_idx[k]];
        plume_engine_params ep = plume_engine_defaults();
        ep.kv_max_tokens = 512;
        plume_engine *e = test_engine_new(f->m, ep);
        stream st = {0};
        serve_streamed(f, e, c, &st);
        plume_engine_stats s = plume_engine_get_stats(e);
        assert_int_equal(s.generated_tokens, c->eog_at + 1);
        plume_engine_free(e);
    }
}

/* All EOG candidates, the same prompts again with ignore_eos, and prompts
 * without an EOG, in one batch (small budgets: chunked prefill, several
 * steps of decoding after the first stops). */
static void test_batch(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    const bool mixed[2] = {true, false};
    for (int v = 0; v < 2; v++) {
        plume_engine_params ep = plume_engine_defaults();
        ep.kv_max_tokens = 4096;
        ep.max_batched_tokens = 48;
        ep.max_num_seqs = 16;
        ep.mixed_batches = mixed[v];
        plume_engine *e = test_engine_new(f->m, ep);
        int64_t stop_ids[N_CAND], cont_ids[N_CAND], plain_ids[N_CAND];
        static stream st[N_CAND];
        memset(st, 0, sizeof st);
        const int n_plain = f->n_plain < 8 ? f->n_plain : 8;
        for (int k = 0; k < f->n_eos; k++) {
            const cand *c = &f->c[f->eos_idx[k]];
            plume_request_params rp = plume_request_defaults();
            rp.max_tokens = N_GEN;
            rp.on_token = on_token;
            rp.user = &st[k];
            stop_ids[k] = st[k].id =
                plume_engine_add_tokens(e, c->prompt, (size_t)c->n_prompt, &rp, &err);
            assert_true(stop_ids[k] >= 0);
            rp = test_request(N_GEN);
            cont_ids[k] = test_add_tokens(e, c->prompt, (size_t)c->n_prompt, &rp);
            if (k < n_plain) {
                const cand *p = &f->c[f->plain_idx[k]];
                rp = plume_request_defaults();
                rp.max_tokens = N_GEN;
                plain_ids[k] = plume_engine_add_tokens(e, p->prompt, (size_t)p->n_prompt, &rp,
                                                       &err);
                assert_true(plain_ids[k] >= 0);
            }
        }
        test_run_all(e);
        /* a stop wastes none of the others' work: every position is
         * computed once (prompt positions the prefix cache did not serve,
         * then each generated token but the last) */
        plume_engine_stats s = plume_engine_get_stats(e);
        int64_t want_positions = -s.cached_prompt_tokens, outputs = 0;
        for (int k = 0; k < f->n_eos; k++) {
            int64_t both[2] = {stop_ids[k], cont_ids[k]};
            for (int j = 0; j < 2 + (k < n_plain); j++) {
                plume_request_result r;
                assert_int_equal(plume_engine_result(e, j < 2 ? both[j] : plain_ids[k], &r), 0);
                want_positions += (int64_t)r.n_prompt + (int64_t)r.n_output - 1;
                outputs += (int64_t)r.n_output;
            }
        }
        assert_int_equal(s.preemptions, 0);
        assert_int_equal(s.generated_tokens, outputs);
        assert_int_equal(s.prefill_tokens + s.decode_tokens, want_positions);
        for (int k = 0; k < f->n_eos; k++) {
            const cand *c = &f->c[f->eos_idx[k]];
            check_stopped(f, e, stop_ids[k], c, &st[k]);
            check_full_length(e, cont_ids[k], c);
            if (k < n_plain)
                check_full_length(e, plain_ids[k], &f->c[f->plain_idx[k]]);
        }
        plume_engine_free(e);
    }
}

/* ---- a proposer that drafts the known greedy continuation ---- */

struct plume_proposer {
    int32_t n_vocab;
};

static int oracle_create(const plume_proposer_host *host, const plume_settings *s,
                         plume_proposer **out, plume_error *err)
{
    (void)s;
    (void)err;
    *out = calloc(1, sizeof **out);
    (*out)->n_vocab = host->n_vocab;
    return 0;
}
static void oracle_destroy(plume_proposer *p) { free(p); }

/* The candidate whose prompt followed by its continuation starts tokens. */
static const cand *which(const int32_t *tokens, int32_t n)
{
    for (int i = 0; i < N_CAND; i++) {
        const cand *c = &g_fixture->c[i];
        int32_t np = c->n_prompt;
        if (n < np || n > np + N_GEN || memcmp(tokens, c->prompt, sizeof(int32_t) * (size_t)np) ||
            memcmp(tokens + np, c->gen, sizeof(int32_t) * (size_t)(n - np)))
            continue;
        return c;
    }
    return NULL;
}

static int oracle_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                          plume_draft *drafts, plume_error *err)
{
    (void)p;
    (void)err;
    for (size_t i = 0; i < n; i++) {
        drafts[i].n = 0;
        const cand *c = which(seqs[i].tokens, seqs[i].n_tokens);
        if (!c)
            continue; /* e.g. a later prompt that extends past the known continuation */
        int32_t at = seqs[i].n_tokens - c->n_prompt, nd = 0;
        while (nd < seqs[i].k && at + nd < N_GEN) {
            drafts[i].tokens[nd] = c->gen[at + nd];
            nd++;
        }
        drafts[i].n = nd;
    }
    return 0;
}

static const plume_proposer_vtable oracle_vt = {
    sizeof(plume_proposer_vtable), PLUME_PROPOSER_INTERFACE_VERSION, "oracle", NULL,
    oracle_create, oracle_destroy, oracle_propose, NULL, NULL, NULL,
};

/* One EOG candidate with speculation, k drafts per step. */
static void spec_one(fixture *f, const cand *c, int32_t k, bool eog_in_first_draft)
{
    plume_error err = {0};
    plume_engine_params ep = plume_engine_defaults();
    ep.kv_max_tokens = 1024;
    plume_engine *e = test_engine_new(f->m, ep);
    assert_int_equal(plume_engine_set_proposer(e, &oracle_vt, NULL, k, &err), 0);
    stream st = {0};
    serve_streamed(f, e, c, &st);
    plume_request_result r;
    assert_int_equal(plume_engine_result(e, st.id, &r), 0);
    /* every draft of the known continuation is accepted: those before and
     * including the EOG made it into the output, none after it */
    if (eog_in_first_draft) {
        assert_int_equal(r.n_drafted, k);
        assert_int_equal(r.n_accepted, c->eog_at);
    }
    assert_true(r.n_accepted <= c->eog_at);
    plume_engine_stats s = plume_engine_get_stats(e);
    assert_int_equal(s.generated_tokens, c->eog_at + 1);
    assert_int_equal(s.spec_emitted, s.generated_tokens - 1); /* all but the prefill's token */
    /* the engine goes on correctly: a prompt that extends the stopped
     * sequence past its EOG (sharing its prefix-cached blocks) gets the
     * known continuation */
    int32_t longer[MAX_PROMPT + N_GEN];
    int32_t nl = c->n_prompt + c->eog_at + 3;
    memcpy(longer, c->prompt, sizeof(int32_t) * (size_t)c->n_prompt);
    memcpy(longer + c->n_prompt, c->gen, sizeof(int32_t) * (size_t)(c->eog_at + 3));
    plume_request_params rp = test_request(N_GEN - (c->eog_at + 3));
    int64_t id2 = test_add_tokens(e, longer, (size_t)nl, &rp);
    test_run_all(e);
    assert_int_equal(plume_engine_result(e, id2, &r), 0);
    assert_int_equal((int)r.n_output, rp.max_tokens);
    assert_memory_equal(r.output_ids, c->gen + c->eog_at + 3, sizeof(int32_t) * r.n_output);
    plume_engine_free(e);
}

static void test_spec_eog_inside_accepted_draft(void **state)
{
    fixture *f = *state;
    int inside = 0;
    for (int i = 0; i < f->n_eos; i++) {
        const cand *c = &f->c[f->eos_idx[i]];
        if (c->eog_at + 3 > N_GEN)
            continue;
        /* k = n + 2: the first decoding step drafts gen[1 .. n+2], so the
         * EOG (gen[n]) sits inside the draft with two drafted tokens after it */
        spec_one(f, c, c->eog_at + 2, true);
        inside++;
        /* and a small k, where the EOG falls wherever the steps put it */
        spec_one(f, c, 3, false);
    }
    assert_true(inside >= 2);
}

/* All EOG and plain candidates in one speculative batch. */
static void test_spec_batch(void **state)
{
    fixture *f = *state;
    plume_error err = {0};
    plume_engine_params ep = plume_engine_defaults();
    ep.kv_max_tokens = 4096;
    ep.max_num_seqs = 16;
    plume_engine *e = test_engine_new(f->m, ep);
    assert_int_equal(plume_engine_set_proposer(e, &oracle_vt, NULL, 5, &err), 0);
    int64_t stop_ids[N_CAND], plain_ids[N_CAND];
    const int n_plain = f->n_plain < 8 ? f->n_plain : 8;
    for (int k = 0; k < f->n_eos; k++) {
        const cand *c = &f->c[f->eos_idx[k]];
        plume_request_params rp = plume_request_defaults();
        rp.max_tokens = N_GEN;
        stop_ids[k] = test_add_tokens(e, c->prompt, (size_t)c->n_prompt, &rp);
    }
    for (int k = 0; k < n_plain; k++) {
        const cand *p = &f->c[f->plain_idx[k]];
        plume_request_params rp = plume_request_defaults();
        rp.max_tokens = N_GEN;
        plain_ids[k] = test_add_tokens(e, p->prompt, (size_t)p->n_prompt, &rp);
    }
    test_run_all(e);
    for (int k = 0; k < f->n_eos; k++)
        check_stopped(f, e, stop_ids[k], &f->c[f->eos_idx[k]], NULL);
    for (int k = 0; k < n_plain; k++)
        check_full_length(e, plain_ids[k], &f->c[f->plain_idx[k]]);
    plume_engine_free(e);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_cases),
        cmocka_unit_test(test_single),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_spec_eog_inside_accepted_draft),
        cmocka_unit_test(test_spec_batch),
    };
    return test_main_on_model(argc, argv, "test_eos TINY_MODEL.gguf", &g_model_path, tests,
                              sizeof tests / sizeof *tests, setup, test_free_model_fixture);
}
