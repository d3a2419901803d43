/* AWQ's scale search and folds inside the quantization pass. */
#include "quant/awq_driver.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/runner.h"
#include "plume/linear.h"
#include "quant/awq_search.h"

static const char *const k_lin[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                     "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                     "mlp.down_proj"};

struct awq_driver {
    const plume_model *m;
    int64_t gs;
    float *s;      /* [K] the current group's scales */
    int64_t K;
};

int awq_driver_create(const plume_model *m, const plume_settings *s, awq_driver **out,
                      plume_error *err)
{
    int64_t gs;
    if (plume_settings_int(s, "group_size", 128, -1, INT32_MAX, &gs, err))
        return -1;
    const plume_model_config *c = &m->cfg;
    int64_t kmax = c->n_embd;
    kmax = kmax > (int64_t)c->n_head * c->head_dim ? kmax : (int64_t)c->n_head * c->head_dim;
    kmax = kmax > c->n_ff ? kmax : c->n_ff;
    awq_driver *d = calloc(1, sizeof *d);
    if (!d || !(d->s = malloc(sizeof *d->s * (size_t)kmax))) {
        free(d);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for the AWQ driver");
    }
    d->m = m;
    d->gs = gs;
    *out = d;
    return 0;
}

void awq_driver_free(awq_driver *d)
{
    if (!d)
        return;
    free(d->s);
    free(d);
}

static const plume_tensor *find_tensor(const plume_model *m, const char *name)
{
    plume_weights w = {m->fmt, m->ck};
    return plume_weights_find(&w, name, NULL);
}

/* *q = the output tensor called name, made an owned f32 copy when it was
 * still the input's tensor; NULL when out has none.  -1 when out of memory. */
static int owned(quant_output *out, const char *name, plume_quant_tensor **q, plume_error *err)
{
    *q = NULL;
    for (size_t i = 0; i < out->n; i++) {
        quant_out_tensor *t = &out->t[i];
        if (strcmp(t->name, name) != 0)
            continue;
        if (t->src) {
            const plume_tensor *src = t->src;
            const int64_t n = plume_tensor_nelements(src);
            float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
            if (!v)
                return plume_err(err, PLUME_ERR_NOMEM, "out of memory folding AWQ scales into %s",
                                 name);
            plume_dequantize((plume_dtype)src->type, src->data, v, n);
            memset(&t->q, 0, sizeof t->q);
            t->q.dtype = out->float_f16 ? "F16" : "F32";
            t->q.n_dims = src->n_dims;
            for (int k = 0; k < src->n_dims; k++)
                t->q.shape[k] = src->ne[src->n_dims - 1 - k];
            t->q.data = v;
            t->src = NULL;
        }
        *q = &t->q;
        return 0;
    }
    return 0;
}

/* Divides the norm's weight (and bias) by s. */
static int fold_norm(awq_driver *d, quant_output *out, int l, const char *norm, plume_error *err)
{
    static const char *const sfx[2] = {"weight", "bias"};
    for (int j = 0; j < 2; j++) {
        char name[192];
        snprintf(name, sizeof name, "model.layers.%d.%s.%s", l, norm, sfx[j]);
        plume_quant_tensor *t;
        if (owned(out, name, &t, err))
            return -1;
        if (!t && j == 0)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "awq: %s is missing; the scale search folds its scales into it",
                             name);
        if (!t)
            continue;
        if (t->n_dims != 1 || t->shape[0] != d->K)
            return plume_err(err, PLUME_ERR_FORMAT, "awq: %s has %" PRId64 " entries, not %" PRId64,
                             name, t->shape[0], d->K);
        float *v = t->data;
        for (int64_t k = 0; k < d->K; k++)
            v[k] /= d->s[k];
    }
    return 0;
}

/* Divides the output rows of an already quantized linear by s: its scales
 * columns ([G][N]) and its bias.  Scaling a whole row scales each of its
 * groups' min-max range, so codes and zeros stay what they were. */
static int fold_linear(awq_driver *d, quant_output *out, int l, int i, plume_error *err)
{
    char name[192];
    snprintf(name, sizeof name, "model.layers.%d.%s.scales", l, k_lin[i]);
    plume_quant_tensor *t;
    if (owned(out, name, &t, err))
        return -1;
    if (!t || t->n_dims != 2 || t->shape[1] != d->K)
        return plume_err(err, PLUME_ERR_INTERNAL,
                         "awq: %s is not a [G, %" PRId64 "] tensor of the output", name, d->K);
    float *v = t->data;
    for (int64_t g = 0; g < t->shape[0]; g++)
        for (int64_t n = 0; n < d->K; n++)
            v[g * d->K + n] /= d->s[n];
    snprintf(name, sizeof name, "model.layers.%d.%s.bias", l, k_lin[i]);
    if (owned(out, name, &t, err))
        return -1;
    if (t) {
        v = t->data;
        for (int64_t n = 0; n < d->K; n++)
            v[n] /= d->s[n];
    }
    return 0;
}

