/* The built-in linear method "native": a float or GGUF block-type matrix
 * (and its bias, when the checkpoint has one) prepared by the backend's
 * weight_prepare and run by its matmul. */
#include <stdlib.h>
#include <string.h>

#include "runtime/builtin.h"

struct plume_linear {
    const plume_backend_vtable *bvt;
    plume_backend *b;
    plume_bweight *w, *bias; /* bias NULL when the checkpoint has none */
    int64_t in, out;
};

static int native_probe(const plume_weights *wt, const char *prefix)
{
    const plume_tensor *t = plume_weights_find(wt, prefix, "weight");
    return t && t->n_dims == 2 && plume_dtype_supported(t->type) ? 1 : 0;
}

static void native_destroy(plume_linear *l)
{
    if (!l)
        return;
    if (l->w)
        l->bvt->weight_free(l->b, l->w);
    if (l->bias)
        l->bvt->weight_free(l->b, l->bias);
    free(l);
}

static int native_load(const plume_weights *wt, const char *prefix, const plume_settings *s,
                       const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                       plume_error *err)
{
    (void)s;
    const plume_tensor *t = plume_weights_find(wt, prefix, "weight");
    if (!t)
        return plume_err(err, PLUME_ERR_FORMAT, "native linear: no tensor %s.weight", prefix);
    if (t->n_dims != 2 || !plume_dtype_supported(t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "native linear: %s.weight is %d-D of type %s; it needs a 2-D tensor of "
                         "one of %s (or a quant plugin)",
                         prefix, t->n_dims, plume_dtype_name(t->type),
                         plume_dtype_supported_names());
    if (!bvt->supports(b, PLUME_FEAT_WEIGHT_TYPE, t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "native linear: backend %s cannot run %s.weight of type %s; use a "
                         "backend that can (cpu runs every type plume reads) or another "
                         "checkpoint type",
                         bvt->name, prefix, plume_dtype_name(t->type));
    const plume_tensor *bt = plume_weights_find(wt, prefix, "bias");
    if (bt && (plume_tensor_nelements(bt) != t->ne[1] || !plume_dtype_supported(bt->type) ||
               plume_dtype_block_elems(bt->type) != 1))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "native linear: %s.bias should be a float vector of %lld elements, "
                         "found %lld of type %s",
                         prefix, (long long)t->ne[1], (long long)plume_tensor_nelements(bt),
                         plume_dtype_name(bt->type));
    plume_tensor bv;
    if (bt) { /* as a 1-D vector, whatever shape the file gave it */
        bv = *bt;
        bv.n_dims = 1;
        bv.ne[0] = t->ne[1];
        bv.ne[1] = bv.ne[2] = bv.ne[3] = 1;
    }
    return plume_native_linear_create(bvt, b, t, bt ? &bv : NULL, out, err);
}

static void native_shape(const plume_linear *l, int64_t *in, int64_t *out)
{
    *in = l->in;
    *out = l->out;
}

static int native_forward_multi(plume_linear *const *l, int n, const plume_backend_vtable *bvt,
                                plume_backend *b, const plume_buf *x, int32_t n_tok,
                                plume_buf *const *y, plume_error *err)
{
    const plume_bweight *w[8];
    for (int i0 = 0; i0 < n; i0 += 8) {
        int c = n - i0 < 8 ? n - i0 : 8;
        for (int i = 0; i < c; i++)
            w[i] = l[i0 + i]->w;
        if (bvt->matmul(b, w, c, x, n_tok, y + i0, err))
            return -1;
    }
    for (int i = 0; i < n; i++)
        if (l[i]->bias && bvt->add_bias(b, y[i], l[i]->bias, n_tok, (int32_t)l[i]->out, err))
            return -1;
    return 0;
}

static int native_forward(plume_linear *l, const plume_backend_vtable *bvt, plume_backend *b,
                          const plume_buf *x, int32_t n_tok, plume_buf *y, plume_error *err)
{
    return native_forward_multi(&l, 1, bvt, b, x, n_tok, &y, err);
}

const plume_bweight *plume_native_linear_weight(const plume_linear *l) { return l->w; }

const plume_bweight *plume_native_linear_bias(const plume_linear *l) { return l->bias; }

int plume_native_linear_create(const plume_backend_vtable *bvt, plume_backend *b,
                               const plume_tensor *w, const plume_tensor *bias,
                               plume_linear **out, plume_error *err)
{
    plume_linear *l = calloc(1, sizeof *l);
    if (!l)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    l->bvt = bvt;
    l->b = b;
    l->in = w->ne[0];
    l->out = w->ne[1];
    if (bvt->weight_prepare(b, w, &l->w, err) ||
        (bias && bvt->weight_prepare(b, bias, &l->bias, err))) {
        native_destroy(l);
        return -1;
    }
    *out = l;
    return 0;
}

int plume_native_linear_adopt(const plume_backend_vtable *bvt, plume_backend *b, plume_bweight *w,
                              plume_bweight *bias, int64_t in, int64_t out, plume_linear **res,
                              plume_error *err)
{
    plume_linear *l = calloc(1, sizeof *l);
    if (!l) {
        bvt->weight_free(b, w);
        if (bias)
            bvt->weight_free(b, bias);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    *l = (plume_linear){bvt, b, w, bias, in, out};
    *res = l;
    return 0;
}

const plume_linear_vtable plume_builtin_native_linear = {
    .struct_size = sizeof(plume_linear_vtable),
    .interface_version = PLUME_LINEAR_INTERFACE_VERSION,
    .name = "native",
    .probe = native_probe,
    .load = native_load,
    .destroy = native_destroy,
    .shape = native_shape,
    .forward = native_forward,
    .forward_multi = native_forward_multi,
};
