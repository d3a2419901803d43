/* H = (2/n) XᵀX as chunked f32 matrix products on the backend, summed in
 * double on the host. */
#include "quant/hessian.h"

#include <stdlib.h>
#include <string.h>

enum { CHUNK = 256 }; /* rows per product: the f32 sum inside stays short */

/* The buffers of one product, reached through host_ptr when the backend
 * has host memory (no copies), else through upload/download. */
typedef struct hbufs {
    const plume_backend_vtable *bvt;
    plume_backend *b;
    plume_buf *xt, *y;
    float *hxt, *hy; /* host staging (or the buffers themselves) */
    bool host;
} hbufs;

static void hbufs_free(hbufs *h)
{
    h->bvt->buf_free(h->b, h->xt);
    h->bvt->buf_free(h->b, h->y);
    if (!h->host) {
        free(h->hxt);
        free(h->hy);
    }
}

int plume_hessian(const plume_backend_vtable *bvt, plume_backend *b, const float *x, int64_t n,
                  int64_t K, double *H, plume_error *err)
{
    memset(H, 0, sizeof(double) * (size_t)(K * K));
    if (n <= 0)
        return 0;
    const size_t xt_bytes = sizeof(float) * (size_t)(K * CHUNK), y_bytes =
                            sizeof(float) * (size_t)(K * K);
    hbufs h = {bvt, b, bvt->buf_alloc(b, xt_bytes, err), NULL, NULL, NULL, false};
    if (h.xt)
        h.y = bvt->buf_alloc(b, y_bytes, err);
    if (!h.xt || !h.y) {
        hbufs_free(&h);
        return plume_err_prefix(err, "a %lld x %lld Hessian", (long long)K, (long long)K);
    }
    h.hxt = bvt->host_ptr ? bvt->host_ptr(b, h.xt) : NULL;
    h.hy = bvt->host_ptr ? bvt->host_ptr(b, h.y) : NULL;
    h.host = h.hxt && h.hy;
    if (!h.host && (!(h.hxt = malloc(xt_bytes)) || !(h.hy = malloc(y_bytes)))) {
        hbufs_free(&h);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for a %lld x %lld Hessian",
                         (long long)K, (long long)K);
    }
    int rc = 0;
    for (int64_t t0 = 0; t0 < n && rc == 0; t0 += CHUNK) {
        int64_t c = n - t0 < CHUNK ? n - t0 : CHUNK;
        /* xt[k][j] = x[t0 + j][k]: row k is input k over the chunk's tokens */
        for (int64_t j = 0; j < c; j++)
            for (int64_t k = 0; k < K; k++)
                h.hxt[k * c + j] = x[(t0 + j) * K + k];
        /* y[a][b] = Σ_j xt[a][j]·xt[b][j]: xt as both the weight and the input */
        plume_tensor wt = {.name = "calibration", .type = PLUME_DTYPE_F32, .n_dims = 2,
                           .ne = {c, K, 1, 1}, .data = h.hxt,
                           .nbytes = sizeof(float) * (size_t)(K * c)};
        plume_bweight *w = NULL;
        rc = (!h.host && bvt->upload(b, h.xt, 0, h.hxt, wt.nbytes, err)) ||
             bvt->weight_prepare(b, &wt, &w, err) ||
             bvt->matmul(b, (const plume_bweight *const *)&w, 1, h.xt, (int32_t)K, &h.y, err) ||
             (bvt->synchronize && bvt->synchronize(b, err)) ||
             (!h.host && bvt->download(b, h.hy, h.y, 0, y_bytes, err));
        if (w)
            bvt->weight_free(b, w);
        for (int64_t i = 0; i < K * K && rc == 0; i++)
            H[i] += h.hy[i];
    }
    hbufs_free(&h);
    if (rc)
        return plume_err_prefix(err, "backend %s computing a Hessian", bvt->name);
    const double s = 2.0 / (double)n;
    for (int64_t i = 0; i < K * K; i++)
        H[i] *= s;
    return 0;
}
