/* The model runner: one forward pass over a batch of sequences, each
 * contributing a run of consecutive positions, reading and writing K/V
 * through its block table in a paged cache (vLLM's PagedAttention layout,
 * nano-vllm's model_runner).  Internal to the core. */
#ifndef PLUME_RUNNER_H
#define PLUME_RUNNER_H

#include <stdint.h>

#include "plume/backend.h"
#include "plume/engine.h"
#include "plume/model.h"

/* K and V of every layer in a pool the model's backend allocated
 * (backend.h describes the layout). */
typedef struct plume_kv_cache {
    plume_kv_pool pool;
    const plume_backend_vtable *bvt;
    plume_backend *b;
} plume_kv_cache;

/* Allocates a cache of n_blocks blocks of block_size positions on the
 * model's backend, after asking it whether it can store dtype. */
int plume_kv_cache_create(const plume_model *m, int32_t n_blocks, int32_t block_size,
                          plume_kv_dtype dtype, plume_kv_cache **out, plume_error *err);
/* The same with n_layer layers instead of the model's (the calibration
 * pass reuses one layer of cache for every layer). */
int plume_kv_cache_create_layers(const plume_model *m, int32_t n_layer, int32_t n_blocks,
                                 int32_t block_size, plume_kv_dtype dtype, plume_kv_cache **out,
                                 plume_error *err);
void plume_kv_cache_free(plume_kv_cache *kv);

/* One sequence's share of a step. */
typedef struct plume_batch_seq {
    const int32_t *tokens;      /* n token ids at positions pos0 .. pos0+n-1 */
    int32_t n;
    int32_t pos0;
    const int32_t *block_table; /* covers positions 0 .. pos0+n-1 */
    int32_t n_logits;           /* logits wanted for the last n_logits positions (0..n) */
} plume_batch_seq;

typedef struct plume_runner plume_runner;

/* A runner for batches of at most max_tokens positions on the model's
 * backend (the instance the weights live on), writing into kv. */
int plume_runner_create(const plume_model *m, plume_kv_cache *kv, int32_t max_tokens,
                        plume_runner **out, plume_error *err);
void plume_runner_free(plume_runner *r);
int32_t plume_runner_max_tokens(const plume_runner *r);
/* Bytes the runner allocated: its activations for max_tokens positions on
 * the backend, the logits rows of the largest pass so far, and its host
 * plan arrays (the KV cache is the caller's). */
int64_t plume_runner_scratch_bytes(const plume_runner *r);

/* Called by plume_runner_forward_hooked before each group of linear layers
 * of layer l with their common input x (n rows of in features, a buffer of
 * the model's backend): which is PLUME_LIN_QKV, _O, _GATE_UP or _DOWN.
 * Returns 0 to go on, -1 (err filled) to stop the pass. */
enum { PLUME_LIN_QKV, PLUME_LIN_O, PLUME_LIN_GATE_UP, PLUME_LIN_DOWN };
typedef int (*plume_lin_hook)(void *ctx, int layer, int which, const plume_buf *x, int32_t n,
                              plume_error *err);

/* Runs the forward pass over the batch (total positions <= max_tokens) and
 * writes, seq by seq, n_logits rows of n_vocab logits to logits.  Token
 * ids and block tables are validated; errors leave the cache's other
 * sequences intact. */
int plume_runner_forward(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs,
                         float *logits, plume_error *err);

/* The same pass in stages, for passes that are not the plain forward
 * (the quantizer's calibration runs the layers one by one over all its
 * tokens, quantizing each group of linears on its way, through this same
 * layer code):
 *   begin: checks and plans the batch and gathers the embeddings;
 *   layer: decoder layer l, K/V in layer kv_layer of the cache, calling
 *          hook (when non-NULL) before each group of linears;
 *   end:   the logits (when logits is non-NULL) and the step's end.
 * After a failed begin nothing is to be ended; after a failed layer call
 * end(r, NULL) still must be called. */
int plume_runner_begin(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs,
                       plume_error *err);
int plume_runner_layer(plume_runner *r, int l, int kv_layer, plume_lin_hook hook, void *hook_ctx,
                       plume_error *err);
int plume_runner_end(plume_runner *r, float *logits, plume_error *err);

#endif
