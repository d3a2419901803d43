/* quant-gptq: packing vectors written from the layout facts of
 * formats.md §1.2/§1.3 (expected words are literals or computed here from
 * the stated bit positions, never by the plugin's packer), RTN round trips
 * over bits × sym × format × desc_act, the reference kernel and the "gptq"
 * linear provider (through the registry, on a safetensors file this test
 * writes byte by byte) against x · dequant(W)ᵀ, and the error messages. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gptq_linear.h"
#include "gptq_pack.h"
#include "plume/fp16.h"
#include "gptq_rtn.h"
#include "plume/plugin.h"
#include "plume/registry.h"
#include "gptq_test_rng.h"

const plume_plugin_desc *plume_plugin_entry_quant_gptq_init(void);


/* The test's own reading of the layout (§1.2): field j of a word is bits
 * [b·j, b·j+b−1]. */
static unsigned field(uint32_t w, int bits, int j) { return (w >> (bits * j)) & ((1u << bits) - 1u); }

/* Code i of a packed run (§1.2): for 2/4/8 bits word i/pf, field i%pf; for
 * 3 bits, blocks of 32 codes in 3 words laid out as §1.2 lists them. */
static unsigned code_at(const int32_t *w, int64_t stride, int bits, int64_t i)
{
    if (bits != 3) {
        int pf = 32 / bits;
        return field((uint32_t)w[(i / pf) * stride], bits, (int)(i % pf));
    }
    const int32_t *b = w + (i / 32) * 3 * stride;
    uint32_t w0 = (uint32_t)b[0], w1 = (uint32_t)b[stride], w2 = (uint32_t)b[2 * stride];
    int j = (int)(i % 32);
    if (j < 10)
        return (w0 >> (3 * j)) & 7u;
    if (j == 10)
        return (w0 >> 30) | ((w1 & 1u) << 2);
    if (j < 21)
        return (w1 >> (3 * (j - 11) + 1)) & 7u;
    if (j == 21)
        return (w1 >> 31) | ((w2 & 3u) << 1);
    return (w2 >> (3 * (j - 22) + 2)) & 7u;
}

/* ---- (a) hand vectors ---- */

static void test_qweight_vectors(void **st)
{
    (void)st;
    plume_error err = {0};
    /* 4-bit, K = 8 rows, N = 2: column 0 holds codes 1..8 in rows 0..7,
     * column 1 alternates 15, 0.  Lowest row in the lowest nibble. */
    uint8_t c4[16], back[64];
    for (int k = 0; k < 8; k++) {
        c4[k * 2 + 0] = (uint8_t)(k + 1);
        c4[k * 2 + 1] = (uint8_t)(k % 2 == 0 ? 15 : 0);
    }
    int32_t qw[4];
    assert_int_equal(gptq_pack_qweight(c4, 8, 2, 4, qw, &err), 0);
    assert_int_equal((uint32_t)qw[0], 0x87654321u);
    assert_int_equal((uint32_t)qw[1], 0x0F0F0F0Fu);
    assert_int_equal(gptq_unpack_qweight(qw, 8, 2, 4, back, &err), 0);
    assert_memory_equal(back, c4, 16);

    /* 2-bit, K = 16 rows, N = 1: code k % 4 -> fields 0,1,2,3 repeating =
     * 0b11100100 per byte. */
    uint8_t c2[16];
    for (int k = 0; k < 16; k++)
        c2[k] = (uint8_t)(k % 4);
    assert_int_equal(gptq_pack_qweight(c2, 16, 1, 2, qw, &err), 0);
    assert_int_equal((uint32_t)qw[0], 0xE4E4E4E4u);
    assert_int_equal(gptq_unpack_qweight(qw, 16, 1, 2, back, &err), 0);
    assert_memory_equal(back, c2, 16);

    /* 8-bit, K = 4 rows, N = 1: rows 0..3 = 0x10, 0x20, 0x30, 0xFF. */
    uint8_t c8[4] = {0x10, 0x20, 0x30, 0xFF};
    assert_int_equal(gptq_pack_qweight(c8, 4, 1, 8, qw, &err), 0);
    assert_int_equal((uint32_t)qw[0], 0xFF302010u);

    /* Packing is along the input dim: with N = 2, word [r][n] holds rows
     * r*pf.. of column n (8-bit, K = 8: two word rows). */
    uint8_t c8b[16];
    for (int k = 0; k < 8; k++) {
        c8b[k * 2] = (uint8_t)k;
        c8b[k * 2 + 1] = (uint8_t)(100 + k);
    }
    assert_int_equal(gptq_pack_qweight(c8b, 8, 2, 8, qw, &err), 0);
    assert_int_equal((uint32_t)qw[0], 0x03020100u);
    assert_int_equal((uint32_t)qw[1], 0x67666564u);
    assert_int_equal((uint32_t)qw[2], 0x07060504u);
    assert_int_equal((uint32_t)qw[3], 0x6B6A6968u);
}

