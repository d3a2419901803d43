/* plume_cpu_matmul_segments (a mixture-of-experts layer's experts as one
 * job) gives, bit for bit, what plume_cpu_matmul_w gives for each
 * (segment, weight) pair alone: for every weight type (the repacked
 * kernels and the per-segment fallback of the float types), one and two
 * weights per segment, empty segments, and pools of 1 and 2 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "backend/cpu/ops.h"
#include "cpu_test_util.h"

enum { N_SEG = 6, MAX_W = 2 };

static void check(plume_pool *pool, uint32_t type, int n_w)
{
    const int64_t K = 256, N[MAX_W] = {40, 33}; /* 33: a partial 16-row group */
    const int32_t rows[N_SEG] = {3, 0, 1, 7, 0, 2};
    int32_t off[N_SEG + 1] = {0};
    for (int s = 0; s < N_SEG; s++)
        off[s + 1] = off[s] + rows[s];
    const int32_t n_rows = off[N_SEG];
    plume_tensor t[N_SEG * MAX_W];
    plume_cpu_weight cw[N_SEG * MAX_W];
    const plume_cpu_weight *pw[N_SEG * MAX_W];
    uint8_t *data[N_SEG * MAX_W];
    for (int i = 0; i < N_SEG * n_w; i++) {
        size_t rb;
        const int64_t n = N[i % n_w];
        data[i] = tu_weights(type, K, (int)n, &rb);
        t[i] = (plume_tensor){.name = "expert", .type = type, .n_dims = 2, .ne = {K, n, 1, 1},
                              .data = data[i], .nbytes = rb * (size_t)n};
        assert_int_equal(plume_cpu_weight_init(&cw[i], &t[i], NULL), 0);
        pw[i] = &cw[i];
    }
    float *x = malloc(sizeof(float) * (size_t)(K * n_rows));
    tu_fill(x, (size_t)(K * n_rows), -2, 2);
    float *y[MAX_W], *want[MAX_W];
    for (int j = 0; j < n_w; j++) {
        y[j] = malloc(sizeof(float) * (size_t)(N[j] * n_rows));
        want[j] = malloc(sizeof(float) * (size_t)(N[j] * n_rows));
        for (int64_t i = 0; i < N[j] * n_rows; i++)
            y[j][i] = want[j][i] = -7.0f; /* rows of no segment stay as they were */
    }
    plume_cpu_matmul_segments(pool, pw, n_w, N_SEG, off, x, y);
    for (int s = 0; s < N_SEG; s++)
        for (int j = 0; j < n_w && rows[s]; j++)
            plume_cpu_matmul_w(pool, pw[s * n_w + j], x + (size_t)(off[s] * K), rows[s],
                               want[j] + (size_t)(off[s] * N[j]));
    for (int j = 0; j < n_w; j++)
        for (int64_t i = 0; i < N[j] * n_rows; i++)
            if (memcmp(&y[j][i], &want[j][i], sizeof(float)) != 0)
                fail_msg("%s, %d weights per segment, %d threads: y[%d][%lld][%lld] = %.9g, "
                         "alone %.9g",
                         plume_dtype_name(type), n_w, plume_pool_threads(pool), j,
                         (long long)(i / N[j]), (long long)(i % N[j]), y[j][i], want[j][i]);
    for (int i = 0; i < N_SEG * n_w; i++) {
        plume_cpu_weight_release(&cw[i]);
        free(data[i]);
    }
    for (int j = 0; j < n_w; j++) {
        free(y[j]);
        free(want[j]);
    }
    free(x);
}

static void test_segments_match_alone(void **state)
{
    (void)state;
    for (int nth = 1; nth <= 2; nth++) {
        plume_pool *pool;
        assert_int_equal(plume_pool_create(nth, &pool, NULL), 0);
        for (int n_w = 1; n_w <= MAX_W; n_w++) {
            for (size_t ti = 0; ti < TU_N_TYPES; ti++)
                check(pool, TU_TYPES[ti], n_w);
            for (size_t ti = 0; ti < TU_N_RP_TYPES; ti++)
                check(pool, TU_RP_TYPES[ti], n_w);
        }
        plume_pool_free(pool);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segments_match_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
