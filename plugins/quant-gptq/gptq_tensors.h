/* Checkpoint tensors as the quant plugins (gptq, awq) read them (types and
 * host copies) and as their quantizers write them. */
#ifndef PLUME_GPTQ_TENSORS_H
#define PLUME_GPTQ_TENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/tensor.h"
#include "plume/linear.h" /* plume_weights_find, plume_quant_job */

/* A 32-bit integer tensor: safetensors keeps I32/U32 as raw views (type not
 * a plume dtype) of 4 bytes per element. */
bool gptq_tensor_is_i32(const plume_tensor *t);
/* An F32, F16 or BF16 tensor. */
bool gptq_tensor_is_float(const plume_tensor *t);

/* True when prefix has an int32 qweight and qzeros and a float scales in
 * w: the tensor set both providers' probes look for. */
bool gptq_layer_tensors_present(const plume_weights *w, const char *prefix);

/* A layer's packed tensors as both providers read them (qweight, qzeros,
 * scales; g_idx and bias may be absent). */
typedef struct gptq_layer_tensors {
    const plume_tensor *qw, *qz, *sc, *gi, *bi;
} gptq_layer_tensors;

/* Finds prefix's qweight, qzeros, scales, g_idx and bias in w; 0, or -1
 * with PLUME_ERR_FORMAT "<method>: layer <prefix> lacks <prefix>.<name>"
 * when one of the first three is missing. */
int gptq_layer_tensors_find(const plume_weights *w, const char *method, const char *prefix,
                            gptq_layer_tensors *t, plume_error *err);

/* 0 when qweight and qzeros are 2-D int32 tensors and scales a 2-D float
 * one; else -1 with PLUME_ERR_FORMAT saying which is wrong, in method's
 * words ("<method>: <prefix>.qweight and ..."). */
int gptq_layer_tensors_check_types(const gptq_layer_tensors *t, const char *method,
                                   const char *prefix, plume_error *err);

/* 0 when there is no bias or it is a float tensor of n entries; else -1
 * with PLUME_ERR_FORMAT "<method>: <prefix>.bias must be ...". */
int gptq_layer_tensors_check_bias(const gptq_layer_tensors *t, const char *method,
                                  const char *prefix, int64_t n, plume_error *err);

/* Host copies of a layer's tensors, aligned (views may not be): the int32
 * ones as stored, scales and bias as f32; g_idx and bias NULL when absent.
 * All live in one allocation, block. */
typedef struct gptq_layer_copy {
    int32_t *qweight, *qzeros, *g_idx;
    float *scales, *bias;
    void *block;
} gptq_layer_copy;

/* Copies t's tensors into c (freed with gptq_layer_copy_free, also on
 * failure); 0, or -1 with PLUME_ERR_NOMEM "<method>: out of memory loading
 * <prefix>". */
int gptq_layer_copy_make(const gptq_layer_tensors *t, const char *method, const char *prefix,
                         gptq_layer_copy *c, plume_error *err);
void gptq_layer_copy_free(gptq_layer_copy *c);

/* ---- writing (the quantizers' plume_quant_result) ---- */

/* 0 when every weight of job is finite; else -1 with PLUME_ERR_INVALID
 * "<method>: <prefix> has a weight that is not finite (row r, input i);
 * the checkpoint is damaged" for the first one. */
int gptq_quant_check_finite(const plume_quant_job *job, const char *method, plume_error *err);

/* Appends the tensor "<prefix>.<suffix>" of dtype and shape [d0] (n_dims
 * 1) or [d0][d1] (n_dims 2) to out, owning data. */
void gptq_quant_put(plume_quant_result *out, const char *suffix, const char *dtype, int64_t d0,
                    int64_t d1, int n_dims, void *data);

#endif