static void test_3bit_vectors(void **st)
{
    (void)st;
    plume_error err = {0};
    /* §1.2, 3 bits: codes 0..31 of one column with value (i % 8); words
     * built here from the stated bit positions. */
    uint8_t c[32], back[32];
    for (int i = 0; i < 32; i++)
        c[i] = (uint8_t)((i * 5 + 3) % 8);
    uint32_t w0 = 0, w1 = 0, w2 = 0;
    for (int j = 0; j < 10; j++)
        w0 |= (uint32_t)c[j] << (3 * j);
    w0 |= (uint32_t)(c[10] & 3u) << 30;
    w1 |= (uint32_t)(c[10] >> 2);
    for (int j = 11; j < 21; j++)
        w1 |= (uint32_t)c[j] << (3 * (j - 11) + 1);
    w1 |= (uint32_t)(c[21] & 1u) << 31;
    w2 |= (uint32_t)(c[21] >> 1);
    for (int j = 22; j < 32; j++)
        w2 |= (uint32_t)c[j] << (3 * (j - 22) + 2);
    int32_t qw[3];
    assert_int_equal(gptq_pack_qweight(c, 32, 1, 3, qw, &err), 0);
    assert_int_equal((uint32_t)qw[0], w0);
    assert_int_equal((uint32_t)qw[1], w1);
    assert_int_equal((uint32_t)qw[2], w2);
    assert_int_equal(gptq_unpack_qweight(qw, 32, 1, 3, back, &err), 0);
    assert_memory_equal(back, c, 32);
    /* All-ones codes fill all 96 bits; code 10 alone = bits 30, 31, 32. */
    memset(c, 7, 32);
    assert_int_equal(gptq_pack_qweight(c, 32, 1, 3, qw, &err), 0);
    assert_int_equal((uint32_t)qw[0] & (uint32_t)qw[1] & (uint32_t)qw[2], 0xFFFFFFFFu);
    memset(c, 0, 32);
    c[10] = 7;
    c[21] = 5; /* bit 0 -> word1 bit 31, bits 1..2 = 0b10 -> word2 bit 1 */
    assert_int_equal(gptq_pack_qweight(c, 32, 1, 3, qw, &err), 0);
    assert_int_equal((uint32_t)qw[0], 0xC0000000u);
    assert_int_equal((uint32_t)qw[1], 0x80000001u);
    assert_int_equal((uint32_t)qw[2], 0x00000002u);
    /* qzeros: the same stream along the output dim; sym 3-bit zero 4 is
     * stored 3 in v1 (0b011 in every field). */
    int32_t z[32], qz[3];
    for (int n = 0; n < 32; n++)
        z[n] = 4;
    assert_int_equal(gptq_pack_qzeros(z, 1, 32, 3, GPTQ_ZERO_V1, qz, &err), 0);
    for (int n = 0; n < 32; n++)
        assert_int_equal(code_at(qz, 1, 3, n), 3);
    assert_int_equal(gptq_unpack_qzeros(qz, 1, 32, 3, GPTQ_ZERO_V1, z, &err), 0);
    for (int n = 0; n < 32; n++)
        assert_int_equal(z[n], 4);
    /* 3-bit needs the packed dim to be a multiple of 32 */
    assert_int_equal(gptq_pack_qweight(c, 16, 1, 3, qw, &err), -1);
    assert_non_null(strstr(err.msg, "multiple of 32"));
}

