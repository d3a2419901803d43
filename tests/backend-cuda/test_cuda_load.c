/* The backend-cuda plugin loads on every machine (static cudart, cuBLAS
 * not mapped), and `auto` agrees with the device: without a usable GPU
 * its score is 0, create fails with PLUME_ERR_UNSUPPORTED saying "no CUDA
 * device" (or which architecture it cannot run), and the best backend is
 * cpu; with one, the best backend is cuda and an instance is created.
 * Its settings are checked on any machine: matmul rows|cublas, device,
 * activations int8|f32. */
#include <string.h>

#include "cuda_test_util.h"
#include "plume/settings.h"

/* validate on one key = value; returns its result, err filled. */
static int validate_one(const plume_backend_vtable *vt, const char *key, const char *value,
                        plume_error *err)
{
    plume_settings *s;
    if (plume_settings_new("backend", &s, err) || plume_settings_set(s, key, value, err))
        return -2;
    int rc = vt->validate(s, err);
    plume_settings_free(s);
    return rc;
}

int main(void)
{
    plume_registry *reg;
    const plume_backend_vtable *vt = ct_load_cuda(&reg);
    int fails = 0;
    const int score = vt->score ? vt->score() : 1;
    const plume_backend_vtable *best = plume_registry_best_backend(reg);
    plume_backend *b = NULL;
    plume_error err = {0};
    const char *bad[][3] = {{"matmul", "rows", "ok"},        {"matmul", "cublas", "ok"},
                            {"matmul", "fast", "bad"},       {"device", "-1", "bad"},
                            {"device", "3", "ok"},           {"gemm", "rows", "bad"},
                            {"activations", "int8", "ok"},   {"activations", "f32", "ok"},
                            {"activations", "fp8", "bad"}};
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        const int rc = validate_one(vt, bad[i][0], bad[i][1], &err);
        if (rc != (strcmp(bad[i][2], "ok") == 0 ? 0 : -1)) {
            printf("FAIL: validate %s: %s gave %d (%s)\n", bad[i][0], bad[i][1], rc, err.msg);
            fails++;
        } else if (rc) {
            printf("# %s: %s refused: %s\n", bad[i][0], bad[i][1], err.msg);
        }
    }
    err = (plume_error){0};
    const int rc = vt->create(NULL, 0, &b, &err);
    if (score == 0) {
        printf("# no usable CUDA device here: checking the refusal\n");
        if (rc == 0 || err.code != PLUME_ERR_UNSUPPORTED ||
            (!strstr(err.msg, "no CUDA device") && !strstr(err.msg, "cannot run"))) {
            printf("FAIL: create without a device: rc %d, code %d, '%s'\n", rc, (int)err.code,
                   err.msg);
            fails++;
        } else {
            printf("# create says: %s\n", err.msg);
        }
        if (!best || strcmp(best->name, "cpu") != 0) {
            printf("FAIL: auto picks %s without a device, want cpu\n", best ? best->name : "none");
            fails++;
        }
    } else {
        printf("# a usable CUDA device: auto must pick cuda\n");
        if (rc != 0) {
            printf("FAIL: score %d but create fails: %s\n", score, err.msg);
            fails++;
        }
        if (!best || strcmp(best->name, "cuda") != 0) {
            printf("FAIL: auto picks %s with a device, want cuda\n", best ? best->name : "none");
            fails++;
        }
    }
    if (b)
        vt->destroy(b);
    plume_registry_free(reg);
    if (!fails)
        printf("ok\n");
    return fails ? 1 : 0;
}
