/* Block manager tests, written from engine/block_manager.h's promises:
 * allocation and exhaustion, reference counts under sharing, prefix hits
 * and misses, forced hash collisions (through the per-manager hash hook),
 * eviction order, truncation, commit, duplicates, and a seeded random
 * stress run that checks every invariant after every operation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/block_manager.h"
#include "engine/block_manager_internal.h"

#define BS 4

static plume_block_manager *make(int32_t n_blocks, bool caching)
{
    plume_block_manager *bm = NULL;
    plume_error err = {0};
    int rc = plume_bm_create(n_blocks, BS, caching, &bm, &err);
    if (rc != 0)
        fail_msg("plume_bm_create: %s", err.msg);
    return bm;
}

static void check(const plume_block_manager *bm)
{
    char why[256];
    if (plume_bm_check(bm, why, sizeof why) != 0)
        fail_msg("block manager inconsistent: %s", why);
}

/* A sequence run through the usual path: match, ensure, commit all. */
static void run_prompt(plume_block_manager *bm, plume_block_table *bt, const int32_t *tokens,
                       int64_t n)
{
    plume_bm_match_prefix(bm, bt, tokens, n, (int32_t)((n - 1) / BS));
    assert_int_equal(plume_bm_ensure(bm, bt, n), 0);
    plume_bm_commit(bm, bt, tokens, n);
    check(bm);
}

/* Fills dst[0..n) with base, base + 1, ... */
static void iota(int32_t *dst, int n, int32_t base)
{
    for (int i = 0; i < n; i++)
        dst[i] = base + i;
}

static void test_create_validation(void **state)
{
    (void)state;
    plume_block_manager *bm = (plume_block_manager *)1;
    plume_error err = {0};
    assert_int_equal(plume_bm_create(0, 16, true, &bm, &err), -1);
    assert_null(bm);
    assert_int_equal(err.code, PLUME_ERR_INVALID);
    assert_non_null(strstr(err.msg, "n_blocks"));
    assert_int_equal(plume_bm_create(-5, 16, true, &bm, &err), -1);
    assert_non_null(strstr(err.msg, "n_blocks"));
    assert_int_equal(plume_bm_create(8, 0, false, &bm, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_INVALID);
    assert_non_null(strstr(err.msg, "block_size"));
    assert_int_equal(plume_bm_create(8, -1, true, &bm, NULL), -1);
    assert_int_equal(plume_bm_create(8, 16, true, NULL, &err), -1);

    assert_int_equal(plume_bm_create(8, 16, true, &bm, &err), 0);
    assert_non_null(bm);
    assert_int_equal(plume_bm_block_size(bm), 16);
    assert_int_equal(plume_bm_n_free(bm), 8);
    plume_block_stats s = plume_bm_stats(bm);
    assert_int_equal(s.n_blocks, 8);
    assert_int_equal(s.n_free, 8);
    assert_int_equal(s.n_cached_free, 0);
    assert_int_equal(s.prefix_queries, 0);
    assert_int_equal(s.prefix_hits, 0);
    assert_int_equal(s.evictions, 0);
    check(bm);
    plume_bm_free(bm);
    plume_bm_free(NULL);
}

static void test_allocation_and_exhaustion(void **state)
{
    (void)state;
    plume_block_manager *bm = make(8, true);
    assert_int_equal(plume_bm_blocks_for(bm, 0), 0);
    assert_int_equal(plume_bm_blocks_for(bm, -3), 0);
    assert_int_equal(plume_bm_blocks_for(bm, 1), 1);
    assert_int_equal(plume_bm_blocks_for(bm, 4), 1);
    assert_int_equal(plume_bm_blocks_for(bm, 5), 2);
    assert_int_equal(plume_bm_blocks_for(bm, 32), 8);
    assert_int_equal(plume_bm_blocks_for(bm, INT64_MAX), INT32_MAX);

    plume_block_table a = {0}, b = {0};
    assert_int_equal(plume_bm_ensure(bm, &a, 10), 0);
    assert_int_equal(a.n, 3);
    assert_int_equal(plume_bm_n_free(bm), 5);
    assert_int_equal(plume_bm_ensure(bm, &a, 12), 0); /* already fits */
    assert_int_equal(a.n, 3);
    assert_int_equal(plume_bm_ensure(bm, &a, 0), 0);
    assert_int_equal(a.n, 3);

    /* 6 blocks wanted, 5 free: fails, b untouched, nothing taken. */
    assert_int_equal(plume_bm_ensure(bm, &b, 21), -1);
    assert_int_equal(b.n, 0);
    assert_int_equal(plume_bm_n_free(bm), 5);
    assert_int_equal(plume_bm_ensure(bm, &b, 20), 0);
    assert_int_equal(b.n, 5);
    assert_int_equal(plume_bm_n_free(bm), 0);

    int32_t saved[3];
    memcpy(saved, a.ids, sizeof saved);
    assert_int_equal(plume_bm_ensure(bm, &a, 13), -1);
    assert_int_equal(a.n, 3);
    assert_memory_equal(a.ids, saved, sizeof saved);
    assert_int_equal(plume_bm_ensure(bm, &a, INT64_MAX), -1);
    assert_int_equal(a.n, 3);

    /* Every block is held exactly once, ids in range. */
    int seen[8] = {0};
    for (int i = 0; i < a.n; i++)
        seen[a.ids[i]]++;
    for (int i = 0; i < b.n; i++)
        seen[b.ids[i]]++;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(seen[i], 1);
        assert_int_equal(plume_bm_ref_count(bm, i), 1);
    }
    check(bm);

    plume_bm_release(bm, &a);
    assert_int_equal(a.n, 0);
    assert_int_equal(plume_bm_n_free(bm), 3);
    plume_bm_release(bm, &b);
    assert_int_equal(plume_bm_n_free(bm), 8);
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 0); /* nothing committed */
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_bm_free(bm);
}

