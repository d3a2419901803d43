/* safetensors reader tests on files written here: values and shapes read
 * back, directories, sharded checkpoints, and corrupt files (every
 * truncation, byte mutations, bad headers) that must give clean errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sys/stat.h>

#include "formats/safetensors.h"
#include "st_test_util.h"

/* ---- a tiny safetensors writer ----------------------------------------- */

typedef struct tw_tensor {
    const char *name;
    const char *dtype;
    int n_dims;
    int64_t shape[6];
    const void *data;
    size_t nbytes;
} tw_tensor;

typedef struct tw_buf {
    char *p;
    size_t len, cap;
} tw_buf;

/* Appends printf output to b (grows as needed). */
static void tw_printf(tw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tw_printf(tw_buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)n + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
}

/* Builds a file image: u64 LE header size, a header padded with spaces to a
 * multiple of 8 (as the Rust writer does), then the tensors' bytes in the
 * order given.  meta (a JSON object text) may be NULL.  Caller frees. */
static uint8_t *tw_build(const tw_tensor *ts, size_t n, const char *meta, size_t *len)
{
    tw_buf h = {0};
    tw_printf(&h, "{");
    if (meta)
        tw_printf(&h, "\"__metadata__\":%s%s", meta, n ? "," : "");
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        tw_printf(&h, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", ts[i].name, ts[i].dtype);
        for (int k = 0; k < ts[i].n_dims; k++)
            tw_printf(&h, "%s%lld", k ? "," : "", (long long)ts[i].shape[k]);
        tw_printf(&h, "],\"data_offsets\":[%zu,%zu]}", off, off + ts[i].nbytes);
        off += ts[i].nbytes;
    }
    tw_printf(&h, "}");
    while (h.len % 8)
        tw_printf(&h, " ");
    *len = 8 + h.len + off;
    uint8_t *img = malloc(*len ? *len : 1);
    assert_non_null(img);
    for (int i = 0; i < 8; i++)
        img[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    memcpy(img + 8, h.p, h.len);
    size_t pos = 8 + h.len;
    for (size_t i = 0; i < n; i++) {
        if (ts[i].nbytes)
            memcpy(img + pos, ts[i].data, ts[i].nbytes);
        pos += ts[i].nbytes;
    }
    free(h.p);
    return img;
}

/* Writes a well-formed safetensors file. */
static void tw_write(const char *path, const tw_tensor *ts, size_t n, const char *meta)
{
    size_t len;
    uint8_t *img = tw_build(ts, n, meta, &len);
    assert_int_equal(tu_write_file(path, img, len), 0);
    free(img);
}

/* Writes u64 LE header_size (explicit, may lie), the header text and data. */
static void tw_write_raw_n(const char *path, uint64_t n, const char *header, const void *data,
                           size_t dlen)
{
    size_t hl = strlen(header), len = 8 + hl + dlen;
    uint8_t *img = calloc(1, len);
    assert_non_null(img);
    for (int i = 0; i < 8; i++)
        img[i] = (uint8_t)(n >> (8 * i));
    memcpy(img + 8, header, hl);
    if (dlen)
        memcpy(img + 8 + hl, data, dlen);
    assert_int_equal(tu_write_file(path, img, len), 0);
    free(img);
}

/* Writes a file whose header size is the true header length; dlen zero
 * bytes of data follow. */
static void tw_write_raw(const char *path, const char *header, size_t dlen)
{
    uint8_t *zeros = calloc(1, dlen ? dlen : 1);
    assert_non_null(zeros);
    tw_write_raw_n(path, strlen(header), header, zeros, dlen);
    free(zeros);
}

/* Opening path must fail with code and a message containing both the path
 * (or `name`, when non-NULL) and want. */
static void expect_open_fails(const char *path, const char *name, plume_status code,
                              const char *want)
{
    safetensors *st = (safetensors *)0x1;
    plume_error err = {0};
    assert_int_equal(safetensors_open(path, &st, &err), -1);
    assert_null(st);
    assert_true(tu_err_is(&err, code, want));
    assert_true(tu_err_is(&err, code, name ? name : path));
}

/* ---- fixtures ---------------------------------------------------------- */

static int setup(void **state)
{
    *state = tu_dir_new();
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    tu_dir_free(*state);
    return 0;
}

/* The mixed-dtype tensor set used by several tests. */
typedef struct sample {
    float f32[6];
    uint16_t f16[4];
    uint16_t bf16[6];
    int32_t i32[5];
    float scalar;
    int64_t i64[12];
    uint8_t mask[3];
    tw_tensor ts[8];
} sample;

static void sample_init(sample *s)
{
    const float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
    const uint16_t f16[4] = {0x3C00, 0xC000, 0x3800, 0x7BFF};          /* 1, -2, 0.5, 65504 */
    const uint16_t bf16[6] = {0x3F80, 0xBF80, 0x4000, 0x0000, 0x7F80, 0x3E80}; /* .., inf, 0.25 */
    const int32_t i32[5] = {-1, 0, 1, INT32_MAX, INT32_MIN};
    memcpy(s->f32, f32, sizeof f32);
    memcpy(s->f16, f16, sizeof f16);
    memcpy(s->bf16, bf16, sizeof bf16);
    memcpy(s->i32, i32, sizeof i32);
    s->scalar = 42.5f;
    for (int i = 0; i < 12; i++)
        s->i64[i] = (int64_t)i * 1000000000000LL - 5;
    s->mask[0] = 1, s->mask[1] = 0, s->mask[2] = 1;
    /* Written in descending alignment, like the Rust writer. */
    tw_tensor ts[8] = {
        {"model.i64_4d", "I64", 4, {2, 1, 3, 2}, s->i64, sizeof s->i64},
        {"model.f32_matrix", "F32", 2, {2, 3}, s->f32, sizeof s->f32},
        {"scalar", "F32", 0, {0}, &s->scalar, sizeof s->scalar},
        {"model.i32_ids", "I32", 1, {5}, s->i32, sizeof s->i32},
        {"model.f16_vector", "F16", 1, {4}, s->f16, sizeof s->f16},
        {"model.bf16_cube", "BF16", 3, {3, 1, 2}, s->bf16, sizeof s->bf16},
        {"model.u8_empty", "U8", 2, {0, 5}, NULL, 0},
        {"model.bool_mask", "BOOL", 1, {3}, s->mask, sizeof s->mask},
    };
    memcpy(s->ts, ts, sizeof ts);
}

/* Checks one tensor view against what was written. */
static void check_tensor(const safetensors *st, const tw_tensor *w, uint32_t type)
{
    const plume_tensor *t = safetensors_find(st, w->name);
    assert_non_null(t);
    assert_string_equal(t->name, w->name);
    assert_int_equal(t->type, type);
    assert_int_equal(t->n_dims, w->n_dims);
    for (int i = 0; i < PLUME_MAX_DIMS; i++) {
        int64_t want = i < w->n_dims ? w->shape[w->n_dims - 1 - i] : 1;
        assert_int_equal(t->ne[i], want);
    }
    assert_int_equal(t->nbytes, w->nbytes);
    if (w->nbytes)
        assert_memory_equal(t->data, w->data, w->nbytes);
    assert_string_equal(safetensors_dtype(st, t), w->dtype);
}

static uint32_t expected_type(const char *dtype)
{
    if (strcmp(dtype, "F32") == 0)
        return PLUME_DTYPE_F32;
    if (strcmp(dtype, "F16") == 0)
        return PLUME_DTYPE_F16;
    if (strcmp(dtype, "BF16") == 0)
        return PLUME_DTYPE_BF16;
    return PLUME_ST_RAW_TYPE;
}

/* Checks every sample tensor, the sorted listing and lookup misses. */
static void check_sample(const safetensors *st, const sample *s)
{
    assert_int_equal(safetensors_n_tensors(st), 8);
    for (int i = 0; i < 8; i++)
        check_tensor(st, &s->ts[i], expected_type(s->ts[i].dtype));
    for (size_t i = 0; i < 8; i++) {
        const plume_tensor *t = safetensors_tensor(st, i);
        assert_non_null(t);
        assert_ptr_equal(safetensors_find(st, t->name), t);
        if (i > 0)
            assert_true(strcmp(safetensors_tensor(st, i - 1)->name, t->name) < 0);
    }
    assert_null(safetensors_tensor(st, 8));
    assert_null(safetensors_find(st, "nope"));
    assert_null(safetensors_find(st, "__metadata__"));
    assert_null(safetensors_find(st, ""));
    plume_tensor foreign = *safetensors_tensor(st, 0);
    assert_null(safetensors_dtype(st, &foreign));
}

/* ---- tests: well-formed files ------------------------------------------ */

static void test_single_file(void **state)
{
    tu_dir *d = *state;
    sample s;
    sample_init(&s);
    const char *path = tu_path(d, "one.safetensors");
    tw_write(path, s.ts, 8, "{\"format\":\"pt\",\"note\":\"x\"}");
    safetensors *st = NULL;
    plume_error err = {0};
    assert_int_equal(safetensors_open(path, &st, &err), 0);
    check_sample(st, &s);
    /* the scalar and the ne order of the linear weight, spelled out */
    const plume_tensor *sc = safetensors_find(st, "scalar");
    assert_int_equal(sc->n_dims, 0);
    float v;
    memcpy(&v, sc->data, sizeof v);
    assert_true(v == 42.5f);
    const plume_tensor *m = safetensors_find(st, "model.f32_matrix");
    assert_int_equal(m->ne[0], 3);
    assert_int_equal(m->ne[1], 2);
    memcpy(&v, (const float *)m->data + 1 * 3 + 2, sizeof v); /* row 1, col 2 */
    assert_true(v == -7.0f);
    safetensors_close(st);
    safetensors_close(NULL);
}

static void test_unpadded_header_and_no_tensors(void **state)
{
    tu_dir *d = *state;
    const char *path = tu_path(d, "raw.safetensors");
    float f = 2.0f;
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    tw_write_raw_n(path, strlen(h), h, &f, 4);
    safetensors *st = NULL;
    plume_error err = {0};
    assert_int_equal(safetensors_open(path, &st, &err), 0);
    assert_int_equal(safetensors_n_tensors(st), 1);
    safetensors_close(st);

    tw_write_raw(path, "{}", 0);
    assert_int_equal(safetensors_open(path, &st, &err), 0);
    assert_int_equal(safetensors_n_tensors(st), 0);
    assert_null(safetensors_find(st, "w"));
    assert_null(safetensors_tensor(st, 0));
    safetensors_close(st);

    tw_write_raw(path, "{\"__metadata__\":{\"format\":\"pt\"}}       ", 0);
    assert_int_equal(safetensors_open(path, &st, &err), 0);
    assert_int_equal(safetensors_n_tensors(st), 0);
    safetensors_close(st);
}

static void test_directory_single(void **state)
{
    tu_dir *d = *state;
    sample s;
    sample_init(&s);
    assert_int_equal(mkdir(tu_path(d, "m1"), 0755), 0);
    tw_write(tu_path(d, "m1/model.safetensors"), s.ts, 8, NULL);
    safetensors *st = NULL;
    plume_error err = {0};
    assert_int_equal(safetensors_open(tu_path(d, "m1"), &st, &err), 0);
    check_sample(st, &s);
    safetensors_close(st);

    assert_int_equal(mkdir(tu_path(d, "empty"), 0755), 0);
    expect_open_fails(tu_path(d, "empty"), NULL, PLUME_ERR_IO,
                      "neither model.safetensors.index.json nor model.safetensors");
    expect_open_fails(tu_path(d, "does-not-exist.safetensors"), NULL, PLUME_ERR_IO, "cannot open");
}

static void test_raw_dtypes(void **state)
{
    tu_dir *d = *state;
    static const char *const names[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                        "I16", "U16", "I32", "U32", "C64", "F64", "I64", "U64"};
    uint8_t data[16 * 14];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)i;
    tw_tensor ts[14];
    size_t n = sizeof names / sizeof names[0];
    char tname[14][16];
    for (size_t i = 0; i < n; i++) {
        snprintf(tname[i], sizeof tname[i], "t_%s", names[i]);
        ts[i] = (tw_tensor){tname[i], names[i], 1, {2}, data, 0};
        ts[i].nbytes = 2 * (strstr(names[i], "64") ? 8
                            : strstr(names[i], "32")   ? 4
                            : strstr(names[i], "16")   ? 2
                                                       : 1);
    }
    const char *path = tu_path(d, "raw.safetensors");
    tw_write(path, ts, n, NULL);
    safetensors *st = NULL;
    plume_error err = {0};
    assert_int_equal(safetensors_open(path, &st, &err), 0);
    for (size_t i = 0; i < n; i++)
        check_tensor(st, &ts[i], PLUME_ST_RAW_TYPE);
    safetensors_close(st);

    /* sub-byte dtypes: F4 needs an even element count */
    uint8_t b = 0x21;
    tw_tensor f4 = {"f4", "F4", 1, {2}, &b, 1};
    tw_write(path, &f4, 1, NULL);
    assert_int_equal(safetensors_open(path, &st, &err), 0);
    check_tensor(st, &f4, PLUME_ST_RAW_TYPE);
    safetensors_close(st);
    tw_write_raw(path, "{\"f4\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 1);
    expect_open_fails(path, NULL, PLUME_ERR_FORMAT, "not a whole number of bytes");
}

/* ---- tests: sharded ---------------------------------------------------- */

typedef struct shard_set {
    float a[2];
    uint16_t b[3];
    int32_t c[4];
    float dsc;
} shard_set;

/* Writes dir/<shard 1> (a, b) and dir/<shard 2> (c, d) and, when index is
 * non-NULL, dir/model.safetensors.index.json with that text. */
static void write_shards(tu_dir *d, const char *dir, shard_set *v, const char *index)
{
    *v = (shard_set){{1.0f, 2.0f}, {0x3C00, 0x4000, 0x4200}, {1, 2, 3, 4}, -0.5f};
    tw_tensor s1[2] = {{"a", "F32", 1, {2}, v->a, sizeof v->a}, {"b", "F16", 1, {3}, v->b, sizeof v->b}};
    tw_tensor s2[2] = {{"c", "I32", 2, {2, 2}, v->c, sizeof v->c}, {"d", "F32", 0, {0}, &v->dsc, 4}};
    mkdir(tu_path(d, "%s", dir), 0755);
    tw_write(tu_path(d, "%s/model-00001-of-00002.safetensors", dir), s1, 2, "{\"format\":\"pt\"}");
    tw_write(tu_path(d, "%s/model-00002-of-00002.safetensors", dir), s2, 2, "{\"format\":\"pt\"}");
    if (index)
        assert_int_equal(tu_write_text(tu_path(d, "%s/model.safetensors.index.json", dir), index), 0);
}

#define GOOD_INDEX                                                                                 \
    "{\"metadata\": {\"total_size\": 38},\n \"weight_map\": {\n"                                   \
    "  \"a\": \"model-00001-of-00002.safetensors\",\n"                                             \
    "  \"b\": \"model-00001-of-00002.safetensors\",\n"                                             \
    "  \"c\": \"model-00002-of-00002.safetensors\",\n"                                             \
    "  \"d\": \"model-00002-of-00002.safetensors\"}}\n"

static void test_sharded(void **state)
{
    tu_dir *d = *state;
    shard_set v;
    write_shards(d, "sh", &v, GOOD_INDEX);
    /* also a model.safetensors: the index must win */
    tw_write_raw(tu_path(d, "sh/model.safetensors"), "{}", 0);
    char index[1024];
    snprintf(index, sizeof index, "%s", tu_path(d, "sh/model.safetensors.index.json"));
    const char *opens[2] = {index, NULL};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_path(d, "sh"));
    opens[1] = dir;
    for (int k = 0; k < 2; k++) {
        safetensors *st = NULL;
        plume_error err = {0};
        assert_int_equal(safetensors_open(opens[k], &st, &err), 0);
        assert_int_equal(safetensors_n_tensors(st), 4);
        tw_tensor want[4] = {{"a", "F32", 1, {2}, v.a, sizeof v.a},
                             {"b", "F16", 1, {3}, v.b, sizeof v.b},
                             {"c", "I32", 2, {2, 2}, v.c, sizeof v.c},
                             {"d", "F32", 0, {0}, &v.dsc, 4}};
        for (int i = 0; i < 4; i++) {
            check_tensor(st, &want[i], expected_type(want[i].dtype));
            assert_string_equal(safetensors_tensor(st, (size_t)i)->name, want[i].name);
        }
        safetensors_close(st);
    }
}

