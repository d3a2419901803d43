/* One sequence over a private paged KV cache whose block table is the
 * identity, with a runner over it: what plume_context and the perplexity
 * window share. */
#ifndef PLUME_MODEL_SINGLE_SEQ_H
#define PLUME_MODEL_SINGLE_SEQ_H

#include <stdint.h>

#include "model/runner.h"

typedef struct plume_single_seq {
    plume_kv_cache *kv;
    plume_runner *runner;
    int32_t *block_table; /* block i holds positions i*block_size .. */
} plume_single_seq;

/* Fills s with a cache of n_ctx positions in blocks of block_size, of
 * dtype, and a runner of up to max_tokens positions a forward.  On failure
 * returns -1 with err set (out of memory: "out of memory creating <what>")
 * and s holds nothing to free beyond what plume_single_seq_fini frees. */
int plume_single_seq_init(plume_single_seq *s, const plume_model *m, int32_t n_ctx,
                          int32_t block_size, plume_kv_dtype dtype, int32_t max_tokens,
                          const char *what, plume_error *err);

/* Frees what s holds; s may be zeroed or partly filled. */
void plume_single_seq_fini(plume_single_seq *s);

/* Runs n tokens at positions pos0.. through the model, writing logits for
 * the last n_logits of them into logits (which may be NULL when n_logits
 * is 0). */
static inline int plume_single_seq_forward(plume_single_seq *s, const int32_t *tokens, int32_t n,
                                           int32_t pos0, int32_t n_logits, float *logits,
                                           plume_error *err)
{
    plume_batch_seq b = {tokens, n, pos0, s->block_table, n_logits};
    return plume_runner_forward(s->runner, &b, 1, logits, err);
}

#endif