static void test_qzeros_vectors(void **st)
{
    (void)st;
    plume_error err = {0};
    int32_t z[16], qz[4];
    /* formats.md §1.3: sym v1 words. */
    int32_t w4 = (int32_t)0x77777777u, w8 = (int32_t)0x7F7F7F7Fu, w2 = (int32_t)0x55555555u;
    assert_int_equal(gptq_unpack_qzeros(&w4, 1, 8, 4, GPTQ_ZERO_V1, z, &err), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(z[i], 8);
    assert_int_equal(gptq_unpack_qzeros(&w8, 1, 4, 8, GPTQ_ZERO_V1, z, &err), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(z[i], 128);
    assert_int_equal(gptq_unpack_qzeros(&w2, 1, 16, 2, GPTQ_ZERO_V1, z, &err), 0);
    for (int i = 0; i < 16; i++)
        assert_int_equal(z[i], 2);
    /* The same words in v2 mean the stored value itself. */
    assert_int_equal(gptq_unpack_qzeros(&w4, 1, 8, 4, GPTQ_ZERO_V2, z, &err), 0);
    assert_int_equal(z[0], 7);
    /* Packing writes those words back (sym zero 8 / 128 / 2 in v1), and
     * v2 = v1 + 0x11111111 for 4-bit (GPTQModel's conversion constant). */
    for (int i = 0; i < 16; i++)
        z[i] = 8;
    assert_int_equal(gptq_pack_qzeros(z, 1, 8, 4, GPTQ_ZERO_V1, qz, &err), 0);
    assert_int_equal((uint32_t)qz[0], 0x77777777u);
    assert_int_equal(gptq_pack_qzeros(z, 1, 8, 4, GPTQ_ZERO_V2, qz, &err), 0);
    assert_int_equal((uint32_t)qz[0], 0x77777777u + 0x11111111u);
    for (int i = 0; i < 4; i++)
        z[i] = 128;
    assert_int_equal(gptq_pack_qzeros(z, 1, 4, 8, GPTQ_ZERO_V1, qz, &err), 0);
    assert_int_equal((uint32_t)qz[0], 0x7F7F7F7Fu);
    for (int i = 0; i < 16; i++)
        z[i] = 2;
    assert_int_equal(gptq_pack_qzeros(z, 1, 16, 2, GPTQ_ZERO_V1, qz, &err), 0);
    assert_int_equal((uint32_t)qz[0], 0x55555555u);
    assert_int_equal(gptq_pack_qzeros(z, 1, 16, 2, GPTQ_ZERO_V2, qz, &err), 0);
    assert_int_equal((uint32_t)qz[0], 0x55555555u + 0x55555555u);
    /* Consecutive output columns, lowest column in the lowest bits; two
     * groups x 16 columns (4-bit: 2 words per group row). */
    int32_t zz[32];
    for (int g = 0; g < 2; g++)
        for (int n = 0; n < 16; n++)
            zz[g * 16 + n] = (n + g) % 16;
    assert_int_equal(gptq_pack_qzeros(zz, 2, 16, 4, GPTQ_ZERO_V2, qz, &err), 0);
    assert_int_equal((uint32_t)qz[0], 0x76543210u);
    assert_int_equal((uint32_t)qz[1], 0xFEDCBA98u);
    assert_int_equal((uint32_t)qz[2], 0x87654321u);
    assert_int_equal((uint32_t)qz[3], 0x0FEDCBA9u);
    /* v1: stored zero − 1; a stored field 15 reads as 16 (mask, then +1). */
    int32_t one = (int32_t)0xF0000000u;
    assert_int_equal(gptq_unpack_qzeros(&one, 1, 8, 4, GPTQ_ZERO_V1, z, &err), 0);
    assert_int_equal(z[0], 1);
    assert_int_equal(z[7], 16);
    /* v1 cannot store a zero of 0. */
    for (int i = 0; i < 8; i++)
        z[i] = 1;
    z[3] = 0;
    assert_int_equal(gptq_pack_qzeros(z, 1, 8, 4, GPTQ_ZERO_V1, qz, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_RANGE);
    assert_non_null(strstr(err.msg, "gptq (v1)"));
    assert_int_equal(gptq_pack_qzeros(z, 1, 8, 4, GPTQ_ZERO_V2, qz, &err), 0);
}

static void test_dequant_vector(void **st)
{
    (void)st;
    plume_error err = {0};
    /* 4-bit, K = 8, N = 8, group 4, v1 sym (zero 8): qweight words written
     * by hand.  Column n holds code (k + n) % 16 in row k. */
    int32_t qw[8], qz[2];
    for (int n = 0; n < 8; n++) {
        uint32_t w = 0;
        for (int k = 0; k < 8; k++)
            w |= (uint32_t)((k + n) % 16) << (4 * k);
        qw[n] = (int32_t)w;
    }
    qz[0] = qz[1] = (int32_t)0x77777777u;
    float sc[16];
    for (int i = 0; i < 16; i++)
        sc[i] = 0.5f + 0.25f * (float)i;
    float W[64];
    assert_int_equal(gptq_dequantize(qw, qz, sc, NULL, 8, 8, 2, 4, 4, GPTQ_ZERO_V1, W, &err), 0);
    for (int n = 0; n < 8; n++)
        for (int k = 0; k < 8; k++)
            assert_float_equal(W[n * 8 + k], sc[(k / 4) * 8 + n] * (float)((k + n) % 16 - 8),
                               0.0f);
    /* Arbitrary g_idx: each row picks its own group. */
    int32_t gi[8] = {1, 0, 1, 0, 0, 1, 1, 0};
    assert_int_equal(gptq_dequantize(qw, qz, sc, gi, 8, 8, 2, 4, 4, GPTQ_ZERO_V1, W, &err), 0);
    for (int n = 0; n < 8; n++)
        for (int k = 0; k < 8; k++)
            assert_float_equal(W[n * 8 + k], sc[gi[k] * 8 + n] * (float)((k + n) % 16 - 8), 0.0f);
    gi[2] = 2;
    assert_int_equal(gptq_dequantize(qw, qz, sc, gi, 8, 8, 2, 4, 4, GPTQ_ZERO_V1, W, &err), -1);
    assert_non_null(strstr(err.msg, "g_idx[2]"));
}

/* ---- round trips ---- */

/* The test's own dequantization of checkpoint tensors (formats.md §1.5). */
static void ref_dequant(const gptq_tensors *t, gptq_zero_format fmt, float *W)
{
    int b = t->bits;
    int64_t nw = t->N * b / 32;
    for (int64_t k = 0; k < t->K; k++)
        for (int64_t n = 0; n < t->N; n++) {
            int g = t->g_idx[k];
            int q = (int)code_at(t->qweight + n, t->N, b, k);
            int z = (int)code_at(t->qzeros + g * nw, 1, b, n) + (fmt == GPTQ_ZERO_V1 ? 1 : 0);
            W[n * t->K + k] = t->scales[g * t->N + n] * (float)(q - z);
        }
}

static void test_round_trips(void **st)
{
    (void)st;
    const int bits_list[] = {2, 3, 4, 8};
    const int64_t K = 128, N = 32;
    const int64_t gs_list[] = {32, -1};
    float *W = malloc(sizeof(float) * K * N), *D = malloc(sizeof(float) * K * N),
          *D2 = malloc(sizeof(float) * K * N);
    uint8_t *codes = malloc((size_t)(K * N));
    int32_t *perm = malloc(sizeof(int32_t) * K), *zeros = malloc(sizeof(int32_t) * K * N);
    int32_t *words = malloc(sizeof(int32_t) * K * N);
    for (int64_t i = 0; i < K * N; i++)
        W[i] = rndf() * (i % 7 == 0 ? 2.0f : 0.5f) + (i % 5 == 0 ? 0.3f : 0.0f);
    for (size_t bi = 0; bi < 4; bi++)
        for (int sym = 0; sym < 2; sym++)
            for (int f = 1; f <= 2; f++)
                for (int da = 0; da < 2; da++)
                    for (size_t gi = 0; gi < 2; gi++) {
                        plume_error err = {0};
                        gptq_qconfig cfg = {bits_list[bi], gs_list[gi], sym != 0,
                                            (gptq_zero_format)f};
                        if (da)
                            shuffle(perm, K);
                        gptq_tensors t;
                        assert_int_equal(gptq_rtn_quantize(W, N, K, &cfg, da ? perm : NULL, &t,
                                                           &err), 0);
                        int64_t gs = gs_list[gi] > 0 ? gs_list[gi] : K, G = K / gs;
                        assert_int_equal(t.G, G);
                        /* g_idx = invperm[k] // g (§1.4) */
                        bool monotone = true;
                        for (int64_t i = 0; i < K; i++) {
                            int64_t k = da ? perm[i] : i;
                            assert_int_equal(t.g_idx[k], i / gs);
                        }
                        for (int64_t k = 1; k < K; k++)
                            monotone &= t.g_idx[k] >= t.g_idx[k - 1];
                        if (da && G > 1)
                            assert_false(monotone);
                        /* the plugin's dequantization equals the test's */
                        ref_dequant(&t, cfg.fmt, D);
                        assert_int_equal(gptq_dequantize(t.qweight, t.qzeros, t.scales, t.g_idx, K,
                                                         N, G, gs, cfg.bits, cfg.fmt, D2, &err),
                                         0);
                        assert_memory_equal(D, D2, sizeof(float) * K * N);
                        /* RTN error is at most half a step (§1.3 range covers the group) */
                        for (int64_t n = 0; n < N; n++)
                            for (int64_t k = 0; k < K; k++) {
                                float s = t.scales[t.g_idx[k] * N + n];
                                assert_true(fabsf(W[n * K + k] - D[n * K + k]) <=
                                            0.5f * s * 1.0001f + 1e-6f);
                            }
                        /* sym zero words (§1.3) */
                        if (sym && cfg.bits == 3) {
                            for (int64_t n = 0; n < N; n++)
                                assert_int_equal(code_at(t.qzeros, 1, 3, n),
                                                 f == 1 ? 3 : 4);
                        } else if (sym) {
                            uint32_t want = cfg.bits == 2 ? 0x55555555u
                                            : cfg.bits == 4 ? 0x77777777u : 0x7F7F7F7Fu;
                            if (f == 2)
                                want += cfg.bits == 2 ? 0x55555555u
                                        : cfg.bits == 4 ? 0x11111111u : 0x01010101u;
                            for (int64_t i = 0; i < G * N * cfg.bits / 32; i++)
                                assert_int_equal((uint32_t)t.qzeros[i], want);
                        }
                        /* unpack -> pack reproduces the words */
                        assert_int_equal(gptq_unpack_qweight(t.qweight, K, N, cfg.bits, codes,
                                                             &err), 0);
                        assert_int_equal(gptq_pack_qweight(codes, K, N, cfg.bits, words, &err), 0);
                        assert_memory_equal(words, t.qweight, sizeof(int32_t) * K * cfg.bits / 32 * N);
                        assert_int_equal(gptq_unpack_qzeros(t.qzeros, G, N, cfg.bits, cfg.fmt,
                                                            zeros, &err), 0);
                        assert_int_equal(gptq_pack_qzeros(zeros, G, N, cfg.bits, cfg.fmt, words,
                                                          &err), 0);
                        assert_memory_equal(words, t.qzeros, sizeof(int32_t) * G * N * cfg.bits / 32);
                        gptq_tensors_free(&t);
                    }
    free(W);
    free(D);
    free(D2);
    free(codes);
    free(perm);
    free(zeros);
    free(words);
}

/* ---- (b) the kernel and the provider ---- */

/* Tolerance: |y − ref| ≤ 1e-4 · Σ_k |x_k·W_nk| (+ |bias|), i.e. 1e-4
 * relative to the magnitude of the dot product's terms. */
static void check_linear(const float *x, int32_t n_tok, const float *D, const float *bias,
                         int64_t K, int64_t N, const float *y)
{
    for (int32_t t = 0; t < n_tok; t++)
        for (int64_t n = 0; n < N; n++) {
            double ref = bias ? bias[n] : 0.0, mag = bias ? fabs(bias[n]) : 0.0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)x[t * K + k] * D[n * K + k];
                mag += fabs((double)x[t * K + k] * D[n * K + k]);
            }
            double e = fabs(y[t * N + n] - ref);
            if (e > 1e-4 * mag + 1e-7)
                fail_msg("t=%d n=%lld: got %.9g want %.9g (err %.3g, mag %.3g)", t, (long long)n,
                         y[t * N + n], ref, e, mag);
        }
}

/* check_linear for the provider's forward, whose fast kernels quantize each
 * token's activations to int8 in blocks of 32 (plume_cpu_quantize_q8:
 * x ≈ d·q, d = the block's max |x| / 127, so |x − d·q| ≤ d/2 ≤ max_k |x_k|
 * / 254 for every k, up to float rounding of x/d): the error of an output
 * may grow by Σ_k |W_nk| · max_k |x_k| / 254 (times 1 + 1e-5 for that
 * rounding) on top of check_linear's float tolerance.  The tight per-block
 * bound and every dispatch level are tested in tests/gptq/kernels. */
static void check_linear_q8(const float *x, int32_t n_tok, const float *D, const float *bias,
                            int64_t K, int64_t N, const float *y)
{
    for (int32_t t = 0; t < n_tok; t++) {
        double xmax = 0.0;
        for (int64_t k = 0; k < K; k++)
            xmax = fmax(xmax, fabs((double)x[t * K + k]));
        for (int64_t n = 0; n < N; n++) {
            double ref = bias ? bias[n] : 0.0, mag = bias ? fabs(bias[n]) : 0.0, wabs = 0.0;
            for (int64_t k = 0; k < K; k++) {
                ref += (double)x[t * K + k] * D[n * K + k];
                mag += fabs((double)x[t * K + k] * D[n * K + k]);
                wabs += fabs((double)D[n * K + k]);
            }
            double e = fabs(y[t * N + n] - ref), tol = 1e-4 * mag + 1e-7 + wabs * xmax / 254.0 * (1 + 1e-5);
            if (e > tol)
                fail_msg("t=%d n=%lld: got %.9g want %.9g (err %.3g, tolerance %.3g)", t,
                         (long long)n, y[t * N + n], ref, e, tol);
        }
    }
}

static void test_reference_kernel(void **st)
{
    (void)st;
    const int64_t K = 256, NMAX = 64;
    const int64_t gs_list[] = {32, 64, 128, -1};
    const int32_t toks[] = {1, 3, 7};
    float *W = malloc(sizeof(float) * K * NMAX), *D = malloc(sizeof(float) * K * NMAX);
    float *x = malloc(sizeof(float) * 7 * K), *y = malloc(sizeof(float) * 7 * NMAX), bias[64];
    int32_t *perm = malloc(sizeof(int32_t) * K);
    rnd_fill(W, K * NMAX, 0.2f);
    rnd_fill(x, 7 * K, 1.0f);
    rnd_fill(bias, NMAX, 1.0f);
    const int bits_list[] = {2, 3, 4, 8};
    for (int bi = 0; bi < 4; bi++)
        for (int g = 0; g < 4; g++)
            for (int da = 0; da < 2; da++)
                for (int sym = 0; sym < 2; sym++) {
                    plume_error err = {0};
                    const int64_t N = bits_list[bi] == 3 ? 64 : 48; /* 3-bit: N % 32 */
                    gptq_qconfig qc = {bits_list[bi], gs_list[g], sym != 0,
                                       sym ? GPTQ_ZERO_V1 : GPTQ_ZERO_V2};
                    shuffle(perm, K);
                    gptq_tensors t;
                    assert_int_equal(gptq_rtn_quantize(W, N, K, &qc, da ? perm : NULL, &t, &err), 0);
                    ref_dequant(&t, qc.fmt, D);
                    gptq_load_config lc = {qc.bits, qc.group_size, qc.sym, da != 0, qc.fmt};
                    gptq_layer *l;
                    assert_int_equal(gptq_layer_build(t.qweight, t.qzeros, t.scales, t.g_idx,
                                                      (g & 1) ? bias : NULL, K, N, t.G, &lc, &l,
                                                      &err), 0);
                    assert_int_equal(gptq_layer_permuted(l), da && t.G > 1);
                    for (int ti = 0; ti < 3; ti++) {
                        assert_int_equal(gptq_forward_ref(l, x, toks[ti], y, &err), 0);
                        check_linear(x, toks[ti], D, (g & 1) ? bias : NULL, K, N, y);
                    }
                    gptq_layer_free(l);
                    gptq_tensors_free(&t);
                }
    free(W);
    free(D);
    free(x);
    free(y);
    free(perm);
}

/* ---- a safetensors file written by hand (formats.md §4) ---- */

typedef struct st_entry {
    const char *name, *dtype;
    int64_t shape[2];
    int ndim;
    const void *data;
    size_t nbytes;
} st_entry;

static void write_st(const char *path, const st_entry *e, int n)
{
    char hdr[4096];
    size_t off = 0;
    int len = snprintf(hdr, sizeof hdr, "{");
    for (int i = 0; i < n; i++) {
        len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                        i ? "," : "", e[i].name, e[i].dtype);
        for (int d = 0; d < e[i].ndim; d++)
            len += snprintf(hdr + len, sizeof hdr - (size_t)len, "%s%lld", d ? "," : "",
                            (long long)e[i].shape[d]);
        len += snprintf(hdr + len, sizeof hdr - (size_t)len, "],\"data_offsets\":[%zu,%zu]}", off,
                        off + e[i].nbytes);
        off += e[i].nbytes;
    }
    len += snprintf(hdr + len, sizeof hdr - (size_t)len, "}");
    while (len % 8)
        hdr[len++] = ' ';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = (uint64_t)len;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(hl >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(hdr, 1, (size_t)len, f);
    for (int i = 0; i < n; i++)
        fwrite(e[i].data, 1, e[i].nbytes, f);
    fclose(f);
}

#define PFX "model.layers.0.mlp.down_proj"

typedef struct fixture {
    plume_registry *reg;
    const plume_linear_vtable *lin;
    const plume_weight_format_vtable *fmt;
    const plume_backend_vtable *bvt;
    plume_backend *be;
    char path[256];
} fixture;

static int fx_setup(void **st)
{
    fixture *fx = calloc(1, sizeof *fx);
    plume_error err = {0};
    if (plume_registry_create(&fx->reg, &err) ||
        plume_registry_add_static(fx->reg, plume_plugin_entry_quant_gptq_init, "test", &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    fx->lin = plume_registry_find_linear(fx->reg, "gptq");
    fx->fmt = plume_registry_find_weight_format(fx->reg, "safetensors");
    fx->bvt = plume_registry_find_backend(fx->reg, "cpu");
    if (!fx->lin || !fx->fmt || !fx->bvt || fx->bvt->create(NULL, 1, &fx->be, &err))
        return -1;
    snprintf(fx->path, sizeof fx->path, "/tmp/plume_test_gptq_%d.safetensors", (int)getpid());
    *st = fx;
    return 0;
}

static int fx_teardown(void **st)
{
    fixture *fx = *st;
    fx->bvt->destroy(fx->be);
    plume_registry_free(fx->reg);
    unlink(fx->path);
    free(fx);
    return 0;
}

/* Writes one quantized layer (t, optional g_idx and bias) to fx->path;
 * f16: scales and bias as F16 (as AutoGPTQ/GPTQModel write them), which
 * the caller has already rounded to f16 values. */
static void write_layer_f(fixture *fx, const gptq_tensors *t, bool with_gidx, const float *bias,
                          bool f16)
{
    int64_t kw = t->K * t->bits / 32, nw = t->N * t->bits / 32; /* §1.1 shapes */
    uint16_t *sh = NULL, *bh = NULL;
    if (f16) {
        sh = malloc(sizeof(uint16_t) * (size_t)(t->G * t->N));
        bh = malloc(sizeof(uint16_t) * (size_t)t->N);
        for (int64_t i = 0; i < t->G * t->N; i++)
            sh[i] = plume_fp32_to_fp16(t->scales[i]);
        for (int64_t i = 0; bias && i < t->N; i++)
            bh[i] = plume_fp32_to_fp16(bias[i]);
    }
    size_t fs = f16 ? 2 : 4;
    st_entry e[5] = {
        {PFX ".qweight", "I32", {kw, t->N}, 2, t->qweight, sizeof(int32_t) * (size_t)(kw * t->N)},
        {PFX ".qzeros", "I32", {t->G, nw}, 2, t->qzeros, sizeof(int32_t) * (size_t)(t->G * nw)},
        {PFX ".scales", f16 ? "F16" : "F32", {t->G, t->N}, 2, f16 ? (const void *)sh : t->scales,
         fs * (size_t)(t->G * t->N)},
        {PFX ".g_idx", "I32", {t->K, 0}, 1, t->g_idx, sizeof(int32_t) * (size_t)t->K},
        {PFX ".bias", f16 ? "F16" : "F32", {t->N, 0}, 1, f16 ? (const void *)bh : bias,
         fs * (size_t)t->N},
    };
    st_entry use[5];
    int n = 0;
    for (int i = 0; i < 5; i++)
        if ((i != 3 || with_gidx) && (i != 4 || bias))
            use[n++] = e[i];
    write_st(fx->path, use, n);
    free(sh);
    free(bh);
}

static void write_layer(fixture *fx, const gptq_tensors *t, bool with_gidx, const float *bias)
{
    write_layer_f(fx, t, with_gidx, bias, false);
}

static plume_settings *settings(const char *bits, const char *gs, const char *sym,
                                const char *desc_act, const char *format)
{
    plume_settings *s;
    plume_error err = {0};
    assert_int_equal(plume_settings_new("quantization", &s, &err), 0);
    if (bits)
        assert_int_equal(plume_settings_set(s, "bits", bits, &err), 0);
    if (gs)
        assert_int_equal(plume_settings_set(s, "group_size", gs, &err), 0);
    if (sym)
        assert_int_equal(plume_settings_set(s, "sym", sym, &err), 0);
    if (desc_act)
        assert_int_equal(plume_settings_set(s, "desc_act", desc_act, &err), 0);
    if (format)
        assert_int_equal(plume_settings_set(s, "checkpoint_format", format, &err), 0);
    return s;
}

static void test_provider(void **st)
{
    fixture *fx = *st;
    const int64_t K = 256, N = 64;
    float *W = malloc(sizeof(float) * K * N), *D = malloc(sizeof(float) * K * N);
    float *x = malloc(sizeof(float) * 5 * K), *y = malloc(sizeof(float) * 5 * N), bias[64];
    int32_t *perm = malloc(sizeof(int32_t) * K);
    rnd_fill(W, K * N, 0.1f);
    rnd_fill(x, 5 * K, 1.0f);
    for (int n = 0; n < N; n++) /* f16-exact, so the F16 cases compare exactly */
        bias[n] = plume_fp16_to_fp32(plume_fp32_to_fp16(rndf()));
    struct {
        int bits;
        int64_t gs;
        bool sym, desc_act;
        gptq_zero_format fmt;
        const char *bs, *gss, *fs;
    } cases[] = {
        {4, 128, true, false, GPTQ_ZERO_V1, "4", "128", "gptq"},
        {4, 32, false, true, GPTQ_ZERO_V2, "4", "32", "gptq_v2"},
        {4, 64, false, true, GPTQ_ZERO_V1, "4", "64", "gptq"},
        {8, -1, true, false, GPTQ_ZERO_V1, "8", "-1", "gptq"},
        {8, 64, false, true, GPTQ_ZERO_V2, "8", "64", "gptq_v2"},
        {2, 32, true, true, GPTQ_ZERO_V1, "2", "32", "gptq"},
        {3, 64, false, true, GPTQ_ZERO_V2, "3", "64", "gptq_v2"},
        {3, 128, true, false, GPTQ_ZERO_V1, "3", "128", "gptq"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        plume_error err = {0};
        gptq_qconfig qc = {cases[c].bits, cases[c].gs, cases[c].sym, cases[c].fmt};
        shuffle(perm, K);
        gptq_tensors t;
        assert_int_equal(gptq_rtn_quantize(W, N, K, &qc, cases[c].desc_act ? perm : NULL, &t, &err),
                         0);
        bool f16 = c % 3 == 1; /* F16 scales/bias as real checkpoints hold them */
        if (f16)
            for (int64_t i = 0; i < t.G * N; i++)
                t.scales[i] = plume_fp16_to_fp32(plume_fp32_to_fp16(t.scales[i]));
        ref_dequant(&t, qc.fmt, D);
        const float *b = c % 2 ? bias : NULL;
        write_layer_f(fx, &t, cases[c].desc_act || c == 0, b, f16);
        plume_checkpoint *ck;
        assert_int_equal(fx->fmt->open(fx->path, NULL, &ck, &err), 0);
        plume_weights w = {fx->fmt, ck};
        assert_int_equal(fx->lin->probe(&w, PFX), 10);
        assert_int_equal(fx->lin->probe(&w, "model.layers.1.mlp.down_proj"), 0);
        plume_settings *s = settings(cases[c].bs, cases[c].gss, cases[c].sym ? "true" : "false",
                                     cases[c].desc_act ? "true" : "false", cases[c].fs);
        assert_int_equal(fx->lin->validate(s, &err), 0);
        plume_linear *l;
        if (fx->lin->load(&w, PFX, s, fx->bvt, fx->be, &l, &err))
            fail_msg("case %zu: %s", c, err.msg);
        int64_t in, out;
        fx->lin->shape(l, &in, &out);
        assert_int_equal(in, K);
        assert_int_equal(out, N);
        for (int32_t nt = 1; nt <= 5; nt += 2) {
            /* through the cpu backend's buffers, as the forward pass does */
            plume_buf *bx = fx->bvt->buf_alloc(fx->be, sizeof(float) * (size_t)(nt * K), &err);
            plume_buf *by = fx->bvt->buf_alloc(fx->be, sizeof(float) * (size_t)(nt * N), &err);
            assert_true(bx && by);
            assert_int_equal(
                fx->bvt->upload(fx->be, bx, 0, x, sizeof(float) * (size_t)(nt * K), &err), 0);
            assert_int_equal(fx->lin->forward(l, fx->bvt, fx->be, bx, nt, by, &err), 0);
            assert_int_equal(
                fx->bvt->download(fx->be, y, by, 0, sizeof(float) * (size_t)(nt * N), &err), 0);
            fx->bvt->buf_free(fx->be, bx);
            fx->bvt->buf_free(fx->be, by);
            check_linear_q8(x, nt, D, b, K, N, y);
        }
        fx->lin->destroy(l);
        plume_settings_free(s);
        fx->fmt->close(ck);
        gptq_tensors_free(&t);
    }
    free(W);
    free(D);
    free(x);
    free(y);
    free(perm);
}

/* ---- (c) errors ---- */

static void expect_load_error(fixture *fx, plume_settings *s, const char *needle)
{
    plume_error err = {0};
    plume_checkpoint *ck;
    assert_int_equal(fx->fmt->open(fx->path, NULL, &ck, &err), 0);
    plume_weights w = {fx->fmt, ck};
    plume_linear *l = NULL;
    assert_int_equal(fx->lin->load(&w, PFX, s, fx->bvt, fx->be, &l, &err), -1);
    if (!strstr(err.msg, needle))
        fail_msg("expected \"%s\" in: %s", needle, err.msg);
    fx->fmt->close(ck);
    plume_settings_free(s);
}

static void test_errors(void **st)
{
    fixture *fx = *st;
    plume_error err = {0};
    assert_int_equal(gptq_check_bits(3, &err), 0);
    assert_int_equal(gptq_check_bits(6, &err), -1);
    assert_non_null(strstr(err.msg, "bits = 6"));
    assert_int_equal(gptq_check_bits(5, &err), -1);
    assert_non_null(strstr(err.msg, "bits = 5"));
    assert_int_equal(gptq_check_bits(16, &err), -1);

    gptq_load_config c;
    plume_settings *s = settings("5", NULL, NULL, NULL, NULL);
    assert_int_equal(gptq_config_from_settings(s, &c, &err), -1);
    assert_non_null(strstr(err.msg, "bits"));
    plume_settings_free(s);
    s = settings(NULL, NULL, NULL, NULL, "awq");
    assert_int_equal(gptq_config_from_settings(s, &c, &err), -1);
    assert_non_null(strstr(err.msg, "checkpoint_format"));
    plume_settings_free(s);
    s = settings(NULL, "0", NULL, NULL, NULL);
    assert_int_equal(gptq_config_from_settings(s, &c, &err), -1);
    assert_non_null(strstr(err.msg, "group_size"));
    plume_settings_free(s);
    s = settings("4", NULL, NULL, NULL, NULL);
    assert_int_equal(plume_settings_set(s, "bogus", "1", &err), 0);
    assert_int_equal(fx->lin->validate(s, &err), -1);
    assert_non_null(strstr(err.msg, "bogus"));
    plume_settings_free(s);

    /* A 4-bit g128 layer without g_idx. */
    const int64_t K = 256, N = 48;
    float *W = malloc(sizeof(float) * K * N);
    rnd_fill(W, K * N, 1.0f);
    gptq_qconfig qc = {4, 128, true, GPTQ_ZERO_V1};
    gptq_tensors t;
    assert_int_equal(gptq_rtn_quantize(W, N, K, &qc, NULL, &t, &err), 0);
    write_layer(fx, &t, false, NULL);
    expect_load_error(fx, settings("8", "128", NULL, NULL, NULL), "qzeros");
    expect_load_error(fx, settings("2", "128", NULL, NULL, NULL), "qzeros");
    expect_load_error(fx, settings("4", "64", NULL, NULL, NULL), "group_size = 64");
    expect_load_error(fx, settings("4", "128", NULL, "true", NULL), "desc_act");
    expect_load_error(fx, settings("5", "128", NULL, NULL, NULL), "bits");
    expect_load_error(fx, settings("3", "128", NULL, NULL, NULL), "check bits");
    /* mismatched scales: write scales with a wrong width */
    int pf = 8;
    st_entry e[3] = {
        {PFX ".qweight", "I32", {K / pf, N}, 2, t.qweight, sizeof(int32_t) * (size_t)(K / pf * N)},
        {PFX ".qzeros", "I32", {t.G, N / pf}, 2, t.qzeros, sizeof(int32_t) * (size_t)(t.G * N / pf)},
        {PFX ".scales", "F32", {t.G, N - 8}, 2, t.scales, sizeof(float) * (size_t)(t.G * (N - 8))},
    };
    write_st(fx->path, e, 3);
    expect_load_error(fx, settings("4", "128", NULL, NULL, NULL), "scales");
    /* qweight stored as F32 is not a GPTQ layer */
    e[0].dtype = "F32";
    write_st(fx->path, e, 3);
    {
        plume_checkpoint *ck;
        assert_int_equal(fx->fmt->open(fx->path, NULL, &ck, &err), 0);
        plume_weights w = {fx->fmt, ck};
        assert_int_equal(fx->lin->probe(&w, PFX), 0);
        fx->fmt->close(ck);
    }
    expect_load_error(fx, settings("4", "128", NULL, NULL, NULL), "int32");
    /* RTN refuses shapes that do not pack */
    qc.bits = 4;
    gptq_tensors bad;
    assert_int_equal(gptq_rtn_quantize(W, 44, K, &qc, NULL, &bad, &err), -1);
    assert_non_null(strstr(err.msg, "multiples of 8"));
    gptq_tensors_free(&t);
    free(W);
}

int main(void)
{
    rng_seed(88172645463325252ull);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qweight_vectors),
        cmocka_unit_test(test_3bit_vectors),
        cmocka_unit_test(test_qzeros_vectors),
        cmocka_unit_test(test_dequant_vector),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_reference_kernel),
        cmocka_unit_test_setup_teardown(test_provider, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