static void test_sharded_missing_shard(void **state)
{
    tu_dir *d = *state;
    shard_set v;
    write_shards(d, "ms", &v,
                 "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\","
                 " \"e\": \"model-00003-of-00003.safetensors\"}}");
    expect_open_fails(tu_path(d, "ms/model.safetensors.index.json"),
                      "model-00003-of-00003.safetensors", PLUME_ERR_IO, "tensor 'e'");
}

static void test_sharded_name_missing(void **state)
{
    tu_dir *d = *state;
    shard_set v;
    write_shards(d, "nm", &v,
                 "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\","
                 " \"c\": \"model-00001-of-00002.safetensors\","
                 " \"zz\": \"model-00002-of-00002.safetensors\"}}");
    char index[1024];
    snprintf(index, sizeof index, "%s", tu_path(d, "nm/model.safetensors.index.json"));
    /* 'c' is mapped to shard 1 but lives in shard 2 */
    expect_open_fails(index, "model-00001-of-00002.safetensors", PLUME_ERR_FORMAT,
                      "tensor 'c' is mapped to shard");

    write_shards(d, "nm2", &v,
                 "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\","
                 " \"zz\": \"model-00002-of-00002.safetensors\"}}");
    snprintf(index, sizeof index, "%s", tu_path(d, "nm2/model.safetensors.index.json"));
    expect_open_fails(index, "model-00002-of-00002.safetensors", PLUME_ERR_FORMAT,
                      "tensor 'zz' is mapped to shard");
}

