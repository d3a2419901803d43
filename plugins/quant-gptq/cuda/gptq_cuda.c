/* quant-gptq CUDA: host side (C11 + the CUDA runtime C API).  Context,
 * layer upload (with the act-order repack), path selection, the cuBLAS
 * prefill (cuBLAS dlopen-ed on first use) and error reporting.  The
 * kernels are in gptq_cuda_kernels.cu. */
#include "gptq_cuda.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cc_cuda.h"
#include "gptq_cuda_internal.h"

#define DEFAULT_SCRATCH ((size_t)256 << 20)

/* ---- errors ---- */

#define WHO "gptq-cuda"

static int cu_fail(plume_error *err, cudaError_t e, const char *what)
{
    return cc_fail(err, e, WHO, what);
}

#define CU(call, what) CC_CHECK(call, WHO, what)

/* ---- availability ---- */

bool gptq_cuda_available(char *why, size_t why_size)
{
    int cur = 0;
    if (cudaGetDevice(&cur) != cudaSuccess) {
        (void)cudaGetLastError();
        cur = 0;
    }
    return cc_device_usable(cur, gptq_cuda_kernel_probe, "the gptq kernels", why, why_size);
}

/* ---- context ---- */

struct gptq_cuda_ctx {
    int device, sm_count;
    cudaStream_t own_stream, stream;
    cc_blas *blas;       /* NULL until the first GEMM */
    cudaStream_t blas_stream;
    void *ws;            /* scratch: split-K partials or dequantized slab + f16 x */
    size_t ws_bytes, scratch_limit;
    int32_t gemv_max_tok;
    gptq_cuda_path prefill;
};

int gptq_cuda_ctx_create(int device, gptq_cuda_ctx **out, plume_error *err)
{
    *out = NULL;
    int count = 0;
    CU(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (device < 0 || device >= count)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq-cuda: device %d does not exist (%d CUDA device%s)", device, count,
                         count == 1 ? "" : "s");
    CU(cudaSetDevice(device), "cudaSetDevice");
    int sms = 0;
    CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
       "cudaDeviceGetAttribute(multiprocessor count)");
    gptq_cuda_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return plume_err(err, PLUME_ERR_NOMEM, "gptq-cuda: out of memory");
    cudaError_t e = cudaStreamCreateWithFlags(&c->own_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(c);
        return cu_fail(err, e, "cudaStreamCreateWithFlags");
    }
    c->device = device;
    c->sm_count = sms > 0 ? sms : 1;
    c->stream = c->own_stream;
    c->scratch_limit = DEFAULT_SCRATCH;
    c->gemv_max_tok = GPTQ_CUDA_GEMV_MAXTOK;
    c->prefill = GPTQ_CUDA_GEMM_TF32;
    *out = c;
    return 0;
}

void gptq_cuda_ctx_destroy(gptq_cuda_ctx *c)
{
    if (!c)
        return;
    (void)cudaSetDevice(c->device);
    (void)cudaStreamSynchronize(c->stream);
    if (c->blas)
        cc_blas_free(c->blas);
    (void)cudaFree(c->ws);
    (void)cudaStreamDestroy(c->own_stream);
    (void)cudaGetLastError();
    free(c);
}

void *gptq_cuda_ctx_stream(const gptq_cuda_ctx *c) { return (void *)c->stream; }

int gptq_cuda_ctx_set_stream(gptq_cuda_ctx *c, void *stream, plume_error *err)
{
    /* work still queued on the old stream may use the scratch */
    CU(cudaSetDevice(c->device), "cudaSetDevice");
    CU(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize");
    c->stream = (cudaStream_t)stream;
    return 0;
}

int gptq_cuda_ctx_set_auto(gptq_cuda_ctx *c, int32_t gemv_max_tok, gptq_cuda_path prefill,
                           plume_error *err)
{
    if (gemv_max_tok < 1)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq-cuda: gemv_max_tok must be >= 1, got %" PRId32, gemv_max_tok);
    if (prefill != GPTQ_CUDA_GEMV && prefill != GPTQ_CUDA_GEMM_F32 &&
        prefill != GPTQ_CUDA_GEMM_TF32 && prefill != GPTQ_CUDA_GEMM_F16)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq-cuda: the prefill path must be gemv, gemm-f32, gemm-tf32 or "
                         "gemm-f16 (got %d)",
                         (int)prefill);
    c->gemv_max_tok = gemv_max_tok;
    c->prefill = prefill;
    return 0;
}

