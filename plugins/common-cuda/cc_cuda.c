/* common-cuda: CUDA errors, the device probe and cuBLAS through dlopen
 * (cc_cuda.h). */
#include "cc_cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cublas_v2.h>

int cc_fail(plume_error *err, cudaError_t e, const char *who, const char *what)
{
    (void)cudaGetLastError(); /* clear a non-sticky error so later calls start clean */
    plume_status code = e == cudaErrorMemoryAllocation ? PLUME_ERR_NOMEM
                        : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
                           e == cudaErrorNoKernelImageForDevice)
                            ? PLUME_ERR_UNSUPPORTED
                            : PLUME_ERR_INTERNAL;
    return plume_err(err, code, "%s: %s: %s (%s)", who, what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

int cc_scratch_reserve(cudaStream_t stream, void **buf, size_t *cap, size_t bytes,
                       const char *who, plume_error *err)
{
    if (bytes <= *cap)
        return 0;
    CC_CHECK(cudaStreamSynchronize(stream), who,
             "cudaStreamSynchronize (before growing the scratch)");
    (void)cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    CC_CHECK(cudaMalloc(buf, bytes), who, "cudaMalloc (scratch)");
    *cap = bytes;
    return 0;
}

bool cc_device_usable(int device, cudaError_t (*probe)(void), const char *kernels, char *why,
                      size_t n)
{
    char dummy[8];
    if (!why || !n) {
        why = dummy;
        n = sizeof dummy;
    }
    why[0] = '\0';
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        snprintf(why, n, "no CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return false;
    }
    if (device < 0 || device >= count) {
        snprintf(why, n, "CUDA device %d asked for, this machine has %d (0 .. %d)", device, count,
                 count - 1);
        return false;
    }
    /* the probe runs on device; the caller's current device is put back
     * after it, so that probing (backend: auto's score) never moves the
     * thread off the device a live backend launches on */
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        (void)cudaGetLastError();
        prev = -1;
    }
    if ((e = cudaSetDevice(device)) == cudaSuccess)
        e = probe();
    if (prev >= 0 && prev != device)
        (void)cudaSetDevice(prev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        struct cudaDeviceProp p;
        int ok = cudaGetDeviceProperties(&p, device) == cudaSuccess;
        snprintf(why, n,
                 "CUDA device %d (%.64s, sm_%d%d) cannot run %s (built for sm_80, sm_90, "
                 "compute_80): %s (%s)",
                 device, ok ? p.name : "?", ok ? p.major : 0, ok ? p.minor : 0, kernels,
                 cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        return false;
    }
    return true;
}

/* ---- cuBLAS ---- */

typedef cublasStatus_t (*pfn_create)(cublasHandle_t *);
typedef cublasStatus_t (*pfn_destroy)(cublasHandle_t);
typedef cublasStatus_t (*pfn_set_stream)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*pfn_gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void *, const void *, cudaDataType, int,
                                      const void *, cudaDataType, int, const void *, void *,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
typedef const char *(*pfn_status_string)(cublasStatus_t);

/* Never called: the compiler checks the typedefs against cublas_v2.h. */
static inline void typedef_check(void)
{
    pfn_create a = cublasCreate;
    pfn_destroy b = cublasDestroy;
    pfn_set_stream c = cublasSetStream;
    pfn_gemm_ex d = cublasGemmEx;
    pfn_status_string e = cublasGetStatusString;
    (void)a, (void)b, (void)c, (void)d, (void)e;
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
    pfn_status_string status_string;
} lib = {.once = PTHREAD_ONCE_INIT};

static void load(void)
{
    (void)typedef_check;
    char soname[64];
    snprintf(soname, sizeof soname, "libcublas.so.%d", CUDART_VERSION / 1000);
    const char *tries[2] = {
#ifdef CC_CUBLAS_PATH
        CC_CUBLAS_PATH, /* the toolkit the plugin was built against */
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
                 "cuBLAS could not be loaded (%s); install the CUDA toolkit's libcublas", msg);
        return;
    }
    *(void **)&lib.create = dlsym(lib.lib, "cublasCreate_v2");
    *(void **)&lib.destroy = dlsym(lib.lib, "cublasDestroy_v2");
    *(void **)&lib.set_stream = dlsym(lib.lib, "cublasSetStream_v2");
    *(void **)&lib.gemm_ex = dlsym(lib.lib, "cublasGemmEx");
    *(void **)&lib.status_string = dlsym(lib.lib, "cublasGetStatusString");
    if (!lib.create || !lib.destroy || !lib.set_stream || !lib.gemm_ex) {
        snprintf(lib.why, sizeof lib.why,
                 "the loaded libcublas lacks cublasCreate_v2/cublasSetStream_v2/cublasGemmEx");
        dlclose(lib.lib);
        lib.lib = NULL;
    }
}

static const char *status(cublasStatus_t s)
{
    const char *m = lib.status_string ? lib.status_string(s) : NULL;
    return m ? m : "unknown cuBLAS status";
}

bool cc_blas_loadable(const char **why)
{
    pthread_once(&lib.once, load);
    if (why)
        *why = lib.lib ? "" : lib.why;
    return lib.lib != NULL;
}

struct cc_blas {
    cublasHandle_t h;
    const char *who;
};

int cc_blas_create(cudaStream_t stream, const char *who, const char *fallback, cc_blas **out,
                   plume_error *err)
{
    *out = NULL;
    if (!cc_blas_loadable(NULL))
        return plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: %s%s%s", who, lib.why,
                         fallback ? " or use " : "", fallback ? fallback : "");
    cc_blas *b = calloc(1, sizeof *b);
    if (!b)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", who);
    b->who = who;
    cublasStatus_t s = lib.create(&b->h);
    if (s == CUBLAS_STATUS_SUCCESS && (s = lib.set_stream(b->h, stream)) != CUBLAS_STATUS_SUCCESS)
        lib.destroy(b->h);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(b);
        return plume_err(err, PLUME_ERR_INTERNAL, "%s: cublasCreate/cublasSetStream: %s", who,
                         status(s));
    }
    *out = b;
    return 0;
}

int cc_blas_set_stream(cc_blas *b, cudaStream_t stream, plume_error *err)
{
    cublasStatus_t s = lib.set_stream(b->h, stream);
    if (s != CUBLAS_STATUS_SUCCESS)
        return plume_err(err, PLUME_ERR_INTERNAL, "%s: cublasSetStream: %s", b->who, status(s));
    return 0;
}

void cc_blas_free(cc_blas *b)
{
    if (!b)
        return;
    lib.destroy(b->h);
    free(b);
}

int cc_blas_gemm(cc_blas *b, bool trans_a, int m, int n, int k, const void *A, int lda,
                 const void *B, int ldb, float *C, int ldc, plume_gemm_precision p,
                 plume_error *err)
{
    const cudaDataType ab = p == PLUME_GEMM_F16 ? CUDA_R_16F : CUDA_R_32F;
    const cublasComputeType_t ct =
        p == PLUME_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = lib.gemm_ex(b->h, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n,
                                   k, &one, A, ab, lda, B, ab, ldb, &zero, C, CUDA_R_32F, ldc, ct,
                                   CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return plume_err(err, PLUME_ERR_INTERNAL, "%s: cublasGemmEx %dx%dx%d (%s): %s", b->who, m,
                         n, k, p == PLUME_GEMM_F16 ? "f16" : p == PLUME_GEMM_TF32 ? "tf32" : "f32",
                         status(s));
    return 0;
}
