/* sample-structured: the one way the plugin grows an array. */
#ifndef SS_GROW_H
#define SS_GROW_H

#include <stddef.h>
#include <stdlib.h>

/* Makes *p (an array of elem-byte elements with room for cap) hold at
 * least need: the capacity doubles, starting from first when cap is 0,
 * until it does, and *p is reallocated to it.  Returns the capacity now
 * (cap when it already sufficed), or 0 when out of memory, *p unchanged
 * (still the caller's to free). */
static inline size_t ss_grow(void **p, size_t cap, size_t need, size_t elem, size_t first)
{
    if (need <= cap)
        return cap;
    size_t c = cap ? cap : first;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return 0;
    *p = q;
    return c;
}

#endif
