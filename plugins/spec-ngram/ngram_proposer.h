/* spec-ngram: the prompt-lookup proposer (vLLM's ngram proposer idea). */
#ifndef PLUME_NGRAM_PROPOSER_H
#define PLUME_NGRAM_PROPOSER_H

#include "plume/proposer.h"

typedef struct plume_ngram_settings {
    int32_t prompt_lookup_min; /* shortest suffix n-gram to match (default 1) */
    int32_t prompt_lookup_max; /* longest (default 4) */
} plume_ngram_settings;

/* The proposer's vtable, name "ngram"; create() takes a
 * const plume_ngram_settings * (NULL = defaults). */
const plume_proposer_vtable *plume_ngram_proposer(void);

#endif
