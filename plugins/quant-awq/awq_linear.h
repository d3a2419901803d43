/* quant-awq: the "awq" linear provider — AutoAWQ GEMM checkpoints
 * (formats.md §2) loaded into the repacked layer quant-gptq runs
 * (gptq_layer.h), so both formats share one set of CPU kernels. */
#ifndef PLUME_AWQ_LINEAR_H
#define PLUME_AWQ_LINEAR_H

#include <stdbool.h>
#include <stdint.h>

#include "gptq_layer.h"
#include "plume/linear.h"
#include "plume/settings.h"

/* The provider's vtable ("awq"). */
const plume_linear_vtable *awq_linear_vtable(void);

/* What a layer is loaded with (formats.md §2.4). */
typedef struct awq_load_config {
    int64_t group_size; /* a positive multiple of 32 */
} awq_load_config;

/* Reads the checkpoint's quantization_config as the core hands it over
 * (hf_quant_config.c maps w_bit -> bits, q_group_size -> group_size):
 * bits (4), group_size (128), zero_point (true), version ("gemm").  NULL:
 * AutoAWQ's defaults.  Refused, naming the field: bits other than 4;
 * group_size not a positive multiple of 32; zero_point false (GEMM needs
 * zeros); a version other than gemm — gemv, gemv_fast, marlin, exllama and
 * ipex by name (they pack differently). */
int awq_config_from_settings(const plume_settings *s, awq_load_config *c, plume_error *err);

/* The shared repacked layer (gptq_layer.h) of one AWQ Linear from its
 * checkpoint arrays (formats.md §2.1): qweight [K][N/8], qzeros [G][N/8],
 * scales [G][N] f32 with G = K / group_size, bias [N] or NULL.  The caller
 * has checked the shapes (K a multiple of group_size, itself a multiple of
 * 32; N of 8); the AWQ codes and true zeros are rewritten as GPTQ 4-bit
 * arrays (awq_to_gptq) and built as a gptq_v2 layer, so the fast kernels
 * run it.  name (a checkpoint prefix or NULL) is for messages. */
int awq_layer_build(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                    const float *bias, int64_t K, int64_t N, int64_t group_size,
                    const char *name, gptq_layer **out, plume_error *err);

#endif