static void test_shared_prefix_refcounts(void **state)
{
    (void)state;
    plume_block_manager *bm = make(16, true);
    int32_t t[15];
    iota(t, 15, 100);

    plume_block_table a = {0}, b = {0};
    assert_int_equal(plume_bm_match_prefix(bm, &a, t, 12, 2), 0);
    assert_int_equal(plume_bm_ensure(bm, &a, 12), 0);
    plume_bm_commit(bm, &a, t, 12);
    assert_int_equal(a.n_hashed, 3);
    assert_int_equal(plume_bm_n_free(bm), 13);

    /* b's prompt extends a's: the three full blocks are shared. */
    assert_int_equal(plume_bm_match_prefix(bm, &b, t, 15, (15 - 1) / BS), 12);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.n_hashed, 3);
    assert_memory_equal(b.ids, a.ids, 3 * sizeof(int32_t));
    for (int i = 0; i < 3; i++)
        assert_int_equal(plume_bm_ref_count(bm, a.ids[i]), 2);
    assert_int_equal(plume_bm_n_free(bm), 13); /* sharing took nothing */
    assert_int_equal(plume_bm_ensure(bm, &b, 15), 0);
    assert_int_equal(b.n, 4);
    assert_int_equal(plume_bm_n_free(bm), 12);
    check(bm);

    /* Releasing a keeps the shared blocks for b. */
    plume_bm_release(bm, &a);
    assert_int_equal(plume_bm_n_free(bm), 12);
    for (int i = 0; i < 3; i++)
        assert_int_equal(plume_bm_ref_count(bm, b.ids[i]), 1);
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 0);
    check(bm);

    plume_bm_release(bm, &b);
    plume_block_stats s = plume_bm_stats(bm);
    assert_int_equal(s.n_free, 16);
    assert_int_equal(s.n_cached_free, 3); /* the committed prefix survives */
    assert_int_equal(s.prefix_hits, 3);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_bm_free(bm);
}

static void test_prefix_hits_and_misses(void **state)
{
    (void)state;
    plume_block_manager *bm = make(32, true);
    int32_t t[16];
    iota(t, 16, 7);
    plume_block_table a = {0}, q = {0};
    run_prompt(bm, &a, t, 16); /* four full blocks registered */
    assert_int_equal(a.n_hashed, 4);

    /* Same prompt: all four blocks, unless max_blocks says fewer. */
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 16, 100), 16);
    assert_memory_equal(q.ids, a.ids, 4 * sizeof(int32_t));
    plume_bm_release(bm, &q);
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 16, 2), 8);
    assert_int_equal(q.n, 2);
    plume_bm_release(bm, &q);
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 16, 0), 0);
    assert_int_equal(q.n, 0);

    /* Full-block granularity: 11 matching tokens cover two blocks. */
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 11, 100), 8);
    plume_bm_release(bm, &q);
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 3, 100), 0);

    /* A different token in block 2 shares only block 1. */
    int32_t u[16];
    memcpy(u, t, sizeof u);
    u[5] = 999;
    assert_int_equal(plume_bm_match_prefix(bm, &q, u, 16, 100), 4);
    assert_int_equal(q.ids[0], a.ids[0]);
    plume_bm_release(bm, &q);
    memcpy(u, t, sizeof u);
    u[0] = 999;
    assert_int_equal(plume_bm_match_prefix(bm, &q, u, 16, 100), 0);
    memcpy(u, t, sizeof u);
    u[15] = 999;
    assert_int_equal(plume_bm_match_prefix(bm, &q, u, 16, 100), 12);
    plume_bm_release(bm, &q);
    check(bm);

    /* The partial last block is never shared. */
    int32_t v[6];
    iota(v, 6, 500);
    plume_block_table c = {0};
    assert_int_equal(plume_bm_ensure(bm, &c, 6), 0);
    plume_bm_commit(bm, &c, v, 6);
    assert_int_equal(c.n_hashed, 1);
    assert_int_equal(plume_bm_match_prefix(bm, &q, v, 6, 100), 4);
    plume_bm_release(bm, &q);
    plume_bm_release(bm, &c);
    assert_int_equal(plume_bm_match_prefix(bm, &q, v, 6, 100), 4);
    plume_bm_release(bm, &q);

    /* A table that already holds blocks is not matched into. */
    assert_int_equal(plume_bm_ensure(bm, &q, 1), 0);
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 16, 100), 0);
    assert_int_equal(q.n, 1);
    plume_bm_release(bm, &q);

    plume_block_stats s = plume_bm_stats(bm);
    assert_true(s.prefix_hits > 0 && s.prefix_hits <= s.prefix_queries);
    plume_bm_release(bm, &a);
    assert_int_equal(plume_bm_n_free(bm), 32);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&c);
    plume_block_table_free(&q);
    plume_bm_free(bm);
}

