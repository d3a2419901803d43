/* GGUF reader: files built by the test writer (gguf_writer.h) are read back
 * and every value is checked; every truncation and a catalogue of
 * corruptions must fail cleanly with the right error class and message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sys/stat.h>

#include "formats/gguf.h"
#include "gguf_writer.h"

/* ------------------------------------------------------------------ */
/* The sample file                                                     */

/* Byte offsets of interesting fields in the sample, for corruption tests. */
typedef struct sample_offs {
    size_t key0_len;      /* u64 length of the first key */
    size_t str_len;       /* u64 length of t.str's value */
    size_t arr_count;     /* u64 count of t.arr_u32 */
    size_t align_value;   /* u32 value of general.alignment (if written) */
    size_t c_ndims;       /* tensor "c.q8_0": n_dims */
    size_t c_type;        /*   type */
    size_t c_offset;      /*   offset */
    size_t e_offset;      /* tensor "e.bf16": offset */
    size_t data_start;    /* start of the data section */
} sample_offs;

#define SAMPLE_N_KV 20
#define SAMPLE_N_TENSORS 5

static const char UTF8_STR[] = "h\xc3\xa9llo, w\xc3\xb6rld"; /* "héllo, wörld" */

/* Tensor layout of the sample: name, n_dims, ne, type, bytes. */
typedef struct sample_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    size_t nbytes;
} sample_tensor;

static const sample_tensor TENSORS[SAMPLE_N_TENSORS] = {
    {"a.f32", 2, {3, 2, 1, 1}, 0, 24},
    {"b.f16", 1, {4, 1, 1, 1}, 1, 8},
    {"c.q8_0", 2, {64, 2, 1, 1}, 8, 2 * 2 * 34},
    {"d.q4_k", 4, {256, 1, 1, 2}, 12, 2 * 144},
    {"e.bf16", 3, {2, 3, 1, 1}, 30, 12},
};

/* Pattern byte k of tensor t's data. */
static uint8_t data_byte(int t, size_t k) { return (uint8_t)(k * 7 + (size_t)t * 31 + 1); }

/* Builds the sample: every value type, nested arrays, strings, five tensors.
 * alignment 0 = no general.alignment key (default 32).  The file ends
 * exactly at the end of the last tensor's data. */
static void build_sample(gw_buf *b, uint32_t version, uint32_t alignment, sample_offs *o)
{
    uint32_t align = alignment ? alignment : 32;
    gw_header(b, version, SAMPLE_N_TENSORS, alignment ? SAMPLE_N_KV : SAMPLE_N_KV - 1);
    o->key0_len = b->n;
    gw_kv_str(b, "general.architecture", "llama");
    if (alignment) {
        gw_key(b, "general.alignment", 4);
        o->align_value = b->n;
        gw_u32(b, alignment);
    }
    gw_key(b, "t.u8", 0); gw_u8(b, 200);
    gw_key(b, "t.i8", 1); gw_u8(b, (uint8_t)(int8_t)-100);
    gw_key(b, "t.u16", 2); gw_u16(b, 60000);
    gw_key(b, "t.i16", 3); gw_u16(b, (uint16_t)(int16_t)-30000);
    gw_key(b, "t.u32", 4); gw_u32(b, 4000000000u);
    gw_key(b, "t.i32", 5); gw_u32(b, (uint32_t)(int32_t)-2000000000);
    gw_key(b, "t.f32", 6); gw_f32(b, 1.5f);
    gw_key(b, "t.bool", 7); gw_u8(b, 1);
    gw_key(b, "t.str", 8);
    o->str_len = b->n;
    gw_str(b, UTF8_STR);
    gw_key(b, "t.arr_u32", 9); gw_u32(b, 4);
    o->arr_count = b->n;
    gw_u64(b, 3); gw_u32(b, 1); gw_u32(b, 2); gw_u32(b, 0xFFFFFFFFu);
    gw_key(b, "t.u64", 10); gw_u64(b, (1ull << 63) + 5);
    gw_key(b, "t.i64", 11); gw_u64(b, (uint64_t)-(1ll << 62));
    gw_key(b, "t.f64", 12); gw_f64(b, 3.141592653589793);
    /* [[1, 2], [], [-3]] of int16 */
    gw_key(b, "t.nested", 9); gw_u32(b, 9); gw_u64(b, 3);
    gw_u32(b, 3); gw_u64(b, 2); gw_u16(b, 1); gw_u16(b, 2);
    gw_u32(b, 3); gw_u64(b, 0);
    gw_u32(b, 3); gw_u64(b, 1); gw_u16(b, (uint16_t)(int16_t)-3);
    gw_key(b, "t.strs", 9); gw_u32(b, 8); gw_u64(b, 3);
    gw_str(b, "a"); gw_str(b, ""); gw_str(b, "ccc");
    gw_kv_str(b, "t.empty_str", "");
    gw_key(b, "t.bools", 9); gw_u32(b, 7); gw_u64(b, 2); gw_u8(b, 1); gw_u8(b, 0);
    gw_key(b, "t.f64s", 9); gw_u32(b, 12); gw_u64(b, 2); gw_f64(b, -0.5); gw_f64(b, 1e300);

    uint64_t off = 0;
    for (int t = 0; t < SAMPLE_N_TENSORS; t++) {
        const sample_tensor *s = &TENSORS[t];
        if (t == 2) {
            o->c_ndims = b->n + 8 + strlen(s->name);
            o->c_type = o->c_ndims + 4 + 8 * s->n_dims;
            o->c_offset = o->c_type + 4;
        }
        if (t == 4)
            o->e_offset = b->n + 8 + strlen(s->name) + 4 + 8 * s->n_dims + 4;
        gw_tensor_info(b, s->name, s->n_dims, s->ne, s->type, off);
        off += (s->nbytes + align - 1) / align * align;
    }
    gw_pad(b, align);
    o->data_start = b->n;
    for (int t = 0; t < SAMPLE_N_TENSORS; t++) {
        for (size_t k = 0; k < TENSORS[t].nbytes; k++)
            gw_u8(b, data_byte(t, k));
        if (t + 1 < SAMPLE_N_TENSORS)
            gw_pad(b, align);
    }
}

