/* The AWQ scale and clip searches. */
#include "quant/awq_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plume/int4_group.h"
#include "plume/tensor.h"

void awq_fake_quant(const float *w, int64_t N, int64_t K, int64_t gs, float *out)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t g0 = 0; g0 < K; g0 += gs) {
            const float *v = w + n * K + g0;
            const plume_int4_group g = plume_int4_group_of(v, gs);
            for (int64_t i = 0; i < gs; i++)
                out[n * K + g0 + i] = plume_int4_group_value(plume_int4_group_code(v[i], g), g);
        }
}

/* ---- quadratic forms ---- */

enum { HROWS = 512 }; /* rows of D per backend product */

struct awq_hess {
    int64_t K;
    const double *H;             /* the caller's, for the plain-C path */
    const plume_backend_vtable *bvt;
    plume_backend *b;
    float *hf;                   /* [K][K] f32 (the prepared weight's data) */
    plume_bweight *w;
    plume_buf *x, *y;
    float *hx, *hy;              /* host views or staging */
    bool host;
};

void awq_hess_free(awq_hess *h)
{
    if (!h)
        return;
    if (h->bvt) {
        if (h->w)
            h->bvt->weight_free(h->b, h->w);
        h->bvt->buf_free(h->b, h->x);
        h->bvt->buf_free(h->b, h->y);
        if (!h->host) {
            free(h->hx);
            free(h->hy);
        }
    }
    free(h->hf);
    free(h);
}

int awq_hess_create(const double *H, int64_t K, const plume_backend_vtable *bvt, plume_backend *b,
                    awq_hess **out, plume_error *err)
{
    awq_hess *h = calloc(1, sizeof *h);
    if (!h)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for the AWQ search");
    h->K = K;
    h->H = H;
    *out = h;
    if (!bvt || !b)
        return 0;
    h->bvt = bvt;
    h->b = b;
    const size_t xb = sizeof(float) * (size_t)(HROWS * K);
    h->hf = malloc(sizeof(float) * (size_t)(K * K));
    if (!h->hf)
        goto nomem;
    for (int64_t i = 0; i < K * K; i++)
        h->hf[i] = (float)H[i];
    /* H is symmetric: as a weight [out = K][in = K], y = D·Hᵀ = D·H */
    plume_tensor t = {.name = "awq-hessian", .type = PLUME_DTYPE_F32, .n_dims = 2,
                      .ne = {K, K, 1, 1}, .data = h->hf,
                      .nbytes = sizeof(float) * (size_t)(K * K)};
    if (bvt->weight_prepare(b, &t, &h->w, err) || !(h->x = bvt->buf_alloc(b, xb, err)) ||
        !(h->y = bvt->buf_alloc(b, xb, err)))
        goto fail;
    h->hx = bvt->host_ptr ? bvt->host_ptr(b, h->x) : NULL;
    h->hy = bvt->host_ptr ? bvt->host_ptr(b, h->y) : NULL;
    h->host = h->hx && h->hy;
    if (!h->host && (!(h->hx = malloc(xb)) || !(h->hy = malloc(xb))))
        goto nomem;
    return 0;
nomem:
    plume_err(err, PLUME_ERR_NOMEM, "out of memory for the AWQ search");
fail:
    awq_hess_free(h);
    *out = NULL;
    return plume_err_prefix(err, "a %lld x %lld AWQ Hessian", (long long)K, (long long)K);
}

