/* The backend-cuda plugin loads on every machine (static cudart, cuBLAS
 * not mapped), and `auto` agrees with the device: without a usable GPU
 * its score is 0, create fails with PLUME_ERR_UNSUPPORTED saying "no CUDA
 * device" (or which architecture it cannot run), and the best backend is
 * cpu; with one, the best backend is cuda and an instance is created. */
#include <string.h>

#include "cuda_test_util.h"

int main(void)
{
    plume_registry *reg;
    const plume_backend_vtable *vt = ct_load_cuda(&reg);
    int fails = 0;
    const int score = vt->score ? vt->score() : 1;
    const plume_backend_vtable *best = plume_registry_best_backend(reg);
    plume_backend *b = NULL;
    plume_error err = {0};
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
