/* Per-position logits over a window of tokens.  plume_decode returns only
 * the last position's logits, so evaluation drives the model runner
 * (model/runner.h) directly: a private paged KV cache with an identity block
 * table, the window fed in chunks from position 0, and the logits of the
 * last n_logits positions of each chunk returned. */
#ifndef PLUME_EVAL_WINDOW_H
#define PLUME_EVAL_WINDOW_H

#include <stdint.h>

#include "plume/backend.h"
#include "plume/error.h"
#include "plume/model.h"

typedef struct plume_window plume_window;

/* A scorer for windows of up to n_ctx tokens, running chunks of at most
 * chunk positions, on the model's backend, with a KV cache of kv_dtype. */
int plume_window_create(const plume_model *m, int32_t n_ctx, int32_t chunk,
                        plume_kv_dtype kv_dtype, plume_window **out, plume_error *err);
void plume_window_free(plume_window *w);

/* Positions per chunk (what plume_window_run may be given at once). */
int32_t plume_window_chunk(const plume_window *w);

/* Runs tokens[0..n) at positions pos0 .. pos0+n−1 (n <= chunk; positions
 * 0 .. pos0−1 must have been run before, since the last reset) and returns
 * the logits of the last n_logits positions, n_logits rows of n_vocab
 * floats that stay valid until the next call; NULL with err on failure. */
const float *plume_window_run(plume_window *w, const int32_t *tokens, int32_t n, int32_t pos0,
                              int32_t n_logits, plume_error *err);

#endif