int awq_hess_loss(awq_hess *h, const float *D, int64_t n_rows, double *loss, plume_error *err)
{
    const int64_t K = h->K;
    double acc = 0;
    if (!h->bvt) {
        double *v = malloc(sizeof *v * (size_t)K);
        if (!v)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory in the AWQ search");
        for (int64_t r = 0; r < n_rows; r++) {
            const float *d = D + r * K;
            for (int64_t c = 0; c < K; c++)
                v[c] = 0;
            for (int64_t a = 0; a < K; a++) { /* v = H d, as a sum of rows (H symmetric) */
                if (d[a] == 0)
                    continue;
                const double da = d[a], *row = h->H + a * K;
                for (int64_t c = 0; c < K; c++)
                    v[c] += da * row[c];
            }
            for (int64_t c = 0; c < K; c++)
                acc += (double)d[c] * v[c];
        }
        free(v);
        *loss = acc;
        return 0;
    }
    const plume_backend_vtable *bvt = h->bvt;
    for (int64_t r0 = 0; r0 < n_rows; r0 += HROWS) {
        const int64_t c = n_rows - r0 < HROWS ? n_rows - r0 : HROWS;
        const size_t bytes = sizeof(float) * (size_t)(c * K);
        memcpy(h->hx, D + r0 * K, bytes);
        if ((!h->host && bvt->upload(h->b, h->x, 0, h->hx, bytes, err)) ||
            bvt->matmul(h->b, (const plume_bweight *const *)&h->w, 1, h->x, (int32_t)c, &h->y,
                        err) ||
            (bvt->synchronize && bvt->synchronize(h->b, err)) ||
            (!h->host && bvt->download(h->b, h->hy, h->y, 0, bytes, err)))
            return plume_err_prefix(err, "backend %s in the AWQ search", bvt->name);
        for (int64_t i = 0; i < c * K; i++)
            acc += (double)h->hx[i] * (double)h->hy[i];
    }
    *loss = acc;
    return 0;
}

/* ---- scales ---- */

/* D = W − Q(W·diag s)·diag(1/s), using ws as scratch. */
static void scaled_error(const float *W, int64_t N, int64_t K, int64_t gs, const float *s,
                         float *ws, float *D)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            ws[n * K + k] = W[n * K + k] * s[k];
    awq_fake_quant(ws, N, K, gs, D);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            D[n * K + k] = W[n * K + k] - D[n * K + k] / s[k];
}

int awq_search_scales(const float *W, int64_t N, int64_t K, int64_t gs, const float *x_mean,
                      awq_hess *h, float *s, awq_scale_result *res, plume_error *err)
{
    enum { GRID = 20 };
    if (gs <= 0 || K % gs)
        return plume_err(err, PLUME_ERR_INVALID,
                         "awq: %lld inputs are not whole groups of %lld", (long long)K,
                         (long long)gs);
    float *w_mean = calloc((size_t)K, sizeof *w_mean), *cand = malloc(sizeof *cand * (size_t)K);
    float *ws = malloc(sizeof *ws * (size_t)(N * K)), *D = malloc(sizeof *D * (size_t)(N * K));
    int rc = -1;
    if (!w_mean || !cand || !ws || !D) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory in the AWQ scale search");
        goto done;
    }
    /* w_mean: |W| relative to its (row, group) max, averaged over rows */
    for (int64_t n = 0; n < N; n++)
        for (int64_t g0 = 0; g0 < K; g0 += gs) {
            float mx = 0;
            for (int64_t i = 0; i < gs; i++)
                mx = fmaxf(mx, fabsf(W[n * K + g0 + i]));
            for (int64_t i = 0; i < gs; i++)
                w_mean[g0 + i] += mx > 0 ? fabsf(W[n * K + g0 + i]) / mx : 0;
        }
    for (int64_t k = 0; k < K; k++)
        w_mean[k] /= (float)N;
    /* s = 1 first: plain rounding */
    for (int64_t k = 0; k < K; k++)
        s[k] = 1;
    scaled_error(W, N, K, gs, s, ws, D);
    if (awq_hess_loss(h, D, N, &res->loss_plain, err))
        goto done;
    res->loss = res->loss_plain;
    res->ratio = -1;
    for (int r = 0; r < GRID; r++) {
        const double a = (double)r / GRID;
        double mx = 0, mn = INFINITY;
        for (int64_t k = 0; k < K; k++) {
            double v = pow((double)x_mean[k], a) / (pow((double)w_mean[k], 1 - a) + 1e-4);
            v = v < 1e-4 ? 1e-4 : v;
            cand[k] = (float)v;
            mx = fmax(mx, v);
            mn = fmin(mn, v);
        }
        const double norm = sqrt(mx * mn);
        for (int64_t k = 0; k < K; k++) {
            cand[k] = (float)(cand[k] / norm);
            if (!isfinite(cand[k]) || cand[k] == 0)
                cand[k] = 1;
        }
        double loss;
        scaled_error(W, N, K, gs, cand, ws, D);
        if (awq_hess_loss(h, D, N, &loss, err))
            goto done;
        if (loss < res->loss) {
            res->loss = loss;
            res->ratio = a;
            memcpy(s, cand, sizeof *s * (size_t)K);
        }
    }
    rc = 0;
