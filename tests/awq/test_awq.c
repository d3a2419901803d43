/* quant-awq: AWQ GEMM packing against words built here by hand from the
 * layout facts of formats.md §2.2/§2.3 (the [0,2,4,6,1,3,5,7] interleave,
 * true zero points), the conversion into quant-gptq's arrays, the shared
 * repacked layer on every kernel level against x · dequant(W)ᵀ computed in
 * double straight from the AWQ words, AutoAWQ's min-max quantizer, and the
 * config's errors (versions, bits, group sizes). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "awq_linear.h"
#include "awq_pack.h"
#include "awq_quantizer.h"
#include "gptq_kernels.h"
#include "gptq_layer.h"
#include "gptq_pack.h"
#include "gptq_test_rng.h"
#include "plume/cpu.h"
#include "plume/fp16.h"

/* The test's own reading of §2.2: nibble i (bits 4i..4i+3) of word c holds
 * column 8c + order[i]. */
static const int k_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};

static unsigned nibble(uint32_t w, int i) { return (w >> (4 * i)) & 15u; }

/* Column n of a row of AWQ words, found by searching the interleave. */
static unsigned hand_code(const int32_t *row, int64_t n)
{
    for (int i = 0; i < 8; i++)
        if (k_order[i] == n % 8)
            return nibble((uint32_t)row[n / 8], i);
    return 99;
}

static void test_hand_words(void **st)
{
    (void)st;
    /* codes of columns 0..7 = 1..8: nibbles 0..7 carry columns
     * 0,2,4,6,1,3,5,7 = codes 1,3,5,7,2,4,6,8 -> 0x86427531 */
    const uint8_t codes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 15, 0, 0, 0, 0, 0, 0, 9};
    int32_t w[2];
    plume_error err = {0};
    assert_int_equal(awq_pack(codes, 1, 16, w, &err), 0);
    assert_int_equal((uint32_t)w[0], 0x86427531u);
    /* column 8 (=15) in nibble 0, column 15 (=9) in nibble 7 */
    assert_int_equal((uint32_t)w[1], 0x9000000Fu);
    uint8_t back[16];
    assert_int_equal(awq_unpack(w, 1, 16, back, &err), 0);
    assert_memory_equal(back, codes, 16);
    for (int n = 0; n < 16; n++)
        assert_int_equal(awq_code(w, 16, 0, n), codes[n]);
    /* the reverse order §2.2 states */
    const int rev[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    for (int j = 0; j < 8; j++)
        assert_int_equal(awq_reverse_order[j], rev[j]);
    /* a hand word read back: 0x76543210 has nibble i = i, so column j = rev[j] */
    const int32_t hw = 0x76543210;
    for (int j = 0; j < 8; j++)
        assert_int_equal(awq_code(&hw, 8, 0, j), (unsigned)rev[j]);
    /* errors: a code over 15, N not a multiple of 8 */
    uint8_t bad[8] = {0, 0, 0, 16, 0, 0, 0, 0};
    assert_int_equal(awq_pack(bad, 1, 8, w, &err), -1);
    assert_non_null(strstr(err.msg, "4 bits"));
    assert_int_equal(awq_unpack(w, 1, 12, back, &err), -1);
    assert_non_null(strstr(err.msg, "multiple of 8"));
}

/* Dequantization with true zeros (no GPTQ v1 −1; §2.3): a zero of 0 and of
 * 15 are both representable. */
static void test_zeros_and_dequant(void **st)
{
    (void)st;
    enum { K = 4, N = 8, GS = 2 };
    /* qweight [K][N/8]: row k has codes k + column (mod 16) */
    int32_t qw[K], qz[K / GS];
    for (int k = 0; k < K; k++) {
        uint32_t w = 0;
        for (int i = 0; i < 8; i++)
            w |= (uint32_t)((k + k_order[i]) % 16) << (4 * i);
        qw[k] = (int32_t)w;
    }
    /* zeros: group 0 all 0, group 1 columns' zero = 15 − column */
    qz[0] = 0;
    uint32_t z1 = 0;
    for (int i = 0; i < 8; i++)
        z1 |= (uint32_t)(15 - k_order[i]) << (4 * i);
    qz[1] = (int32_t)z1;
    float sc[K / GS * N];
    for (int i = 0; i < K / GS * N; i++)
        sc[i] = 0.25f * (float)(i + 1);
    float W[N * K];
    plume_error err = {0};
    assert_int_equal(awq_dequantize(qw, qz, sc, K, N, GS, W, &err), 0);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int g = k / GS, z = g == 0 ? 0 : 15 - n;
            float want = (float)((k + n) % 16 - z) * sc[g * N + n];
            assert_float_equal(W[n * K + k], want, 0);
            assert_int_equal(hand_code(&qw[k], n), (unsigned)((k + n) % 16));
        }
    assert_int_equal(awq_dequantize(qw, qz, sc, K, N, 3, W, &err), -1);
    assert_non_null(strstr(err.msg, "group_size"));
}

