/* The token-id argument of the logits helpers (family_logits,
 * forced_logits): "ID,ID,..." in decimal. */
#ifndef PLUME_TEST_ID_LIST_H
#define PLUME_TEST_ID_LIST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The ids of s in a malloc'd array, their count in *n; NULL, after printing
 * where the list stops being a number, when a part is not one. */
static inline int32_t *parse_id_list(const char *s, int32_t *n)
{
    int32_t cap = 16;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
    *n = 0;
    for (char *end; *s; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s) {
            fprintf(stderr, "bad id list at '%s'\n", s);
            free(ids);
            return NULL;
        }
        if (*n == cap)
            ids = realloc(ids, sizeof(int32_t) * (size_t)(cap *= 2));
        ids[(*n)++] = (int32_t)v;
    }
    return ids;
}

#endif
