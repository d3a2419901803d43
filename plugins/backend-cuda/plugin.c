/* backend-cuda: the plugin entry, registering the "cuda" backend.  It
 * registers on every machine: without a device its score is 0 (so
 * `backend: auto` picks cpu) and create says "no CUDA device". */
#include "cuda_backend.h"
#include "plume/plugin.h"

static int backend_cuda_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_backend(reg, &ck_backend_vtable);
}

PLUME_PLUGIN_DEFINE("backend-cuda", "0.1.0",
                    "the forward pass on an NVIDIA GPU (CUDA kernels, cuBLAS GEMM for prefill)",
                    "Apache-2.0", backend_cuda_init)
