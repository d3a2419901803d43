/* plume — running a model over several sequences with its own paged KV
 * cache (the SDK for a draft model, a reranker, anything that keeps
 * per-sequence state in a second model).
 *
 * A sequence runner owns a KV cache of whole blocks on the model's backend
 * (the instance the model was loaded onto) and a table of sequences, each
 * named by a caller's id (any int64_t >= 0: e.g. the engine's seq_id of
 * plume/proposer.h) with the tokens it has cached so far.  One run call
 * appends new tokens to any number of sequences and computes them all in
 * ONE batched forward pass: a sequence the runner does not know yet is
 * created by its first run.  The logits of a sequence do not depend on what
 * else is in the batch (the same tokens alone give the same bits).
 *
 *     plume_seq_runner_params p = plume_seq_runner_defaults();
 *     p.kv_max_tokens = 8192;
 *     plume_seq_runner *r;
 *     plume_seq_runner_create(draft, &p, &r, &err);
 *     plume_seq_run runs[2] = {{7, prompt7, n7, 1}, {9, &tok9, 1, 1}};
 *     plume_seq_runner_run(r, runs, 2, logits, &err);  // 2 rows of n_vocab
 *     plume_seq_runner_truncate(r, 7, n7 - 2, &err);   // forget 2 rejected drafts
 *     plume_seq_runner_release(r, 9);                  // sequence 9 finished
 *
 * Blocks come from a free list: a run takes the blocks its new positions
 * need, truncate and release give back every block past what is kept.
 * There is no prefix sharing between sequences.  Not thread-safe: one
 * caller at a time per runner.  Free the runner before its model. */
#ifndef PLUME_SEQ_RUNNER_H
#define PLUME_SEQ_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/backend.h"
#include "plume/error.h"
#include "plume/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plume_seq_runner plume_seq_runner;

typedef struct plume_seq_runner_params {
    int64_t kv_max_tokens;      /* KV cache capacity in tokens over all sequences,
                                   rounded up to whole blocks (default 4096) */
    int32_t block_size;         /* tokens per KV block (default 16) */
    int32_t max_batch_tokens;   /* new positions one run may compute (default 512) */
    int32_t max_seqs;           /* sequences alive at once (default 64) */
    plume_kv_dtype kv_dtype;    /* default PLUME_KV_F16, as the engine's */
} plume_seq_runner_params;

/* The defaults listed above. */
PLUME_API plume_seq_runner_params plume_seq_runner_defaults(void);

/* A runner for model m (borrowed: it must outlive the runner) with the KV
 * cache and activations on m's backend instance.  p NULL: the defaults.
 * Fails naming the parameter that is out of range, or the backend's reason
 * (e.g. it cannot store kv_dtype, out of device memory). */
PLUME_API int plume_seq_runner_create(const plume_model *m, const plume_seq_runner_params *p,
                                      plume_seq_runner **out, plume_error *err);
/* Frees the cache and every sequence.  NULL does nothing. */
PLUME_API void plume_seq_runner_free(plume_seq_runner *r);

/* One sequence's share of a run. */
typedef struct plume_seq_run {
    int64_t seq_id;             /* >= 0; created (length 0) when new */
    const int32_t *tokens;      /* n_tokens ids appended after the cached ones */
    int32_t n_tokens;           /* >= 1 */
    int32_t n_logits;           /* logits wanted for the last n_logits new tokens
                                   (0 .. n_tokens) */
} plume_seq_run;

/* Appends each seqs[i].tokens to sequence seqs[i].seq_id and computes every
 * new position in one forward pass (the sum of n_tokens must be at most
 * max_batch_tokens; each id at most once per call).  logits receives, seq
 * by seq in call order, n_logits rows of plume_model_n_vocab(m) floats each
 * (it may be NULL when no logits are wanted).  Checked before anything
 * changes: ids, token ids against the vocabulary, shapes, the batch size,
 * free sequence slots and free KV blocks.  When the cache is full the error
 * says how many tokens the run needs, how many fit and what to raise or
 * free.  On any failure no sequence changes (new ones are not created, no
 * length grows, no block is lost). */
PLUME_API int plume_seq_runner_run(plume_seq_runner *r, const plume_seq_run *seqs, size_t n,
                                   float *logits, plume_error *err);

/* Keeps the first n_keep tokens of sequence seq_id (0 <= n_keep <= its
 * length) and frees every whole block past them: e.g. after the verifier
 * rejected drafts the runner had computed.  The next run continues at
 * position n_keep. */
PLUME_API int plume_seq_runner_truncate(plume_seq_runner *r, int64_t seq_id, int32_t n_keep,
                                        plume_error *err);

/* Forgets sequence seq_id and frees all its blocks.  0 when it existed,
 * -1 (err filled when non-NULL) for an unknown id. */
PLUME_API int plume_seq_runner_release(plume_seq_runner *r, int64_t seq_id, plume_error *err);

/* Tokens cached for seq_id, or -1 when the runner does not know it. */
PLUME_API int32_t plume_seq_runner_length(const plume_seq_runner *r, int64_t seq_id);

/* Sequences alive, and tokens the free blocks can still hold (free blocks
 * times block_size). */
PLUME_API int32_t plume_seq_runner_n_seqs(const plume_seq_runner *r);
PLUME_API int64_t plume_seq_runner_free_tokens(const plume_seq_runner *r);

/* Bytes of KV cache one cached token takes over all layers (K and V, with
 * whatever the backend stores beside the values, e.g. int8 scales): what a
 * decode step reads per token of context. */
PLUME_API int64_t plume_seq_runner_kv_bytes_per_token(const plume_seq_runner *r);

/* Bytes the runner holds on its model's backend (either pointer may be
 * NULL): kv_bytes, the KV cache (K and V of every layer, every block:
 * allocated in full at create, whatever is in use), and scratch_bytes, the
 * forward pass's activations for max_batch_tokens positions, the logits
 * rows of the largest run so far and its host plan arrays. */
PLUME_API void plume_seq_runner_memory(const plume_seq_runner *r, int64_t *kv_bytes,
                                       int64_t *scratch_bytes);

/* The model the runner was created for. */
PLUME_API const plume_model *plume_seq_runner_model(const plume_seq_runner *r);

#ifdef __cplusplus
}
#endif
#endif