static void test_no_prefix_caching(void **state)
{
    (void)state;
    plume_block_manager *bm = make(8, false);
    int32_t t[12];
    iota(t, 12, 1);
    plume_block_table a = {0}, b = {0};
    assert_int_equal(plume_bm_match_prefix(bm, &a, t, 12, 100), 0);
    assert_int_equal(plume_bm_ensure(bm, &a, 12), 0);
    plume_bm_commit(bm, &a, t, 12);
    assert_int_equal(a.n_hashed, 0);
    assert_int_equal(plume_bm_match_prefix(bm, &b, t, 12, 100), 0);
    assert_int_equal(b.n, 0);
    plume_bm_release(bm, &a);
    plume_block_stats s = plume_bm_stats(bm);
    assert_int_equal(s.n_free, 8);
    assert_int_equal(s.n_cached_free, 0);
    assert_int_equal(s.prefix_queries, 0);
    assert_int_equal(plume_bm_match_prefix(bm, &b, t, 12, 100), 0);
    /* Truncation works to the block without a registered prefix. */
    assert_int_equal(plume_bm_ensure(bm, &a, 12), 0);
    plume_bm_truncate(bm, &a, 0);
    assert_int_equal(a.n, 0);
    assert_int_equal(plume_bm_n_free(bm), 8);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_bm_free(bm);
}

static uint64_t constant_hash(uint64_t prev, const int32_t *ids, int32_t n, void *ctx)
{
    (void)prev;
    (void)ids;
    (void)n;
    (*(int *)ctx)++;
    return 42;
}

/* Ignores the chain: the same ids hash the same after any prefix. */
static uint64_t unchained_hash(uint64_t prev, const int32_t *ids, int32_t n, void *ctx)
{
    (void)prev;
    (void)ctx;
    return plume_bm_default_hash(PLUME_BM_HASH_SEED, ids, n, NULL);
}

static void test_hash_collision_is_a_miss(void **state)
{
    (void)state;
    plume_block_manager *bm = make(8, true);
    int calls = 0;
    plume_bm_set_hash_fn(bm, constant_hash, &calls);
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8};

    plume_block_table a = {0}, b = {0}, q = {0};
    run_prompt(bm, &a, x, 4);
    assert_true(calls > 0); /* the override is in use */
    assert_true(plume_bm_is_cached(bm, a.ids[0]));

    /* y hashes like x but its ids differ: a miss, not x's KV. */
    assert_int_equal(plume_bm_match_prefix(bm, &q, y, 4, 1), 0);
    assert_int_equal(q.n, 0);
    assert_int_equal(plume_bm_ensure(bm, &b, 4), 0);
    plume_bm_commit(bm, &b, y, 4);
    assert_int_equal(b.n_hashed, 1);
    assert_false(plume_bm_is_cached(bm, b.ids[0])); /* the existing mapping is kept */
    assert_int_equal(plume_bm_match_prefix(bm, &q, y, 4, 1), 0);
    assert_int_equal(plume_bm_match_prefix(bm, &q, x, 4, 1), 4);
    assert_int_equal(q.ids[0], a.ids[0]);
    plume_bm_release(bm, &q);

    /* The loser holds nothing findable: freed, it is not counted cached. */
    plume_bm_release(bm, &b);
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 0);
    plume_bm_release(bm, &a);
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 1);
    assert_int_equal(plume_bm_match_prefix(bm, &q, y, 4, 1), 0);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_block_table_free(&q);
    plume_bm_free(bm);
}

