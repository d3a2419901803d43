/* The shared plume_linear of quant-gptq and quant-awq (int4_linear.h):
 * host layers run by the CPU kernels, device layers by quant-gptq's CUDA
 * kernels through backend.h's device hooks. */
#include "int4_linear.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define DEV_BUFS 7                          /* qweight scales zeros gs gend perm bias */
#define SLAB_LIMIT ((size_t)256 << 20) /* default: most scratch for one dequantized slab */

typedef struct int4_dev {
    const plume_backend_vtable *bvt;
    plume_backend *b;
    const gptq_dev_kernels *k;
    plume_device_info info;
    int sm_count;
    size_t slab_limit;     /* bytes of one dequantized f32 slab, at most */
    gptq_cuda_dev d;       /* device addresses of bufs, as the kernels take them */
    plume_buf *bufs[DEV_BUFS];
    size_t bytes;
} int4_dev;

struct plume_linear {
    const char *method;
    gptq_layer *g; /* host, or NULL */
    int4_dev *dev; /* device, or NULL */
};

/* ---- which path ---- */

static bool has_device_hooks(const plume_backend_vtable *bvt)
{
    return PLUME_BACKEND_HAS_OP(bvt, device_info) && PLUME_BACKEND_HAS_OP(bvt, device_ptr) &&
           PLUME_BACKEND_HAS_OP(bvt, device_scratch) && PLUME_BACKEND_HAS_OP(bvt, device_gemm);
}

/* ---- device ---- */

static void dev_free(int4_dev *v)
{
    if (!v)
        return;
    for (int i = 0; i < DEV_BUFS; i++)
        v->bvt->buf_free(v->b, v->bufs[i]); /* buf_free(NULL) does nothing */
    free(v);
}

/* A backend buffer holding bytes of src; its device address in *dptr. */
static int put(int4_dev *v, int slot, const void *src, size_t bytes, const void **dptr,
               plume_error *err)
{
    if (!(v->bufs[slot] = v->bvt->buf_alloc(v->b, bytes ? bytes : 1, err)) ||
        (bytes && v->bvt->upload(v->b, v->bufs[slot], 0, src, bytes, err)))
        return -1;
    *dptr = v->bvt->device_ptr(v->b, v->bufs[slot]);
    v->bytes += bytes;
    return *dptr ? 0 : plume_err(err, PLUME_ERR_INTERNAL,
                                 "backend \"%s\" gave no device address for a buffer",
                                 v->bvt->name);
}

static int dev_load(const char *method, const char *prefix, const gptq_cuda_layer_desc *d,
                    const gptq_dev_kernels *k, const plume_device_info *info,
                    const plume_backend_vtable *bvt, plume_backend *b, int4_dev **out,
                    plume_error *err)
{
    char why[320];
    if (k->probe(info->device, why, sizeof why))
        return plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: layer %s: %s", method, prefix, why);
    gptq_cuda_host_layout h;
    if (gptq_cuda_prepare(d, &h, err))
        return plume_err_prefix(err, "%s: layer %s", method, prefix);
    int4_dev *v = calloc(1, sizeof *v);
    int rc = -1;
    if (!v) {
        plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory loading %s", method, prefix);
        goto done;
    }
    *v = (int4_dev){.bvt = bvt, .b = b, .k = k, .info = *info, .slab_limit = SLAB_LIMIT};
    if (k->sm_count(info->device, &v->sm_count, err))
        goto done;
    const int64_t K = d->K, N = d->N, G = d->G;
    const size_t qbytes = (size_t)(gptq_packed_len(K, d->bits) * N) * sizeof(int32_t);
    gptq_cuda_dev *D = &v->d;
    if (put(v, 0, h.qweight ? h.qweight : d->qweight, qbytes, (const void **)&D->qweight, err) ||
        put(v, 1, d->scales, (size_t)(G * N) * sizeof(float), (const void **)&D->scales, err) ||
        put(v, 2, h.zeros, (size_t)(G * N) * sizeof(uint16_t), (const void **)&D->zeros, err) ||
        put(v, 3, h.gs, (size_t)K * sizeof(int32_t), (const void **)&D->gs, err) ||
        put(v, 4, h.gend, (size_t)G * sizeof(int32_t), (const void **)&D->gend, err) ||
        (h.perm && put(v, 5, h.perm, (size_t)K * sizeof(int32_t), (const void **)&D->perm, err)) ||
        (d->bias && put(v, 6, d->bias, (size_t)N * sizeof(float), (const void **)&D->bias, err))) {
        plume_err_prefix(err, "%s: uploading layer %s", method, prefix);
        goto done;
    }
    D->K = K;
    D->N = N;
    D->G = G;
    D->bits = d->bits;
    *out = v;
    v = NULL;
    rc = 0;
done:
    dev_free(v);
    gptq_cuda_host_layout_free(&h);
    return rc;
}

