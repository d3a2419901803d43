/* Checkpoint tensors as the quant plugins read and write them. */
#include "gptq_tensors.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
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

bool gptq_layer_tensors_present(const plume_weights *w, const char *prefix)
{
    return gptq_tensor_is_i32(plume_weights_find(w, prefix, "qweight")) &&
           gptq_tensor_is_i32(plume_weights_find(w, prefix, "qzeros")) &&
           gptq_tensor_is_float(plume_weights_find(w, prefix, "scales"));
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

/* Bytes put() takes for t (absent: none). */
static size_t put_bytes(const plume_tensor *t, bool as_f32)
{
    return !t ? 0 : as_f32 ? (size_t)plume_tensor_nelements(t) * sizeof(float) : t->nbytes;
}

/* Copies t (absent: NULL) to *at, its int32 values as stored or its values
 * as f32, and moves *at past them; returns where they went. */
static void *put(const plume_tensor *t, bool as_f32, unsigned char **at)
{
    if (!t)
        return NULL;
    void *p = *at;
    if (as_f32)
        plume_dequantize((plume_dtype)t->type, t->data, p, plume_tensor_nelements(t));
    else
        memcpy(p, t->data, t->nbytes);
    *at += put_bytes(t, as_f32);
    return p;
}

int gptq_layer_copy_make(const gptq_layer_tensors *t, const char *method, const char *prefix,
                         gptq_layer_copy *c, plume_error *err)
{
    memset(c, 0, sizeof *c);
    const size_t bytes = put_bytes(t->qw, false) + put_bytes(t->qz, false) +
                         put_bytes(t->gi, false) + put_bytes(t->sc, true) + put_bytes(t->bi, true);
    unsigned char *at = c->block = malloc(bytes ? bytes : 1);
    if (!at)
        return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory loading %s", method, prefix);
    c->qweight = put(t->qw, false, &at);
    c->qzeros = put(t->qz, false, &at);
    c->g_idx = put(t->gi, false, &at);
    c->scales = put(t->sc, true, &at);
    c->bias = put(t->bi, true, &at);
    return 0;
}

void gptq_layer_copy_free(gptq_layer_copy *c) { free(c->block); }

int gptq_quant_check_finite(const plume_quant_job *job, const char *method, plume_error *err)
{
    const int64_t N = job->out_features, K = job->in_features;
    for (int64_t i = 0; i < N * K; i++)
        if (!isfinite(job->w[i]))
            return plume_err(err, PLUME_ERR_INVALID,
                             "%s: %s has a weight that is not finite (row %" PRId64
                             ", input %" PRId64 "); the checkpoint is damaged",
                             method, job->prefix, i / K, i % K);
    return 0;
}

void gptq_quant_put(plume_quant_result *out, const char *suffix, const char *dtype, int64_t d0,
                    int64_t d1, int n_dims, void *data)
{
    plume_quant_tensor *t = &out->tensors[out->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->suffix, sizeof t->suffix, "%s", suffix);
    t->dtype = dtype;
    t->n_dims = n_dims;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->data = data;
}