static void test_sharded_duplicate(void **state)
{
    tu_dir *d = *state;
    float x = 1.0f;
    tw_tensor t = {"x", "F32", 1, {1}, &x, 4};
    mkdir(tu_path(d, "dup"), 0755);
    tw_write(tu_path(d, "dup/s1.safetensors"), &t, 1, NULL);
    tw_write(tu_path(d, "dup/s2.safetensors"), &t, 1, NULL);
    assert_int_equal(tu_write_text(tu_path(d, "dup/model.safetensors.index.json"),
                                   "{\"weight_map\": {\"x\": \"s1.safetensors\","
                                   " \"y\": \"s2.safetensors\"}}"),
                     0);
    expect_open_fails(tu_path(d, "dup"), "s2.safetensors", PLUME_ERR_FORMAT,
                      "duplicate tensor 'x'");
}

static void test_bad_index(void **state)
{
    tu_dir *d = *state;
    shard_set v;
    write_shards(d, "bi", &v, NULL);
    const char *idx = "bi/model.safetensors.index.json";
    static const struct {
        const char *text;
        const char *want;
    } cases[] = {
        {"{\"weight_map\": {\"a\": ", "not valid JSON"},
        {"", "not valid JSON"},
        {"[1, 2]", "no \"weight_map\" object"},
        {"{\"metadata\": {}}", "no \"weight_map\" object"},
        {"{\"weight_map\": {}}", "\"weight_map\" is empty"},
        {"{\"weight_map\": {\"a\": 3}}", "tensor 'a' is not a shard file name"},
        {"{\"weight_map\": {\"a\": \"../x.safetensors\"}}", "tensor 'a' is not a shard file name"},
        {"{\"weight_map\": {\"a\": \"/etc/passwd\"}}", "tensor 'a' is not a shard file name"},
        {"{\"weight_map\": {\"a\": \"\"}}", "tensor 'a' is not a shard file name"},
        {"{\"weight_map\": {\"a\": \"s.st\", \"a\": \"s.st\"}}", "not valid JSON"},
        {"{\"weight_map\": {\"a\": \"model.safetensors.index.json\"}}", "100000000-byte limit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(tu_write_text(tu_path(d, "%s", idx), cases[i].text), 0);
        expect_open_fails(tu_path(d, "%s", idx), NULL, PLUME_ERR_FORMAT, cases[i].want);
    }
    expect_open_fails(tu_path(d, "bi/nothere.index.json"), NULL, PLUME_ERR_IO, "cannot open");
}

/* ---- tests: corrupt single files --------------------------------------- */

static void test_exact_size_mismatch_message(void **state)
{
    tu_dir *d = *state;
    const char *path = tu_path(d, "model.safetensors");
    tw_write_raw(path, "{\"x\":{\"dtype\":\"F16\",\"shape\":[3,2],\"data_offsets\":[0,10]}}", 10);
    char want[1200];
    snprintf(want, sizeof want,
             "%s: tensor 'x' data_offsets [0, 10) has 10 bytes but dtype F16 shape [3, 2] needs 12",
             path);
    safetensors *st = NULL;
    plume_error err = {0};
    assert_int_equal(safetensors_open(path, &st, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_FORMAT);
    assert_string_equal(err.msg, want);
}

static void test_bad_headers(void **state)
{
    tu_dir *d = *state;
    static const struct {
        const char *header;
        size_t dlen;
        plume_status code;
        const char *want;
    } cases[] = {
        {"", 0, PLUME_ERR_FORMAT, "does not start with '{'"},
        {"[1]", 0, PLUME_ERR_FORMAT, "does not start with '{'"},
        {" {}", 0, PLUME_ERR_FORMAT, "does not start with '{'"},
        {"{\"x\": ", 0, PLUME_ERR_FORMAT, "header is not valid JSON"},
        {"{}\x01", 0, PLUME_ERR_FORMAT, "header is not valid JSON"},
        {"{} x", 0, PLUME_ERR_FORMAT, "header is not valid JSON"},
        {"{\"x\":\"y\"}", 0, PLUME_ERR_FORMAT, "tensor 'x' is not an object"},
        {"{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, PLUME_ERR_FORMAT, "no \"dtype\" string"},
        {"{\"x\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, PLUME_ERR_FORMAT,
         "unknown dtype 'F17'"},
        {"{\"x\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, PLUME_ERR_FORMAT,
         "no \"dtype\" string"},
        {"{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, PLUME_ERR_FORMAT, "no \"shape\" array"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, PLUME_ERR_FORMAT,
         "shape[0] is not a non-negative integer"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, PLUME_ERR_FORMAT,
         "shape[0] is not a non-negative integer"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         PLUME_ERR_UNSUPPORTED, "tensor 'x' has 5 dimensions (at most 4"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, PLUME_ERR_FORMAT, "no \"data_offsets\""},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, PLUME_ERR_FORMAT,
         "no \"data_offsets\""},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 4, PLUME_ERR_FORMAT,
         "not non-negative integers"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, PLUME_ERR_FORMAT,
         "[8, 4) end before begin"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, PLUME_ERR_FORMAT,
         "run past the 4-byte data buffer"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,8],\"data_offsets\":[0,4]}}", 4,
         PLUME_ERR_FORMAT, "is too large"},
        {"{\"x\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,4]}}", 4,
         PLUME_ERR_FORMAT, "is too large"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]}}", 4,
         PLUME_ERR_FORMAT, "header is not valid JSON"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, PLUME_ERR_FORMAT, "tensor 'b' data_offsets [4, 12) overlap tensor 'a' [0, 8)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         8, PLUME_ERR_FORMAT, "overlap tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, PLUME_ERR_FORMAT, "hole in the data buffer: bytes [4, 8) before tensor 'b'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, PLUME_ERR_FORMAT,
         "bytes [0, 4) before tensor 'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 9, PLUME_ERR_FORMAT,
         "5 bytes of trailing data after the last tensor"},
        {"{}", 1, PLUME_ERR_FORMAT, "1 bytes of trailing data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
         4, PLUME_ERR_FORMAT, "duplicate"},
        {"{\"__metadata__\":[1]}", 0, PLUME_ERR_FORMAT, "__metadata__ is not an object"},
        {"{\"__metadata__\":{\"total\":5}}", 0, PLUME_ERR_FORMAT,
         "__metadata__ value 'total' is not a string"},
    };
    const char *path = tu_path(d, "bad.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tw_write_raw(path, cases[i].header, cases[i].dlen);
        expect_open_fails(path, NULL, cases[i].code, cases[i].want);
    }
}