typedef struct fixture {
    gw_tmp tmp;
    gw_buf buf;
    sample_offs offs;
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    gw_tmp_init(&fx->tmp);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    gw_tmp_fini(&fx->tmp);
    gw_free(&fx->buf);
    free(fx);
    return 0;
}

/* Writes fx->buf and opens it; returns gguf_open's result. */
static int write_and_open(fixture *fx, gguf_file **f, plume_error *err)
{
    gw_write_file(&fx->tmp, fx->buf.p, fx->buf.n);
    memset(err, 0, sizeof *err);
    return gguf_open(fx->tmp.path, f, err);
}

static bool str_is(gguf_str s, const char *c) { return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0; }

/* Opening must fail with code and a message holding the path and phrase. */
static void expect_fail(fixture *fx, plume_status code, const char *phrase)
{
    gguf_file *f = (gguf_file *)1;
    plume_error err;
    int rc = write_and_open(fx, &f, &err);
    if (rc == 0) {
        gguf_close(f);
        fail_msg("gguf_open accepted a corrupt file (expected '%s')", phrase);
    }
    assert_null(f);
    if (err.code != code || !strstr(err.msg, phrase) || !strstr(err.msg, fx->tmp.path))
        fail_msg("expected %s with '%s', got %s: %s", plume_status_name(code), phrase,
                 plume_status_name(err.code), err.msg);
}

/* ------------------------------------------------------------------ */
/* Reading back                                                        */

