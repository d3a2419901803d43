/* Scheduler providers in the engine (tiny model, argv[1]): a scheduler
 * defined here -- shortest prompt first, one sequence at a time -- has its
 * plan called every step and obeyed (requests finish in prompt-length
 * order, never two in a step); one that picks the newest sequences first
 * under a KV cache too small for everyone forces preemption in its own
 * order; the built-in "continuous" taken from the registry with settings
 * behaves as the default.  Greedy outputs stay those of the built-in
 * scheduler (a prompt's logits do not depend on batching).  A plan that
 * breaks the rules fails the step with a message naming the scheduler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/engine.h"
#include "plume/registry.h"
#include "plume/scheduler.h"
#include "plume/settings.h"

#include "../support/engine_fixture.h"

static const char *g_model_path;
static plume_model *g_model;

#define N_REQ 10

typedef struct req {
    int32_t prompt[64];
    int32_t n_prompt;
    int32_t max_tokens;
    int32_t out[32];
    int32_t n_out;
} req;

static req g_reqs[N_REQ];

/* ---- the schedulers under test ---- */

typedef enum { SPF_SERIAL, NEWEST_FIRST, BAD_INDEX, OVER_BUDGET, NOTHING } kind;

struct plume_sched_policy {
    kind k;
};

static int64_t g_plans;       /* plan calls */
static int32_t g_max_picks;   /* most picks in one plan */

static int policy_create(kind k, plume_sched_policy **out, plume_error *err)
{
    *out = malloc(sizeof **out);
    if (!*out)
        return plume_err(err, PLUME_ERR_NOMEM, "test scheduler: out of memory");
    (*out)->k = k;
    return 0;
}
#define CREATE(name, k)                                                                          \
    static int name(const plume_settings *s, plume_sched_policy **out, plume_error *err)          \
    {                                                                                            \
        (void)s;                                                                                 \
        return policy_create(k, out, err);                                                       \
    }
CREATE(create_spf, SPF_SERIAL)
CREATE(create_newest, NEWEST_FIRST)
CREATE(create_bad_index, BAD_INDEX)
CREATE(create_over_budget, OVER_BUDGET)
CREATE(create_nothing, NOTHING)

static void policy_destroy(plume_sched_policy *p) { free(p); }

static int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

static int32_t plan(plume_sched_policy *p, const plume_sched_seq *running, int32_t n_running,
                    const plume_sched_seq *waiting, int32_t n_waiting,
                    const plume_sched_budget *b, plume_sched_pick *picks)
{
    g_plans++;
    int32_t n = 0, tokens = b->max_batched_tokens;
    switch (p->k) {
    case SPF_SERIAL: /* finish the one running, else start the shortest prompt */
        if (n_running > 0) {
            assert_int_equal(n_running, 1);
            int32_t left = running[0].n_tokens - running[0].n_computed;
            picks[n++] = (plume_sched_pick){0, min32(left, tokens), false};
        } else if (n_waiting > 0) {
            int32_t best = 0;
            for (int32_t i = 1; i < n_waiting; i++)
                if (waiting[i].n_prompt < waiting[best].n_prompt)
                    best = i;
            int32_t left = waiting[best].n_tokens - waiting[best].n_computed;
            picks[n++] = (plume_sched_pick){best, min32(left, tokens), true};
        }
        break;
    case NEWEST_FIRST: /* running newest first, then waiting newest first */
        for (int32_t i = n_running - 1; i >= 0 && tokens > 0 && n < b->max_num_seqs; i--) {
            int32_t m = min32(running[i].n_tokens - running[i].n_computed, tokens);
            picks[n++] = (plume_sched_pick){i, m, false};
            tokens -= m;
        }
        for (int32_t i = n_waiting - 1; i >= 0 && tokens > 0 && n < b->max_num_seqs; i--) {
            int32_t m = min32(waiting[i].n_tokens - waiting[i].n_computed, tokens);
            picks[n++] = (plume_sched_pick){i, m, true};
            tokens -= m;
        }
        break;
    case BAD_INDEX:
        picks[n++] = (plume_sched_pick){n_waiting + 3, 1, true};
        break;
    case OVER_BUDGET:
        if (n_waiting > 0)
            picks[n++] = (plume_sched_pick){0, b->max_batched_tokens + 1, true};
        break;
    case NOTHING:
        break;
    }
    if (n > g_max_picks)
        g_max_picks = n;
    return n;
}

