/* Cross-check against the reference writer: runs write_with_pypi.py (the
 * PyPI safetensors package) and reads its file with plume's reader.
 * Usage: test_safetensors_pypi PYTHON SCRIPT.  Exits 77 (skipped) when the
 * script says the package is missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sys/wait.h>

#include "formats/safetensors.h"
#include "st_test_util.h"

/* IEEE half -> float for the normal numbers and zeros the script writes. */
static float half_to_float(uint16_t h)
{
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (exp == 0 && mant == 0)
        return sign * 0.0f;
    float v = 1.0f + (float)mant / 1024.0f;
    for (int e = exp - 15; e > 0; e--)
        v *= 2.0f;
    for (int e = exp - 15; e < 0; e++)
        v *= 0.5f;
    return sign * v;
}

/* Runs `python script out`; returns its exit status, or -1. */
static int run_writer(const char *python, const char *script, const char *out)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execlp(python, python, script, out, (char *)NULL);
        perror("exec python");
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

/* Returns the tensor named name after checking its dtype and ne. */
static const plume_tensor *expect(const safetensors *st, const char *name, const char *dtype,
                                  int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
    const plume_tensor *t = safetensors_find(st, name);
    assert_non_null(t);
    assert_string_equal(safetensors_dtype(st, t), dtype);
    assert_int_equal(t->n_dims, n_dims);
    assert_int_equal(t->ne[0], ne0);
    assert_int_equal(t->ne[1], ne1);
    assert_int_equal(t->ne[2], ne2);
    assert_int_equal(t->ne[3], ne3);
    return t;
}

static void test_read_pypi_file(void **state)
{
    const char *path = *state;
    safetensors *st = NULL;
    plume_error err = {0};
    if (safetensors_open(path, &st, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(safetensors_n_tensors(st), 9);

    const plume_tensor *t = expect(st, "f32", "F32", 2, 4, 3, 1, 1);
    assert_int_equal(t->type, PLUME_DTYPE_F32);
    for (int i = 0; i < 12; i++) {
        float v;
        memcpy(&v, (const char *)t->data + 4 * i, 4);
        assert_true(v == (float)i * 0.5f - 1.0f);
    }
    t = expect(st, "f16", "F16", 3, 5, 3, 2, 1);
    assert_int_equal(t->type, PLUME_DTYPE_F16);
    for (int i = 0; i < 30; i++) {
        uint16_t h;
        memcpy(&h, (const char *)t->data + 2 * i, 2);
        assert_true(half_to_float(h) == (float)i / 8.0f);
    }
    t = expect(st, "i32", "I32", 1, 7, 1, 1, 1);
    assert_int_equal(t->type, PLUME_ST_RAW_TYPE);
    for (int i = 0; i < 7; i++) {
        int32_t v;
        memcpy(&v, (const char *)t->data + 4 * i, 4);
        assert_int_equal(v, i * 1000 - 3000);
    }
    t = expect(st, "i64", "I64", 2, 2, 2, 1, 1);
    for (int i = 0; i < 4; i++) {
        int64_t v;
        memcpy(&v, (const char *)t->data + 8 * i, 8);
        assert_true(v == (int64_t)i << 40);
    }
    t = expect(st, "u8", "U8", 1, 10, 1, 1, 1);
    for (int i = 0; i < 10; i++)
        assert_int_equal(((const uint8_t *)t->data)[i], i * 25);
    t = expect(st, "f64_scalar", "F64", 0, 1, 1, 1, 1);
    double dv;
    memcpy(&dv, t->data, 8);
    assert_true(dv == 3.25);
    t = expect(st, "mask", "BOOL", 1, 4, 1, 1, 1);
    assert_memory_equal(t->data, "\1\0\1\1", 4);
    t = expect(st, "empty", "F32", 2, 3, 0, 1, 1);
    assert_int_equal(t->nbytes, 0);
    t = expect(st, "w4d", "F32", 4, 5, 4, 3, 2);
    for (int i = 0; i < 120; i++) {
        float v;
        memcpy(&v, (const char *)t->data + 4 * i, 4);
        assert_true(v == (float)i);
    }
    safetensors_close(st);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PYTHON write_with_pypi.py\n", argv[0]);
        return 2;
    }
    tu_dir *d = tu_dir_new();
    if (!d) {
        perror("mkdtemp");
        return 1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s", tu_path(d, "pypi.safetensors"));
    int rc = run_writer(argv[1], argv[2], path);
    if (rc != 0) {
        tu_dir_free(d);
        if (rc == 77)
            return 77;
        fprintf(stderr, "%s %s failed (status %d)\n", argv[1], argv[2], rc);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_read_pypi_file, path),
    };
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_dir_free(d);
    return rc;
}