static void fill_random_awq(int64_t K, int64_t N, int64_t gs, int32_t *qw, int32_t *qz, float *sc)
{
    const int64_t G = K / gs;
    for (int64_t i = 0; i < K * N / 8; i++)
        qw[i] = (int32_t)(rnd() ^ (rnd() << 16));
    for (int64_t i = 0; i < G * N / 8; i++)
        qz[i] = (int32_t)(rnd() ^ (rnd() << 16));
    for (int64_t i = 0; i < G * N; i++)
        sc[i] = plume_fp16_to_fp32(plume_fp32_to_fp16(0.002f + 0.01f * fabsf(rndf())));
}

/* awq_to_gptq: the GPTQ arrays hold the same codes and true zeros
 * (read back with quant-gptq's own unpackers, format gptq_v2). */
static void test_to_gptq(void **st)
{
    (void)st;
    rng_seed(11);
    enum { K = 64, N = 24, GS = 32, G = K / GS };
    int32_t qw[K * N / 8], qz[G * N / 8], gq[K / 8 * N], gz[G * N / 8], zeros[G * N];
    float sc[G * N];
    fill_random_awq(K, N, GS, qw, qz, sc);
    plume_error err = {0};
    assert_int_equal(awq_to_gptq(qw, qz, K, N, G, gq, gz, &err), 0);
    uint8_t codes[K * N];
    assert_int_equal(gptq_unpack_qweight(gq, K, N, 4, codes, &err), 0);
    assert_int_equal(gptq_unpack_qzeros(gz, G, N, 4, GPTQ_ZERO_V2, zeros, &err), 0);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            assert_int_equal(codes[k * N + n], hand_code(&qw[k * N / 8], n));
    for (int g = 0; g < G; g++)
        for (int n = 0; n < N; n++)
            assert_int_equal(zeros[g * N + n], (int32_t)hand_code(&qz[g * N / 8], n));
}

static const int k_levels[] = {PLUME_CPU_LEVEL_SCALAR, PLUME_CPU_LEVEL_AVX2,
                               PLUME_CPU_LEVEL_AVX512};

/* The layer built from AWQ tensors against x · Wᵀ in double, W dequantized
 * here from the words (hand_code): the reference kernel to float rounding,
 * every fast level this CPU runs to int8-activation accuracy, and on each
 * level a token alone bit-identical to the same token in a batch. */
static void check_layer(int64_t K, int64_t N, int64_t gs, bool with_bias)
{
    const int64_t G = K / gs;
    const int T = 5;
    int32_t *qw = malloc(sizeof *qw * (size_t)(K * N / 8)), *qz = malloc(sizeof *qz * (size_t)(G * N / 8));
    float *sc = malloc(sizeof *sc * (size_t)(G * N)), *bias = malloc(sizeof *bias * (size_t)N);
    float *x = malloc(sizeof *x * (size_t)(T * K)), *y = malloc(sizeof *y * (size_t)(T * N));
    double *want = malloc(sizeof *want * (size_t)(T * N));
    fill_random_awq(K, N, gs, qw, qz, sc);
    for (int64_t i = 0; i < N; i++)
        bias[i] = rndf();
    for (int64_t i = 0; i < T * K; i++)
        x[i] = rndf();
    double scale = 0;
    for (int t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double acc = with_bias ? bias[n] : 0;
            for (int64_t k = 0; k < K; k++) {
                const int64_t g = k / gs;
                const double w = ((double)hand_code(&qw[k * N / 8], n) -
                                  (double)hand_code(&qz[g * N / 8], n)) * sc[g * N + n];
                acc += (double)x[t * K + k] * w;
            }
            want[t * N + n] = acc;
            scale = fmax(scale, fabs(acc));
        }
    gptq_layer *l = NULL;
    plume_error err = {0};
    assert_int_equal(awq_layer_build(qw, qz, sc, with_bias ? bias : NULL, K, N, gs, "test", &l, &err), 0);
    assert_true(gptq_layer_fast(l));
    assert_int_equal(gptq_forward_ref(l, x, T, y, &err), 0);
    for (int64_t i = 0; i < T * N; i++)
        assert_true(fabs(y[i] - want[i]) <= 1e-4 * (1 + scale));
    int ran = 0;
    for (size_t li = 0; li < sizeof k_levels / sizeof k_levels[0]; li++) {
        if (!gptq_kernels_for(k_levels[li]))
            continue;
        assert_int_equal(gptq_forward_level(l, k_levels[li], NULL, NULL, x, T, y, &err), 0);
        double worst = 0;
        for (int64_t i = 0; i < T * N; i++)
            worst = fmax(worst, fabs(y[i] - want[i]));
        /* int8 activations: a relative error of about 1/127 per block */
        assert_true(worst <= 0.02 * (1 + scale));
        /* each token alone gives the same bits as the batch (the property
         * that keeps a prompt's logits independent of batching/chunks) */
        float one[64];
        assert_true(N <= 64);
        for (int t = 0; t < T; t++) {
            assert_int_equal(gptq_forward_level(l, k_levels[li], NULL, NULL, x + t * K, 1, one, &err), 0);
            assert_memory_equal(one, y + t * N, sizeof(float) * (size_t)N);
        }
        ran++;
    }
    assert_true(ran >= 1);
    gptq_layer_free(l);
    free(qw);
    free(qz);
    free(sc);
    free(bias);
    free(x);
    free(y);
    free(want);
}