static void test_chain_collision_is_a_miss(void **state)
{
    (void)state;
    plume_block_manager *bm = make(16, true);
    plume_bm_set_hash_fn(bm, unchained_hash, NULL);
    /* a = [X | Y], b = [Z | W]; the query [Z | Y] finds Y's block under
     * the same hash, with the same ids, but after a different prefix. */
    int32_t ta[8] = {1, 1, 1, 1, 2, 2, 2, 2};
    int32_t tb[8] = {3, 3, 3, 3, 4, 4, 4, 4};
    int32_t tq[9] = {3, 3, 3, 3, 2, 2, 2, 2, 0};
    plume_block_table a = {0}, b = {0}, q = {0};
    run_prompt(bm, &a, ta, 8);
    run_prompt(bm, &b, tb, 8);

    assert_int_equal(plume_bm_match_prefix(bm, &q, tq, 9, 2), 4);
    assert_int_equal(q.ids[0], b.ids[0]);
    plume_bm_release(bm, &q);
    assert_int_equal(plume_bm_match_prefix(bm, &q, ta, 8, 2), 8);
    assert_memory_equal(q.ids, a.ids, 2 * sizeof(int32_t));
    plume_bm_release(bm, &q);

    /* Computing [Z | Y] for real registers its own Y block, which is not
     * confused with a's either way. */
    run_prompt(bm, &q, tq, 9);
    assert_int_equal(q.n_hashed, 2);
    assert_int_not_equal(q.ids[1], a.ids[1]);
    plume_block_table r = {0};
    assert_int_equal(plume_bm_match_prefix(bm, &r, ta, 8, 2), 8);
    assert_int_equal(r.ids[1], a.ids[1]);
    plume_bm_release(bm, &r);
    plume_bm_release(bm, &q);
    plume_bm_release(bm, &a);
    plume_bm_release(bm, &b);
    assert_int_equal(plume_bm_n_free(bm), 16);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_block_table_free(&q);
    plume_block_table_free(&r);
    plume_bm_free(bm);
}

static int64_t hit_len(plume_block_manager *bm, const int32_t *t, int64_t n)
{
    plume_block_table q = {0};
    int64_t got = plume_bm_match_prefix(bm, &q, t, n, 100);
    plume_bm_release(bm, &q);
    plume_block_table_free(&q);
    return got;
}

static void test_eviction_order(void **state)
{
    (void)state;
    plume_block_manager *bm = make(8, true);
    int32_t p[3][4];
    plume_block_table s[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        iota(p[i], 4, 10 * (i + 1));
        run_prompt(bm, &s[i], p[i], 4);
    }
    /* A sequence that never commits: its block holds nothing. */
    plume_block_table u = {0};
    assert_int_equal(plume_bm_ensure(bm, &u, 4), 0);
    for (int i = 0; i < 3; i++)
        plume_bm_release(bm, &s[i]); /* freed in order p0, p1, p2 */
    plume_bm_release(bm, &u);
    plume_block_stats st = plume_bm_stats(bm);
    assert_int_equal(st.n_free, 8);
    assert_int_equal(st.n_cached_free, 3);

    /* Five blocks hold nothing cached (including u's, freed last): they go
     * first, before any cached prefix. */
    plume_block_table x = {0};
    assert_int_equal(plume_bm_ensure(bm, &x, 5 * BS), 0);
    assert_int_equal(plume_bm_stats(bm).evictions, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(hit_len(bm, p[i], 4), 4);

    /* The hits above re-freed p0, p1, p2 in that order; touch p0 again so
     * p1 is now the least recently freed. */
    assert_int_equal(hit_len(bm, p[0], 4), 4);
    assert_int_equal(plume_bm_ensure(bm, &x, 6 * BS), 0);
    st = plume_bm_stats(bm);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.n_cached_free, 2);
    assert_int_equal(hit_len(bm, p[1], 4), 0);
    assert_int_equal(hit_len(bm, p[2], 4), 4);
    assert_int_equal(hit_len(bm, p[0], 4), 4);
    /* Now p2 is the oldest, then p0. */
    assert_int_equal(plume_bm_ensure(bm, &x, 7 * BS), 0);
    assert_int_equal(hit_len(bm, p[2], 4), 0);
    assert_int_equal(hit_len(bm, p[0], 4), 4);
    assert_int_equal(plume_bm_stats(bm).evictions, 2);
    check(bm);
    plume_bm_release(bm, &x);

    /* Within one sequence the tail is freed first, so the leading blocks
     * outlive it. */
    int32_t t[12];
    iota(t, 12, 300);
    plume_block_table a = {0};
    run_prompt(bm, &a, t, 12);
    plume_bm_release(bm, &a);
    /* 8 free: 3 of a's, p0 (cached, older) and 4 empty. */
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 4);
    assert_int_equal(plume_bm_ensure(bm, &x, 4 * BS), 0); /* the empty ones */
    assert_int_equal(hit_len(bm, t, 12), 12);
    plume_bm_release(bm, &x);
    /* Re-hit freed a's blocks last-first again; p0 is oldest: 4 empty + p0 +
     * a's third block go when 6 are taken. */
    assert_int_equal(plume_bm_ensure(bm, &x, 6 * BS), 0);
    assert_int_equal(hit_len(bm, p[0], 4), 0);
    assert_int_equal(hit_len(bm, t, 12), 8);
    check(bm);
    plume_bm_release(bm, &x);
    assert_int_equal(plume_bm_n_free(bm), 8);
    for (int i = 0; i < 3; i++)
        plume_block_table_free(&s[i]);
    plume_block_table_free(&u);
    plume_block_table_free(&x);
    plume_block_table_free(&a);
    plume_bm_free(bm);
}

