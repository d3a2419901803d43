/* The target's law over the first few generated tokens, for tests that
 * check sampled (speculative) output against it: a tree of every prefix the
 * law allows (top-k keeps it small), each node holding the exact law of the
 * next token (plume_decode's logits shaped by oracle_probs) and the counts
 * the engine produced; then per position a chi-square fit of the tokens
 * given the ones before.  Include after cmocka.h and sample/oracle.h. */
#ifndef PLUME_TEST_TARGET_LAW_H
#define PLUME_TEST_TARGET_LAW_H

#include "plume/engine.h"
#include "plume/model.h"

#include "../support/engine_fixture.h"

#define LAW_MAX_TOKENS 4
#define LAW_MAX_CHILD 8    /* top-k at most 8 */
#define LAW_MAX_NODES 100  /* e.g. top-k 4 over 4 tokens: 85; top-k 7 over 3: 57 */

typedef struct law_node {
    int32_t prefix[LAW_MAX_TOKENS];
    int len, n_child;
    int child[LAW_MAX_CHILD];
    int32_t child_tok[LAW_MAX_CHILD];
    double *p;  /* the target's law after prompt + prefix */
    int *count; /* generated tokens seen after this prefix */
} law_node;

typedef struct law_tree {
    law_node node[LAW_MAX_NODES];
    int n, depth; /* depth: the generated tokens the tree covers */
} law_tree;

/* Adds the node of prefix (len tokens) and, below depth, its children. */
static inline int law_build(law_tree *t, plume_context *c, const plume_sampling_params *sp,
                            const int32_t *prompt, int n_prompt, const int32_t *prefix, int len,
                            int32_t nv)
{
    assert_true(t->n < LAW_MAX_NODES && t->depth <= LAW_MAX_TOKENS);
    int id = t->n++;
    law_node *nd = &t->node[id];
    if (len)
        memcpy(nd->prefix, prefix, sizeof(int32_t) * (size_t)len);
    nd->len = len;
    nd->p = calloc((size_t)nv, sizeof(double));
    nd->count = calloc((size_t)nv, sizeof(int));
    int32_t seq[64];
    assert_true(n_prompt + len <= 64);
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)n_prompt);
    if (len)
        memcpy(seq + n_prompt, prefix, sizeof(int32_t) * (size_t)len);
    float *logits = malloc(sizeof(float) * (size_t)nv);
    plume_error err = {0};
    plume_context_reset(c);
    assert_int_equal(plume_decode(c, seq, (size_t)(n_prompt + len), logits, &err), 0);
    double margin;
    oracle_probs(sp, logits, nv, seq, (size_t)(n_prompt + len), nd->p, &margin);
    free(logits);
    assert_true(margin > 1e-3);
    if (len + 1 < t->depth && len + 1 < LAW_MAX_TOKENS)
        for (int32_t v = 0; v < nv; v++) {
            if (t->node[id].p[v] <= 0)
                continue;
            int32_t next[LAW_MAX_TOKENS];
            if (len)
                memcpy(next, prefix, sizeof(int32_t) * (size_t)len);
            next[len] = v;
            assert_true(t->node[id].n_child < LAW_MAX_CHILD);
            int k = t->node[id].n_child++;
            t->node[id].child_tok[k] = v;
            t->node[id].child[k] = law_build(t, c, sp, prompt, n_prompt, next, len + 1, nv);
        }
    return id;
}

/* A tree of depth tokens after prompt under sp, on model m. */
static inline law_tree *law_tree_new(const plume_model *m, const plume_sampling_params *sp,
                                     const int32_t *prompt, int n_prompt, int depth)
{
    law_tree *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->depth = depth;
    plume_context *c;
    plume_error err = {0};
    assert_int_equal(plume_context_create(m, 64, &c, &err), 0);
    law_build(t, c, sp, prompt, n_prompt, NULL, 0, plume_model_n_vocab(m));
    plume_context_free(c);
    return t;
}

/* Counts one request's first depth generated tokens along the tree (a
 * token the law excludes ends the walk; law_check counts it impossible). */