static void test_layer(void **st)
{
    (void)st;
    rng_seed(5);
    check_layer(256, 48, 32, true);
    check_layer(256, 40, 64, false);
    check_layer(384, 64, 128, true);
}

/* AutoAWQ's pseudo_quantize_tensor (§2.3) on one group, by hand. */
static void test_rtn(void **st)
{
    (void)st;
    float w[32];
    for (int i = 0; i < 32; i++)
        w[i] = -0.3f + 0.05f * (float)i; /* min -0.3, max 1.25 */
    uint8_t codes[32], zero;
    float scale, deq[32];
    awq_rtn(w, 1, 32, 32, codes, &zero, &scale, deq);
    const float s = plume_fp16_to_fp32(plume_fp32_to_fp16(1.55f / 15.0f));
    assert_float_equal(scale, s, 0);
    const float z = roundf(0.3f / s); /* -round(min/s) = 3 */
    assert_int_equal(zero, (int)z);
    for (int i = 0; i < 32; i++) {
        float q = fminf(15.f, fmaxf(0.f, roundf(w[i] / s) + z));
        assert_int_equal(codes[i], (int)q);
        assert_float_equal(deq[i], s * (q - z), 0);
    }
    /* a constant group: the 1e-5 floor on the range */
    float c[32];
    for (int i = 0; i < 32; i++)
        c[i] = 0.5f;
    awq_rtn(c, 1, 32, 32, codes, &zero, &scale, deq);
    assert_true(scale > 0 && isfinite(deq[0]));
}

/* Settings -> config errors, each naming what was wrong. */
static void expect_config(const char *key, const char *value, const char *want)
{
    plume_settings *s = NULL;
    plume_error err = {0};
    assert_int_equal(plume_settings_new("quantization_config", &s, &err), 0);
    assert_int_equal(plume_settings_set(s, "quant_method", "awq", &err), 0);
    if (key)
        assert_int_equal(plume_settings_set(s, key, value, &err), 0);
    awq_load_config c;
    int rc = awq_config_from_settings(s, &c, &err);
    if (!want) {
        assert_int_equal(rc, 0);
    } else {
        assert_int_equal(rc, -1);
        if (!strstr(err.msg, want))
            fail_msg("config %s = %s: message \"%s\" lacks \"%s\"", key, value, err.msg, want);
    }
    plume_settings_free(s);
}

static void test_config(void **st)
{
    (void)st;
    expect_config(NULL, NULL, NULL);
    expect_config("version", "GEMM", NULL);
    expect_config("group_size", "64", NULL);
    expect_config("version", "gemv", "gemv");
    expect_config("version", "GEMV_fast", "gemv_fast");
    expect_config("version", "marlin", "marlin");
    expect_config("version", "exllama", "exllama");
    expect_config("version", "v9", "unknown version");
    expect_config("bits", "8", "4-bit only");
    expect_config("group_size", "48", "multiple of 32");
    expect_config("group_size", "-1", "multiple of 32");
    expect_config("zero_point", "false", "zero_point");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_words),
        cmocka_unit_test(test_zeros_and_dequant),
        cmocka_unit_test(test_to_gptq),
        cmocka_unit_test(test_layer),
        cmocka_unit_test(test_rtn),
        cmocka_unit_test(test_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
