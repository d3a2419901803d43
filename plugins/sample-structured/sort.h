/* sample-structured: the one sort the plugin has, of indices by the byte
 * strings they name (the vocabulary's tokens, a choice list's strings). */
#ifndef SS_SORT_H
#define SS_SORT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The bytes of string i of ctx; their count in *len. */
typedef const void *(*ss_bytes_of)(const void *ctx, uint32_t i, size_t *len);

/* < 0, 0 or > 0 as string x orders before, with or after string y:
 * bytewise, a string before the longer ones it begins, equal strings by
 * index. */
static inline int ss_cmp_bytes(ss_bytes_of bytes, const void *ctx, uint32_t x, uint32_t y)
{
    size_t lx, ly;
    const void *px = bytes(ctx, x, &lx), *py = bytes(ctx, y, &ly);
    int c = memcmp(px, py, lx < ly ? lx : ly);
    if (c)
        return c;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return (x > y) - (x < y);
}

/* Sorts the indices a[0..n) by their strings (ss_cmp_bytes): a merge sort,
 * tmp room for n, no global comparator state. */
static inline void ss_sort_by_bytes(uint32_t *a, uint32_t *tmp, size_t n, ss_bytes_of bytes,
                                    const void *ctx)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    ss_sort_by_bytes(a, tmp, h, bytes, ctx);
    ss_sort_by_bytes(a + h, tmp, n - h, bytes, ctx);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = ss_cmp_bytes(bytes, ctx, a[i], a[j]) <= 0 ? a[i++] : a[j++];
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

#endif
