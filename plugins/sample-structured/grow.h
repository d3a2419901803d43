/* sample-structured: the one way the plugin grows an array (the SDK's
 * plume_grow, in the form its callers use). */
#ifndef SS_GROW_H
#define SS_GROW_H

#include <stddef.h>

#include "plume/grow.h"

/* Makes *p (an array of elem-byte elements with room for cap) hold at
 * least need: the capacity doubles, starting from first when cap is 0,
 * until it does, and *p is reallocated to it.  Returns the capacity now
 * (cap when it already sufficed), or 0 when out of memory or the size
 * overflows, *p unchanged (still the caller's to free). */
static inline size_t ss_grow(void **p, size_t cap, size_t need, size_t elem, size_t first)
{
    void *q = plume_grow(*p, &cap, need, first, elem);
    if (!q)
        return 0;
    *p = q;
    return cap;
}

#endif
