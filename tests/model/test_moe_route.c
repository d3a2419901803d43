/* The mixture-of-experts routing (model/moe.c: plume_moe_route) and the cpu
 * backend's row ops (backend/cpu/moe_rows.c), against values worked out by
 * hand: top-k order and ties, renormalized or raw softmax weights, rows
 * routed independently of each other, gather and weighted scatter-add. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/ops.h"
#include "model/moe.h"

static plume_model_config cfg(int n_expert, int k, bool norm)
{
    plume_model_config c;
    memset(&c, 0, sizeof c);
    c.n_expert = n_expert;
    c.n_expert_used = k;
    c.moe_norm_topk = norm;
    return c;
}

static void test_topk_order_and_ties(void **state)
{
    (void)state;
    const plume_model_config c = cfg(5, 3, true);
    const float l[5] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
    int32_t ids[3];
    float w[3];
    plume_moe_route(&c, l, 1, ids, w);
    /* descending logit; the tie between experts 1 and 3 goes to 1 first */
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 2);
    const double s = 2 * exp(0.0) + exp(-1.0);
    assert_true(fabs(w[0] - 1.0 / s) < 1e-7 && fabs(w[1] - 1.0 / s) < 1e-7);
    assert_true(fabs(w[2] - exp(-1.0) / s) < 1e-7);
    assert_true(fabs((double)w[0] + w[1] + w[2] - 1.0) < 1e-6);
}

static void test_raw_softmax(void **state)
{
    (void)state;
    const plume_model_config c = cfg(4, 2, false);
    const float l[4] = {0.5f, -2.0f, 1.5f, 0.0f};
    int32_t ids[2];
    float w[2];
    plume_moe_route(&c, l, 1, ids, w);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 0);
    const double s = exp(0.5) + exp(-2.0) + exp(1.5) + exp(0.0);
    /* probabilities over all four experts, not renormalized over the two */
    assert_true(fabs(w[0] - exp(1.5) / s) < 1e-7);
    assert_true(fabs(w[1] - exp(0.5) / s) < 1e-7);
    assert_true(w[0] + w[1] < 0.95f);
}

static void test_all_experts_and_rows_independent(void **state)
{
    (void)state;
    const plume_model_config c = cfg(6, 6, true);
    float l[3][6];
    for (int r = 0; r < 3; r++)
        for (int e = 0; e < 6; e++)
            l[r][e] = (float)sin(1.0 + 7.0 * r + 3.0 * e) * 4.0f;
    int32_t ids[3][6], one_id[6];
    float w[3][6], one_w[6];
    plume_moe_route(&c, &l[0][0], 3, &ids[0][0], &w[0][0]);
    for (int r = 0; r < 3; r++) {
        plume_moe_route(&c, l[r], 1, one_id, one_w);
        assert_memory_equal(one_id, ids[r], sizeof one_id);
        assert_memory_equal(one_w, w[r], sizeof one_w); /* the same bits alone */
        int seen = 0;
        for (int j = 0; j < 6; j++) {
            seen |= 1 << ids[r][j];
            if (j > 0)
                assert_true(l[r][ids[r][j - 1]] >= l[r][ids[r][j]]);
        }
        assert_int_equal(seen, 63); /* every expert once */
    }
}

static void test_gather_scatter(void **state)
{
    (void)state;
    const float src[4][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};
    const int32_t idx[2] = {3, 1};
    float g[2][3];
    plume_cpu_gather_rows(&g[0][0], &src[0][0], idx, 2, 3);
    assert_memory_equal(g[0], src[3], sizeof g[0]);
    assert_memory_equal(g[1], src[1], sizeof g[1]);
    float dst[4][3] = {{0}};
    dst[1][0] = 1.0f;
    const float w[2] = {0.1f, 0.3f};
    plume_cpu_scatter_add_rows(&dst[0][0], &g[0][0], idx, w, 2, 3);
    for (int j = 0; j < 3; j++) {
        volatile float p3 = 0.1f * src[3][j], p1 = 0.3f * src[1][j]; /* each product rounded */
        assert_true(dst[3][j] == p3);
        assert_true(dst[1][j] == (j == 0 ? 1.0f : 0.0f) + p1);
        assert_true(dst[0][j] == 0.0f && dst[2][j] == 0.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_order_and_ties),
        cmocka_unit_test(test_raw_softmax),
        cmocka_unit_test(test_all_experts_and_rows_independent),
        cmocka_unit_test(test_gather_scatter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
