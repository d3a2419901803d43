/* The cpu backend's mixture-of-experts row ops (backend.h, version 5):
 * gathering the rows routed to one expert and adding its weighted output
 * back into their rows. */
#include <string.h>

#include "backend/cpu/ops.h"

void plume_cpu_gather_rows(float *dst, const float *src, const int32_t *idx, int32_t n,
                           int32_t dim)
{
    for (int32_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * dim, src + (size_t)idx[i] * dim, sizeof(float) * (size_t)dim);
}

void plume_cpu_scatter_add_rows(float *dst, const float *src, const int32_t *idx, const float *w,
                                int32_t n, int32_t dim)
{
    for (int32_t i = 0; i < n; i++) {
        float *d = dst + (size_t)idx[i] * dim;
        const float *s = src + (size_t)i * dim;
        const float wi = w[i];
        for (int32_t j = 0; j < dim; j++) {
            const float p = wi * s[j]; /* rounded to f32 before the add (no FMA contraction) */
            d[j] += p;
        }
    }
}