static void test_bad_header_sizes(void **state)
{
    tu_dir *d = *state;
    const char *path = tu_path(d, "hs.safetensors");
    tw_write_raw_n(path, 1000, "{}", NULL, 0);
    expect_open_fails(path, NULL, PLUME_ERR_FORMAT, "header size 1000 runs past the end of the 10-byte file");
    tw_write_raw_n(path, 200000000, "{}", NULL, 0);
    expect_open_fails(path, NULL, PLUME_ERR_FORMAT, "header size 200000000 exceeds the 100000000-byte limit");
    tw_write_raw_n(path, UINT64_MAX, "{}", NULL, 0);
    expect_open_fails(path, NULL, PLUME_ERR_FORMAT, "exceeds the 100000000-byte limit");
    tw_write_raw_n(path, 3, "{}", NULL, 0); /* header "{}\0"-less: cut short */
    expect_open_fails(path, NULL, PLUME_ERR_FORMAT, "runs past the end");
    assert_int_equal(tu_write_file(path, "abc", 3), 0);
    expect_open_fails(path, NULL, PLUME_ERR_FORMAT, "file is 3 bytes, too short");
    assert_int_equal(tu_write_file(path, "", 0), 0);
    expect_open_fails(path, NULL, PLUME_ERR_FORMAT, "file is 0 bytes, too short");
}

