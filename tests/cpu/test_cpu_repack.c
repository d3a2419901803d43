/* The repacked weight layouts (repack.h, repack_k.h) and their mm_r
 * kernels, for every repacked type (Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, IQ4_NL,
 * Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS, MXFP4):
 *  - every level's mm_r against Σ_k dequant(W)[k] · d_b·q[k] in double (the
 *    product of the dequantized weights with the int8 activations the
 *    kernel sees, so only float rounding separates them), odd row counts
 *    (partial groups), token counts that are not multiples of the tiles, a
 *    y stride wider than the rows (padding never written);
 *  - plume_cpu_matmul_w against x · dequant(W)ᵀ within the int8 bound;
 *  - batch invariance: one (row, token) result has the same bits for
 *    n_tok 1, 5 and 64, 1 or 2 threads, and alone or in a shared-activation
 *    multi matmul, at every level;
 *  - tile invariance: the same bits from the kernels for a token alone and
 *    in calls of 2, 3, 4, 7, 9, 14, 16 and 100 tokens (every tail). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/repack.h"
#include "cpu_test_util.h"
#include "matmul_tolerance.h"

static const plume_kernels *levels[PLUME_CPU_LEVEL_COUNT];
static int n_levels;

#define RP_TYPES TU_RP_TYPES
#define N_RP TU_N_RP_TYPES

static int setup(void **state)
{
    (void)state;
    n_levels = tu_levels(levels);
    return 0;
}

/* The activations as matmul.c quantizes them for the mm_r kernels. */
static void quantize_all(const float *x, int64_t K, int n_tok, int8_t *q, float *d, float *s,
                         int32_t *is, int32_t *is16, float *s16)
{
    const int64_t nb = K / 32;
    for (int t = 0; t < n_tok; t++) {
        plume_kernels_scalar()->quantize_q8(x + t * K, K, q + t * K, d + t * nb, s + t * nb);
        for (int64_t b = 0; b < nb; b++) {
            int32_t h[2] = {0, 0};
            for (int i = 0; i < 32; i++)
                h[i / 16] += q[t * K + 32 * b + i];
            is[t * nb + b] = h[0] + h[1];
            for (int k = 0; k < 2; k++) {
                is16[t * 2 * nb + 2 * b + k] = h[k];
                s16[t * 2 * nb + 2 * b + k] = d[t * nb + b] * (float)h[k];
            }
        }
    }
}

