/* dtype table and dequantization.  Blocks are built by hand from the
 * layouts in formats.md §3.2 and the expected values are computed here by
 * the formulas written out directly (never by calling the code under test);
 * all chosen values are exact in f32, so comparisons are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "plume/tensor.h"

/* f16 bit patterns used below (IEEE binary16: 1 sign, 5 exponent, 10 mantissa) */
#define H_0_125 0x3000 /* 0.125 = 2^-3: exponent 12 */
#define H_0_25 0x3400
#define H_0_5 0x3800
#define H_1 0x3c00
#define H_2 0x4000
#define H_M1 0xbc00 /* -1 */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* Dequantizes one value of a 1-element-block type. */
static float deq1(plume_dtype t, uint16_t bits)
{
    uint8_t b[2];
    float y;
    put16(b, bits);
    plume_dequantize(t, b, &y, 1);
    return y;
}

static void test_table(void **state)
{
    (void)state;
    static const struct { uint32_t id; const char *name; size_t blck, bytes; } known[] = {
        {0, "F32", 1, 4},      {1, "F16", 1, 2},      {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
        {6, "Q5_0", 32, 22},   {7, "Q5_1", 32, 24},   {8, "Q8_0", 32, 34},   {9, "Q8_1", 32, 36},
        {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
        {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},   {25, "I16", 1, 2},
        {26, "I32", 1, 4},     {27, "I64", 1, 8},     {28, "F64", 1, 8},     {30, "BF16", 1, 2},
        {20, "IQ4_NL", 32, 18}, {23, "IQ4_XS", 256, 136}, {39, "MXFP4", 32, 17},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        assert_string_equal(plume_dtype_name(known[i].id), known[i].name);
        assert_int_equal(plume_dtype_block_elems(known[i].id), known[i].blck);
        assert_int_equal(plume_dtype_block_bytes(known[i].id), known[i].bytes);
    }
    /* removed or never-assigned ids have no size */
    static const uint32_t unknown[] = {4, 5, 31, 33, 36, 38, 40, 41, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_int_equal(plume_dtype_block_elems(unknown[i]), 0);
        assert_int_equal(plume_dtype_block_bytes(unknown[i]), 0);
        assert_int_equal(plume_dtype_row_bytes(unknown[i], 256), 0);
    }
    assert_string_equal(plume_dtype_name(4), "Q4_2");
    assert_string_equal(plume_dtype_name(1000), "unknown");
    assert_string_equal(plume_dtype_name(UINT32_MAX), "unknown");
}

static void test_supported_and_row_bytes(void **state)
{
    (void)state;
    static const uint32_t yes[] = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 15, 20, 23, 30, 39};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        assert_true(plume_dtype_supported(yes[i]));
    static const uint32_t no[] = {4, 9, 16, 19, 21, 24, 26, 28, 40, 1000};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        assert_false(plume_dtype_supported(no[i]));

    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_F32, 3), 12);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_BF16, 5), 10);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_Q8_0, 576), 18 * 34);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_Q4_1, 64), 40);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_Q4_K, 512), 288);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_Q6_K, 256), 210);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_Q4_K, 100), 0); /* not whole blocks */
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_Q4_0, 33), 0);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_Q4_0, 0), 0);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_F32, -4), 0);
    assert_int_equal(plume_dtype_row_bytes(PLUME_DTYPE_F32, INT64_MAX), 0); /* overflows 64 bits */

    plume_tensor t = {.ne = {3, 4, 5, 1}};
    assert_int_equal(plume_tensor_nelements(&t), 60);
}