void gptq_cuda_ctx_set_scratch_limit(gptq_cuda_ctx *c, size_t bytes) { c->scratch_limit = bytes; }

int gptq_cuda_sync(gptq_cuda_ctx *c, plume_error *err)
{
    CU(cudaSetDevice(c->device), "cudaSetDevice");
    CU(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize (a kernel failed)");
    return 0;
}

/* Grows the scratch to at least bytes. */
static int ws_reserve(gptq_cuda_ctx *c, size_t bytes, plume_error *err)
{
    if (bytes <= c->ws_bytes)
        return 0;
    bytes = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    return cc_scratch_reserve(c->stream, &c->ws, &c->ws_bytes, bytes, WHO, err);
}

/* ---- memory helpers ---- */

int gptq_cuda_alloc(gptq_cuda_ctx *c, size_t bytes, void **dptr, plume_error *err)
{
    *dptr = NULL;
    CU(cudaSetDevice(c->device), "cudaSetDevice");
    CU(cudaMalloc(dptr, bytes ? bytes : 1), "cudaMalloc");
    return 0;
}

void gptq_cuda_free(gptq_cuda_ctx *c, void *dptr)
{
    if (!dptr)
        return;
    (void)cudaSetDevice(c->device);
    (void)cudaStreamSynchronize(c->stream);
    (void)cudaFree(dptr);
    (void)cudaGetLastError();
}

static int copy_sync(gptq_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind, plume_error *err)
{
    CU(cudaSetDevice(c->device), "cudaSetDevice");
    if (!bytes)
        return 0;
    CU(cudaMemcpyAsync(dst, src, bytes, kind, c->stream),
       kind == cudaMemcpyHostToDevice ? "cudaMemcpyAsync (host to device)"
                                      : "cudaMemcpyAsync (device to host)");
    CU(cudaStreamSynchronize(c->stream), "cudaStreamSynchronize (after a copy)");
    return 0;
}

int gptq_cuda_upload(gptq_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                     plume_error *err)
{
    return copy_sync(c, dst, src, bytes, cudaMemcpyHostToDevice, err);
}

int gptq_cuda_download(gptq_cuda_ctx *c, void *dst, const void *src, size_t bytes,
                       plume_error *err)
{
    return copy_sync(c, dst, src, bytes, cudaMemcpyDeviceToHost, err);
}

/* ---- layers ---- */

struct gptq_cuda_layer {
    int device;
    gptq_cuda_dev d; /* the device pointers below, as the kernels take them */
    int32_t *qweight, *gs, *gend, *perm;
    float *scales, *bias;
    uint16_t *zeros;
    size_t bytes;
};

void gptq_cuda_layer_free(gptq_cuda_layer *l)
{
    if (!l)
        return;
    (void)cudaSetDevice(l->device);
    (void)cudaDeviceSynchronize(); /* the layer may be in use on any stream */
    (void)cudaFree(l->qweight);
    (void)cudaFree(l->gs);
    (void)cudaFree(l->gend);
    (void)cudaFree(l->perm);
    (void)cudaFree(l->scales);
    (void)cudaFree(l->bias);
    (void)cudaFree(l->zeros);
    (void)cudaGetLastError();
    free(l);
}

bool gptq_cuda_layer_permuted(const gptq_cuda_layer *l) { return l->perm != NULL; }

size_t gptq_cuda_layer_bytes(const gptq_cuda_layer *l) { return l->bytes; }

/* cudaMalloc + copy of bytes from host src into *dst (on the layer). */
static int put(gptq_cuda_ctx *c, gptq_cuda_layer *l, void **dst, const void *src, size_t bytes,
               const char *what, plume_error *err)
{
    cudaError_t e = cudaMalloc(dst, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *dst = NULL;
        char m[96];
        snprintf(m, sizeof m, "cudaMalloc (%s, %zu bytes)", what, bytes);
        return cu_fail(err, e, m);
    }
    l->bytes += bytes;
    if (bytes)
        CU(cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, c->stream),
           "cudaMemcpyAsync (layer upload)");
    return 0;
}

