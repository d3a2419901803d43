/* backend-cuda: cuBLAS through dlopen (see cuda_blas.h). */
#include "cuda_blas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>

typedef cublasStatus_t (*pfn_create)(cublasHandle_t *);
typedef cublasStatus_t (*pfn_destroy)(cublasHandle_t);
typedef cublasStatus_t (*pfn_set_stream)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*pfn_gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void *, const void *, cudaDataType, int,
                                      const void *, cudaDataType, int, const void *, void *,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

/* Never called: the compiler checks the typedefs against cublas_v2.h. */
static inline void typedef_check(void)
{
    pfn_create a = cublasCreate;
    pfn_destroy b = cublasDestroy;
    pfn_set_stream c = cublasSetStream;
    pfn_gemm_ex d = cublasGemmEx;
    (void)a, (void)b, (void)c, (void)d;
}

/* The library's entry points: process-wide, loaded once. */
static struct {
    pthread_once_t once;
    void *lib;
    char why[400];
    pfn_create create;
    pfn_destroy destroy;
    pfn_set_stream set_stream;
    pfn_gemm_ex gemm_ex;
} lib = {.once = PTHREAD_ONCE_INIT};

static void load(void)
{
    (void)typedef_check;
    char soname[64];
    snprintf(soname, sizeof soname, "libcublas.so.%d", CUDART_VERSION / 1000);
    const char *tries[2] = {
#ifdef CK_CUBLAS_PATH
        CK_CUBLAS_PATH,
#else
        NULL,
#endif
        soname};
    const char *msg = "not tried";
    for (int i = 0; i < 2 && !lib.lib; i++)
        if (tries[i] && !(lib.lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL))) {
            const char *m = dlerror();
            msg = m ? m : "dlopen failed";
        }
    if (!lib.lib) {
        snprintf(lib.why, sizeof lib.why,
                 "cuBLAS could not be loaded (%s); install the CUDA toolkit's libcublas or use "
                 "the backend's matmul: rows",
                 msg);
        return;
    }
    *(void **)&lib.create = dlsym(lib.lib, "cublasCreate_v2");
    *(void **)&lib.destroy = dlsym(lib.lib, "cublasDestroy_v2");
    *(void **)&lib.set_stream = dlsym(lib.lib, "cublasSetStream_v2");
    *(void **)&lib.gemm_ex = dlsym(lib.lib, "cublasGemmEx");
    if (!lib.create || !lib.destroy || !lib.set_stream || !lib.gemm_ex) {
        snprintf(lib.why, sizeof lib.why,
                 "the loaded libcublas lacks cublasCreate_v2/cublasSetStream_v2/cublasGemmEx");
        dlclose(lib.lib);
        lib.lib = NULL;
    }
}

struct ck_blas {
    cublasHandle_t h;
};

int ck_blas_create(cudaStream_t stream, ck_blas **out, plume_error *err)
{
    *out = NULL;
    pthread_once(&lib.once, load);
    if (!lib.lib)
        return plume_err(err, PLUME_ERR_UNSUPPORTED, "cuda backend: %s", lib.why);
    ck_blas *b = calloc(1, sizeof *b);
    if (!b)
        return plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory");
    cublasStatus_t s = lib.create(&b->h);
    if (s == CUBLAS_STATUS_SUCCESS && (s = lib.set_stream(b->h, stream)) != CUBLAS_STATUS_SUCCESS)
        lib.destroy(b->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return plume_err(err, PLUME_ERR_INTERNAL, "cuda backend: cublasCreate/SetStream: status %d",
                         (int)s);
    }
    *out = b;
    return 0;
}

void ck_blas_free(ck_blas *b)
{
    if (!b)
        return;
    lib.destroy(b->h);
    free(b);
}

int ck_blas_gemm_f16(ck_blas *b, const void *w, const void *x, float *y, int m, int n, int k,
                     int ldy, plume_error *err)
{
    /* Column-major: W row-major [m][k] is k x m (ld k), x is k x n (ld k),
     * y row-major [n][ldy] is ldy x n: Y = op_T(W) · X. */
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = lib.gemm_ex(b->h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w, CUDA_R_16F, k,
                                   x, CUDA_R_16F, k, &zero, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return plume_err(err, PLUME_ERR_INTERNAL, "cuda backend: cublasGemmEx %dx%dx%d: status %d",
                         m, n, k, (int)s);
    return 0;
}
