/* spec-ngram: the prompt-lookup proposer (vLLM's ngram proposer idea). */
#ifndef PLUME_NGRAM_PROPOSER_H
#define PLUME_NGRAM_PROPOSER_H

#include "plume/proposer.h"

/* The proposer's vtable, name "ngram".  Settings: prompt_lookup_min
 * (shortest suffix n-gram to match, default 1) and prompt_lookup_max
 * (longest, default 4), 1 <= min <= max <= 64. */
const plume_proposer_vtable *plume_ngram_proposer(void);

#endif