static void test_f16_special_values(void **state)
{
    (void)state;
    assert_true(deq1(PLUME_DTYPE_F16, H_1) == 1.0f);
    assert_true(deq1(PLUME_DTYPE_F16, 0xc000) == -2.0f);
    assert_true(deq1(PLUME_DTYPE_F16, 0x3555) == 0.333251953125f); /* 2^-2 * (1 + 341/1024) */
    assert_true(deq1(PLUME_DTYPE_F16, 0x7bff) == 65504.0f);                 /* largest finite */
    assert_true(deq1(PLUME_DTYPE_F16, 0x0400) == ldexpf(1.0f, -14));        /* smallest normal */
    assert_true(deq1(PLUME_DTYPE_F16, 0x0001) == ldexpf(1.0f, -24));        /* smallest subnormal */
    assert_true(deq1(PLUME_DTYPE_F16, 0x03ff) == 1023 * ldexpf(1.0f, -24)); /* largest subnormal */
    assert_true(deq1(PLUME_DTYPE_F16, 0x8201) == -513 * ldexpf(1.0f, -24)); /* negative subnormal */
    float z = deq1(PLUME_DTYPE_F16, 0x8000);
    assert_true(z == 0.0f && signbit(z));
    z = deq1(PLUME_DTYPE_F16, 0x0000);
    assert_true(z == 0.0f && !signbit(z));
    float inf = deq1(PLUME_DTYPE_F16, 0x7c00);
    assert_true(isinf(inf) && inf > 0);
    inf = deq1(PLUME_DTYPE_F16, 0xfc00);
    assert_true(isinf(inf) && inf < 0);
    assert_true(isnan(deq1(PLUME_DTYPE_F16, 0x7e00)));
    assert_true(isnan(deq1(PLUME_DTYPE_F16, 0xfc01)));
}

static void test_bf16_and_f32(void **state)
{
    (void)state;
    assert_true(deq1(PLUME_DTYPE_BF16, 0x3f80) == 1.0f);
    assert_true(deq1(PLUME_DTYPE_BF16, 0xc0a0) == -5.0f);
    assert_true(deq1(PLUME_DTYPE_BF16, 0x4049) == 3.140625f);
    assert_true(deq1(PLUME_DTYPE_BF16, 0x0001) == ldexpf(1.0f, -133)); /* subnormal */
    assert_true(deq1(PLUME_DTYPE_BF16, 0x7f7f) == ldexpf(255.0f / 128.0f, 127)); /* max finite */
    float z = deq1(PLUME_DTYPE_BF16, 0x8000);
    assert_true(z == 0.0f && signbit(z));
    assert_true(isinf(deq1(PLUME_DTYPE_BF16, 0xff80)) && deq1(PLUME_DTYPE_BF16, 0xff80) < 0);
    assert_true(isnan(deq1(PLUME_DTYPE_BF16, 0x7fc0)));

    const float src[5] = {1.5f, -0.0f, 3e38f, -7.25f, 1e-40f};
    float dst[5];
    plume_dequantize(PLUME_DTYPE_F32, src, dst, 5);
    assert_memory_equal(src, dst, sizeof src);

    /* multi-element f16 row read from an odd (unaligned) address */
    uint8_t buf[1 + 6];
    put16(buf + 1, H_0_5);
    put16(buf + 3, H_M1);
    put16(buf + 5, H_2);
    float y[3];
    plume_dequantize(PLUME_DTYPE_F16, buf + 1, y, 3);
    assert_true(y[0] == 0.5f && y[1] == -1.0f && y[2] == 2.0f);
}

/* Q8_0: 2 blocks; block b: d, qs[j] = (j*11 + b*5) % 256 - 128. */
static void test_q8_0(void **state)
{
    (void)state;
    uint8_t blk[2 * 34];
    const float d[2] = {0.25f, -2.0f};
    put16(blk, H_0_25);
    put16(blk + 34, 0xc000);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 32; j++)
            blk[34 * b + 2 + j] = (uint8_t)(int8_t)((j * 11 + b * 5) % 256 - 128);
    float y[64];
    plume_dequantize(PLUME_DTYPE_Q8_0, blk, y, 64);
    for (int b = 0; b < 2; b++)
        for (int j = 0; j < 32; j++)
            assert_true(y[32 * b + j] == d[b] * (float)((j * 11 + b * 5) % 256 - 128));
    assert_true(y[0] == -32.0f);        /* 0.25 * -128 */
    assert_true(y[32 + 1] == 2 * 112.0f); /* -2 * (16 - 128) */
}

