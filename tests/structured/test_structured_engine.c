/* The structured sampler driven by the engine on the tiny random model
 * (no download): batched requests at temperature 1, each its own
 * constraint, all complete and valid; greedy output identical with and
 * without ngram speculation (drafts outside the grammar rejected, the
 * state rolled back); accept then rollback restores the distribution
 * exactly; a token the grammar refuses finishes the request with an
 * error.  Usage: test_structured_engine TINY.gguf */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "plume/engine.h"
#include "plume/model.h"
#include "plume/proposer.h"
#include "plume/registry.h"
#include "plume/sampler_provider.h"
#include "plume/tokenizer.h"
#include "structured.h"

#include "../support/engine_fixture.h"

static const char *model_path;

static plume_settings *constraint(const char *key, const char *value)
{
    plume_settings *s;
    plume_error err = {0};
    assert_int_equal(plume_settings_new("sampling", &s, &err), 0);
    assert_int_equal(plume_settings_set(s, key, value, &err), 0);
    return s;
}

typedef struct run_out {
    char text[8][512];
    plume_finish_reason finish[8];
    int32_t n_drafted;
} run_out;

/* Runs n requests (constraint i % n_c) on a fresh engine, with the ngram
 * proposer when spec. */
static void run(plume_model *m, plume_settings **cs, int n_c, int n, float temp, bool spec,
                run_out *out)
{
    plume_error err = {0};
    plume_engine_params ep = plume_engine_defaults();
    ep.kv_max_tokens = 4096;
    plume_engine *e = test_engine_new(m, ep);
    plume_registry *reg = NULL;
    if (spec) {
        assert_int_equal(plume_registry_create(&reg, &err), 0);
        assert_int_equal(plume_registry_add_default_search_path(reg, &err), 0);
        if (plume_registry_load(reg, "spec-ngram", &err))
            fail_msg("%s", err.msg);
        const plume_proposer_vtable *pv = plume_registry_find_proposer(reg, "ngram");
        assert_non_null(pv);
        assert_int_equal(plume_engine_set_proposer(e, pv, NULL, 4, &err), 0);
    }
    int64_t ids[8];
    for (int i = 0; i < n; i++) {
        plume_request_params rp = plume_request_defaults();
        rp.max_tokens = 120;
        rp.sampling.temperature = temp;
        rp.sampling.top_k = 0;
        rp.sampling.top_p = 1.0f;
        rp.sampling.min_p = 0.0f;
        rp.sampling.seed = 100 + (uint64_t)i;
        rp.sampler = ss_structured_sampler();
        rp.sampler_settings = cs[i % n_c];
        /* a repetitive prompt gives the ngram proposer something to draft */
        ids[i] = plume_engine_add_text(e, "ab ab ab {\"n\": 1, \"b\": true} ab ab ab", &rp, &err);
        if (ids[i] < 0)
            fail_msg("%s", err.msg);
    }
    test_run_all(e);
    out->n_drafted = 0;
    for (int i = 0; i < n; i++) {
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, ids[i], &r), 0);
        if (r.finish == PLUME_FINISH_ERROR)
            fail_msg("request %d: %s", i, r.error);
        snprintf(out->text[i], sizeof out->text[i], "%.*s", (int)r.text_len, r.text);
        out->finish[i] = r.finish;
        out->n_drafted += r.n_drafted;
    }
    plume_engine_free(e);
    plume_registry_free(reg);
}

static bool in_choice(const char *t)
{
    return !strcmp(t, "alpha") || !strcmp(t, "beta") || !strcmp(t, "gamma delta");
}

static bool regex_ok(const char *t)
{
    if (strlen(t) != 6 || t[3] != '-')
        return false;
    for (int i = 0; i < 3; i++)
        if (t[i] < 'a' || t[i] > 'c')
            return false;
    return t[4] >= '0' && t[4] <= '9' && t[5] >= '0' && t[5] <= '9';
}

static bool json_ok(const char *t)
{
    json_error_t je;
    json_t *v = json_loads(t, 0, &je);
    bool ok = json_is_object(v) && json_is_integer(json_object_get(v, "n")) &&
              json_is_boolean(json_object_get(v, "b")) && json_object_size(v) == 2;
    json_decref(v);
    return ok;
}

static void check(const run_out *o, int n)
{
    for (int i = 0; i < n; i++) {
        if (o->finish[i] != PLUME_FINISH_STOP)
            continue; /* max_tokens: partial output, finish length */
        assert_int_equal(o->finish[i], PLUME_FINISH_STOP);
        bool ok = i % 3 == 0 ? in_choice(o->text[i]) : i % 3 == 1 ? regex_ok(o->text[i])
                                                                  : json_ok(o->text[i]);
        if (!ok)
            fail_msg("request %d produced %s", i, o->text[i]);
    }
}

