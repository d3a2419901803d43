/* quant-awq: the "awq" method's quantizer slots (linear.h quant_begin /
 * quantize) for `plume quantize --method awq`.  The activation-aware part
 * of AWQ — the per-channel scale search, folding the scales into the
 * preceding norm or linear, and the clipping search — is done by the core's
 * driver (core/src/quant/awq_search.c) before a Linear reaches quantize():
 * what arrives here is the scaled and clipped weight, which is quantized
 * with AutoAWQ's min-max group quantizer and packed as AWQ GEMM tensors. */
#ifndef PLUME_AWQ_QUANTIZER_H
#define PLUME_AWQ_QUANTIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "plume/error.h"
#include "plume/linear.h"
#include "plume/settings.h"

#define PLUME_AWQ_VERSION "0.1.0"

/* Checks the options (bits 4, group_size a positive multiple of 32; the
 * keys `plume quantize` sets), sets *needs_hessian (always: AWQ needs
 * calibration) and writes the quantization_config AutoAWQ, transformers
 * and vLLM read (formats.md §2.4). */
int awq_quant_begin(const plume_settings *s, bool *needs_hessian, char *config_json, size_t cap,
                    plume_error *err);

/* AutoAWQ's pseudo_quantize_tensor with zero points (formats.md §2.3) on
 * each row's groups of group_size inputs of w [N][K]: scale =
 * max(max − min, 1e-5)/15 rounded to f16 (the checkpoint keeps F16), zero =
 * clamp(−round(min/scale), 0, 15), code = clamp(round(w/scale) + zero, 0,
 * 15).  codes [N][K], zeros and scales [N][K/group_size]; deq (may be NULL)
 * [N][K] gets scale·(code − zero). */
void awq_rtn(const float *w, int64_t N, int64_t K, int64_t group_size, uint8_t *codes,
             uint8_t *zeros, float *scales, float *deq);

/* Quantizes one Linear: tensors qweight, qzeros (I32) and scales (F16) in
 * formats.md §2.1's layout; w_deq is exactly what they dequantize to; loss
 * Σ_rows (w − w_deq) H (w − w_deq)ᵀ with the job's Hessian. */
int awq_quantize_job(const plume_settings *s, const plume_quant_job *job,
                     plume_quant_result *out, plume_error *err);

#endif