static void test_truncate(void **state)
{
    (void)state;
    plume_block_manager *bm = make(16, true);
    int32_t t[20];
    iota(t, 20, 40);
    plume_block_table a = {0};
    assert_int_equal(plume_bm_ensure(bm, &a, 20), 0);
    assert_int_equal(a.n, 5);
    int32_t ids[5];
    memcpy(ids, a.ids, sizeof ids);
    plume_bm_commit(bm, &a, t, 8);
    assert_int_equal(a.n_hashed, 2);

    plume_bm_truncate(bm, &a, 20); /* nothing to drop */
    assert_int_equal(a.n, 5);
    plume_bm_truncate(bm, &a, 13); /* 13 positions need 4 blocks */
    assert_int_equal(a.n, 4);
    assert_memory_equal(a.ids, ids, 4 * sizeof(int32_t));
    assert_int_equal(plume_bm_n_free(bm), 12);
    assert_int_equal(plume_bm_ref_count(bm, ids[4]), 0);
    plume_bm_truncate(bm, &a, 9);
    assert_int_equal(a.n, 3);
    assert_int_equal(plume_bm_ref_count(bm, ids[3]), 0);
    assert_int_equal(plume_bm_ref_count(bm, ids[2]), 1);
    assert_int_equal(plume_bm_n_free(bm), 13);
    /* Never below the registered prefix. */
    plume_bm_truncate(bm, &a, 8);
    assert_int_equal(a.n, 2);
    plume_bm_truncate(bm, &a, 0);
    assert_int_equal(a.n, 2);
    assert_int_equal(a.n_hashed, 2);
    assert_int_equal(plume_bm_n_free(bm), 14);
    /* Truncated, never-committed blocks are not cached. */
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 0);

    /* Truncating a shared table drops only its own references. */
    plume_block_table b = {0};
    assert_int_equal(plume_bm_match_prefix(bm, &b, t, 9, 2), 8);
    assert_int_equal(plume_bm_ensure(bm, &b, 12), 0);
    plume_bm_truncate(bm, &b, 8);
    assert_int_equal(b.n, 2);
    assert_int_equal(plume_bm_ref_count(bm, ids[0]), 2);
    assert_int_equal(plume_bm_n_free(bm), 14);
    check(bm);
    plume_bm_release(bm, &a);
    plume_bm_release(bm, &b);
    assert_int_equal(plume_bm_n_free(bm), 16);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_bm_free(bm);
}

static void test_commit_partial_and_idempotent(void **state)
{
    (void)state;
    plume_block_manager *bm = make(16, true);
    int32_t t[12];
    iota(t, 12, 900);
    plume_block_table a = {0};
    assert_int_equal(plume_bm_ensure(bm, &a, 10), 0);
    plume_bm_commit(bm, &a, t, 3); /* not one full block yet */
    assert_int_equal(a.n_hashed, 0);
    plume_bm_commit(bm, &a, t, 10); /* the last block is partial */
    assert_int_equal(a.n_hashed, 2);
    uint64_t h1 = plume_bm_default_hash(PLUME_BM_HASH_SEED, t, BS, NULL);
    uint64_t h2 = plume_bm_default_hash(h1, t + BS, BS, NULL);
    assert_true(a.last_hash == h2);

    plume_block_stats before = plume_bm_stats(bm);
    plume_bm_commit(bm, &a, t, 10);
    plume_bm_commit(bm, &a, t, 6);
    assert_int_equal(a.n_hashed, 2);
    assert_true(a.last_hash == h2);
    plume_block_stats after = plume_bm_stats(bm);
    assert_int_equal(before.n_free, after.n_free);
    assert_int_equal(before.n_cached_free, after.n_cached_free);
    assert_int_equal(before.prefix_queries, after.prefix_queries);
    assert_int_equal(before.prefix_hits, after.prefix_hits);
    assert_int_equal(before.evictions, after.evictions);

    /* The third block fills: committed only once all of it is. */
    plume_bm_commit(bm, &a, t, 11);
    assert_int_equal(a.n_hashed, 2);
    plume_bm_commit(bm, &a, t, 12);
    assert_int_equal(a.n_hashed, 3);
    assert_true(a.last_hash == plume_bm_default_hash(h2, t + 2 * BS, BS, NULL));
    /* Not past the blocks held. */
    plume_bm_commit(bm, &a, t, 1000);
    assert_int_equal(a.n_hashed, 3);
    check(bm);

    plume_bm_release(bm, &a);
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 3);
    assert_int_equal(hit_len(bm, t, 12), 12);
    plume_block_table_free(&a);
    plume_bm_free(bm);
}

