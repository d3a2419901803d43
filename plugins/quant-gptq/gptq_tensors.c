/* Checkpoint tensors as the quant plugins read them. */
#include "gptq_tensors.h"

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