#define VTABLE(var, nm, create_fn)                                                               \
    static const plume_scheduler_vtable var = {                                                  \
        .struct_size = sizeof(plume_scheduler_vtable),                                           \
        .interface_version = PLUME_SCHEDULER_INTERFACE_VERSION,                                  \
        .name = nm,                                                                              \
        .create = create_fn,                                                                     \
        .destroy = policy_destroy,                                                               \
        .plan = plan,                                                                            \
    };
VTABLE(spf_serial, "spf-serial", create_spf)
VTABLE(newest_first, "newest-first", create_newest)
VTABLE(bad_index, "bad-index", create_bad_index)
VTABLE(over_budget, "over-budget", create_over_budget)
VTABLE(nothing, "nothing", create_nothing)

/* ---- serving ---- */

static int64_t g_finished[N_REQ];
static int g_n_finished;

static void on_token(void *user, int64_t id, int32_t token, const char *text, size_t len,
                     plume_finish_reason reason)
{
    (void)user;
    (void)token;
    (void)text;
    (void)len;
    if (reason != PLUME_FINISH_NONE && g_n_finished < N_REQ)
        g_finished[g_n_finished++] = id;
}

/* Serves every request on an engine with params ep; checks the outputs
 * against g_reqs (or records them when record); returns the stats. */
static plume_engine_stats serve(plume_engine_params ep, bool record)
{
    plume_error err = {0};
    plume_engine *e = test_engine_new(g_model, ep);
    g_n_finished = 0;
    g_plans = 0;
    g_max_picks = 0;
    int64_t ids[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        plume_request_params rp = test_request(g_reqs[i].max_tokens);
        rp.on_token = on_token;
        ids[i] = plume_engine_add_tokens(e, g_reqs[i].prompt, (size_t)g_reqs[i].n_prompt, &rp,
                                         &err);
        assert_int_equal(ids[i], i);
    }
    test_run_all(e);
    for (int i = 0; i < N_REQ; i++) {
        plume_request_result r;
        assert_int_equal(plume_engine_result(e, ids[i], &r), 0);
        assert_int_equal(r.finish, PLUME_FINISH_LENGTH);
        if (record) {
            memcpy(g_reqs[i].out, r.output_ids, sizeof(int32_t) * r.n_output);
            g_reqs[i].n_out = (int32_t)r.n_output;
        } else {
            assert_int_equal((int)r.n_output, g_reqs[i].n_out);
            assert_memory_equal(r.output_ids, g_reqs[i].out, sizeof(int32_t) * r.n_output);
        }
    }
    assert_int_equal(g_n_finished, N_REQ);
    plume_engine_stats st = test_stats_within(e, &ep);
    plume_engine_free(e);
    return st;
}

/* Reference: the built-in scheduler, everything batched. */
static void test_reference_builtin(void **state)
{
    (void)state;
    serve(plume_engine_defaults(), true);
    assert_int_equal(g_plans, 0); /* the built-in's plan is not this file's */
}

/* Shortest prompt first, one at a time: its plan runs every step, requests
 * finish in prompt-length order, never two in a step, same tokens. */
static void test_plugin_plan_is_obeyed(void **state)
{
    (void)state;
    plume_engine_params ep = plume_engine_defaults();
    ep.scheduler = &spf_serial;
    ep.max_batched_tokens = 16; /* long prompts go in chunks of the plugin's size */
    plume_engine_stats st = serve(ep, false);
    assert_int_equal(st.max_step_seqs, 1);
    assert_int_equal(g_max_picks, 1);
    assert_true(g_plans >= st.steps);
    for (int i = 1; i < N_REQ; i++) {
        int32_t a = g_reqs[g_finished[i - 1]].n_prompt, b = g_reqs[g_finished[i]].n_prompt;
        if (a > b)
            fail_msg("request %lld (%d prompt tokens) finished before request %lld (%d)",
                     (long long)g_finished[i - 1], a, (long long)g_finished[i], b);
    }
    /* ids are not in prompt-length order: FCFS would have finished otherwise */
    bool sorted_by_id = true;
    for (int i = 1; i < N_REQ; i++)
        sorted_by_id = sorted_by_id && g_finished[i] > g_finished[i - 1];
    assert_false(sorted_by_id);
}