static void check_sample_values(const gguf_file *f)
{
    uint32_t u32;
    int64_t i64;
    float f32;
    bool bl;
    gguf_str s;
    gguf_type et;
    uint64_t n;
    const gguf_value *items;

    assert_true(gguf_get_str(f, "general.architecture", &s) && str_is(s, "llama"));
    const gguf_value *v = gguf_get(f, "t.u8");
    assert_non_null(v);
    assert_int_equal(v->type, GGUF_TYPE_UINT8);
    assert_int_equal(v->u, 200);
    v = gguf_get(f, "t.i8");
    assert_int_equal(v->type, GGUF_TYPE_INT8);
    assert_int_equal(v->i, -100);
    assert_int_equal(gguf_get(f, "t.u16")->u, 60000);
    assert_int_equal(gguf_get(f, "t.i16")->i, -30000);
    assert_int_equal(gguf_get(f, "t.u32")->u, 4000000000u);
    assert_int_equal(gguf_get(f, "t.i32")->i, -2000000000);
    assert_true(gguf_get(f, "t.f32")->f == 1.5);
    assert_int_equal(gguf_get(f, "t.bool")->type, GGUF_TYPE_BOOL);
    assert_true(gguf_get(f, "t.bool")->b);
    assert_true(gguf_get_str(f, "t.str", &s) && str_is(s, UTF8_STR));
    assert_int_equal(gguf_get(f, "t.u64")->u, (1ull << 63) + 5);
    assert_int_equal(gguf_get(f, "t.u64")->type, GGUF_TYPE_UINT64);
    assert_int_equal(gguf_get(f, "t.i64")->i, -(1ll << 62));
    assert_int_equal(gguf_get(f, "t.i64")->type, GGUF_TYPE_INT64);
    assert_true(gguf_get(f, "t.f64")->f == 3.141592653589793);
    assert_int_equal(gguf_get(f, "t.f64")->type, GGUF_TYPE_FLOAT64);
    assert_true(gguf_get_str(f, "t.empty_str", &s) && s.len == 0);

    assert_true(gguf_get_arr(f, "t.arr_u32", &et, &n, &items));
    assert_int_equal(et, GGUF_TYPE_UINT32);
    assert_int_equal(n, 3);
    assert_int_equal(items[0].u, 1);
    assert_int_equal(items[1].u, 2);
    assert_int_equal(items[2].u, 0xFFFFFFFFu);
    assert_int_equal(items[2].type, GGUF_TYPE_UINT32);

    assert_true(gguf_get_arr(f, "t.nested", &et, &n, &items));
    assert_int_equal(et, GGUF_TYPE_ARRAY);
    assert_int_equal(n, 3);
    assert_int_equal(items[0].type, GGUF_TYPE_ARRAY);
    assert_int_equal(items[0].arr.type, GGUF_TYPE_INT16);
    assert_int_equal(items[0].arr.n, 2);
    assert_int_equal(items[0].arr.items[0].i, 1);
    assert_int_equal(items[0].arr.items[1].i, 2);
    assert_int_equal(items[1].arr.n, 0);
    assert_int_equal(items[2].arr.n, 1);
    assert_int_equal(items[2].arr.items[0].i, -3);

    assert_true(gguf_get_arr(f, "t.strs", &et, &n, &items));
    assert_int_equal(et, GGUF_TYPE_STRING);
    assert_int_equal(n, 3);
    assert_true(str_is(items[0].s, "a") && str_is(items[1].s, "") && str_is(items[2].s, "ccc"));
    assert_true(gguf_get_arr(f, "t.bools", &et, &n, &items));
    assert_true(et == GGUF_TYPE_BOOL && n == 2 && items[0].b && !items[1].b);
    assert_true(gguf_get_arr(f, "t.f64s", &et, &n, &items));
    assert_true(et == GGUF_TYPE_FLOAT64 && n == 2 && items[0].f == -0.5 && items[1].f == 1e300);

    /* typed getters: exact conversions only */
    assert_true(gguf_get_u32(f, "t.u8", &u32) && u32 == 200);
    assert_true(gguf_get_u32(f, "t.u32", &u32) && u32 == 4000000000u);
    assert_false(gguf_get_u32(f, "t.i8", &u32));  /* negative */
    assert_false(gguf_get_u32(f, "t.u64", &u32)); /* too big */
    assert_false(gguf_get_u32(f, "t.f32", &u32));
    assert_false(gguf_get_u32(f, "t.str", &u32));
    assert_false(gguf_get_u32(f, "t.bool", &u32));
    assert_false(gguf_get_u32(f, "absent.key", &u32));
    assert_true(gguf_get_i64(f, "t.i64", &i64) && i64 == -(1ll << 62));
    assert_true(gguf_get_i64(f, "t.u32", &i64) && i64 == 4000000000ll);
    assert_true(gguf_get_i64(f, "t.i8", &i64) && i64 == -100);
    assert_false(gguf_get_i64(f, "t.u64", &i64)); /* > INT64_MAX */
    assert_false(gguf_get_i64(f, "t.f64", &i64));
    assert_true(gguf_get_f32(f, "t.f32", &f32) && f32 == 1.5f);
    assert_true(gguf_get_f32(f, "t.f64", &f32) && f32 == (float)3.141592653589793);
    assert_true(gguf_get_f32(f, "t.i16", &f32) && f32 == -30000.0f);
    assert_true(gguf_get_f32(f, "t.u8", &f32) && f32 == 200.0f);
    assert_false(gguf_get_f32(f, "t.str", &f32));
    assert_false(gguf_get_f32(f, "t.bool", &f32));
    assert_true(gguf_get_bool(f, "t.bool", &bl) && bl);
    assert_false(gguf_get_bool(f, "t.u8", &bl));
    assert_false(gguf_get_str(f, "t.u8", &s));
    assert_false(gguf_get_arr(f, "t.str", &et, &n, &items));
    assert_null(gguf_get(f, "t"));
    assert_null(gguf_get(f, "t.u8x"));
}