static inline void law_count(law_tree *t, const int32_t *out, int32_t nv)
{
    int node = 0;
    for (int j = 0; j < t->depth && node >= 0; j++) {
        int32_t tok = out[j];
        assert_true(tok >= 0 && tok < nv);
        t->node[node].count[tok]++;
        int next = -1;
        for (int k = 0; k < t->node[node].n_child; k++)
            if (t->node[node].child_tok[k] == tok)
                next = t->node[node].child[k];
        node = next;
    }
}

/* The request the law is sampled with: tokens tokens at temperature and
 * top_k (at most LAW_MAX_CHILD), top-p and min-p off, and a repetition
 * penalty of 1.3 over the whole context, so that the law checks its
 * shaping too. */
static inline plume_request_params law_request(int32_t tokens, float temperature, int32_t top_k)
{
    plume_request_params rp = test_request(tokens);
    rp.sampling.temperature = temperature;
    rp.sampling.top_k = top_k;
    rp.sampling.top_p = 1.0f;
    rp.sampling.min_p = 0.0f;
    rp.sampling.repetition_penalty = 1.3f;
    rp.sampling.repeat_last_n = -1;
    return rp;
}

/* Serves n_req requests of prompt under rp on e, at most batch at a time,
 * request i seeded seed0 + i, and counts each one's output (the tree's depth
 * in tokens, rp.max_tokens) into t. */
static inline void law_sample(law_tree *t, plume_engine *e, const int32_t *prompt, int n_prompt,
                              plume_request_params rp, int n_req, int batch, uint64_t seed0,
                              int32_t nv)
{
    plume_error err = {0};
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)batch);
    assert_non_null(ids);
    for (int base = 0; base < n_req; base += batch) {
        int n = n_req - base < batch ? n_req - base : batch;
        for (int r = 0; r < n; r++) {
            rp.sampling.seed = seed0 + (uint64_t)(base + r);
            ids[r] = plume_engine_add_tokens(e, prompt, (size_t)n_prompt, &rp, &err);
            assert_true(ids[r] >= 0);
        }
        test_run_all(e);
        for (int r = 0; r < n; r++) {
            plume_request_result res;
            assert_int_equal(plume_engine_result(e, ids[r], &res), 0);
            assert_int_equal((int)res.n_output, t->depth);
            law_count(t, res.output_ids, nv);
            plume_engine_release(e, ids[r]);
        }
    }
    free(ids);
}

/* Fits each generated position given the ones before (chi-square, p >
 * 1e-5), prints a failing position (or every one with PLUME_TEST_VERBOSE),
 * frees the tree and asserts that nothing failed and no excluded token was
 * generated.  what names the run in the messages. */
static inline void law_check_and_free(law_tree *t, int32_t nv, const char *what)
{
    double *ex = malloc(sizeof(double) * (size_t)nv);
    int failed = 0, impossible = 0;
    for (int j = 0; j < t->depth; j++) {
        double chi = 0;
        int dof = 0;
        for (int i = 0; i < t->n; i++) {
            law_node *nd = &t->node[i];
            if (nd->len != j)
                continue;
            int n_seen = 0;
            for (int32_t v = 0; v < nv; v++)
                n_seen += nd->count[v];
            for (int32_t v = 0; v < nv; v++)
                ex[v] = n_seen * nd->p[v];
            if (n_seen)
                oracle_pearson(ex, nd->count, nv, &chi, &dof, &impossible);
        }
        double pv = dof > 0 ? oracle_chi2_sf(chi, dof) : 1.0;
        if (getenv("PLUME_TEST_VERBOSE") || !(pv > 1e-5))
            fprintf(stderr, "%s: generated token %d given the ones before: chi2 %.1f, %d dof, "
                            "p-value %.3g\n",
                    what, j, chi, dof, pv);
        failed += !(pv > 1e-5);
    }
    free(ex);
    for (int i = 0; i < t->n; i++) {
        free(t->node[i].p);
        free(t->node[i].count);
    }
    free(t);
    assert_int_equal(impossible, 0);
    assert_int_equal(failed, 0);
}

#endif