/* Newest first under a KV cache too small for all: the engine preempts
 * around the plugin's order (never a sequence it already scheduled), the
 * tokens stay the same. */
static void test_plugin_order_with_preemption(void **state)
{
    (void)state;
    plume_engine_params ep = plume_engine_defaults();
    ep.scheduler = &newest_first;
    ep.block_size = 8;
    ep.kv_max_tokens = 112; /* 14 blocks: the largest request needs 12 */
    ep.max_batched_tokens = 40;
    plume_engine_stats st = serve(ep, false);
    assert_true(st.preemptions > 0);
    assert_true(g_max_picks > 1);
}

/* FCFS under preemption, watched from outside: a scheduler that checks,
 * before every step, that each running sequence arrived before each
 * waiting one, then plans with the built-in "continuous".  A victim of
 * preemption goes back to the front of the waiting queue; a newcomer the
 * step's plan had picked must not be admitted before it (overtaking, and
 * more recompute soon after). */
static const plume_scheduler_vtable *g_builtin;
static int64_t g_watch_violations;

struct watch_policy {
    plume_sched_policy *inner;
};

static int watch_create(const plume_settings *s, plume_sched_policy **out, plume_error *err)
{
    struct watch_policy *w = calloc(1, sizeof *w);
    if (!w)
        return plume_err(err, PLUME_ERR_NOMEM, "test scheduler: out of memory");
    if (g_builtin->create(s, &w->inner, err)) {
        free(w);
        return -1;
    }
    *out = (plume_sched_policy *)w;
    return 0;
}

static void watch_destroy(plume_sched_policy *p)
{
    struct watch_policy *w = (struct watch_policy *)p;
    g_builtin->destroy(w->inner);
    free(w);
}

static int32_t watch_plan(plume_sched_policy *p, const plume_sched_seq *running,
                          int32_t n_running, const plume_sched_seq *waiting, int32_t n_waiting,
                          const plume_sched_budget *budget, plume_sched_pick *picks)
{
    struct watch_policy *w = (struct watch_policy *)p;
    for (int32_t i = 0; i < n_running; i++)
        for (int32_t j = 0; j < n_waiting; j++)
            g_watch_violations += running[i].arrival > waiting[j].arrival;
    g_plans++;
    return g_builtin->plan(w->inner, running, n_running, waiting, n_waiting, budget, picks);
}

static const plume_scheduler_vtable fcfs_watch = {
    .struct_size = sizeof(plume_scheduler_vtable),
    .interface_version = PLUME_SCHEDULER_INTERFACE_VERSION,
    .name = "fcfs-watch",
    .create = watch_create,
    .destroy = watch_destroy,
    .plan = watch_plan,
};

static void test_builtin_fcfs_under_preemption(void **state)
{
    (void)state;
    plume_error err = {0};
    plume_registry *reg;
    assert_int_equal(plume_registry_create(&reg, &err), 0);
    g_builtin = plume_registry_find_scheduler(reg, "continuous");
    assert_non_null(g_builtin);
    /* caches from barely the largest request to a third of the load, step
     * budgets from a few decodes to whole prompts */
    static const int32_t shapes[][3] = {/* block_size, kv tokens, batched tokens */
                                        {8, 112, 40}, {4, 96, 128}, {4, 128, 64},
                                        {16, 160, 128}, {2, 100, 256}};
    int64_t preemptions = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        g_watch_violations = 0;
        plume_engine_params ep = plume_engine_defaults();
        ep.scheduler = &fcfs_watch;
        ep.block_size = shapes[i][0];
        ep.kv_max_tokens = shapes[i][1];
        ep.max_batched_tokens = shapes[i][2];
        plume_engine_stats st = serve(ep, false);
        assert_true(g_plans >= st.steps);
        preemptions += st.preemptions;
        if (g_watch_violations)
            fail_msg("blocks of %d, %d KV tokens, %d per step: %lld times a running sequence "
                     "had arrived after a waiting one",
                     shapes[i][0], shapes[i][1], shapes[i][2], (long long)g_watch_violations);
    }
    assert_true(preemptions > 0);
    plume_registry_free(reg);
}

