/* quant-gptq: the "gptq" linear provider (its layers: gptq_layer.h). */
#ifndef PLUME_GPTQ_LINEAR_H
#define PLUME_GPTQ_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "gptq_layer.h"
#include "gptq_pack.h"
#include "plume/linear.h"

/* The provider's vtable ("gptq"). */
const plume_linear_vtable *gptq_linear_vtable(void);

/* Reads bits, group_size, sym, desc_act and checkpoint_format from s (NULL:
 * the defaults 4, 128, true, false, "gptq" — GPTQModel's and transformers'
 * defaults, formats.md §1.6).  Unsupported values are errors naming the
 * field. */
int gptq_config_from_settings(const plume_settings *s, gptq_load_config *c, plume_error *err);

#endif