static void test_mm_r_vs_dequant(void **state)
{
    (void)state;
    const int rows_list[] = {1, 5, 9, 16, 17, 33};
    const int tok_list[] = {1, 2, 5, 6, 7, 9};
    for (size_t ti = 0; ti < N_RP; ti++)
        for (size_t ki = 0; ki < 2; ki++) {
            const uint32_t type = RP_TYPES[ti];
            const int kr = (int)ti;
            const int big = plume_dtype_block_elems(type) == 256;
            const int64_t K = big ? (ki ? 768 : 256) : (ki ? 576 : 96), nb = K / 32;
            const int max_rows = 33, max_tok = 9;
            size_t rb;
            uint8_t *w = tu_weights(type, K, max_rows, &rb);
            plume_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, max_rows, 1, 1},
                              .data = w, .nbytes = rb * max_rows};
            float *x = malloc(sizeof(float) * K * max_tok);
            tu_fill(x, (size_t)(K * max_tok), -2, 2);
            int8_t *aq = malloc((size_t)(K * max_tok));
            float *ad = malloc(sizeof(float) * nb * max_tok), *as = malloc(sizeof(float) * nb * max_tok);
            int32_t *ai = malloc(sizeof(int32_t) * nb * max_tok);
            int32_t *ai16 = malloc(sizeof(int32_t) * 2 * nb * max_tok);
            float *as16 = malloc(sizeof(float) * 2 * nb * max_tok);
            quantize_all(x, K, max_tok, aq, ad, as, ai, ai16, as16);
            plume_q8_act act = {aq, ad, as, K, ai, ai16, as16, NULL, 0};
            plume_q8_blk *blk = aligned_alloc(64, plume_cpu_act_blocks_bytes(max_tok, K));
            plume_cpu_act_blocks(&act, max_tok, blk);
            /* reference: dequantized weights · the int8 activations, in double */
            float *deq = malloc(sizeof(float) * K * max_rows);
            double *ref = malloc(sizeof(double) * max_rows * max_tok);
            double *mag = malloc(sizeof(double) * max_rows * max_tok);
            for (int r = 0; r < max_rows; r++) {
                plume_dequantize((plume_dtype)type, w + r * rb, deq + r * K, K);
                for (int tk = 0; tk < max_tok; tk++) {
                    double e = 0, m = 0;
                    for (int64_t i = 0; i < K; i++) {
                        const double a = (double)ad[tk * nb + i / 32] * aq[tk * K + i];
                        e += (double)deq[r * K + i] * a;
                        m += fabs((double)deq[r * K + i] * a);
                    }
                    ref[r * max_tok + tk] = e;
                    mag[r * max_tok + tk] = m;
                }
            }
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
                for (size_t tj = 0; tj < sizeof tok_list / sizeof tok_list[0]; tj++) {
                    const int nr = rows_list[ri], nt = tok_list[tj];
                    t.ne[1] = nr;
                    plume_cpu_weight pw;
                    assert_int_equal(plume_cpu_weight_init(&pw, &t, NULL), 0);
                    assert_int_equal(pw.kr, kr);
                    const int64_t ldy = nr + 3;
                    float *yb = calloc((size_t)(ldy * nt), sizeof(float));
                    for (int l = 0; l < n_levels; l++) {
                        memset(yb, 0, sizeof(float) * ldy * nt);
                        levels[l]->mm_r[kr](pw.packed, nr, &act, nt, yb, ldy);
                        for (int r = 0; r < nr; r++)
                            for (int tk = 0; tk < nt; tk++) {
                                const double want = ref[r * max_tok + tk];
                                const double tol = 2e-5 * mag[r * max_tok + tk] + 1e-6;
                                const double err = fabs((double)yb[tk * ldy + r] - want);
                                if (!(err <= tol))
                                    fail_msg("%s level %s K=%lld rows=%d tokens=%d: y[%d][%d] = %.9g, "
                                             "dequant·q %.9g (tolerance %.3g)",
                                             plume_dtype_name(type),
                                             plume_cpu_level_name(levels[l]->level), (long long)K, nr,
                                             nt, tk, r, yb[tk * ldy + r], want, tol);
                            }
                        for (int tk = 0; tk < nt; tk++)
                            for (int64_t r = nr; r < ldy; r++)
                                assert_true(yb[tk * ldy + r] == 0.0f);
                    }
                    plume_cpu_weight_release(&pw);
                    free(yb);
                }
            free(w); free(x); free(aq); free(ad); free(as); free(ai); free(ai16); free(as16);
            free(blk);
            free(deq); free(ref); free(mag);
        }
}

/* MXFP4's E8M0 scales over their whole range, subnormal (e = 0, 1) and
 * huge ones included, at every level: 16 rows of one block, row r with
 * exponent E[r] and every weight at level 1 (code 1), against activations
 * of 1.0 (q = 127 each, one scale da).  Each kernel computes
 * float(32·127) · (2^(e−128) · da) in f32 with one rounding per step, so
 * the result is known to the bit. */
static void test_mxfp4_scales(void **state)
{
    (void)state;
    static const uint8_t E[16] = {0, 1, 2, 3, 20, 64, 100, 118, 120, 126, 127, 128, 129, 150, 200, 240};
    uint8_t w[16 * 17];
    for (int r = 0; r < 16; r++) {
        w[17 * r] = E[r];
        memset(w + 17 * r + 1, 0x11, 16);
        assert_true(plume_e8m0_half_to_fp32(E[r]) == ldexpf(1.0f, E[r] - 128));
    }
    plume_tensor t = {.name = "w", .type = PLUME_DTYPE_MXFP4, .n_dims = 2, .ne = {32, 16, 1, 1},
                      .data = w, .nbytes = sizeof w};
    plume_cpu_weight pw;
    assert_int_equal(plume_cpu_weight_init(&pw, &t, NULL), 0);
    assert_int_equal(pw.kr, PLUME_KR_MXFP4);
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = 1.0f;
    int8_t aq[32];
    float ad, as, as16[2];
    int32_t ai, ai16[2];
    quantize_all(x, 32, 1, aq, &ad, &as, &ai, ai16, as16);
    assert_int_equal(ai, 32 * 127);
    plume_q8_act act = {aq, &ad, &as, 32, &ai, ai16, as16, NULL, 0};
    plume_q8_blk *blk = aligned_alloc(64, plume_cpu_act_blocks_bytes(1, 32));
    plume_cpu_act_blocks(&act, 1, blk);
    for (int l = 0; l < n_levels; l++) {
        float y[16];
        levels[l]->mm_r[PLUME_KR_MXFP4](pw.packed, 16, &act, 1, y, 16);
        for (int r = 0; r < 16; r++) {
            volatile float sc = plume_e8m0_half_to_fp32(E[r]) * ad; /* one f32 rounding */
            const float want = (float)(4064.0 * (double)sc);
            if (memcmp(&y[r], &want, 4) != 0)
                fail_msg("MXFP4 level %s, exponent %d: y = %a, want %a",
                         plume_cpu_level_name(levels[l]->level), E[r], (double)y[r], (double)want);
        }
    }
    plume_cpu_weight_release(&pw);
    free(blk);
}

