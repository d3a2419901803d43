#include "ngram_lookup.h"

#include <string.h>

int32_t plume_ngram_lookup(const int32_t *tokens, int32_t n, int32_t min_n, int32_t max_n,
                           int32_t k, int32_t *out)
{
    if (k <= 0 || min_n < 1)
        return 0;
    for (int32_t len = max_n < n - 1 ? max_n : n - 1; len >= min_n; len--) {
        const int32_t *suffix = tokens + n - len;
        /* latest start i < n - len whose n-gram equals the suffix */
        for (int32_t i = n - len - 1; i >= 0; i--) {
            if (tokens[i] != suffix[0] || memcmp(tokens + i, suffix, sizeof(int32_t) * (size_t)len))
                continue;
            int32_t avail = n - (i + len);
            int32_t m = avail < k ? avail : k;
            memcpy(out, tokens + i + len, sizeof(int32_t) * (size_t)m);
            return m;
        }
    }
    return 0;
}