static void test_concurrent_duplicates(void **state)
{
    (void)state;
    plume_block_manager *bm = make(16, true);
    int32_t t[17];
    iota(t, 17, 60);
    /* a and b prefill the same 12-token prompt at once: both miss. */
    plume_block_table a = {0}, b = {0}, q = {0};
    assert_int_equal(plume_bm_match_prefix(bm, &a, t, 12, 2), 0);
    assert_int_equal(plume_bm_match_prefix(bm, &b, t, 12, 2), 0);
    assert_int_equal(plume_bm_ensure(bm, &a, 12), 0);
    assert_int_equal(plume_bm_ensure(bm, &b, 12), 0);
    plume_bm_commit(bm, &a, t, 12);
    plume_bm_commit(bm, &b, t, 12);
    assert_int_equal(b.n_hashed, 3);
    assert_true(b.last_hash == a.last_hash);
    for (int i = 0; i < 3; i++) {
        assert_true(plume_bm_is_cached(bm, a.ids[i]));
        assert_false(plume_bm_is_cached(bm, b.ids[i]));
    }
    /* b decodes on: its next block chains from a's mapped blocks. */
    assert_int_equal(plume_bm_ensure(bm, &b, 16), 0);
    plume_bm_commit(bm, &b, t, 16);
    assert_int_equal(b.n_hashed, 4);
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 17, 4), 16);
    assert_memory_equal(q.ids, a.ids, 3 * sizeof(int32_t));
    assert_int_equal(q.ids[3], b.ids[3]);
    plume_bm_release(bm, &q);
    check(bm);

    plume_bm_release(bm, &b);
    /* b's three duplicates hold nothing findable; its fourth block does. */
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 1);
    plume_bm_release(bm, &a);
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 4);
    assert_int_equal(hit_len(bm, t, 17), 16);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_block_table_free(&q);
    plume_bm_free(bm);
}

static void test_duplicate_takes_over_evicted_entry(void **state)
{
    (void)state;
    plume_block_manager *bm = make(4, true);
    int32_t t[4] = {9, 8, 7, 6};
    plume_block_table a = {0}, b = {0}, x = {0};
    assert_int_equal(plume_bm_ensure(bm, &a, 4), 0);
    assert_int_equal(plume_bm_ensure(bm, &b, 4), 0);
    plume_bm_commit(bm, &a, t, 4);
    plume_bm_commit(bm, &b, t, 4);
    plume_bm_release(bm, &a);
    /* Take every free block: a's cached block is evicted. */
    assert_int_equal(plume_bm_ensure(bm, &x, 3 * BS), 0);
    assert_int_equal(plume_bm_stats(bm).evictions, 1);
    plume_bm_release(bm, &x);
    /* b's block, identical content, becomes the cached one when freed. */
    int32_t bid = b.ids[0];
    plume_bm_release(bm, &b);
    assert_int_equal(plume_bm_stats(bm).n_cached_free, 1);
    plume_block_table q = {0};
    assert_int_equal(plume_bm_match_prefix(bm, &q, t, 4, 1), 4);
    assert_int_equal(q.ids[0], bid);
    plume_bm_release(bm, &q);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_block_table_free(&x);
    plume_block_table_free(&q);
    plume_bm_free(bm);
}

/* Hashes a block by its first id alone: ignores the chain and the rest. */
static uint64_t first_id_hash(uint64_t prev, const int32_t *ids, int32_t n, void *ctx)
{
    (void)prev;
    (void)n;
    (void)ctx;
    return (uint64_t)(uint32_t)ids[0];
}

static void test_reused_parent_does_not_vouch(void **state)
{
    (void)state;
    /* b's block Y was registered after the mapped block E = [X] (b itself
     * holds a duplicate of E).  E is then evicted and reused for [Z]; the
     * query [Z | Y] finds E for Z and then Y's block, whose recorded parent
     * is E's id -- but E no longer holds X, so it must be a miss. */
    plume_block_manager *bm = make(8, true);
    plume_bm_set_hash_fn(bm, first_id_hash, NULL);
    int32_t tx[8] = {1, 0, 0, 0, 2, 0, 0, 0}; /* [X | Y] */
    int32_t tz[9] = {3, 0, 0, 0, 2, 0, 0, 0, 5}; /* [Z | Y] */
    plume_block_table a = {0}, b = {0}, x1 = {0}, x2 = {0}, q = {0};
    assert_int_equal(plume_bm_ensure(bm, &a, 4), 0);
    assert_int_equal(plume_bm_ensure(bm, &b, 8), 0);
    plume_bm_commit(bm, &a, tx, 4);
    plume_bm_commit(bm, &b, tx, 8);
    int32_t e = a.ids[0];
    assert_true(plume_bm_is_cached(bm, e));
    assert_false(plume_bm_is_cached(bm, b.ids[0]));
    assert_true(plume_bm_is_cached(bm, b.ids[1]));
    assert_int_equal(hit_len(bm, tx, 8), 8); /* E then b's Y */

    plume_bm_release(bm, &a);
    assert_int_equal(plume_bm_ensure(bm, &x1, 5 * BS), 0); /* the empty ones */
    assert_int_equal(plume_bm_ensure(bm, &x2, 4), 0);      /* evicts E */
    assert_int_equal(x2.ids[0], e);
    assert_int_equal(plume_bm_stats(bm).evictions, 1);
    plume_bm_commit(bm, &x2, tz, 4);
    assert_true(plume_bm_is_cached(bm, e));

    assert_int_equal(plume_bm_match_prefix(bm, &q, tz, 9, 2), 4);
    assert_int_equal(q.ids[0], e);
    plume_bm_release(bm, &q);
    check(bm);
    plume_bm_release(bm, &x1);
    plume_bm_release(bm, &x2);
    plume_bm_release(bm, &b);
    assert_int_equal(plume_bm_match_prefix(bm, &q, tz, 9, 2), 4);
    plume_bm_release(bm, &q);
    assert_int_equal(plume_bm_n_free(bm), 8);
    check(bm);
    plume_block_table_free(&a);
    plume_block_table_free(&b);
    plume_block_table_free(&x1);
    plume_block_table_free(&x2);
    plume_block_table_free(&q);
    plume_bm_free(bm);
}

