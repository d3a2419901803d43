/* plume — growing a heap array by doubling. */
#ifndef PLUME_GROW_H
#define PLUME_GROW_H

#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the heap array p (from malloc or realloc, or NULL) of *cap
 * elements of `size` bytes, made to hold at least need elements: p itself
 * when need <= *cap; otherwise p reallocated to *cap (`first` when *cap is
 * 0) doubled until it holds need, with *cap set to that.  NULL when out of
 * memory or when the size overflows: p and *cap are then as they were. */
static inline void *plume_grow(void *p, size_t *cap, size_t need, size_t first, size_t size)
{
    if (need <= *cap)
        return p;
    size_t nc = *cap ? *cap : first;
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return NULL;
        nc *= 2;
    }
    if (nc > SIZE_MAX / size)
        return NULL;
    void *np = realloc(p, nc * size);
    if (np)
        *cap = nc;
    return np;
}

#ifdef __cplusplus
}
#endif

#endif