/* Unsupported shapes and types are not repacked and still multiply. */
static void test_weight_fallback(void **state)
{
    (void)state;
    size_t rb;
    uint8_t *w = tu_weights(PLUME_DTYPE_Q8_K, 256, 3, &rb);
    plume_tensor t = {.name = "w", .type = PLUME_DTYPE_Q8_K, .n_dims = 2, .ne = {256, 3, 1, 1},
                      .data = w, .nbytes = rb * 3};
    plume_cpu_weight pw;
    assert_int_equal(plume_cpu_weight_init(&pw, &t, NULL), 0);
    assert_int_equal(pw.kr, -1);
    assert_null(pw.packed);
    plume_pool *pool;
    assert_int_equal(plume_pool_create(2, &pool, NULL), 0);
    float x[256 * 2], y0[6], y1[6];
    tu_fill(x, 512, -1, 1);
    plume_cpu_matmul_w(pool, &pw, x, 2, y0);
    plume_cpu_matmul(pool, &t, x, 2, y1);
    assert_memory_equal(y0, y1, sizeof y0);
    plume_cpu_weight_release(&pw);
    plume_cpu_weight_release(&pw);
    plume_pool_free(pool);
    free(w);
}

/* plume_cpu_matmul_multi_with against x · dequant(W)ᵀ (the int8 bound of
 * test_cpu_matmul.c). */
static void check_exact(const plume_kernels *k, plume_pool *pool, uint32_t type, int64_t K,
                        int64_t N, int n_tok)
{
    size_t rb;
    uint8_t *w = tu_weights(type, K, (int)N, &rb);
    plume_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = w,
                      .nbytes = rb * (size_t)N};
    plume_cpu_weight pw;
    assert_int_equal(plume_cpu_weight_init(&pw, &t, NULL), 0);
    assert_true(pw.kr >= 0);
    float *x = malloc(sizeof(float) * K * n_tok);
    tu_fill(x, (size_t)(K * n_tok), -2, 2);
    for (int64_t i = 0; i < K * n_tok; i += 7)
        x[i] *= 8.0f;
    float *y = malloc(sizeof(float) * N * n_tok);
    const plume_cpu_weight *pws[1] = {&pw};
    float *ys[1] = {y};
    plume_cpu_matmul_multi_with(k, pool, pws, 1, x, n_tok, ys);
    check_matmul_vs_dequant(type, plume_cpu_level_name(k->level), w, rb, x, y, K, N, n_tok,
                            true);
    plume_cpu_weight_release(&pw);
    free(w); free(x); free(y);
}

static void test_matmul_w_vs_dequant(void **state)
{
    (void)state;
    plume_pool *pool;
    assert_int_equal(plume_pool_create(2, &pool, NULL), 0);
    const int toks[] = {1, 3, 17, 64};
    for (int l = 0; l < n_levels; l++)
        for (size_t ti = 0; ti < N_RP; ti++)
            for (size_t j = 0; j < sizeof toks / sizeof toks[0]; j++) {
                check_exact(levels[l], pool, RP_TYPES[ti], 512, 37, toks[j]);
                if (plume_dtype_block_elems(RP_TYPES[ti]) == 32)
                    check_exact(levels[l], pool, RP_TYPES[ti], 96, 5, toks[j]);
                else
                    check_exact(levels[l], pool, RP_TYPES[ti], 768, 5, toks[j]);
            }
    plume_pool_free(pool);
}

/* The same bits for one (row, token) whatever the batch, threads, chunking
 * and whether the activations are shared with other matmuls.  At K = 8192
 * a matmul of the 64 tokens runs its kernels on blocks of 24 of them (48
 * at the amx level; matmul.c: mr_token_block), at the smaller K on all at
 * once. */
