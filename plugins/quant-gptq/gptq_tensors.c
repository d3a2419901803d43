/* Checkpoint tensors as the quant plugins read them. */
#include "gptq_tensors.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

bool gptq_tensor_is_i32(const plume_tensor *t)
{
    return t && !plume_dtype_supported(t->type) &&
           t->nbytes == (size_t)plume_tensor_nelements(t) * 4u;
}

bool gptq_tensor_is_float(const plume_tensor *t)
{
    return t && (t->type == PLUME_DTYPE_F32 || t->type == PLUME_DTYPE_F16 ||
                 t->type == PLUME_DTYPE_BF16);
}

int32_t *gptq_tensor_copy_i32(const plume_tensor *t)
{
    int32_t *p = malloc(t->nbytes ? t->nbytes : 4);
    if (p)
        memcpy(p, t->data, t->nbytes);
    return p;
}

float *gptq_tensor_copy_f32(const plume_tensor *t)
{
    int64_t n = plume_tensor_nelements(t);
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    if (p)
        plume_dequantize((plume_dtype)t->type, t->data, p, n);
    return p;
}

int gptq_layer_tensors_find(const plume_weights *w, const char *method, const char *prefix,
                            gptq_layer_tensors *t, plume_error *err)
{
    t->qw = plume_weights_find(w, prefix, "qweight");
    t->qz = plume_weights_find(w, prefix, "qzeros");
    t->sc = plume_weights_find(w, prefix, "scales");
    t->gi = plume_weights_find(w, prefix, "g_idx");
    t->bi = plume_weights_find(w, prefix, "bias");
    if (!t->qw || !t->qz || !t->sc)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: layer %s lacks %s.%s", method, prefix, prefix,
                         !t->qw ? "qweight" : !t->qz ? "qzeros" : "scales");
    return 0;
}

int gptq_layer_tensors_check_types(const gptq_layer_tensors *t, const char *method,
                                   const char *prefix, plume_error *err)
{
    if (!gptq_tensor_is_i32(t->qw) || t->qw->n_dims != 2 || !gptq_tensor_is_i32(t->qz) ||
        t->qz->n_dims != 2)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: %s.qweight and %s.qzeros must be 2-D int32 tensors", method, prefix,
                         prefix);
    if (!gptq_tensor_is_float(t->sc) || t->sc->n_dims != 2)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: %s.scales must be a 2-D F16, BF16 or F32 tensor (type %s)", method,
                         prefix, plume_dtype_name(t->sc->type));
    return 0;
}

int gptq_layer_tensors_check_bias(const gptq_layer_tensors *t, const char *method,
                                  const char *prefix, int64_t n, plume_error *err)
{
    if (t->bi && (!gptq_tensor_is_float(t->bi) || plume_tensor_nelements(t->bi) != n))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: %s.bias must be a float tensor of %" PRId64 " entries", method,
                         prefix, n);
    return 0;
}

int gptq_layer_copy_make(const gptq_layer_tensors *t, const char *method, const char *prefix,
                         gptq_layer_copy *c, plume_error *err)
{
    c->qweight = gptq_tensor_copy_i32(t->qw);
    c->qzeros = gptq_tensor_copy_i32(t->qz);
    c->g_idx = t->gi ? gptq_tensor_copy_i32(t->gi) : NULL;
    c->scales = gptq_tensor_copy_f32(t->sc);
    c->bias = t->bi ? gptq_tensor_copy_f32(t->bi) : NULL;
    if (!c->qweight || !c->qzeros || !c->scales || (t->gi && !c->g_idx) || (t->bi && !c->bias))
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory loading %s", method, prefix);
    return 0;
}

void gptq_layer_copy_free(gptq_layer_copy *c)
{
    free(c->qweight);
    free(c->qzeros);
    free(c->g_idx);
    free(c->scales);
    free(c->bias);
}
