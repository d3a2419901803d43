/* plume_seq_runner (plume/seq_runner.h) on the generated tiny model
 * (argv[1]): a sequence's logits are bit-identical whether it runs alone or
 * batched with others, for each KV cache (f32, f16 the default, int8); with
 * an f32 cache they equal plume_decode's; truncate then re-run equals a fresh run; a full
 * cache, bad ids and bad shapes are refused with messages that say what to
 * do and leave every sequence as it was; release and truncate give back
 * their blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/model.h"
#include "plume/seq_runner.h"

#include "../support/engine_fixture.h"

static const char *g_model_path;
static plume_model *g_m;
static int32_t g_nv;

#define NS 4
static int32_t g_tok[NS][64];
static const int32_t g_len[NS] = {23, 5, 40, 17};

static int setup(void **state)
{
    (void)state;
    if (test_load_model(g_model_path, &g_m))
        return -1;
    g_nv = plume_model_n_vocab(g_m);
    uint64_t x = 7;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < 64; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            g_tok[s][i] = (int32_t)((x >> 33) % (uint64_t)g_nv);
        }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    plume_model_free(g_m);
    return 0;
}

/* A runner with the KV cache dt and the rest of the defaults. */
static plume_seq_runner *runner_kv(plume_kv_dtype dt, int64_t kv_tokens, int32_t block_size,
                                   int32_t max_batch, int32_t max_seqs)
{
    plume_seq_runner_params p = plume_seq_runner_defaults();
    p.kv_dtype = dt;
    p.kv_max_tokens = kv_tokens;
    p.block_size = block_size;
    p.max_batch_tokens = max_batch;
    p.max_seqs = max_seqs;
    plume_seq_runner *r;
    plume_error err = {0};
    if (plume_seq_runner_create(g_m, &p, &r, &err))
        fail_msg("%s", err.msg);
    return r;
}

/* The same with the default cache (f16). */
static plume_seq_runner *runner(int64_t kv_tokens, int32_t block_size, int32_t max_batch,
                                int32_t max_seqs)
{
    return runner_kv(plume_seq_runner_defaults().kv_dtype, kv_tokens, block_size, max_batch,
                     max_seqs);
}

static float *rows(size_t n) { return malloc(sizeof(float) * n * (size_t)g_nv); }

static void run_ok(plume_seq_runner *r, const plume_seq_run *runs, size_t n, float *logits)
{
    plume_error err = {0};
    if (plume_seq_runner_run(r, runs, n, logits, &err))
        fail_msg("%s", err.msg);
}

/* Each sequence's prompt alone (all positions' logits), then three decode
 * steps of one token each alone; the same batched: all prompts in one run,
 * each decode step one run over all sequences.  Every row is the same bits.
 * The batched runner has another block size and a different history of
 * blocks, so block placement does not matter either. */