/* Q4_0: d = 2, byte j = j | (15-j)<<4: low nibble -> element j, high ->
 * element j+16 (an adjacent-pairs reading would give different values). */
static void test_q4_0(void **state)
{
    (void)state;
    uint8_t blk[2 * 18];
    put16(blk, H_2);
    put16(blk + 18, H_0_5);
    for (int j = 0; j < 16; j++) {
        blk[2 + j] = (uint8_t)(j | ((15 - j) << 4));
        blk[18 + 2 + j] = (uint8_t)(((j * 5) & 15) | (((j * 3 + 1) & 15) << 4));
    }
    float y[64];
    plume_dequantize(PLUME_DTYPE_Q4_0, blk, y, 64);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 2.0f * (j - 8));
        assert_true(y[j + 16] == 2.0f * ((15 - j) - 8));
        assert_true(y[32 + j] == 0.5f * (((j * 5) & 15) - 8));
        assert_true(y[32 + j + 16] == 0.5f * (((j * 3 + 1) & 15) - 8));
    }
    assert_true(y[0] == -16.0f && y[1] == -14.0f && y[16] == 14.0f && y[31] == -16.0f);
}

/* Q4_1: d = 0.5, m = -1; byte j = j | ((3j) % 16) << 4. */
static void test_q4_1(void **state)
{
    (void)state;
    uint8_t blk[20];
    put16(blk, H_0_5);
    put16(blk + 2, H_M1);
    for (int j = 0; j < 16; j++)
        blk[4 + j] = (uint8_t)(j | (((3 * j) % 16) << 4));
    float y[32];
    plume_dequantize(PLUME_DTYPE_Q4_1, blk, y, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 0.5f * j - 1.0f);
        assert_true(y[j + 16] == 0.5f * ((3 * j) % 16) - 1.0f);
    }
    /* spot values worked by hand: element 5 = 0.5*5-1; element 21 = 0.5*15-1 */
    assert_true(y[5] == 1.5f);
    assert_true(y[21] == 6.5f);
    assert_true(y[16] == -1.0f);
}

/* Packs eight 6-bit scales and mins into the 12-byte Q4_K scales field, the
 * inverse of get_scale_min_k4 as formats.md §3.2 states it:
 *   j < 4:  sc = s[j] & 63,  m = s[j+4] & 63
 *   j >= 4: sc = (s[j+4] & 0xF) | (s[j-4] >> 6) << 4,  m = (s[j+4] >> 4) | (s[j] >> 6) << 4 */