static void check_sample_tensors(const gguf_file *f, uint32_t align)
{
    assert_int_equal(gguf_n_tensors(f), SAMPLE_N_TENSORS);
    for (int t = 0; t < SAMPLE_N_TENSORS; t++) {
        const sample_tensor *s = &TENSORS[t];
        const plume_tensor *pt = gguf_tensor(f, (size_t)t);
        assert_non_null(pt);
        assert_ptr_equal(gguf_find_tensor(f, s->name), pt);
        assert_string_equal(pt->name, s->name);
        assert_int_equal(pt->type, s->type);
        assert_int_equal(pt->n_dims, s->n_dims);
        for (int d = 0; d < 4; d++)
            assert_int_equal(pt->ne[d], (int64_t)s->ne[d]);
        assert_int_equal(pt->nbytes, s->nbytes);
        /* the map is page-aligned, so data must be aligned to the file's alignment */
        assert_int_equal((uintptr_t)pt->data % align, 0);
        const uint8_t *p = pt->data;
        for (size_t k = 0; k < s->nbytes; k++)
            assert_int_equal(p[k], data_byte(t, k));
    }
    assert_null(gguf_tensor(f, SAMPLE_N_TENSORS));
    assert_null(gguf_find_tensor(f, "a.f3"));
    assert_null(gguf_find_tensor(f, "nope"));
}

