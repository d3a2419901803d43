/* Checkpoint tensors as the quant plugins (gptq, awq) read them: types and
 * host copies. */
#ifndef PLUME_GPTQ_TENSORS_H
#define PLUME_GPTQ_TENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/tensor.h"

/* A 32-bit integer tensor: safetensors keeps I32/U32 as raw views (type not
 * a plume dtype) of 4 bytes per element. */
bool gptq_tensor_is_i32(const plume_tensor *t);
/* An F32, F16 or BF16 tensor. */
bool gptq_tensor_is_float(const plume_tensor *t);
/* A malloc'd copy of an int32 tensor's data (views may be unaligned); NULL
 * when out of memory. */
int32_t *gptq_tensor_copy_i32(const plume_tensor *t);
/* A malloc'd f32 copy of a float tensor; NULL when out of memory. */
float *gptq_tensor_copy_f32(const plume_tensor *t);

#endif