static void batched_equals_alone(plume_kv_dtype dt)
{
    const int steps = 3;
    float *alone[NS], *batched[NS];
    for (int s = 0; s < NS; s++) {
        alone[s] = rows((size_t)(g_len[s] + steps));
        batched[s] = rows((size_t)(g_len[s] + steps));
    }
    for (int s = 0; s < NS; s++) {
        plume_seq_runner *r = runner_kv(dt, 256, 16, 64, 2);
        plume_seq_run q = {100 + s, g_tok[s], g_len[s], g_len[s]};
        run_ok(r, &q, 1, alone[s]);
        for (int t = 0; t < steps; t++) {
            q = (plume_seq_run){100 + s, &g_tok[s][g_len[s] + t], 1, 1};
            run_ok(r, &q, 1, alone[s] + (size_t)(g_len[s] + t) * (size_t)g_nv);
        }
        assert_int_equal(plume_seq_runner_length(r, 100 + s), g_len[s] + steps);
        plume_seq_runner_free(r);
    }

    plume_seq_runner *r = runner_kv(dt, 512, 8, 128, NS + 1);
    /* a sequence run and released first, so the batch gets other blocks */
    plume_seq_run warm = {999, g_tok[0], 20, 0};
    run_ok(r, &warm, 1, NULL);
    plume_seq_run q[NS];
    int order[NS] = {2, 0, 3, 1}; /* not in id order */
    int32_t total = 0;
    for (int j = 0; j < NS; j++) {
        int s = order[j];
        q[j] = (plume_seq_run){100 + s, g_tok[s], g_len[s], g_len[s]};
        total += g_len[s];
    }
    float *all = rows((size_t)total);
    assert_int_equal(plume_seq_runner_release(r, 999, NULL), 0);
    run_ok(r, q, NS, all);
    size_t at = 0;
    for (int j = 0; j < NS; j++) {
        int s = order[j];
        memcpy(batched[s], all + at * (size_t)g_nv, sizeof(float) * (size_t)g_len[s] * g_nv);
        at += (size_t)g_len[s];
    }
    for (int t = 0; t < steps; t++) {
        for (int j = 0; j < NS; j++) {
            int s = order[j];
            q[j] = (plume_seq_run){100 + s, &g_tok[s][g_len[s] + t], 1, 1};
        }
        run_ok(r, q, NS, all);
        for (int j = 0; j < NS; j++) {
            int s = order[j];
            memcpy(batched[s] + (size_t)(g_len[s] + t) * (size_t)g_nv, all + (size_t)j * g_nv,
                   sizeof(float) * (size_t)g_nv);
        }
    }
    assert_int_equal(plume_seq_runner_n_seqs(r), NS);
    for (int s = 0; s < NS; s++) {
        assert_int_equal(plume_seq_runner_length(r, 100 + s), g_len[s] + steps);
        for (int i = 0; i < g_len[s] + steps; i++)
            if (memcmp(alone[s] + (size_t)i * g_nv, batched[s] + (size_t)i * g_nv,
                       sizeof(float) * (size_t)g_nv))
                fail_msg("%s cache, sequence %d position %d: batched logits differ from alone",
                         plume_kv_dtype_name(dt), s, i);
        free(alone[s]);
        free(batched[s]);
    }
    free(all);
    plume_seq_runner_free(r);
}

static void test_batched_equals_alone(void **state)
{
    (void)state;
    for (int dt = PLUME_KV_F32; dt <= PLUME_KV_INT8; dt++)
        batched_equals_alone((plume_kv_dtype)dt);
}

/* The logits of the last prompt position match plume_decode's (the single
 * sequence API on the same runner code, with its f32 cache). */
static void test_matches_context(void **state)
{
    (void)state;
    plume_context *c;
    plume_error err = {0};
    assert_int_equal(plume_context_create(g_m, 64, &c, &err), 0);
    float *a = rows(1), *b = rows(1);
    assert_int_equal(plume_decode(c, g_tok[2], (size_t)g_len[2], a, &err), 0);
    plume_context_free(c);
    plume_seq_runner *r = runner_kv(PLUME_KV_F32, 64, 16, 64, 1);
    plume_seq_run q = {0, g_tok[2], g_len[2], 1};
    run_ok(r, &q, 1, b);
    assert_memory_equal(a, b, sizeof(float) * (size_t)g_nv);
    plume_seq_runner_free(r);
    free(a);
    free(b);
}

/* Prompt, 9 drafted tokens (crossing a block boundary), truncate back to
 * the prompt plus 2 of them, then 3 other tokens: the logits of those 3
 * equal a fresh run of the kept tokens followed by them, and the blocks
 * past the kept tokens are free again. */