/* The image of the sample file with metadata {"format":"pt"} (tw_build's:
 * *len bytes, the caller frees them). */
static uint8_t *sample_image(size_t *len)
{
    sample s;
    sample_init(&s);
    return tw_build(s.ts, 8, "{\"format\":\"pt\"}", len);
}

static void test_every_truncation(void **state)
{
    tu_dir *d = *state;
    size_t len;
    uint8_t *img = sample_image(&len);
    const char *path = tu_path(d, "trunc.safetensors");
    for (size_t n = 0; n < len; n++) {
        assert_int_equal(tu_write_file(path, img, n), 0);
        safetensors *st = NULL;
        plume_error err = {0};
        assert_int_equal(safetensors_open(path, &st, &err), -1);
        assert_null(st);
        assert_int_equal(err.code, PLUME_ERR_FORMAT);
        assert_non_null(strstr(err.msg, path));
    }
    assert_int_equal(tu_write_file(path, img, len), 0);
    safetensors *st = NULL;
    plume_error err = {0};
    assert_int_equal(safetensors_open(path, &st, &err), 0);
    safetensors_close(st);
    free(img);
}

/* Touches every byte of every tensor so that ASan sees any bad view. */
static unsigned touch_all(const safetensors *st)
{
    unsigned sum = 0;
    for (size_t i = 0; i < safetensors_n_tensors(st); i++) {
        const plume_tensor *t = safetensors_tensor(st, i);
        for (size_t k = 0; k < t->nbytes; k++)
            sum += ((const uint8_t *)t->data)[k];
        sum += (unsigned)strlen(safetensors_dtype(st, t));
        assert_ptr_equal(safetensors_find(st, t->name), t);
    }
    return sum;
}