/* ---- randomized stress ------------------------------------------------- */

#define S_BLOCKS 48
#define S_SEQS 10
#define S_MAXTOK 64

typedef struct sseq {
    bool live;
    plume_block_table bt;
    int32_t tokens[S_MAXTOK + 8];
    int64_t n;         /* tokens the table must hold */
    int64_t written;   /* positions whose KV is written (and committed) */
} sseq;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int rng_int(uint64_t *s, int n)
{
    return (int)(rng_next(s) % (uint64_t)n);
}

/* A hash with many collisions, chained and unchained ones alike. */
static uint64_t weak_hash(uint64_t prev, const int32_t *ids, int32_t n, void *ctx)
{
    (void)ctx;
    uint64_t h = prev & 3;
    for (int32_t i = 0; i < n; i++)
        h += (uint64_t)ids[i];
    return h & 7;
}

typedef struct stress_state {
    plume_block_manager *bm;
    sseq seqs[S_SEQS];
    /* What each block's KV was computed from: the whole context up to its
     * last written position (KV at position p depends on tokens[0..p]). */
    int32_t ctx[S_BLOCKS][S_MAXTOK];
    int32_t ctx_len[S_BLOCKS];
} stress_state;

static void stress_check(stress_state *st)
{
    check(st->bm);
    int32_t held[S_BLOCKS] = {0};
    for (int i = 0; i < S_SEQS; i++) {
        sseq *s = &st->seqs[i];
        if (!s->live) {
            assert_int_equal(s->bt.n, 0);
            continue;
        }
        assert_int_equal(s->bt.n, plume_bm_blocks_for(st->bm, s->n));
        assert_true(s->bt.n_hashed * BS <= s->written);
        for (int j = 0; j < s->bt.n; j++) {
            int32_t id = s->bt.ids[j];
            assert_true(id >= 0 && id < S_BLOCKS);
            assert_true(plume_bm_ref_count(st->bm, id) > 0);
            held[id]++;
        }
    }
    int32_t in_use = 0;
    for (int id = 0; id < S_BLOCKS; id++) {
        assert_int_equal(plume_bm_ref_count(st->bm, id), held[id]);
        in_use += held[id] > 0;
    }
    plume_block_stats s = plume_bm_stats(st->bm);
    assert_int_equal(s.n_blocks, S_BLOCKS);
    assert_int_equal(s.n_free + in_use, S_BLOCKS);
    assert_int_equal(plume_bm_n_free(st->bm), s.n_free);
    assert_true(s.n_cached_free >= 0 && s.n_cached_free <= s.n_free);
    assert_true(s.prefix_hits <= s.prefix_queries);
}

/* "Computes" the KV of s's positions [written, upto): each lands in a block
 * only s holds, and is then committed. */
static void stress_write(stress_state *st, sseq *s, int64_t upto)
{
    for (int64_t p = s->written; p < upto; p++) {
        int32_t id = s->bt.ids[p / BS];
        assert_int_equal(plume_bm_ref_count(st->bm, id), 1);
        memcpy(st->ctx[id], s->tokens, (size_t)(p + 1) * sizeof(int32_t));
        st->ctx_len[id] = (int32_t)(p + 1);
    }
    if (upto > s->written)
        s->written = upto;
    plume_bm_commit(st->bm, &s->bt, s->tokens, s->written);
}

static void stress_release(stress_state *st, sseq *s)
{
    plume_bm_release(st->bm, &s->bt);
    assert_int_equal(s->bt.n, 0);
    s->live = false;
    s->n = s->written = 0;
}

