/* Drawing one index from a probability vector by inverse CDF, shared by
 * the sampler and the rejection sampler so that both walk it alike. */
#ifndef PLUME_SAMPLE_DRAW_H
#define PLUME_SAMPLE_DRAW_H

#include <stdint.h>

/* The index drawn from p[0..n) at u in [0, 1): the first i whose running
 * sum of the positive entries exceeds u.  When rounding leaves u at or
 * above the total, the last positive index; -1 when none is positive. */
static inline int32_t plume_draw_at(const float *p, int32_t n, double u)
{
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] <= 0.0f)
            continue;
        last = i;
        cum += p[i];
        if (u < cum)
            return i;
    }
    return last;
}

#endif
