/* `plume quantize --method awq`: the activation-aware part of AWQ inside
 * the layer pass of quantize.c (formats.md §2.5; AutoAWQ's Llama groups).
 * At each group's calibration hook the scales of its linears' input
 * channels are searched (awq_search.h) and 1/s is folded into what
 * produces that input: input_layernorm -> q/k/v, post_attention_layernorm
 * -> gate/up, up_proj's output rows -> down, v_proj's output rows -> o when
 * v and o have the same shape (no GQA; else o keeps s = 1).  Each linear
 * is then quantized as W·diag(s) (clipped first, except q and k, as
 * AutoAWQ does) by the method's quantize(), and computes on in the rest of
 * the pass as Q(W·diag s)·diag(1/s) on its unscaled input, which is what
 * the checkpoint computes after the fold. */
#ifndef PLUME_QUANT_AWQ_DRIVER_H
#define PLUME_QUANT_AWQ_DRIVER_H

#include <stdint.h>

#include "model/model_internal.h"
#include "plume/error.h"
#include "plume/settings.h"
#include "quant/quant_output.h"

typedef struct awq_driver awq_driver;

/* For model m (a float HF checkpoint) with the method's settings s
 * (group_size). */
int awq_driver_create(const plume_model *m, const plume_settings *s, awq_driver **out,
                      plume_error *err);
void awq_driver_free(awq_driver *d);

/* At the hook of group `which` (PLUME_LIN_QKV, _O, _GATE_UP, _DOWN) of
 * layer l: x [n][K] is its calibration input, H its Hessian.  Searches the
 * scales and folds 1/s into the preceding norm or linear among out's
 * tensors (already there: the norms are copied first, and v/up are
 * quantized before o/down). */
int awq_driver_group(awq_driver *d, quant_output *out, int l, int which, const float *x,
                     int64_t n, int64_t K, const double *H, plume_error *err);

/* Before linear i (0..6: q k v o gate up down) of the current group is
 * quantized: w [out][in] becomes W·diag(s), clipped unless i is q or k,
 * and H [in][in] becomes diag(1/s)·H·diag(1/s) (the Hessian of the scaled
 * input). */
int awq_driver_prepare(awq_driver *d, int i, float *w, int64_t in, int64_t out, double *H,
                       plume_error *err);

/* After: w_deq [out][in] of the scaled weight becomes w_deq·diag(1/s). */
void awq_driver_finish(const awq_driver *d, float *w_deq, int64_t in, int64_t out);

#endif
