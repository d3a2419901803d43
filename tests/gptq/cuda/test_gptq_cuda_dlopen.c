/* The quant-gptq plugin, which links the CUDA kernels and the static CUDA
 * runtime, must dlopen on a machine without a GPU or a driver (no
 * libcuda.so): the runtime opens the driver only when first used.  This
 * loads the built plugin the way plume does (RTLD_NOW | RTLD_LOCAL) and
 * looks up its entry point; it runs, and must pass, with or without a GPU.
 * Plain C, no plume link: the plugin brings libplume.so itself. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char path[4096];
    if (argc > 1)
        snprintf(path, sizeof path, "%s", argv[1]);
    else {
        const char *root = getenv("PLUME_BUILD_ROOT");
        if (!root) {
            printf("SKIP: PLUME_BUILD_ROOT is not set and no plugin path was given\n");
            return 77;
        }
        snprintf(path, sizeof path, "%s/plugins/quant-gptq/plume-quant-gptq.so", root);
    }
    if (access(path, R_OK) != 0) {
        printf("SKIP: %s is not built\n", path);
        return 77;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL: dlopen(%s): %s\n", path, dlerror());
        return 1;
    }
    void *entry = dlsym(h, "plume_plugin_entry");
    if (!entry) {
        printf("FAIL: %s has no plume_plugin_entry: %s\n", path, dlerror());
        dlclose(h);
        return 1;
    }
    printf("ok: dlopen(%s) and plume_plugin_entry found\n", path);
    dlclose(h);
    return 0;
}