static void test_byte_mutations(void **state)
{
    tu_dir *d = *state;
    size_t len;
    uint8_t *img = sample_image(&len);
    const char *path = tu_path(d, "mut.safetensors");
    static const uint8_t vals[] = {0x00, 0xff, 0x20, '0', '9', '"', ',', '}', '[', 0x80, '-'};
    size_t ok = 0, failed = 0;
    for (size_t pos = 0; pos < len; pos++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            uint8_t saved = img[pos];
            img[pos] = vals[v];
            assert_int_equal(tu_write_file(path, img, len), 0);
            img[pos] = saved;
            safetensors *st = NULL;
            plume_error err = {0};
            if (safetensors_open(path, &st, &err) == 0) {
                touch_all(st);
                safetensors_close(st);
                ok++;
            } else {
                assert_null(st);
                assert_true(err.msg[0] != '\0');
                failed++;
            }
        }
    }
    assert_true(ok > 0 && failed > 0);
    free(img);
}

static void test_null_arguments(void **state)
{
    (void)state;
    safetensors *st = NULL;
    plume_error err = {0};
    assert_int_equal(safetensors_open(NULL, &st, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_INVALID);
    assert_int_equal(safetensors_open("x", NULL, NULL), -1);
    assert_int_equal(safetensors_n_tensors(NULL), 0);
    assert_null(safetensors_tensor(NULL, 0));
    assert_null(safetensors_find(NULL, "x"));
    assert_null(safetensors_dtype(NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_unpadded_header_and_no_tensors),
        cmocka_unit_test(test_directory_single),
        cmocka_unit_test(test_raw_dtypes),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_sharded_missing_shard),
        cmocka_unit_test(test_sharded_name_missing),
        cmocka_unit_test(test_sharded_duplicate),
        cmocka_unit_test(test_bad_index),
        cmocka_unit_test(test_exact_size_mismatch_message),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_bad_header_sizes),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_byte_mutations),
        cmocka_unit_test(test_null_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