/* The built-in from the registry, with settings, is the default scheduler. */
static void test_builtin_through_registry(void **state)
{
    (void)state;
    plume_error err = {0};
    plume_registry *reg;
    assert_int_equal(plume_registry_create(&reg, &err), 0);
    const plume_scheduler_vtable *vt = plume_registry_find_scheduler(reg, "continuous");
    assert_non_null(vt);
    assert_non_null(vt->plan);
    plume_settings *s;
    assert_int_equal(plume_settings_new("scheduler", &s, &err), 0);
    assert_int_equal(plume_settings_set(s, "mixed_batches", "false", &err), 0);
    plume_engine_params ep = plume_engine_defaults();
    ep.scheduler = vt;
    ep.scheduler_settings = s;
    ep.max_batched_tokens = 24;
    serve(ep, false);
    plume_engine *e = test_engine_new(g_model, ep);
    assert_string_equal(plume_engine_scheduler_name(e), "continuous");
    plume_engine_free(e);
    /* its own validate runs on the settings */
    assert_int_equal(plume_settings_set(s, "mixed", "true", &err), 0);
    assert_int_equal(plume_engine_create(g_model, &ep, &e, &err), -1);
    assert_non_null(strstr(err.msg, "unknown key 'mixed'"));
    plume_settings_free(s);
    plume_registry_free(reg);
}

static plume_engine *engine_with(const plume_scheduler_vtable *vt, plume_error *err)
{
    plume_engine_params ep = plume_engine_defaults();
    ep.scheduler = vt;
    plume_engine *e = NULL;
    if (plume_engine_create(g_model, &ep, &e, err))
        return NULL;
    plume_request_params rp = plume_request_defaults();
    rp.max_tokens = 2;
    assert_true(plume_engine_add_tokens(e, g_reqs[0].prompt, (size_t)g_reqs[0].n_prompt, &rp,
                                        err) >= 0);
    return e;
}

/* A plan that breaks the rules fails the step and says what to fix. */
static void test_bad_plans_are_refused(void **state)
{
    (void)state;
    static const struct {
        const plume_scheduler_vtable *vt;
        const char *msg;
    } cases[] = {
        {&bad_index, "scheduler 'bad-index' picked waiting index 4, but there are 1 waiting "
                     "sequences"},
        {&over_budget, "scheduler 'over-budget' planned 513 positions, more than "
                       "max_batched_tokens (512)"},
        {&nothing, "scheduler 'nothing' scheduled nothing while 0 sequences are running and 1 "
                   "waiting"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        plume_error err = {0};
        plume_engine *e = engine_with(cases[i].vt, &err);
        assert_non_null(e);
        assert_string_equal(plume_engine_scheduler_name(e), cases[i].vt->name);
        assert_int_equal(plume_engine_step(e, &err), -1);
        if (!strstr(err.msg, cases[i].msg) || !strstr(err.msg, "fix the provider"))
            fail_msg("got '%s', want '%s'", err.msg, cases[i].msg);
        plume_engine_free(e);
    }
    /* a plan without its instance is refused when the engine is created */
    plume_scheduler_vtable no_create = spf_serial;
    no_create.create = NULL;
    no_create.destroy = NULL;
    plume_error err = {0};
    assert_null(engine_with(&no_create, &err));
    assert_non_null(strstr(err.msg, "scheduler 'spf-serial' has a plan slot but no create"));
}

int main(int argc, char **argv)
{
    int load_rc = test_load_model_arg(argc, argv, "test_scheduler_provider TINY_MODEL.gguf", &g_model_path,
                                      &g_model);
    if (load_rc)
        return load_rc;
    uint64_t x = 0x5eed;
    for (int i = 0; i < N_REQ; i++) { /* distinct prompt lengths, unsorted ids */
        req *r = &g_reqs[i];
        r->n_prompt = 3 + (int32_t)((i * 7) % N_REQ) * 6;
        r->max_tokens = 4 + i % 5;
        for (int j = 0; j < r->n_prompt; j++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            r->prompt[j] = (int32_t)(32 + (x >> 33) % 200);
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_builtin),
        cmocka_unit_test(test_plugin_plan_is_obeyed),
        cmocka_unit_test(test_plugin_order_with_preemption),
        cmocka_unit_test(test_builtin_through_registry),
        cmocka_unit_test(test_builtin_fcfs_under_preemption),
        cmocka_unit_test(test_bad_plans_are_refused),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    plume_model_free(g_model);
    return rc;
}