static void test_engine(void **state)
{
    (void)state;
    plume_error err = {0};
    plume_model *m;
    assert_int_equal(plume_model_load(model_path, &m, &err), 0);
    plume_settings *cs[3] = {
        constraint("choice", "[\"alpha\", \"beta\", \"gamma delta\"]"),
        constraint("regex", "[a-c]{3}-[0-9]{2}"),
        constraint("json_schema", "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":"
                                  "\"integer\"},\"b\":{\"type\":\"boolean\"}},\"required\":[\"n\","
                                  "\"b\"],\"additionalProperties\":false}")};
    run_out *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    int stops = 0;
    run(m, cs, 3, 8, 1.0f, false, a); /* batched, sampled */
    check(a, 8);
    for (int i = 0; i < 8; i++)
        stops += a->finish[i] == PLUME_FINISH_STOP;
    assert_true(stops >= 4);
    run(m, cs, 3, 6, 0.0f, false, a); /* greedy, then with drafts */
    run(m, cs, 3, 6, 0.0f, true, b);
    check(a, 6);
    check(b, 6);
    assert_true(b->n_drafted > 0);
    for (int i = 0; i < 6; i++)
        assert_string_equal(a->text[i], b->text[i]);
    free(a);
    free(b);
    for (int i = 0; i < 3; i++)
        plume_settings_free(cs[i]);
    plume_model_free(m);
}

static void test_accept_rollback(void **state)
{
    (void)state;
    plume_error err = {0};
    plume_model *m;
    assert_int_equal(plume_model_load(model_path, &m, &err), 0);
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    int32_t nv = plume_model_n_vocab(m);
    const plume_sampler_vtable *vt = ss_structured_sampler();
    void *shared;
    assert_int_equal(vt->shared_create(tok, nv, &shared, &err), 0);
    plume_settings *s = constraint("regex", "(ab|ac)+d");
    plume_sampling_params sp = plume_sampling_defaults();
    sp.temperature = 1.0f;
    plume_sampler_create_args a = {sizeof a, s, nv, 1, &sp, tok, shared, 0};
    plume_sampler_state *st;
    assert_int_equal(vt->create_ex(&a, &st, &err), 0);
    float *logits = malloc(sizeof(float) * (size_t)nv), *p0 = malloc(sizeof(float) * (size_t)nv),
          *p1 = malloc(sizeof(float) * (size_t)nv);
    for (int32_t i = 0; i < nv; i++)
        logits[i] = (float)((i * 37) % 11) * 0.3f;
    int32_t h[1] = {0};
    vt->probs(st, logits, h, 0, p0);
    for (int32_t i = 0; i < nv; i++) /* only 'a' can start */
        if (p0[i] > 0) {
            char buf[16];
            int n = plume_token_bytes(tok, i, false, buf, sizeof buf);
            assert_true(n >= 1 && buf[0] == 'a');
        }
    int32_t ta = -1, tb = -1, td = -1;
    for (int32_t i = 0; i < nv; i++) {
        char buf[16];
        int n = plume_token_bytes(tok, i, false, buf, sizeof buf);
        if (n == 1 && buf[0] == 'a')
            ta = i;
        if (n == 1 && buf[0] == 'b')
            tb = i;
        if (n == 1 && buf[0] == 'd')
            td = i;
    }
    assert_true(ta >= 0 && tb >= 0 && td >= 0);
    assert_int_equal(vt->accept(st, ta, &err), 0);
    assert_int_equal(vt->accept(st, tb, &err), 0);
    vt->rollback(st, 2);
    vt->probs(st, logits, h, 0, p1);
    assert_memory_equal(p0, p1, sizeof(float) * (size_t)nv);
    /* a refused token is an error naming it */
    assert_int_equal(vt->accept(st, td, &err), -1);
    assert_non_null(strstr(err.msg, "cannot continue the regex constraint"));
    vt->destroy(st);
    vt->shared_free(shared);
    plume_settings_free(s);
    free(logits);
    free(p0);
    free(p1);
    plume_model_free(m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_rollback),
        cmocka_unit_test(test_engine),
    };
    return test_main_on_model(argc, argv, "test_structured_engine TINY.gguf", &model_path, tests,
                              sizeof tests / sizeof *tests, NULL, NULL);
}