static void test_truncate_then_rerun(void **state)
{
    (void)state;
    const int32_t bs = 4, n_prompt = 13, n_draft = 9, keep = n_prompt + 2, n_new = 3;
    plume_seq_runner *r = runner(64, bs, 64, 2);
    const int64_t all_free = plume_seq_runner_free_tokens(r);
    plume_error err = {0};
    plume_seq_run q = {7, g_tok[0], n_prompt, 0};
    run_ok(r, &q, 1, NULL);
    q = (plume_seq_run){7, g_tok[1], n_draft, 1};
    float *scratch = rows(1);
    run_ok(r, &q, 1, scratch);
    assert_int_equal(plume_seq_runner_length(r, 7), n_prompt + n_draft);
    assert_int_equal(plume_seq_runner_free_tokens(r),
                     all_free - bs * ((n_prompt + n_draft + bs - 1) / bs));
    assert_int_equal(plume_seq_runner_truncate(r, 7, keep, &err), 0);
    assert_int_equal(plume_seq_runner_length(r, 7), keep);
    assert_int_equal(plume_seq_runner_free_tokens(r), all_free - bs * ((keep + bs - 1) / bs));
    float *got = rows((size_t)n_new), *want = rows((size_t)n_new);
    q = (plume_seq_run){7, g_tok[2], n_new, n_new};
    run_ok(r, &q, 1, got);
    assert_int_equal(plume_seq_runner_length(r, 7), keep + n_new);

    int32_t fresh[64];
    memcpy(fresh, g_tok[0], sizeof(int32_t) * (size_t)n_prompt);
    memcpy(fresh + n_prompt, g_tok[1], sizeof(int32_t) * (size_t)(keep - n_prompt));
    memcpy(fresh + keep, g_tok[2], sizeof(int32_t) * (size_t)n_new);
    plume_seq_runner *f = runner(64, bs, 64, 1);
    q = (plume_seq_run){7, fresh, keep + n_new, n_new};
    run_ok(f, &q, 1, want);
    assert_memory_equal(got, want, sizeof(float) * (size_t)n_new * (size_t)g_nv);
    plume_seq_runner_free(f);

    /* truncating to 0 keeps the sequence, with no blocks */
    assert_int_equal(plume_seq_runner_truncate(r, 7, 0, &err), 0);
    assert_int_equal(plume_seq_runner_length(r, 7), 0);
    assert_int_equal(plume_seq_runner_n_seqs(r), 1);
    assert_int_equal(plume_seq_runner_free_tokens(r), all_free);
    /* and it runs again from position 0 */
    q = (plume_seq_run){7, fresh, keep + n_new, n_new};
    run_ok(r, &q, 1, got);
    assert_memory_equal(got, want, sizeof(float) * (size_t)n_new * (size_t)g_nv);
    plume_seq_runner_free(r);
    free(scratch);
    free(got);
    free(want);
}

/* Nothing changed: the sequence lengths and free tokens are as given. */
static void assert_state(plume_seq_runner *r, int32_t n_seqs, int64_t free_tokens)
{
    assert_int_equal(plume_seq_runner_n_seqs(r), n_seqs);
    assert_int_equal(plume_seq_runner_free_tokens(r), free_tokens);
}