static void pack_q4k_scales(uint8_t s[12], const uint8_t sc[8], const uint8_t m[8])
{
    memset(s, 0, 12);
    for (int j = 0; j < 4; j++) {
        s[j] = sc[j] & 63;
        s[j + 4] = m[j] & 63;
    }
    for (int j = 4; j < 8; j++) {
        s[j + 4] = (uint8_t)((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
        s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
        s[j] |= (uint8_t)((m[j] >> 4) << 6);
    }
}

static void test_q4_k(void **state)
{
    (void)state;
    /* scales/mins use all six bits, so the high-bit packing is exercised */
    const uint8_t sc[8] = {1, 63, 17, 32, 5, 48, 63, 33};
    const uint8_t m[8] = {0, 7, 63, 16, 49, 2, 31, 60};
    const float d = 0.5f, dmin = 0.25f;
    uint8_t blk[144];
    put16(blk, H_0_5);
    put16(blk + 2, H_0_25);
    pack_q4k_scales(blk + 4, sc, m);
    uint8_t *qs = blk + 16;
    for (int k = 0; k < 128; k++)
        qs[k] = (uint8_t)((k * 7 + 3) & 0xFF);
    float y[256];
    plume_dequantize(PLUME_DTYPE_Q4_K, blk, y, 256);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            float lo = d * sc[2 * c] * (qs[32 * c + l] & 0xF) - dmin * m[2 * c];
            float hi = d * sc[2 * c + 1] * (qs[32 * c + l] >> 4) - dmin * m[2 * c + 1];
            assert_true(y[64 * c + l] == lo);
            assert_true(y[64 * c + 32 + l] == hi);
        }
    }
    /* worked by hand: element 0: q = qs[0] & 15 = 3, sub-block 0 (sc 1, m 0): 0.5*1*3 - 0 = 1.5 */
    assert_true(y[0] == 1.5f);
    /* element 32: q = qs[0] >> 4 = 0, sub-block 1 (sc 63, m 7): -0.25*7 = -1.75 */
    assert_true(y[32] == -1.75f);
    /* element 200 = chunk 3, low half, l = 8: qs[104] = (104*7+3)&255 = 219 = 0xDB -> q 11;
     * sub-block 6 (sc 63, m 31): 0.5*63*11 - 0.25*31 = 346.5 - 7.75 = 338.75 */
    assert_true(y[200] == 338.75f);
    /* element 232 = chunk 3, high half, l = 8: q = 0xD = 13; sub-block 7 (sc 33, m 60):
     * 0.5*33*13 - 0.25*60 = 214.5 - 15 = 199.5 */
    assert_true(y[232] == 199.5f);
    /* element 140 = chunk 2, low half, l = 12: qs[76] = (76*7+3)&255 = 23 = 0x17 -> q 7;
     * sub-block 4 (sc 5, m 49): 17.5 - 12.25 = 5.25 */
    assert_true(y[140] == 5.25f);
}

/* Builds a Q6_K block holding the 6-bit values q[e] in [-32, 31] by placing
 * each element where formats.md §3.2 says it lives: element e = 128h + 32g + l
 * (half h, quarter g, l < 32) takes ql[64h + l + 32*(g&1)], low nibble when
 * g < 2 else high, its top 2 bits in qh[32h + l] bits 2g..2g+1, and scale
 * sc[8h + l/16 + 2g]. */
static void pack_q6k(uint8_t blk[210], const int q[256], const int8_t sc[16], uint16_t d)
{
    memset(blk, 0, 210);
    uint8_t *ql = blk, *qh = blk + 128;
    for (int e = 0; e < 256; e++) {
        int h = e / 128, g = (e % 128) / 32, l = e % 32;
        unsigned u = (unsigned)(q[e] + 32);
        uint8_t *lo = &ql[64 * h + l + 32 * (g & 1)];
        *lo |= (uint8_t)((u & 0xF) << (g < 2 ? 0 : 4));
        qh[32 * h + l] |= (uint8_t)((u >> 4) << (2 * g));
    }
    memcpy(blk + 192, sc, 16);
    put16(blk + 208, d);
}

static void test_q6_k(void **state)
{
    (void)state;
    int q[256];
    for (int e = 0; e < 256; e++)
        q[e] = (e * 37 + 11) % 64 - 32;
    const int8_t sc[16] = {1, -2, 3, -4, 5, 127, -128, 8, 9, -10, 11, 12, -13, 14, 15, 16};
    const float d = 0.125f;
    uint8_t blk[210];
    pack_q6k(blk, q, sc, H_0_125);
    float y[256];
    plume_dequantize(PLUME_DTYPE_Q6_K, blk, y, 256);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, g = (e % 128) / 32, l = e % 32;
        float want = d * sc[8 * h + l / 16 + 2 * g] * q[e];
        if (y[e] != want)
            fail_msg("Q6_K element %d: got %g, want %g", e, y[e], want);
    }
    /* worked by hand: e = 0: q = 11 - 32 = -21, scale sc[0] = 1: 0.125 * -21 = -2.625 */
    assert_true(y[0] == -2.625f);
    /* e = 80 (h 0, g 2, l 16): q = (80*37+11)%64-32 = 2971%64-32 = 27-32 = -5;
     * scale sc[0 + 1 + 4] = 127: 0.125*127*-5 = -79.375 */
    assert_true(y[80] == -79.375f);
    /* e = 230 (h 1, g 3, l 6): q = (230*37+11)%64-32 = 8521%64-32 = 9-32 = -23;
     * scale sc[8 + 0 + 6] = 15: 0.125*15*-23 = -43.125 */
    assert_true(y[230] == -43.125f);
    /* e = 38 (h 0, g 1, l 6): q = 1417%64-32 = 9-32 = -23; scale sc[2] = 3: -8.625 */
    assert_true(y[38] == -8.625f);
    /* e = 0 uses ql[0] low nibble and qh[0] bits 0-1: raw q+32 = 11 = 0b001011 */
    assert_int_equal(blk[0] & 0xF, 11);
    assert_int_equal(blk[128] & 3, 0);
}