int gptq_cuda_layer_upload(gptq_cuda_ctx *c, const gptq_cuda_layer_desc *d,
                           gptq_cuda_layer **out, plume_error *err)
{
    *out = NULL;
    gptq_cuda_host_layout h;
    if (gptq_cuda_prepare(d, &h, err))
        return -1;
    const int64_t K = d->K, N = d->N, G = d->G;
    const int bits = d->bits;
    const int64_t qrows = gptq_packed_len(K, bits);
    int rc = -1;
    gptq_cuda_layer *l = calloc(1, sizeof *l);
    if (!l) {
        plume_err(err, PLUME_ERR_NOMEM, "gptq-cuda: out of memory");
        goto done;
    }
    l->device = c->device;
    {
        cudaError_t e = cudaSetDevice(c->device);
        if (e != cudaSuccess) {
            cu_fail(err, e, "cudaSetDevice");
            goto done;
        }
    }
    if (put(c, l, (void **)&l->qweight, h.qweight ? h.qweight : d->qweight,
            (size_t)(qrows * N) * sizeof(int32_t), "qweight", err) ||
        put(c, l, (void **)&l->scales, d->scales, (size_t)(G * N) * sizeof(float), "scales",
            err) ||
        put(c, l, (void **)&l->zeros, h.zeros, (size_t)(G * N) * sizeof(uint16_t), "zeros", err) ||
        put(c, l, (void **)&l->gs, h.gs, (size_t)K * sizeof(int32_t), "g_idx", err) ||
        put(c, l, (void **)&l->gend, h.gend, (size_t)G * sizeof(int32_t), "group ends", err) ||
        (h.perm && put(c, l, (void **)&l->perm, h.perm, (size_t)K * sizeof(int32_t), "perm", err)) ||
        (d->bias && put(c, l, (void **)&l->bias, d->bias, (size_t)N * sizeof(float), "bias", err)))
        goto done;
    /* the host buffers are freed below: wait for the copies */
    {
        cudaError_t e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) {
            cu_fail(err, e, "cudaStreamSynchronize (layer upload)");
            goto done;
        }
    }
    l->d.qweight = l->qweight;
    l->d.scales = l->scales;
    l->d.zeros = l->zeros;
    l->d.gs = l->gs;
    l->d.gend = l->gend;
    l->d.perm = l->perm;
    l->d.bias = l->bias;
    l->d.K = K;
    l->d.N = N;
    l->d.G = G;
    l->d.bits = bits;
    *out = l;
    l = NULL;
    rc = 0;
done:
    if (l) {
        (void)cudaStreamSynchronize(c->stream); /* copies may still read the host buffers */
        gptq_cuda_layer_free(l);
    }
    gptq_cuda_host_layout_free(&h);
    return rc;
}

/* ---- forward ---- */

const char *gptq_cuda_path_name(gptq_cuda_path p)
{
    switch (p) {
    case GPTQ_CUDA_AUTO: return "auto";
    case GPTQ_CUDA_GEMV: return "gemv";
    case GPTQ_CUDA_GEMM_F32: return "gemm-f32";
    case GPTQ_CUDA_GEMM_TF32: return "gemm-tf32";
    case GPTQ_CUDA_GEMM_F16: return "gemm-f16";
    }
    return "?";
}

static int forward_gemv(gptq_cuda_ctx *c, const gptq_cuda_layer *l, const float *x,
                        int32_t n_tok, float *y, plume_error *err)
{
    const int64_t K = l->d.K, N = l->d.N;
    int64_t ksplit, tps;
    gptq_cuda_gemv_plan(K, N, c->sm_count, &ksplit, &tps);
    float *partial = NULL;
    if (ksplit > 1) {
        if (ws_reserve(c, (size_t)(ksplit * GPTQ_CUDA_GEMV_MAXTOK * N) * sizeof(float), err))
            return -1;
        partial = c->ws;
    }
    for (int32_t t0 = 0; t0 < n_tok; t0 += GPTQ_CUDA_GEMV_MAXTOK) {
        const int T = n_tok - t0 < GPTQ_CUDA_GEMV_MAXTOK ? (int)(n_tok - t0)
                                                          : GPTQ_CUDA_GEMV_MAXTOK;
        CU(gptq_cuda_launch_gemv(&l->d, x + (int64_t)t0 * K, T, y + (int64_t)t0 * N, partial,
                                 (int)ksplit, (int)tps, c->stream),
           "gemv kernel launch");
    }
    return 0;
}

static int blas_ready(gptq_cuda_ctx *c, plume_error *err)
{
    if (!c->blas) {
        if (cc_blas_create(c->stream, WHO, "the gemv path", &c->blas, err))
            return -1;
    } else if (c->blas_stream != c->stream && cc_blas_set_stream(c->blas, c->stream, err))
        return -1;
    c->blas_stream = c->stream;
    return 0;
}