static void test_cache_full(void **state)
{
    (void)state;
    plume_seq_runner *r = runner(30, 8, 64, 4); /* 4 blocks of 8: 32 tokens */
    assert_int_equal(plume_seq_runner_free_tokens(r), 32);
    plume_error err = {0};
    plume_seq_run q[2] = {{1, g_tok[0], 20, 1}, {2, g_tok[1], 20, 1}};
    float *lg = rows(2);
    assert_int_equal(plume_seq_runner_run(r, q, 2, lg, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_RANGE);
    assert_string_equal(err.msg,
                        "seq runner: the KV cache is full: the run needs 6 more blocks (48 tokens) "
                        "but only 4 blocks (32 tokens) are free of 4 blocks of 8 tokens "
                        "(kv_max_tokens 30); raise kv_max_tokens, or truncate or release "
                        "sequences first");
    assert_state(r, 0, 32);
    assert_int_equal(plume_seq_runner_length(r, 1), -1); /* not created */
    /* one fits; a second then needs more than is left */
    run_ok(r, q, 1, lg);
    assert_state(r, 1, 8);
    assert_int_equal(plume_seq_runner_run(r, q + 1, 1, lg, &err), -1);
    assert_non_null(strstr(err.msg, "needs 3 more blocks (24 tokens) but only 1 blocks (8 "
                                    "tokens) are free"));
    assert_state(r, 1, 8);
    /* appending past the last block is refused the same way */
    plume_seq_run more = {1, g_tok[2], 13, 1};
    assert_int_equal(plume_seq_runner_run(r, &more, 1, lg, &err), -1);
    assert_non_null(strstr(err.msg, "KV cache is full"));
    assert_int_equal(plume_seq_runner_length(r, 1), 20);
    more.n_tokens = 12; /* exactly fills the cache */
    run_ok(r, &more, 1, lg);
    assert_state(r, 1, 0);
    free(lg);
    plume_seq_runner_free(r);
}

static void test_release_frees_blocks(void **state)
{
    (void)state;
    plume_seq_runner *r = runner(64, 4, 64, 3);
    plume_error err = {0};
    plume_seq_run q[3] = {{10, g_tok[0], 9, 0}, {11, g_tok[1], 4, 0}, {12, g_tok[2], 1, 0}};
    run_ok(r, q, 3, NULL);
    assert_state(r, 3, 64 - 4 * (3 + 1 + 1));
    assert_int_equal(plume_seq_runner_release(r, 11, &err), 0);
    assert_state(r, 2, 64 - 4 * (3 + 1));
    assert_int_equal(plume_seq_runner_length(r, 11), -1);
    assert_int_equal(plume_seq_runner_release(r, 11, &err), -1);
    assert_string_equal(err.msg,
                        "seq runner: release: no sequence 11 (never run, or released)");
    /* a freed slot takes a new sequence; the id 11 can come back */
    plume_seq_run again[2] = {{11, g_tok[3], 6, 0}, {13, g_tok[3], 3, 0}};
    assert_int_equal(plume_seq_runner_run(r, again, 2, NULL, &err), -1); /* 4 alive > 3 */
    assert_string_equal(err.msg,
                        "seq runner: the run starts 2 new sequences but only 1 of max_seqs (3) "
                        "are free; release finished sequences or raise max_seqs");
    assert_state(r, 2, 64 - 16);
    run_ok(r, again, 1, NULL);
    assert_int_equal(plume_seq_runner_length(r, 11), 6);
    assert_state(r, 3, 64 - 16 - 8);
    for (int64_t id = 10; id <= 12; id++)
        assert_int_equal(plume_seq_runner_release(r, id, NULL), 0);
    assert_state(r, 0, 64);
    plume_seq_runner_free(r);
}

static void expect_refused(plume_seq_runner *r, const plume_seq_run *q, size_t n, float *lg,
                           const char *msg)
{
    plume_error err = {0};
    assert_int_equal(plume_seq_runner_run(r, q, n, lg, &err), -1);
    if (strcmp(err.msg, msg) != 0)
        fail_msg("got:\n  %s\nwanted:\n  %s", err.msg, msg);
    assert_state(r, 1, 64 - 8);
    assert_int_equal(plume_seq_runner_length(r, 5), 8);
}

static void test_bad_ids_and_shapes(void **state)
{
    (void)state;
    plume_seq_runner *r = runner(64, 8, 16, 2);
    plume_seq_run q0 = {5, g_tok[0], 8, 0};
    run_ok(r, &q0, 1, NULL);
    float *lg = rows(16);
    int32_t bad_tok[2] = {1, g_nv};
    char msg[512];

    plume_seq_run neg = {-3, g_tok[0], 1, 0};
    expect_refused(r, &neg, 1, lg, "seq runner: run entry 0 has seq_id -3; ids must be >= 0");
    plume_seq_run dup[2] = {{5, g_tok[0], 1, 0}, {5, g_tok[1], 1, 0}};
    expect_refused(r, dup, 2, lg,
                   "seq runner: sequence 5 appears twice in one run (entries 0 and 1); give each "
                   "sequence's new tokens in one entry");
    plume_seq_run empty = {5, g_tok[0], 0, 0};
    expect_refused(r, &empty, 1, lg,
                   "seq runner: run entry 0 (sequence 5) has 0 tokens; give at least one");
    plume_seq_run toomany = {5, g_tok[0], 2, 3};
    expect_refused(r, &toomany, 1, lg,
                   "seq runner: run entry 0 (sequence 5) asks for 3 logits rows of 2 new tokens; "
                   "n_logits must be in [0, n_tokens]");
    plume_seq_run oov[2] = {{6, g_tok[0], 1, 0}, {5, bad_tok, 2, 0}};
    snprintf(msg, sizeof msg,
             "seq runner: sequence 5: token id %d at index 1 is outside the vocabulary [0, %d) "
             "of the model", g_nv, g_nv);
    expect_refused(r, oov, 2, lg, msg);
    plume_seq_run nolog = {5, g_tok[0], 2, 1};
    expect_refused(r, &nolog, 1, NULL,
                   "seq runner: the run asks for 1 logits rows but logits is NULL");
    plume_seq_run big[2] = {{5, g_tok[0], 9, 0}, {6, g_tok[1], 8, 0}};
    expect_refused(r, big, 2, lg,
                   "seq runner: the run has 17 new tokens, more than max_batch_tokens (16); split "
                   "it into several runs or raise max_batch_tokens");
    plume_seq_run three[3] = {{5, g_tok[0], 1, 0}, {6, g_tok[1], 1, 0}, {7, g_tok[1], 1, 0}};
    expect_refused(r, three, 3, lg,
                   "seq runner: a run of 3 sequences is more than max_seqs (2); split the run or "
                   "raise max_seqs");

    plume_error err = {0};
    assert_int_equal(plume_seq_runner_truncate(r, 6, 0, &err), -1);
    assert_string_equal(err.msg, "seq runner: truncate: no sequence 6 (never run, or released)");
    assert_int_equal(plume_seq_runner_truncate(r, 5, 9, &err), -1);
    assert_string_equal(err.msg, "seq runner: truncate: sequence 5 has 8 tokens; n_keep must be "
                                 "in [0, 8], got 9");
    assert_int_equal(plume_seq_runner_truncate(r, 5, -1, &err), -1);
    assert_int_equal(plume_seq_runner_release(r, -1, &err), -1);
    assert_int_equal(plume_seq_runner_length(r, -1), -1);
    assert_state(r, 1, 64 - 8);
    /* an empty run does nothing */
    assert_int_equal(plume_seq_runner_run(r, NULL, 0, NULL, &err), 0);
    assert_state(r, 1, 64 - 8);
    free(lg);
    plume_seq_runner_free(r);
}

static void test_bad_params(void **state)
{
    (void)state;
    plume_seq_runner_params p = plume_seq_runner_defaults();
    plume_seq_runner *r = NULL;
    plume_error err = {0};
    p.block_size = 0;
    assert_int_equal(plume_seq_runner_create(g_m, &p, &r, &err), -1);
    assert_string_equal(err.msg, "seq runner: block_size must be in [1, 4096] tokens, got 0");
    p = plume_seq_runner_defaults();
    p.max_seqs = 0;
    assert_int_equal(plume_seq_runner_create(g_m, &p, &r, &err), -1);
    assert_string_equal(err.msg, "seq runner: max_seqs must be in [1, 1048576], got 0");
    p = plume_seq_runner_defaults();
    p.kv_max_tokens = 0;
    assert_int_equal(plume_seq_runner_create(g_m, &p, &r, &err), -1);
    assert_non_null(strstr(err.msg, "kv_max_tokens must be in [1, "));
    assert_int_equal(plume_seq_runner_create(NULL, NULL, &r, &err), -1);
    assert_null(r);
    /* NULL params: the defaults, an f16 cache at half the bytes of an f32 one */
    assert_int_equal(plume_seq_runner_defaults().kv_dtype, PLUME_KV_F16);
    assert_int_equal(plume_seq_runner_create(g_m, NULL, &r, &err), 0);
    assert_int_equal(plume_seq_runner_free_tokens(r), plume_seq_runner_defaults().kv_max_tokens);
    assert_ptr_equal(plume_seq_runner_model(r), g_m);
    int64_t f16_bytes = plume_seq_runner_kv_bytes_per_token(r);
    plume_seq_runner_free(r);
    r = runner_kv(PLUME_KV_F32, 64, 16, 64, 1);
    assert_true(f16_bytes > 0);
    assert_int_equal(plume_seq_runner_kv_bytes_per_token(r), 2 * f16_bytes);
    plume_seq_runner_free(r);
    plume_seq_runner_free(NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_matches_context),
        cmocka_unit_test(test_truncate_then_rerun),
        cmocka_unit_test(test_cache_full),
        cmocka_unit_test(test_release_frees_blocks),
        cmocka_unit_test(test_bad_ids_and_shapes),
        cmocka_unit_test(test_bad_params),
    };
    return test_main_on_model(argc, argv, "test_seq_runner TINY_MODEL.gguf", &g_model_path, tests,
                              sizeof tests / sizeof *tests, setup, teardown);
}