static void test_read_v3_aligned64(void **state)
{
    fixture *fx = *state;
    build_sample(&fx->buf, 3, 64, &fx->offs);
    gguf_file *f;
    plume_error err;
    if (write_and_open(fx, &f, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(gguf_version(f), 3);
    assert_int_equal(gguf_alignment(f), 64);
    assert_int_equal(gguf_file_size(f), fx->buf.n);
    assert_string_equal(gguf_path(f), fx->tmp.path);
    assert_int_equal(gguf_n_kv(f), SAMPLE_N_KV);
    assert_true(str_is(gguf_kv_key(f, 0), "general.architecture"));
    assert_true(str_is(gguf_kv_key(f, 1), "general.alignment"));
    assert_true(str_is(gguf_kv_key(f, SAMPLE_N_KV - 1), "t.f64s"));
    assert_int_equal(gguf_kv_value(f, 2)->u, 200);
    assert_null(gguf_kv_value(f, SAMPLE_N_KV));
    assert_null(gguf_kv_key(f, SAMPLE_N_KV).ptr);
    check_sample_values(f);
    check_sample_tensors(f, 64);
    gguf_close(f);
}

static void test_read_v2_default_alignment(void **state)
{
    fixture *fx = *state;
    build_sample(&fx->buf, 2, 0, &fx->offs);
    assert_int_equal(fx->offs.data_start % 32, 0);
    gguf_file *f;
    plume_error err;
    if (write_and_open(fx, &f, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(gguf_version(f), 2);
    assert_int_equal(gguf_alignment(f), 32);
    assert_int_equal(gguf_n_kv(f), SAMPLE_N_KV - 1);
    check_sample_values(f);
    check_sample_tensors(f, 32);
    gguf_close(f);
}

/* A file with no metadata and no tensors is valid; so are 16 nested arrays. */
static void test_minimal_and_deep_nesting(void **state)
{
    fixture *fx = *state;
    gw_header(&fx->buf, 3, 0, 0);
    gguf_file *f;
    plume_error err;
    if (write_and_open(fx, &f, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(gguf_n_kv(f), 0);
    assert_int_equal(gguf_n_tensors(f), 0);
    assert_null(gguf_get(f, "x"));
    assert_null(gguf_find_tensor(f, "x"));
    gguf_close(f);

    gw_free(&fx->buf);
    gw_header(&fx->buf, 3, 0, 1);
    gw_key(&fx->buf, "deep", 9);
    for (int d = 0; d < 15; d++) { /* 15 arrays of one array each ... */
        gw_u32(&fx->buf, 9);
        gw_u64(&fx->buf, 1);
    }
    gw_u32(&fx->buf, 0); /* ... then the 16th holds one uint8 */
    gw_u64(&fx->buf, 1);
    gw_u8(&fx->buf, 42);
    if (write_and_open(fx, &f, &err) != 0)
        fail_msg("%s", err.msg);
    const gguf_value *v = gguf_get(f, "deep");
    for (int d = 0; d < 16; d++) {
        assert_int_equal(v->type, GGUF_TYPE_ARRAY);
        assert_int_equal(v->arr.n, 1);
        v = &v->arr.items[0];
    }
    assert_int_equal(v->type, GGUF_TYPE_UINT8);
    assert_int_equal(v->u, 42);
    gguf_close(f);
    gguf_close(NULL);
}

static void test_type_names(void **state)
{
    (void)state;
    static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32",
                                        "int32", "float32", "bool", "string", "array",
                                        "uint64", "int64", "float64"};
    for (int t = 0; t < GGUF_TYPE_COUNT; t++)
        assert_string_equal(gguf_type_name((gguf_type)t), names[t]);
    assert_string_equal(gguf_type_name(GGUF_TYPE_COUNT), "unknown");
}

/* ------------------------------------------------------------------ */
/* Truncation                                                          */

static void test_truncation_every_length(void **state)
{
    fixture *fx = *state;
    build_sample(&fx->buf, 3, 64, &fx->offs);
    for (size_t len = 0; len < fx->buf.n; len++) {
        gw_write_file(&fx->tmp, fx->buf.p, len);
        gguf_file *f = (gguf_file *)1;
        plume_error err = {0};
        int rc = gguf_open(fx->tmp.path, &f, &err);
        if (rc == 0) {
            gguf_close(f);
            fail_msg("truncated to %zu of %zu bytes but gguf_open succeeded", len, fx->buf.n);
        }
        assert_null(f);
        if (err.code != PLUME_ERR_FORMAT || !strstr(err.msg, fx->tmp.path) ||
            !strstr(err.msg, "offset"))
            fail_msg("truncated to %zu: %s: %s", len, plume_status_name(err.code), err.msg);
    }
}

/* Specific truncation messages name the field. */
static void test_truncation_messages(void **state)
{
    fixture *fx = *state;
    build_sample(&fx->buf, 3, 64, &fx->offs);
    size_t full = fx->buf.n;
    fx->buf.n = 2;
    expect_fail(fx, PLUME_ERR_FORMAT, "header magic: needs 4 bytes");
    fx->buf.n = 6;
    expect_fail(fx, PLUME_ERR_FORMAT, "header version");
    fx->buf.n = fx->offs.c_type + 2; /* inside tensor c's type field */
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #2 'c.q8_0' type: needs 4 bytes but only 2 remain");
    fx->buf.n = 20; /* inside metadata_kv_count */
    expect_fail(fx, PLUME_ERR_FORMAT, "header metadata_kv_count: needs 8 bytes");
    fx->buf.n = full - 1;
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #4 'e.bf16' offset");
    fx->buf.n = full - 1;
    expect_fail(fx, PLUME_ERR_FORMAT, "runs past the end of the file");
    fx->buf.n = 0;
    expect_fail(fx, PLUME_ERR_FORMAT, "empty");
}

/* ------------------------------------------------------------------ */
/* Corruptions of the sample                                           */

static void build64(fixture *fx) { build_sample(&fx->buf, 3, 64, &fx->offs); }

static void test_bad_magic(void **state)
{
    fixture *fx = *state;
    build64(fx);
    fx->buf.p[0] = 'X';
    expect_fail(fx, PLUME_ERR_FORMAT, "expected \"GGUF\"");
}

static void test_versions(void **state)
{
    fixture *fx = *state;
    build64(fx);
    gw_patch_u32(&fx->buf, 4, 1);
    expect_fail(fx, PLUME_ERR_UNSUPPORTED, "GGUF version 1 is no longer supported");
    gw_patch_u32(&fx->buf, 4, 4);
    expect_fail(fx, PLUME_ERR_UNSUPPORTED, "GGUF version 4");
    gw_patch_u32(&fx->buf, 4, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "version 0");
    gw_patch_u32(&fx->buf, 4, 0x03000000u); /* version 3 written big-endian */
    expect_fail(fx, PLUME_ERR_UNSUPPORTED, "big-endian GGUF file, which is unsupported");
}

static void test_huge_lengths_and_counts(void **state)
{
    fixture *fx = *state;
    build64(fx);
    gw_patch_u64(&fx->buf, fx->offs.str_len, 1ull << 62);
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #10 't.str' value: string length 4611686018427387904");
    gw_patch_u64(&fx->buf, fx->offs.str_len, UINT64_MAX);
    expect_fail(fx, PLUME_ERR_FORMAT, "string length 18446744073709551615 exceeds");
    gw_free(&fx->buf);

    build64(fx);
    gw_patch_u64(&fx->buf, fx->offs.key0_len, UINT64_MAX - 3);
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #0: string length");
    gw_free(&fx->buf);

    build64(fx);
    gw_patch_u64(&fx->buf, fx->offs.arr_count, 1ull << 60);
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #11 't.arr_u32' value: array count 1152921504606846976");
    gw_patch_u64(&fx->buf, fx->offs.arr_count, UINT64_MAX);
    expect_fail(fx, PLUME_ERR_FORMAT, "array count");
    gw_free(&fx->buf);

    build64(fx);
    gw_patch_u64(&fx->buf, 8, 1ull << 60); /* tensor_count */
    expect_fail(fx, PLUME_ERR_FORMAT, "header tensor_count");
    gw_free(&fx->buf);
    build64(fx);
    gw_patch_u64(&fx->buf, 16, UINT64_MAX); /* metadata_kv_count */
    expect_fail(fx, PLUME_ERR_FORMAT, "header metadata_kv_count");
    gw_free(&fx->buf);
    build64(fx);
    gw_patch_u64(&fx->buf, 16, SAMPLE_N_KV + 1); /* one key more than present */
    /* key #19 swallows the start of tensor info #0; what follows is garbage */
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #0 name: string length");
}

/* A file with one key "general.alignment" of the given type and raw value. */
static void build_alignment(fixture *fx, uint32_t type, uint64_t value)
{
    gw_free(&fx->buf);
    gw_header(&fx->buf, 3, 0, 1);
    gw_key(&fx->buf, "general.alignment", type);
    if (type == 10)
        gw_u64(&fx->buf, value);
    else
        gw_u32(&fx->buf, (uint32_t)value);
}

static void test_bad_alignment(void **state)
{
    fixture *fx = *state;
    build_alignment(fx, 4, 3);
    expect_fail(fx, PLUME_ERR_FORMAT, "general.alignment 3 is not a nonzero power of two");
    build_alignment(fx, 4, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "general.alignment 0 is not a nonzero power of two");
    build_alignment(fx, 4, 96);
    expect_fail(fx, PLUME_ERR_FORMAT, "power of two");
    build_alignment(fx, 10, 64);
    expect_fail(fx, PLUME_ERR_FORMAT, "general.alignment must be a uint32, found uint64");
    build_alignment(fx, 5, 64);
    expect_fail(fx, PLUME_ERR_FORMAT, "must be a uint32, found int32");
    build_alignment(fx, 4, 128); /* valid */
    gguf_file *f;
    plume_error err;
    assert_int_equal(write_and_open(fx, &f, &err), 0);
    assert_int_equal(gguf_alignment(f), 128);
    gguf_close(f);
}

static void test_bad_tensor_infos(void **state)
{
    fixture *fx = *state;
    build64(fx);
    gw_patch_u32(&fx->buf, fx->offs.c_ndims, 5);
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #2 'c.q8_0' dims: n_dims 5 exceeds the maximum 4");
    gw_free(&fx->buf);

    build64(fx);
    gw_patch_u64(&fx->buf, fx->offs.c_offset, 128 + 2);
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #2 'c.q8_0' offset: data offset 130 is not a multiple of the alignment 64");
    gw_free(&fx->buf);

    build64(fx);
    gw_patch_u64(&fx->buf, fx->offs.e_offset, 64 * 1000);
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #4 'e.bf16' offset: data (offset 64000");
    gw_patch_u64(&fx->buf, fx->offs.e_offset, UINT64_MAX - 63); /* aligned, would wrap */
    expect_fail(fx, PLUME_ERR_FORMAT, "runs past the end of the file");
    gw_free(&fx->buf);

    build64(fx);
    gw_patch_u32(&fx->buf, fx->offs.c_type, 77);
    expect_fail(fx, PLUME_ERR_UNSUPPORTED, "tensor info #2 'c.q8_0' type: type id 77 (unknown)");
    gw_patch_u32(&fx->buf, fx->offs.c_type, 4); /* Q4_2: assigned once, removed, size unknown */
    expect_fail(fx, PLUME_ERR_UNSUPPORTED, "type id 4 (Q4_2)");
    gw_free(&fx->buf);

    build64(fx);
    gw_patch_u64(&fx->buf, fx->offs.c_ndims + 4, 33); /* ne[0] of a Q8_0 tensor */
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #2 'c.q8_0' dims: ne[0] = 33 is not a multiple of the Q8_0 block size 32");
}

static void test_dims_overflow(void **state)
{
    fixture *fx = *state;
    uint64_t ne[4] = {1ull << 32, 1ull << 32, 1ull << 32, 1};
    gw_header(&fx->buf, 3, 1, 0);
    gw_tensor_info(&fx->buf, "big", 3, ne, 0, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #0 'big' dims: dims overflow");

    uint64_t ne2[4] = {1ull << 62, 1, 1, 1}; /* 2^62 elements fit; 2^64 bytes of F32 do not */
    gw_free(&fx->buf);
    gw_header(&fx->buf, 3, 1, 0);
    gw_tensor_info(&fx->buf, "big", 1, ne2, 0, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "byte size overflows");

    uint64_t ne3[4] = {UINT64_MAX, 1, 1, 1};
    gw_free(&fx->buf);
    gw_header(&fx->buf, 3, 1, 0);
    gw_tensor_info(&fx->buf, "big", 1, ne3, 0, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "dims overflow");
}

static void test_duplicates(void **state)
{
    fixture *fx = *state;
    gw_header(&fx->buf, 3, 0, 3);
    gw_kv_u32(&fx->buf, "a.key", 1);
    gw_kv_u32(&fx->buf, "b.key", 2);
    gw_kv_str(&fx->buf, "a.key", "again");
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #2 'a.key': duplicates metadata key #0");

    uint64_t ne[1] = {8};
    gw_free(&fx->buf);
    gw_header(&fx->buf, 3, 2, 0);
    gw_tensor_info(&fx->buf, "w", 1, ne, 0, 0);
    gw_tensor_info(&fx->buf, "w", 1, ne, 0, 32);
    gw_pad(&fx->buf, 32);
    for (int i = 0; i < 64; i++)
        gw_u8(&fx->buf, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "tensor info #1 'w': duplicates the name of tensor #0");
}

static void test_nesting_too_deep(void **state)
{
    fixture *fx = *state;
    gw_header(&fx->buf, 3, 0, 1);
    gw_key(&fx->buf, "deep", 9);
    for (int d = 0; d < 17; d++) {
        gw_u32(&fx->buf, 9);
        gw_u64(&fx->buf, 1);
    }
    for (int i = 0; i < 64; i++)
        gw_u8(&fx->buf, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #0 'deep' value[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: arrays are nested more than 16 deep");
}

static void test_bad_value_types(void **state)
{
    fixture *fx = *state;
    gw_header(&fx->buf, 3, 0, 1);
    gw_key(&fx->buf, "k", 13);
    gw_u32(&fx->buf, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #0 'k' type: value type 13 is not a GGUF value type");

    gw_free(&fx->buf);
    gw_header(&fx->buf, 3, 0, 1);
    gw_key(&fx->buf, "k", 9);
    gw_u32(&fx->buf, 0xFFFFFFFFu);
    gw_u64(&fx->buf, 0);
    expect_fail(fx, PLUME_ERR_FORMAT, "array element type 4294967295 is not a GGUF value type");

    /* a failure inside a string array names the element */
    gw_free(&fx->buf);
    gw_header(&fx->buf, 3, 0, 1);
    gw_key(&fx->buf, "toks", 9);
    gw_u32(&fx->buf, 8);
    gw_u64(&fx->buf, 3);
    gw_str(&fx->buf, "ab");
    gw_str(&fx->buf, "cd");
    gw_u64(&fx->buf, 1000); /* string #2 claims 1000 bytes */
    gw_put(&fx->buf, "xyz", 3);
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #0 'toks' value[2]: string length 1000");
}

/* Non-printable bytes in a key are shown as '?' in messages. */
static void test_odd_key_in_message(void **state)
{
    fixture *fx = *state;
    gw_header(&fx->buf, 3, 0, 1);
    gw_strn(&fx->buf, "a\nb\x01", 4);
    gw_u32(&fx->buf, 4); /* uint32 value, but the file ends */
    expect_fail(fx, PLUME_ERR_FORMAT, "metadata key #0 'a?b?' value: needs 4 bytes");
}

/* Deterministic random corruption: flip 1-4 bytes of the sample, 3000 times.
 * Each open must succeed or fail with a message naming the file (and never
 * crash; the sanitizer build checks memory safety). */
static void test_random_corruption(void **state)
{
    fixture *fx = *state;
    build64(fx);
    gw_buf orig = {0};
    gw_put(&orig, fx->buf.p, fx->buf.n);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int n_ok = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(fx->buf.p, orig.p, orig.n);
        int flips = 1 + (int)(x % 4);
        for (int k = 0; k < flips; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            /* bias towards the header and metadata, where structure lives */
            size_t pos = (size_t)(x >> 20) % (k == 0 ? fx->offs.data_start : orig.n);
            fx->buf.p[pos] = (uint8_t)(x >> 8);
        }
        gguf_file *f;
        plume_error err = {0};
        if (write_and_open(fx, &f, &err) == 0) {
            n_ok++;
            for (size_t i = 0; i < gguf_n_tensors(f); i++) { /* views must lie in the file */
                const plume_tensor *t = gguf_tensor(f, i);
                volatile uint8_t sink = 0;
                for (size_t b = 0; b < t->nbytes; b++)
                    sink ^= ((const uint8_t *)t->data)[b];
                (void)sink;
            }
            gguf_close(f);
        } else if (!strstr(err.msg, fx->tmp.path) || err.code == PLUME_OK ||
                   err.code == PLUME_ERR_INTERNAL) {
            fail_msg("iteration %d: %s: %s", it, plume_status_name(err.code), err.msg);
        }
    }
    assert_true(n_ok > 0 && n_ok < 3000);
    gw_free(&orig);
}

static void test_io_errors(void **state)
{
    fixture *fx = *state;
    gguf_file *f = (gguf_file *)1;
    plume_error err = {0};
    assert_int_equal(gguf_open(fx->tmp.dir, &f, &err), -1); /* a directory */
    assert_null(f);
    assert_int_equal(err.code, PLUME_ERR_IO);
    assert_non_null(strstr(err.msg, fx->tmp.dir));
    char missing[400];
    snprintf(missing, sizeof missing, "%s/missing.gguf", fx->tmp.dir);
    assert_int_equal(gguf_open(missing, &f, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_IO);
    assert_non_null(strstr(err.msg, "missing.gguf: cannot open"));
    assert_int_equal(gguf_open(missing, &f, NULL), -1); /* NULL err is allowed */
}

/* ------------------------------------------------------------------ */
/* Split models (gguf-split's shards)                                  */

/* Writes shard no (0-based) of count at DIR/m-0000<no+1>-of-0000<count>.gguf:
 * split keys (and a name key in the first), one F32 tensor "t<no>" of 4
 * values no*10 + k; split_count overrides the count written. */
static void write_shard(const fixture *fx, int no, int count, int split_count, char *path,
                        size_t cap)
{
    gw_buf b = {0};
    gw_header(&b, 3, 1, no == 0 ? 4 : 3);
    if (no == 0)
        gw_kv_str(&b, "general.name", "split");
    gw_key(&b, "split.no", 2);
    gw_u16(&b, (uint16_t)no);
    gw_key(&b, "split.count", 2);
    gw_u16(&b, (uint16_t)split_count);
    gw_key(&b, "split.tensors.count", 5);
    gw_u32(&b, (uint32_t)count);
    char name[8];
    snprintf(name, sizeof name, "t%d", no);
    uint64_t ne[1] = {4};
    gw_tensor_info(&b, name, 1, ne, 0, 0);
    gw_pad(&b, 32);
    for (int k = 0; k < 4; k++)
        gw_f32(&b, (float)(no * 10 + k));
    snprintf(path, cap, "%s/m-%05d-of-%05d.gguf", fx->tmp.dir, no + 1, count);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(b.p, 1, b.n, fp) != b.n)
        abort();
    fclose(fp);
    gw_free(&b);
}

static void test_split_shards(void **state)
{
    fixture *fx = *state;
    char p[3][400];
    for (int i = 0; i < 3; i++)
        write_shard(fx, i, 3, 3, p[i], sizeof p[i]);
    gguf_file *f = NULL;
    plume_error err = {0};
    if (gguf_open(p[0], &f, &err))
        fail_msg("%s", err.msg);
    /* the first's metadata, every shard's tensors and data */
    gguf_str name;
    assert_true(gguf_get_str(f, "general.name", &name) && str_is(name, "split"));
    assert_int_equal(gguf_n_tensors(f), 3);
    for (int i = 0; i < 3; i++) {
        char tn[8];
        snprintf(tn, sizeof tn, "t%d", i);
        const plume_tensor *t = gguf_find_tensor(f, tn);
        assert_non_null(t);
        float v[4];
        memcpy(v, t->data, sizeof v);
        for (int k = 0; k < 4; k++)
            assert_true(v[k] == (float)(i * 10 + k));
    }
    gguf_close(f);
    /* another shard alone names the first */
    f = (gguf_file *)1;
    assert_int_not_equal(gguf_open(p[1], &f, &err), 0);
    assert_null(f);
    assert_non_null(strstr(err.msg, "shard 2 of 3"));
    assert_non_null(strstr(err.msg, "-00001-of-00003.gguf"));
    /* a missing shard is named */
    unlink(p[2]);
    assert_int_not_equal(gguf_open(p[0], &f, &err), 0);
    assert_non_null(strstr(err.msg, "shard 3 of 3"));
    assert_non_null(strstr(err.msg, "m-00003-of-00003.gguf"));
    /* a shard of another split */
    write_shard(fx, 2, 3, 4, p[2], sizeof p[2]);
    assert_int_not_equal(gguf_open(p[0], &f, &err), 0);
    assert_non_null(strstr(err.msg, "shards are of different splits"));
    for (int i = 0; i < 3; i++)
        unlink(p[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_v3_aligned64, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_v2_default_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_minimal_and_deep_nesting, setup, teardown),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test_setup_teardown(test_truncation_every_length, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncation_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_magic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_lengths_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_tensor_infos, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dims_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nesting_too_deep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_value_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_odd_key_in_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_corruption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_shards, setup, teardown),
    };
    return cmocka_run_group_tests_name("gguf_read", tests, NULL, NULL);
}
