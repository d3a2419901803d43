/* plume — asymmetric 4-bit group quantization as AutoAWQ writes it,
 * header-only so that the core's AWQ search and the awq plugin's quantizer
 * round the same way: per group of values, scale = (max − min) / 15 (at
 * least 1e-5 / 15) rounded to f16, zero = clamp(−round(min / scale), 0,
 * 15), code = clamp(round(v / scale) + zero, 0, 15), and the value it
 * stands for scale · (code − zero). */
#ifndef PLUME_INT4_GROUP_H
#define PLUME_INT4_GROUP_H

#include <math.h>
#include <stdint.h>

#include "plume/fp16.h"

typedef struct plume_int4_group {
    float scale; /* f16-representable */
    float zero;  /* an integer in [0, 15] */
} plume_int4_group;

/* The scale and zero of the n >= 1 values v[0..n). */
static inline plume_int4_group plume_int4_group_of(const float *v, int64_t n)
{
    float lo = v[0], hi = v[0];
    for (int64_t i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    float sc = (hi - lo) > 1e-5f ? (hi - lo) / 15.0f : 1e-5f / 15.0f;
    sc = plume_fp16_to_fp32(plume_fp32_to_fp16(sc));
    float z = -roundf(lo / sc);
    z = z < 0 ? 0 : z > 15 ? 15 : z;
    return (plume_int4_group){sc, z};
}

/* The code of value v in group g: an integer in [0, 15], as a float. */
static inline float plume_int4_group_code(float v, plume_int4_group g)
{
    const float q = roundf(v / g.scale) + g.zero;
    return q < 0 ? 0 : q > 15 ? 15 : q;
}

/* The value code q stands for in group g. */
static inline float plume_int4_group_value(float q, plume_int4_group g)
{
    return g.scale * (q - g.zero);
}

#endif
