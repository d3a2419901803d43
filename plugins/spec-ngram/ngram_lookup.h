/* Prompt lookup (n-gram) drafting: the pure search behind spec-ngram. */
#ifndef PLUME_NGRAM_LOOKUP_H
#define PLUME_NGRAM_LOOKUP_H

#include <stdint.h>

/* Finds the longest suffix of tokens[0..n) of length L in [min_n, max_n]
 * that also occurs earlier in tokens (the most recent such occurrence) and
 * copies up to k tokens that followed that occurrence to out.  Returns how
 * many were copied (0 when no suffix n-gram recurs). */
int32_t plume_ngram_lookup(const int32_t *tokens, int32_t n, int32_t min_n, int32_t max_n,
                           int32_t k, int32_t *out);

#endif
