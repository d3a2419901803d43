/* plume_cpu_matmul (through each dispatch level, on a 2-thread pool) against
 * x · dequant(W)ᵀ computed in double, for every weight type and
 * n_tok in {1, 3, 17, 64}.
 *
 * Tolerance: activations are quantized per token in blocks of 32 with
 * d = amax/127, so each x differs from d·q by at most d/2; the result may
 * differ from the exact product by at most Σ_blocks d_b/2 · Σ_{k in b}|w_k|
 * (plus float rounding).  Float weights get a float-rounding tolerance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "backend/cpu/ops.h"
#include "cpu_test_util.h"
#include "matmul_tolerance.h"

static void check_type(plume_pool *pool, const plume_kernels *k, uint32_t type, int64_t K,
                       int64_t N, int n_tok)
{
    size_t rb;
    uint8_t *w = tu_weights(type, K, (int)N, &rb);
    plume_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = w,
                      .nbytes = rb * (size_t)N};
    float *x = malloc(sizeof(float) * K * n_tok);
    tu_fill(x, (size_t)(K * n_tok), -2, 2);
    for (int64_t i = 0; i < K; i += 7) /* a few outliers per token */
        x[i] *= 8.0f;
    float *y = malloc(sizeof(float) * N * n_tok);
    plume_cpu_matmul_with(k, pool, &t, x, n_tok, y);
    check_matmul_vs_dequant(type, plume_cpu_level_name(k->level), w, rb, x, y, K, N, n_tok,
                            plume_dtype_block_elems(type) > 1);
    free(w); free(x); free(y);
}

static void test_matmul_vs_dequant(void **state)
{
    (void)state;
    const plume_kernels *levels[PLUME_CPU_LEVEL_COUNT];
    const int n_levels = tu_levels(levels);
    plume_pool *pool;
    assert_int_equal(plume_pool_create(2, &pool, NULL), 0);
    const int toks[] = {1, 3, 17, 64};
    for (int l = 0; l < n_levels; l++)
        for (size_t ti = 0; ti < TU_N_TYPES; ti++)
            for (size_t j = 0; j < sizeof toks / sizeof toks[0]; j++) {
                const uint32_t type = TU_TYPES[ti];
                /* K: 2 super-blocks; float types also an odd K */
                check_type(pool, levels[l], type, 512, 37, toks[j]);
                if (plume_dtype_block_elems(type) == 1)
                    check_type(pool, levels[l], type, 77, 13, toks[j]);
                else if (plume_dtype_block_elems(type) == 32)
                    check_type(pool, levels[l], type, 96, 5, toks[j]);
            }
    plume_pool_free(pool);
}

/* The active table through the public entry point, and a 1-thread pool. */
static void test_matmul_entry_point(void **state)
{
    (void)state;
    plume_pool *pool;
    assert_int_equal(plume_pool_create(1, &pool, NULL), 0);
    size_t rb;
    const int64_t K = 256, N = 9;
    uint8_t *w = tu_weights(PLUME_DTYPE_Q4_K, K, (int)N, &rb);
    plume_tensor t = {.name = "w", .type = PLUME_DTYPE_Q4_K, .n_dims = 2, .ne = {K, N, 1, 1},
                      .data = w, .nbytes = rb * N};
    float x[256 * 3], y0[9 * 3], y1[9 * 3];
    tu_fill(x, 256 * 3, -1, 1);
    plume_cpu_matmul(pool, &t, x, 3, y0);
    plume_cpu_matmul_with(plume_kernels_active(), pool, &t, x, 3, y1);
    assert_memory_equal(y0, y1, sizeof y0);
    free(w);
    plume_pool_free(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_vs_dequant),
        cmocka_unit_test(test_matmul_entry_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
