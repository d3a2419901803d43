/* tests/backend-cuda: the cuda backend through the plugin, as plume loads
 * it (the registry over the build tree's plugin). */
#ifndef PLUME_CUDA_TEST_UTIL_H
#define PLUME_CUDA_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "plume/backend.h"
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

#endif