static void stress_run(plume_bm_hash_fn fn, uint64_t seed, int steps)
{
    stress_state *st = calloc(1, sizeof *st);
    assert_non_null(st);
    st->bm = make(S_BLOCKS, true);
    plume_bm_set_hash_fn(st->bm, fn, NULL);
    /* Four prompt families sharing long prefixes, tails from 3 tokens. */
    int32_t family[4][S_MAXTOK];
    for (int f = 0; f < 4; f++)
        for (int i = 0; i < S_MAXTOK; i++)
            family[f][i] = (int32_t)(rng_int(&seed, 3) + (i % 5 == 0 ? f : 0));

    for (int step = 0; step < steps; step++) {
        sseq *s = &st->seqs[rng_int(&seed, S_SEQS)];
        int op = rng_int(&seed, 10);
        if (!s->live) {
            /* Start: match, check the hit's KV, allocate the rest. */
            int f = rng_int(&seed, 4);
            int64_t n = 1 + rng_int(&seed, 40);
            int64_t shared = rng_int(&seed, (int)n + 1);
            for (int64_t i = 0; i < n; i++)
                s->tokens[i] = i < shared ? family[f][i] : rng_int(&seed, 3);
            int32_t maxb = (int32_t)((n - 1) / BS);
            int64_t got = plume_bm_match_prefix(st->bm, &s->bt, s->tokens, n, maxb);
            assert_true(got % BS == 0 && got <= (int64_t)maxb * BS);
            assert_int_equal(s->bt.n, got / BS);
            assert_int_equal(s->bt.n_hashed, got / BS);
            for (int32_t j = 0; j < s->bt.n; j++) {
                int32_t id = s->bt.ids[j];
                assert_int_equal(st->ctx_len[id], (j + 1) * BS);
                assert_memory_equal(st->ctx[id], s->tokens, (size_t)(j + 1) * BS * sizeof(int32_t));
            }
            s->live = true;
            s->n = got;
            s->written = got;
            if (plume_bm_ensure(st->bm, &s->bt, n) != 0) {
                assert_int_equal(s->bt.n, got / BS); /* unchanged */
                stress_release(st, s);
            } else {
                s->n = n;
            }
        } else if (op < 3) {
            /* Prefill progress: write and commit some of what is held. */
            int64_t upto = s->written + rng_int(&seed, (int)(s->n - s->written) + 1);
            stress_write(st, s, upto);
        } else if (op < 6) {
            /* Decode one token (all earlier positions computed first). */
            stress_write(st, s, s->n);
            if (s->n >= S_MAXTOK || plume_bm_ensure(st->bm, &s->bt, s->n + 1) != 0) {
                stress_release(st, s);
            } else {
                s->tokens[s->n++] = rng_int(&seed, 3);
            }
        } else if (op < 8) {
            /* Speculate k tokens, accept a of them, roll back the rest. */
            stress_write(st, s, s->n);
            int k = 1 + rng_int(&seed, 6);
            if (s->n + k > S_MAXTOK || plume_bm_ensure(st->bm, &s->bt, s->n + k) != 0) {
                stress_release(st, s);
            } else {
                for (int i = 0; i < k; i++)
                    s->tokens[s->n + i] = rng_int(&seed, 3);
                int a = rng_int(&seed, k + 1);
                int64_t n0 = s->n;
                s->n = n0 + k;
                stress_check(st);
                plume_bm_truncate(st->bm, &s->bt, n0 + a);
                s->n = n0 + a;
            }
        } else if (op == 8) {
            /* Roll back to the committed point, e.g. a rejected draft. */
            plume_bm_truncate(st->bm, &s->bt, s->written);
            s->n = s->written;
            if (s->bt.n < plume_bm_blocks_for(st->bm, s->n))
                fail_msg("truncate dropped needed blocks");
        } else {
            stress_release(st, s);
        }
        stress_check(st);
    }
    for (int i = 0; i < S_SEQS; i++) {
        if (st->seqs[i].live)
            stress_release(st, &st->seqs[i]);
        plume_block_table_free(&st->seqs[i].bt);
    }
    stress_check(st);
    plume_block_stats s = plume_bm_stats(st->bm);
    assert_int_equal(s.n_free, S_BLOCKS);
    assert_true(s.prefix_hits > 0); /* the run exercised sharing */
    assert_true(s.evictions > 0);   /* and eviction */
    plume_bm_free(st->bm);
    free(st);
}

static void test_stress_default_hash(void **state)
{
    (void)state;
    stress_run(NULL, 0x1234abcdull, 20000);
}

static void test_stress_colliding_hash(void **state)
{
    (void)state;
    stress_run(weak_hash, 0xfeedbeefull, 20000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_validation),
        cmocka_unit_test(test_allocation_and_exhaustion),
        cmocka_unit_test(test_shared_prefix_refcounts),
        cmocka_unit_test(test_prefix_hits_and_misses),
        cmocka_unit_test(test_no_prefix_caching),
        cmocka_unit_test(test_hash_collision_is_a_miss),
        cmocka_unit_test(test_chain_collision_is_a_miss),
        cmocka_unit_test(test_eviction_order),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_commit_partial_and_idempotent),
        cmocka_unit_test(test_concurrent_duplicates),
        cmocka_unit_test(test_duplicate_takes_over_evicted_entry),
        cmocka_unit_test(test_reused_parent_does_not_vouch),
        cmocka_unit_test(test_stress_default_hash),
        cmocka_unit_test(test_stress_colliding_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
