/* The quantization config of an HF checkpoint directory (formats.md §1.6):
 * which quantization method its linear layers need and that method's
 * settings. */
#ifndef PLUME_HF_QUANT_CONFIG_H
#define PLUME_HF_QUANT_CONFIG_H

#include <stddef.h>

#include "plume/error.h"
#include "plume/settings.h"

/* Reads config.json's quantization_config, else quantize_config.json,
 * else quant_config.json in dir.  *out is NULL (and method "") when the
 * checkpoint is not quantized.  Otherwise *out holds every scalar field as
 * a setting (objects, arrays and nulls are left out) under its canonical
 * name — GPTQModel's method/format and AutoAWQ's w_bit/q_group_size become
 * quant_method/checkpoint_format/bits/group_size — and method the
 * lower-cased quant_method.  Errors name the file and the field: a config
 * without quant_method, a non-empty `dynamic` (per-module overrides) and
 * the marlin checkpoint format are refused. */
int plume_hf_quant_config(const char *dir, plume_settings **out, char *method, size_t cap,
                          plume_error *err);

#endif