done:
    free(w_mean);
    free(cand);
    free(ws);
    free(D);
    return rc;
}

/* ---- clipping ---- */

/* d H_gg dᵀ for the group of inputs [g0, g0 + gs), v [gs] scratch: v = H_gg d
 * as a sum of H's rows (vectorizable), then d·v. */
static double group_error(const double *H, int64_t K, int64_t g0, int64_t gs, const float *d,
                          double *v)
{
    for (int64_t c = 0; c < gs; c++)
        v[c] = 0;
    for (int64_t a = 0; a < gs; a++) {
        if (d[a] == 0)
            continue;
        const double da = d[a], *row = H + (g0 + a) * K + g0;
        for (int64_t c = 0; c < gs; c++)
            v[c] += da * row[c];
    }
    double acc = 0;
    for (int64_t c = 0; c < gs; c++)
        acc += (double)d[c] * v[c];
    return acc;
}

int awq_search_clip(float *W, int64_t N, int64_t K, int64_t gs, const double *H, double *before,
                    double *after, plume_error *err)
{
    enum { GRID = 20, STEPS = 10 }; /* AutoAWQ: n_grid 20, max_shrink 0.5 */
    if (gs <= 0 || K % gs)
        return plume_err(err, PLUME_ERR_INVALID,
                         "awq: %lld inputs are not whole groups of %lld", (long long)K,
                         (long long)gs);
    float *c = malloc(sizeof *c * (size_t)gs), *q = malloc(sizeof *q * (size_t)gs),
          *d = malloc(sizeof *d * (size_t)gs);
    double *v = malloc(sizeof *v * (size_t)gs);
    if (!c || !q || !d || !v) {
        free(c);
        free(q);
        free(d);
        free(v);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory in the AWQ clip search");
    }
    double sum0 = 0, sum1 = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g0 = 0; g0 < K; g0 += gs) {
            float *w = W + n * K + g0;
            float amax = 0;
            for (int64_t i = 0; i < gs; i++)
                amax = fmaxf(amax, fabsf(w[i]));
            double best = INFINITY, first = 0;
            float best_mv = amax;
            for (int st = 0; st < STEPS; st++) {
                const float mv = amax * (1.0f - (float)st / GRID);
                for (int64_t i = 0; i < gs; i++)
                    c[i] = w[i] > mv ? mv : w[i] < -mv ? -mv : w[i];
                awq_fake_quant(c, 1, gs, gs, q);
                for (int64_t i = 0; i < gs; i++)
                    d[i] = q[i] - w[i];
                const double e = group_error(H, K, g0, gs, d, v);
                if (st == 0)
                    first = e;
                if (e < best) {
                    best = e;
                    best_mv = mv;
                }
            }
            for (int64_t i = 0; i < gs; i++)
                w[i] = w[i] > best_mv ? best_mv : w[i] < -best_mv ? -best_mv : w[i];
            sum0 += first;
            sum1 += best;
        }
    free(c);
    free(q);
    free(d);
    free(v);
    if (before)
        *before = sum0;
    if (after)
        *after = sum1;
    return 0;
}
