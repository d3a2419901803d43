/* The draft-model proposer (method: draft) and its vocabulary check. */
#ifndef PLUME_SPEC_DRAFT_PROPOSER_H
#define PLUME_SPEC_DRAFT_PROPOSER_H

#include "plume/model.h"
#include "plume/proposer.h"

const plume_proposer_vtable *plume_draft_proposer(void);

/* llama.cpp's common_speculative_are_compatible: the same tokenizer type,
 * BOS, EOS and add_bos, vocabulary sizes at most SPEC_DRAFT_VOCAB_MAX_DIFF
 * apart, and the same text for every token id from
 * SPEC_DRAFT_VOCAB_CHECK_START on over the shared range.  The message names
 * draft_path and the first difference (for a token: its id and both texts). */
#define SPEC_DRAFT_VOCAB_MAX_DIFF 128
#define SPEC_DRAFT_VOCAB_CHECK_START 5
int spec_draft_vocab_check(const plume_model *target, const plume_model *draft,
                           const char *draft_path, plume_error *err);

#endif
