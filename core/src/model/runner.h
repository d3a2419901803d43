/* The model runner: one forward pass over a batch of sequences, each
 * contributing a run of consecutive positions, reading and writing K/V
 * through its block table in a paged cache (vLLM's PagedAttention layout,
 * nano-vllm's model_runner).  Internal to the core. */
#ifndef PLUME_RUNNER_H
#define PLUME_RUNNER_H

#include <stdint.h>

#include "plume/engine.h"
#include "plume/model.h"

/* K and V of every layer: [n_layer][n_blocks * block_size][kv_dim] of f32
 * or binary16 (dtype). */
typedef struct plume_kv_cache {
    int32_t n_layer, n_blocks, block_size, kv_dim;
    plume_kv_dtype dtype;
    size_t elem;      /* bytes per value: 4 or 2 */
    void *k, *v;
} plume_kv_cache;

/* Allocates a cache of n_blocks blocks of block_size positions. */
int plume_kv_cache_create(const plume_model *m, int32_t n_blocks, int32_t block_size,
                          plume_kv_dtype dtype, plume_kv_cache **out, plume_error *err);
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

/* A runner for batches of at most max_tokens positions, on n_threads
 * threads (0 = default), writing into kv. */
int plume_runner_create(const plume_model *m, plume_kv_cache *kv, int32_t max_tokens,
                        int n_threads, plume_runner **out, plume_error *err);
void plume_runner_free(plume_runner *r);
int32_t plume_runner_max_tokens(const plume_runner *r);
int plume_runner_threads(const plume_runner *r);

/* Runs the forward pass over the batch (total positions <= max_tokens) and
 * writes, seq by seq, n_logits rows of n_vocab logits to logits.  Token
 * ids and block tables are validated; errors leave the cache's other
 * sequences intact. */
int plume_runner_forward(plume_runner *r, const plume_batch_seq *seqs, int32_t n_seqs,
                         float *logits, plume_error *err);

#endif
