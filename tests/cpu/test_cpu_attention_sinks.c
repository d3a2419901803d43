/* plume_paged_attention with attention sinks (gpt-oss: one logit per query
 * head joins the softmax denominator): against a double-precision
 * reference, and every row the same bits whichever path computes it: a
 * long prefill (tiles of rows, each (tile, kv head) streamed once), a lone
 * decode row over several key chunks (split-K: partials merged in
 * chunk order, then the sink), a lone short row (one item per head), at
 * 1, 2 and 3 threads, with and without a sliding window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cpu_test_util.h"
#include "backend/cpu/paged_attention.h"

enum { NH = 6, NKV = 2, HD = 64, BS = 16, NB = 64, LEN = 700 };

/* head h of the row at position pos, in double: softmax over the keys
 * lo..pos and the sink, the sink's share dropped. */
static void reference(const float *q, const float *kc, const float *vc, const int32_t *table,
                      int pos, int window, int h, double sink, double *out)
{
    const int kv_dim = NKV * HD, kvh = h / (NH / NKV);
    const int lo = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    tu_attn_ref(q, kc + kvh * HD, vc + kvh * HD, kv_dim, table, BS, lo, pos + 1, HD,
                1.0 / sqrt((double)HD), sink, out);
}

static void test_sinks(void **state)
{
    (void)state;
    const int kv_dim = NKV * HD, qs = NH * HD;
    const size_t nv = (size_t)NB * BS * kv_dim;
    float *kc = malloc(sizeof(float) * nv), *vc = malloc(sizeof(float) * nv);
    float *q = malloc(sizeof(float) * (size_t)LEN * qs);
    float *all = malloc(sizeof(float) * (size_t)LEN * qs), *one = malloc(sizeof(float) * qs);
    float *plain = malloc(sizeof(float) * qs);
    tu_fill(kc, nv, -1, 1);
    tu_fill(vc, nv, -1, 1);
    tu_fill(q, (size_t)LEN * qs, -1.5f, 1.5f);
    float sinks[NH];
    tu_fill(sinks, NH, -1, 4); /* some above the typical score: they matter */
    int32_t table[NB];
    for (int b = 0; b < NB; b++)
        table[b] = (b * 29 + 5) % NB; /* shuffled blocks */
    plume_attn_row rows[LEN];
    for (int p = 0; p < LEN; p++)
        rows[p] = (plume_attn_row){p, table};
    const float scale = 1.0f / sqrtf((float)HD);
    plume_attn_scratch scratch = {0};
    const int lone[] = {LEN - 1, 600, 300, 255, 40, 0}; /* split-K, then one chunk */
    for (int window = 0; window <= 300; window += 300)
        for (int nt = 1; nt <= 3; nt++) {
            plume_pool *pool;
            plume_error err;
            assert_int_equal(plume_pool_create(nt, &pool, &err), 0);
            assert_int_equal(plume_paged_attention(pool, &scratch, q, kc, vc, 0, kv_dim, HD,
                                                   rows, LEN, BS, NH, NKV, HD, scale, window,
                                                   sinks, all),
                             0);
            double want[HD], worst = 0;
            for (int p = 0; p < LEN; p += 7)
                for (int h = 0; h < NH; h++) {
                    reference(q + (size_t)p * qs + h * HD, kc, vc, table, p, window, h, sinks[h],
                              want);
                    for (int d = 0; d < HD; d++)
                        worst = fmax(worst, fabs(want[d] - all[(size_t)p * qs + h * HD + d]));
                }
            if (worst > 2e-6)
                fail_msg("sinks: max |diff| vs the double reference %g (window %d)", worst,
                         window);
            for (size_t i = 0; i < sizeof lone / sizeof lone[0]; i++) {
                const int p = lone[i];
                assert_int_equal(plume_paged_attention(pool, &scratch, q + (size_t)p * qs, kc,
                                                       vc, 0, kv_dim, HD, rows + p, 1, BS, NH,
                                                       NKV, HD, scale, window, sinks, one),
                                 0);
                if (memcmp(one, all + (size_t)p * qs, sizeof(float) * qs) != 0)
                    fail_msg("sinks: row %d alone differs from the prefill (window %d, %d "
                             "threads)",
                             p, window, nt);
                assert_int_equal(plume_paged_attention(pool, &scratch, q + (size_t)p * qs, kc,
                                                       vc, 0, kv_dim, HD, rows + p, 1, BS, NH,
                                                       NKV, HD, scale, window, NULL, plain),
                                 0);
                if (p > 0 && memcmp(one, plain, sizeof(float) * qs) == 0)
                    fail_msg("sinks: row %d is the same with and without sinks", p);
            }
            plume_pool_free(pool);
        }
    plume_attn_scratch_free(&scratch);
    free(kc); free(vc); free(q); free(all); free(one); free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sinks)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
