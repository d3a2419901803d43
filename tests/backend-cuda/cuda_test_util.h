/* tests/backend-cuda: the cuda backend through the plugin, as plume loads
 * it (the registry over the build tree's plugin). */
#ifndef PLUME_CUDA_TEST_UTIL_H
#define PLUME_CUDA_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/backend.h"
#include "plume/model.h"
#include "plume/registry.h"

/* A registry with the build tree's backend-cuda loaded, and its "cuda"
 * backend; exits 1 (a failure, not a skip) when the plugin does not load. */
static inline const plume_backend_vtable *ct_load_cuda(plume_registry **reg)
{
    plume_error err;
    char dir[4096];
    const char *build = getenv("PLUME_BUILD_ROOT");
    snprintf(dir, sizeof dir, "%s/plugins/backend-cuda", build && *build ? build : "build");
    if (plume_registry_create(reg, &err) || plume_registry_add_search_dir(*reg, dir, &err) ||
        plume_registry_load(*reg, "backend-cuda", &err)) {
        printf("FAIL: loading the backend-cuda plugin from %s: %s\n", dir, err.msg);
        exit(1);
    }
    const plume_backend_vtable *vt = plume_registry_find_backend(*reg, "cuda");
    if (!vt) {
        printf("FAIL: the backend-cuda plugin registered no backend named cuda\n");
        exit(1);
    }
    return vt;
}

/* Exits 1 naming the call and err's message when call returns non-zero. */
#define CT_MUST(call, err)                                                                         \
    do {                                                                                           \
        if (call) {                                                                                \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, (err).msg);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The backend a device test runs on: the cpu backend when
 * PLUME_CUDA_TEST_STANDIN=cpu (*harness 1: the test proves its harness,
 * nothing about the GPU), else the plugin's cuda backend; without a usable
 * device it prints SKIP with the reason and exits 77. */
static inline const plume_backend_vtable *ct_device_backend(plume_registry **reg,
                                                            const plume_backend_vtable *cpu,
                                                            int *harness)
{
    const plume_backend_vtable *gpu = ct_load_cuda(reg);
    const char *standin = getenv("PLUME_CUDA_TEST_STANDIN");
    *harness = standin && strcmp(standin, "cpu") == 0;
    if (*harness) {
        printf("# harness check: a cpu backend stands in for the GPU\n");
        return cpu;
    }
    if (gpu->score() == 0) {
        plume_backend *b = NULL;
        plume_error err = {0};
        if (gpu->create(NULL, 0, &b, &err) == 0) /* never: score 0 means create fails */
            printf("FAIL: score 0, yet create succeeded\n");
        printf("SKIP: no usable CUDA device: %s\n", err.msg);
        plume_registry_free(*reg);
        exit(77);
    }
    return gpu;
}

/* The index of the largest of v[0 .. n). */
static inline int32_t ct_argmax(const float *v, int32_t n)
{
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* *md = max |lg - lc| and *range = max |lc| over n logits. */
static inline void ct_logit_diff(const float *lc, const float *lg, int32_t n, double *md,
                                 double *range)
{
    *md = *range = 0;
    for (int32_t i = 0; i < n; i++) {
        *md = fmax(*md, fabs((double)lg[i] - lc[i]));
        *range = fmax(*range, fabs(lc[i]));
    }
}

/* Greedy decoding on the cpu context cc and the GPU one cg from their last
 * logits lc and lg (V each, overwritten), n_steps tokens.  Each step's
 * tokens must be equal; where they differ and the cpu's own top-2 margin
 * lies inside tol, a near tie flipped: said, and the comparison stops.
 * Returns 0, 1 after a real divergence (printed, FAIL), -1 with err
 * filled when a decode fails. */
static inline int ct_greedy(const char *what, plume_context *cc, plume_context *cg, float *lc,
                            float *lg, int32_t V, int n_steps, double tol, plume_error *err)
{
    for (int s = 0; s < n_steps; s++) {
        const int32_t tc = ct_argmax(lc, V), tg = ct_argmax(lg, V);
        if (tc != tg) {
            float second = -INFINITY;
            for (int32_t i = 0; i < V; i++)
                if (i != tc && lc[i] > second)
                    second = lc[i];
            const double margin = (double)(lc[tc] - second);
            printf("%s '%s' step %d: greedy %d (gpu) vs %d (cpu), cpu margin %.4g (tolerance "
                   "%.4g)\n",
                   margin <= tol ? "# near tie:" : "FAIL", what, s, tg, tc, margin, tol);
            return margin <= tol ? 0 : 1;
        }
        if (plume_decode(cc, &tc, 1, lc, err) || plume_decode(cg, &tg, 1, lg, err))
            return -1;
    }
    return 0;
}

#endif