static int forward_gemm(gptq_cuda_ctx *c, const gptq_cuda_layer *l, const float *x,
                        int32_t n_tok, float *y, gptq_cuda_path path, plume_error *err)
{
    if (blas_ready(c, err))
        return -1;
    const int64_t K = l->d.K, N = l->d.N;
    const int f16 = path == GPTQ_CUDA_GEMM_F16;
    const size_t elt = f16 ? 2 : 4;
    const size_t xh_bytes = f16 ? (size_t)n_tok * (size_t)K * 2 : 0;
    const int64_t nb = gptq_cuda_slab_cols(K, N, elt, xh_bytes, c->scratch_limit);
    const size_t w_bytes = ((size_t)K * (size_t)nb * elt + 255) & ~(size_t)255;
    if (ws_reserve(c, w_bytes + xh_bytes, err))
        return -1;
    void *w = c->ws, *xh = (char *)c->ws + w_bytes;
    const void *B = x;
    if (f16) {
        CU(gptq_cuda_launch_to_f16(x, (int64_t)n_tok * K, xh, c->stream),
           "f32-to-f16 kernel launch");
        B = xh;
    }
    const plume_gemm_precision prec = f16                          ? PLUME_GEMM_F16
                                      : path == GPTQ_CUDA_GEMM_TF32 ? PLUME_GEMM_TF32
                                                                    : PLUME_GEMM_F32;
    for (int64_t n0 = 0; n0 < N; n0 += nb) {
        const int64_t cur = N - n0 < nb ? N - n0 : nb;
        CU(gptq_cuda_launch_dequant(&l->d, n0, cur, w, f16, c->stream),
           "dequantize kernel launch");
        /* Column-major view: the slab is cur × K (ld cur), x is K × n_tok
         * (ld K), y[:, n0:n0+cur] is cur × n_tok (ld N):  Y = Wslab · X. */
        if (cc_blas_gemm(c->blas, false, (int)cur, (int)n_tok, (int)K, w, (int)cur, B, (int)K,
                         y + n0, (int)N, prec, err)) {
            plume_err_prefix(err, "%s", gptq_cuda_path_name(path));
            return -1;
        }
    }
    if (l->d.bias)
        CU(gptq_cuda_launch_add_bias(y, l->d.bias, n_tok, N, c->stream), "bias kernel launch");
    return 0;
}

int gptq_cuda_forward_path(gptq_cuda_ctx *c, const gptq_cuda_layer *l, const float *x,
                           int32_t n_tok, float *y, gptq_cuda_path path, plume_error *err)
{
    if (n_tok < 0)
        return plume_err(err, PLUME_ERR_INVALID, "gptq-cuda: n_tok must be >= 0, got %" PRId32,
                         n_tok);
    if (n_tok == 0)
        return 0;
    if (!c || !l || !x || !y)
        return plume_err(err, PLUME_ERR_INVALID, "gptq-cuda: forward needs a context, a layer, "
                                                 "x and y");
    if (l->device != c->device)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq-cuda: the layer is on device %d, the context on device %d",
                         l->device, c->device);
    CU(cudaSetDevice(c->device), "cudaSetDevice");
    if (path == GPTQ_CUDA_AUTO) {
        path = n_tok <= c->gemv_max_tok ? GPTQ_CUDA_GEMV : c->prefill;
        if (path != GPTQ_CUDA_GEMV && !cc_blas_loadable(NULL))
            path = GPTQ_CUDA_GEMV; /* no cuBLAS: slower but correct */
    }
    switch (path) {
    case GPTQ_CUDA_GEMV:
        return forward_gemv(c, l, x, n_tok, y, err);
    case GPTQ_CUDA_GEMM_F32:
    case GPTQ_CUDA_GEMM_TF32:
    case GPTQ_CUDA_GEMM_F16:
        return forward_gemm(c, l, x, n_tok, y, path, err);
    default:
        return plume_err(err, PLUME_ERR_INVALID, "gptq-cuda: unknown path %d", (int)path);
    }
}

int gptq_cuda_forward(gptq_cuda_ctx *c, const gptq_cuda_layer *l, const float *x, int32_t n_tok,
                      float *y, plume_error *err)
{
    return gptq_cuda_forward_path(c, l, x, n_tok, y, GPTQ_CUDA_AUTO, err);
}