static void test_batch_invariance(void **state)
{
    (void)state;
    enum { NT = 64 };
    plume_pool *pools[2];
    assert_int_equal(plume_pool_create(1, &pools[0], NULL), 0);
    assert_int_equal(plume_pool_create(2, &pools[1], NULL), 0);
    const int64_t Ks[] = {96, 576, 8192};
    const int64_t Ns[] = {37, 200, 37};
    for (size_t ki = 0; ki < 3; ki++)
        for (size_t ti = 0; ti < N_RP; ti++) {
            const uint32_t type = RP_TYPES[ti];
            const int64_t K = ki < 2 && plume_dtype_block_elems(type) == 256 ? (int64_t)(256 * (ki + 1))
                                                                              : Ks[ki];
            const int64_t N = Ns[ki];
            size_t rb, rb2;
            uint8_t *w = tu_weights(type, K, (int)N, &rb);
            uint8_t *w2 = tu_weights(type, K, 21, &rb2);
            plume_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1},
                              .data = w, .nbytes = rb * (size_t)N};
            plume_tensor t2 = {.name = "w2", .type = type, .n_dims = 2, .ne = {K, 21, 1, 1},
                               .data = w2, .nbytes = rb2 * 21};
            plume_cpu_weight pw, pw2;
            assert_int_equal(plume_cpu_weight_init(&pw, &t, NULL), 0);
            assert_int_equal(plume_cpu_weight_init(&pw2, &t2, NULL), 0);
            float *x = malloc(sizeof(float) * K * NT);
            tu_fill(x, (size_t)(K * NT), -2, 2);
            float *ref = malloc(sizeof(float) * N * NT), *y = malloc(sizeof(float) * N * NT);
            float *y2 = malloc(sizeof(float) * 21 * NT);
            for (int l = 0; l < n_levels; l++) {
                const plume_kernels *k = levels[l];
                const plume_cpu_weight *one[1] = {&pw};
                float *yo[1] = {ref};
                plume_cpu_matmul_multi_with(k, pools[1], one, 1, x, NT, yo);
                for (int p = 0; p < 2; p++) {
                    /* every token alone */
                    for (int tk = 0; tk < NT; tk++) {
                        yo[0] = y + tk * N;
                        plume_cpu_matmul_multi_with(k, pools[p], one, 1, x + tk * K, 1, yo);
                    }
                    if (memcmp(ref, y, sizeof(float) * N * NT) != 0)
                        fail_msg("%s level %s K=%lld threads %d: n_tok=1 differs from n_tok=64",
                                 plume_dtype_name(type), plume_cpu_level_name(k->level),
                                 (long long)K, p + 1);
                    /* batches of 5 (and a last one of 4) */
                    for (int tk = 0; tk < NT; tk += 5) {
                        yo[0] = y + tk * N;
                        plume_cpu_matmul_multi_with(k, pools[p], one, 1, x + tk * K,
                                                    NT - tk < 5 ? NT - tk : 5, yo);
                    }
                    if (memcmp(ref, y, sizeof(float) * N * NT) != 0)
                        fail_msg("%s level %s K=%lld threads %d: n_tok=5 differs from n_tok=64",
                                 plume_dtype_name(type), plume_cpu_level_name(k->level),
                                 (long long)K, p + 1);
                    /* all 64, sharing the activations with a second weight */
                    const plume_cpu_weight *two[2] = {&pw2, &pw};
                    float *yt[2] = {y2, y};
                    plume_cpu_matmul_multi_with(k, pools[p], two, 2, x, NT, yt);
                    if (memcmp(ref, y, sizeof(float) * N * NT) != 0)
                        fail_msg("%s level %s K=%lld threads %d: multi differs from single",
                                 plume_dtype_name(type), plume_cpu_level_name(k->level),
                                 (long long)K, p + 1);
                }
            }
            plume_cpu_weight_release(&pw);
            plume_cpu_weight_release(&pw2);
            free(w); free(w2); free(x); free(ref); free(y); free(y2);
        }
    plume_pool_free(pools[0]);
    plume_pool_free(pools[1]);
}

/* The mm_r kernels' token tiles: a (row, token) result has the same bits
 * whether the token is alone or in a call of n tokens for every n that
 * gives a different tiling (full tiles, ragged tails of 1..5, the 1-2 and
 * 3+ token paths of the avx512 level, the amx level's tiles of 16 with and
 * without a tail, its passes of 256 tokens and its chunks of 32 blocks, the
 * last one short), at every level and type; and the amx level's bits are
 * the avx512 level's. */