/* Two Q4_K blocks and two Q6_K blocks in a row: the block stride is right. */
static void test_k_quants_two_blocks(void **state)
{
    (void)state;
    uint8_t k4[2 * 144] = {0};
    const uint8_t sc1[8] = {2, 2, 2, 2, 2, 2, 2, 2}, m0[8] = {0};
    const uint8_t sc2[8] = {4, 4, 4, 4, 4, 4, 4, 4}, m1[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    put16(k4, H_1);
    pack_q4k_scales(k4 + 4, sc1, m0);
    memset(k4 + 16, 0x21, 128);
    put16(k4 + 144, H_0_5);
    put16(k4 + 146, H_2);
    pack_q4k_scales(k4 + 148, sc2, m1);
    memset(k4 + 160, 0x53, 128);
    float y[512];
    plume_dequantize(PLUME_DTYPE_Q4_K, k4, y, 512);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            assert_true(y[64 * c + l] == 2.0f);      /* 1*2*1 - 0 */
            assert_true(y[64 * c + 32 + l] == 4.0f); /* 1*2*2 - 0 */
            assert_true(y[256 + 64 * c + l] == 4.0f);      /* 0.5*4*3 - 2*1 */
            assert_true(y[256 + 64 * c + 32 + l] == 8.0f); /* 0.5*4*5 - 2*1 */
        }

    int q[256];
    int8_t sc[16];
    uint8_t k6[2 * 210];
    for (int e = 0; e < 256; e++)
        q[e] = 3;
    for (int i = 0; i < 16; i++)
        sc[i] = 2;
    pack_q6k(k6, q, sc, H_1);
    for (int e = 0; e < 256; e++)
        q[e] = -32;
    pack_q6k(k6 + 210, q, sc, H_0_5);
    float z[512];
    plume_dequantize(PLUME_DTYPE_Q6_K, k6, z, 512);
    for (int e = 0; e < 256; e++) {
        assert_true(z[e] == 6.0f);
        assert_true(z[256 + e] == -32.0f);
    }
}

/* A caller bug (unsupported type) must not pass silently. */
static void test_unsupported_gives_nan(void **state)
{
    (void)state;
    uint8_t blk[66] = {0};
    float y[256];
    plume_dequantize((plume_dtype)16 /* IQ2_XXS */, blk, y, 256);
    for (int i = 0; i < 256; i++)
        assert_true(isnan(y[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_supported_and_row_bytes),
        cmocka_unit_test(test_f16_special_values),
        cmocka_unit_test(test_bf16_and_f32),
        cmocka_unit_test(test_q8_0),
        cmocka_unit_test(test_q4_0),
        cmocka_unit_test(test_q4_1),
        cmocka_unit_test(test_q4_k),
        cmocka_unit_test(test_q6_k),
        cmocka_unit_test(test_k_quants_two_blocks),
        cmocka_unit_test(test_unsupported_gives_nan),
    };
    return cmocka_run_group_tests_name("dtype", tests, NULL, NULL);
}