int awq_driver_group(awq_driver *d, quant_output *out, int l, int which, const float *x,
                     int64_t n, int64_t K, const double *H, plume_error *err)
{
    static const int first[] = {[PLUME_LIN_QKV] = 0, [PLUME_LIN_O] = 3, [PLUME_LIN_GATE_UP] = 4,
                                [PLUME_LIN_DOWN] = 6};
    static const int count[] = {[PLUME_LIN_QKV] = 3, [PLUME_LIN_O] = 1, [PLUME_LIN_GATE_UP] = 2,
                                [PLUME_LIN_DOWN] = 1};
    if (d->gs <= 0 || K % d->gs) {
        int64_t fit = 0; /* a smaller group size (32 · 2^i) that divides K, to suggest */
        for (int64_t g = 32; g < d->gs; g *= 2)
            if (K % g == 0)
                fit = g;
        char hint[96] = "";
        if (fit)
            snprintf(hint, sizeof hint, "; --group-size %" PRId64 " divides it", fit);
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "awq: layer %d's %s takes %" PRId64 " inputs, not a multiple of the "
                         "group size %" PRId64 " (AWQ GEMM checkpoints have whole groups only)%s",
                         l, k_lin[which == PLUME_LIN_QKV ? 0 : which == PLUME_LIN_O ? 3 :
                                  which == PLUME_LIN_GATE_UP ? 4 : 6], K, d->gs, hint);
    }
    d->K = K;
    for (int64_t k = 0; k < K; k++)
        d->s[k] = 1;
    const plume_tensor *lt[3];
    int64_t rows = 0;
    for (int j = 0; j < count[which]; j++) {
        char name[192];
        snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, k_lin[first[which] + j]);
        if (!(lt[j] = find_tensor(d->m, name)) || lt[j]->ne[0] != K)
            return plume_err(err, PLUME_ERR_FORMAT, "awq: %s is missing or not %" PRId64 " wide",
                             name, K);
        rows += lt[j]->ne[1];
    }
    if (which == PLUME_LIN_O) { /* v -> o only when v and o have one shape */
        char name[192];
        snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, k_lin[2]);
        const plume_tensor *v = find_tensor(d->m, name);
        if (!v || v->ne[0] != lt[0]->ne[0] || v->ne[1] != lt[0]->ne[1])
            return 0;
    }
    float *W = malloc(sizeof *W * (size_t)(rows * K)), *xm = calloc((size_t)K, sizeof *xm);
    awq_hess *h = NULL;
    int rc = -1;
    if (!W || !xm) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory in the AWQ scale search");
        goto done;
    }
    for (int j = 0, r = 0; j < count[which]; r += (int)lt[j]->ne[1], j++)
        plume_dequantize((plume_dtype)lt[j]->type, lt[j]->data, W + (int64_t)r * K,
                         lt[j]->ne[0] * lt[j]->ne[1]);
    for (int64_t t = 0; t < n; t++)
        for (int64_t k = 0; k < K; k++)
            xm[k] += fabsf(x[t * K + k]);
    for (int64_t k = 0; k < K; k++)
        xm[k] /= (float)n;
    awq_scale_result res;
    if (awq_hess_create(H, K, d->m->bvt, d->m->b, &h, err) ||
        awq_search_scales(W, rows, K, d->gs, xm, h, d->s, &res, err))
        goto done;
    switch (which) {
    case PLUME_LIN_QKV: rc = fold_norm(d, out, l, "input_layernorm", err); break;
    case PLUME_LIN_GATE_UP: rc = fold_norm(d, out, l, "post_attention_layernorm", err); break;
    case PLUME_LIN_O: rc = fold_linear(d, out, l, 2, err); break;
    default: rc = fold_linear(d, out, l, 5, err); break;
    }
done:
    awq_hess_free(h);
    free(W);
    free(xm);
    return rc;
}

int awq_driver_prepare(awq_driver *d, int i, float *w, int64_t in, int64_t out, double *H,
                       plume_error *err)
{
    if (in != d->K)
        return plume_err(err, PLUME_ERR_INTERNAL, "awq: linear %s has %" PRId64
                         " inputs but its group's scales %" PRId64, k_lin[i], in, d->K);
    for (int64_t n = 0; n < out; n++)
        for (int64_t k = 0; k < in; k++)
            w[n * in + k] *= d->s[k];
    for (int64_t a = 0; a < in; a++)
        for (int64_t b = 0; b < in; b++)
            H[a * in + b] /= (double)d->s[a] * (double)d->s[b];
    if (i == 0 || i == 1) /* AutoAWQ clips neither q nor k (their products meet in softmax) */
        return 0;
    return awq_search_clip(w, out, in, d->gs, H, NULL, NULL, err);
}

void awq_driver_finish(const awq_driver *d, float *w_deq, int64_t in, int64_t out)
{
    for (int64_t n = 0; n < out; n++)
        for (int64_t k = 0; k < in; k++)
            w_deq[n * in + k] /= d->s[k];
}