static void test_tile_invariance(void **state)
{
    (void)state;
    enum { NT = 276, NR = 37 }; /* 276: the amx level's passes of 256 tokens, then one tile and a tail */
    const int batches[] = {2, 3, 4, 7, 9, 14, 16, 48, 276};
    for (size_t ti = 0; ti < N_RP; ti++) {
        const uint32_t type = RP_TYPES[ti];
        /* 40 or 41 blocks: two of the amx level's chunks, the second short */
        const int64_t K = plume_dtype_block_elems(type) == 256 ? 1280 : 1312, nb = K / 32;
        size_t rb;
        uint8_t *w = tu_weights(type, K, NR, &rb);
        plume_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, NR, 1, 1}, .data = w,
                          .nbytes = rb * NR};
        plume_cpu_weight pw;
        assert_int_equal(plume_cpu_weight_init(&pw, &t, NULL), 0);
        assert_int_equal(pw.kr, (int)ti);
        float *x = malloc(sizeof(float) * K * NT);
        tu_fill(x, (size_t)(K * NT), -2, 2);
        int8_t *aq = malloc((size_t)(K * NT));
        float *ad = malloc(sizeof(float) * nb * NT), *as = malloc(sizeof(float) * nb * NT);
        int32_t *ai = malloc(sizeof(int32_t) * nb * NT), *ai16 = malloc(sizeof(int32_t) * 2 * nb * NT);
        float *as16 = malloc(sizeof(float) * 2 * nb * NT);
        quantize_all(x, K, NT, aq, ad, as, ai, ai16, as16);
        plume_q8_act all = {aq, ad, as, K, ai, ai16, as16, NULL, 0};
        plume_q8_blk *blk = aligned_alloc(64, plume_cpu_act_blocks_bytes(NT, K));
        plume_cpu_act_blocks(&all, NT, blk);
        float *ref = malloc(sizeof(float) * NR * NT), *y = malloc(sizeof(float) * NR * NT);
        float *ref512 = malloc(sizeof(float) * NR * NT);
        bool have512 = false;
        for (int l = 0; l < n_levels; l++) {
            const plume_kernels *k = levels[l];
            for (int tk = 0; tk < NT; tk++) { /* every token alone */
                const plume_q8_act one = {aq + tk * K, ad + tk * nb, as + tk * nb, K, ai + tk * nb,
                                          ai16 + 2 * tk * nb, as16 + 2 * tk * nb, blk + tk, all.ldb};
                k->mm_r[pw.kr](pw.packed, NR, &one, 1, ref + tk * NR, NR);
            }
            if (k->level == PLUME_CPU_AVX512) {
                memcpy(ref512, ref, sizeof(float) * NR * NT);
                have512 = true;
            }
            for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
                const int bs = batches[bi];
                memset(y, 0, sizeof(float) * NR * NT);
                for (int t0 = 0; t0 < NT; t0 += bs) {
                    const int n = NT - t0 < bs ? NT - t0 : bs;
                    const plume_q8_act part = {aq + t0 * K, ad + t0 * nb, as + t0 * nb, K,
                                               ai + t0 * nb, ai16 + 2 * t0 * nb, as16 + 2 * t0 * nb,
                                               blk + t0, all.ldb};
                    k->mm_r[pw.kr](pw.packed, NR, &part, n, y + t0 * NR, NR);
                }
                if (memcmp(ref, y, sizeof(float) * NR * NT) != 0)
                    fail_msg("%s level %s: calls of %d tokens differ from 1 token at a time",
                             plume_dtype_name(type), plume_cpu_level_name(k->level), bs);
                /* the amx level is the avx512 level's arithmetic on other
                 * units: its calls of many tokens, on tiles, have the
                 * avx512 level's bits */
                if (k->level == PLUME_CPU_AMX && have512 &&
                    memcmp(ref512, y, sizeof(float) * NR * NT) != 0)
                    fail_msg("%s: the amx level's calls of %d tokens differ from the avx512 level's",
                             plume_dtype_name(type), bs);
            }
        }
        plume_cpu_weight_release(&pw);
        free(w); free(x); free(aq); free(ad); free(as); free(ai); free(ai16); free(as16);
        free(blk); free(ref); free(ref512); free(y);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mm_r_vs_dequant),
        cmocka_unit_test(test_mxfp4_scales),
        cmocka_unit_test(test_weight_fallback),
        cmocka_unit_test(test_matmul_w_vs_dequant),
        cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_tile_invariance),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