static int dev_forward(const char *method, int4_dev *v, const plume_buf *xb, int32_t n_tok,
                       plume_buf *yb, plume_error *err)
{
    const plume_backend_vtable *bvt = v->bvt;
    plume_backend *b = v->b;
    const float *x = bvt->device_ptr(b, xb);
    float *y = bvt->device_ptr(b, yb);
    if (!x || !y)
        return plume_err(err, PLUME_ERR_INVALID,
                         "%s: backend \"%s\" gave no device address for x or y", method,
                         bvt->name);
    const int64_t K = v->d.K, N = v->d.N;
    void *stream = v->info.stream;
    if (v->info.batch_invariant || n_tok <= GPTQ_CUDA_GEMV_MAXTOK) {
        /* GEMV: every token through the same per-thread sums and the same
         * split-K (a function of K, N and the device only), whatever n_tok */
        int64_t ksplit, tps;
        gptq_cuda_gemv_plan(K, N, v->sm_count, &ksplit, &tps);
        float *partial = NULL;
        if (ksplit > 1 &&
            !(partial = bvt->device_scratch(
                  b, (size_t)(ksplit * GPTQ_CUDA_GEMV_MAXTOK * N) * sizeof(float), err)))
            return -1;
        for (int32_t t0 = 0; t0 < n_tok; t0 += GPTQ_CUDA_GEMV_MAXTOK) {
            const int T = n_tok - t0 < GPTQ_CUDA_GEMV_MAXTOK ? (int)(n_tok - t0)
                                                              : GPTQ_CUDA_GEMV_MAXTOK;
            if (v->k->gemv(&v->d, x + (int64_t)t0 * K, T, y + (int64_t)t0 * N, partial,
                           (int)ksplit, (int)tps, stream, err))
                return -1;
        }
        return 0;
    }
    /* prefill: f32 column slabs of the dequantized weight, device_gemm in tf32 */
    const int64_t nb = gptq_cuda_slab_cols(K, N, sizeof(float), 0, v->slab_limit);
    float *w = bvt->device_scratch(b, (size_t)K * (size_t)nb * sizeof(float), err);
    if (!w)
        return -1;
    for (int64_t n0 = 0; n0 < N; n0 += nb) {
        const int64_t cur = N - n0 < nb ? N - n0 : nb;
        const plume_device_gemm g = {.n_out = (int32_t)cur, .n_rows = n_tok, .k = (int32_t)K,
                                     .ldy = (int32_t)N, .w = w, .x = x, .y = y + n0,
                                     .precision = PLUME_GEMM_TF32};
        if (v->k->dequant(&v->d, n0, cur, w, 0, stream, err) || bvt->device_gemm(b, &g, err))
            return -1;
    }
    return v->d.bias ? v->k->add_bias(y, v->d.bias, n_tok, N, stream, err) : 0;
}

/* ---- the shared slots ---- */

const gptq_dev_kernels *int4_linear_dev_kernels(void)
{
#ifdef PLUME_GPTQ_CUDA
    return gptq_cuda_dev_kernels();
#else
    return NULL;
#endif
}

int int4_linear_load(const char *method, const char *prefix, const gptq_cuda_layer_desc *d,
                     const gptq_load_config *cfg, const gptq_dev_kernels *k,
                     const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                     plume_error *err)
{
    *out = NULL;
    plume_device_info info = {0};
    const bool host = bvt && b && bvt->host_ptr;
    if (!host) {
        if (!bvt || !b || !has_device_hooks(bvt))
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: layer %s: backend \"%s\" has neither host-addressable buffers "
                             "(the %s CPU kernels) nor the device hooks of backend.h version 4 "
                             "(the CUDA kernels); use backend cpu or cuda",
                             method, prefix, bvt ? bvt->name : "?", method);
        if (bvt->device_info(b, &info, err))
            return -1;
        if (!info.api || strcmp(info.api, "cuda") != 0)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: layer %s: backend \"%s\" computes with \"%s\"; the %s device "
                             "kernels are CUDA only (use backend cpu or cuda)",
                             method, prefix, bvt->name, info.api ? info.api : "?", method);
        if (!k)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: layer %s: this plugin was built without CUDA (nvcc was not "
                             "found), so it cannot run on backend \"%s\"; rebuild with the CUDA "
                             "toolkit or use backend cpu",
                             method, prefix, bvt->name);
    }
    plume_linear *l = calloc(1, sizeof *l);
    if (!l)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory loading %s", method, prefix);
    l->method = method;
    int rc = host ? gptq_layer_build_named(d->qweight, d->qzeros, d->scales, d->g_idx, d->bias,
                                           d->K, d->N, d->G, cfg, prefix, &l->g, err)
                  : dev_load(method, prefix, d, k, &info, bvt, b, &l->dev, err);
    if (rc) {
        if (host)
            plume_err_prefix(err, "layer %s", prefix);
        free(l);
        return -1;
    }
    *out = l;
    return 0;
}

void int4_linear_destroy(plume_linear *l)
{
    if (!l)
        return;
    gptq_layer_free(l->g);
    dev_free(l->dev);
    free(l);
}

void int4_linear_shape(const plume_linear *l, int64_t *in, int64_t *out)
{
    if (l->g) {
        gptq_layer_shape(l->g, in, out);
        return;
    }
    *in = l->dev->d.K;
    *out = l->dev->d.N;
}

void int4_linear_set_slab_limit(plume_linear *l, size_t bytes)
{
    if (l->dev)
        l->dev->slab_limit = bytes;
}

bool int4_linear_on_device(const plume_linear *l, size_t *bytes)
{
    if (bytes)
        *bytes = l->dev ? l->dev->bytes : 0;
    return l->dev != NULL;
}

int int4_linear_forward(plume_linear *l, const plume_backend_vtable *bvt, plume_backend *b,
                        const plume_buf *x, int32_t n_tok, plume_buf *y, plume_error *err)
{
    if (n_tok <= 0)
        return 0;
    if (l->dev) {
        if (b != l->dev->b)
            return plume_err(err, PLUME_ERR_INVALID,
                             "%s: a layer loaded for one backend instance was run on another",
                             l->method);
        return dev_forward(l->method, l->dev, x, n_tok, y, err);
    }
    const float *hx = bvt->host_ptr ? bvt->host_ptr(b, x) : NULL;
    float *hy = bvt->host_ptr ? bvt->host_ptr(b, y) : NULL;
    if (!hx || !hy)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: backend \"%s\" handed over buffers that are not in host memory",
                         l->method, bvt->name);
    return gptq_forward_level(l->g, GPTQ_LEVEL_ACTIVE, bvt, b, hx, n_tok, hy, err);
}
