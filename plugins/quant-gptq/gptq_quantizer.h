/* quant-gptq: the "gptq" method's quantizer slots (linear.h quant_begin /
 * quantize), used by `plume quantize`: GPTQ (gptq_algo.h) or RTN
 * (gptq_rtn.h) per Linear, written as GPTQ checkpoint tensors. */
#ifndef PLUME_GPTQ_QUANTIZER_H
#define PLUME_GPTQ_QUANTIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "plume/error.h"
#include "plume/linear.h"
#include "plume/settings.h"

/* The plugin's version (its descriptor and the quantizer tag in meta). */
#define PLUME_GPTQ_VERSION "0.2.0"

/* Checks the options (method gptq|rtn, bits, group_size, sym, desc_act,
 * damp_percent, checkpoint_format), sets *needs_hessian (gptq, or rtn with
 * desc_act) and writes the quantization_config JSON object. */
int gptq_quant_begin(const plume_settings *s, bool *needs_hessian, char *config_json, size_t cap,
                     plume_error *err);

/* Quantizes one Linear per the options: tensors qweight (I32), qzeros
 * (I32), scales (F16) and g_idx (I32) in formats.md §1.1's layout; w_deq is
 * exactly what those tensors dequantize to (scales rounded to F16 first). */
int gptq_quantize_job(const plume_settings *s, const plume_quant_job *job,
                      plume_quant_result *out, plume_error *err);

#endif
