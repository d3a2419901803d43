/* Perplexity over a token sequence in fixed windows, as llama.cpp's
 * llama-perplexity computes it, and KL divergence against a base model.
 *
 * Windows: the tokens are cut into windows of n_ctx tokens, each evaluated
 * from an empty cache; when the model adds BOS, the first token of every
 * window is replaced by BOS (as llama-perplexity does).
 *  - stride 0 (default): non-overlapping windows starting at 0, n_ctx,
 *    2·n_ctx, ... (a tail shorter than n_ctx is dropped).  In each window the
 *    logits of positions n_ctx/2 .. n_ctx−2 are scored against the tokens at
 *    positions n_ctx/2+1 .. n_ctx−1: the second half of the window, every
 *    prediction made with at least n_ctx/2 tokens of context
 *    (n_ctx/2 − 1 predictions per window; n_ctx − 1 − n_ctx/2 exactly).
 *  - stride s (1 <= s < n_ctx): windows start every s tokens (0, s, 2s, ...
 *    while the window fits) and score their last s tokens (logits of
 *    positions n_ctx−s−1 .. n_ctx−2), so every scored token is scored once,
 *    with at least n_ctx−s tokens of context (llama-perplexity --ppl-stride).
 *
 * PPL = exp(mean NLL) over all scored tokens; its error is
 * PPL · sqrt(var(NLL) / (N−1)), llama-perplexity's estimate.  With a base
 * model, per scored position KL(base || model) = Σ p_base·(log p_base −
 * log p_model) over the vocabulary, and top-1 agreement = argmaxes equal. */
#ifndef PLUME_EVAL_PERPLEXITY_H
#define PLUME_EVAL_PERPLEXITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/backend.h"
#include "plume/error.h"
#include "plume/model.h"

typedef struct plume_ppl_params {
    int32_t n_ctx;       /* window length in tokens (>= 4) */
    int32_t stride;      /* 0 = non-overlapping windows, else see above */
    int32_t max_windows; /* evaluate at most this many windows (0 = all) */
    plume_kv_dtype kv_dtype; /* the model's KV cache (0: PLUME_KV_F32; `plume perplexity`
                                passes f16, the engine's default); the KL base
                                always uses f32 */
} plume_ppl_params;

/* Running totals, reported after every window and at the end. */
typedef struct plume_ppl_stats {
    int32_t window, n_windows; /* windows done / planned */
    int64_t n_tokens;          /* tokens of the whole text */
    int64_t n_scored;          /* predictions scored so far */
    double nll_mean, ppl, ppl_err;
    bool has_base;
    double base_nll_mean, base_ppl, base_ppl_err;
    double kl_mean, kl_err;    /* mean KL(base || model) and its standard error */
    double kl_median, kl_p99, kl_max; /* filled at the end only */
    double top1_pct, top1_err; /* % of positions where both argmaxes agree */
    double seconds;            /* wall time so far */
} plume_ppl_stats;

typedef void (*plume_ppl_progress_fn)(void *user, const plume_ppl_stats *s);

/* Number of windows and predictions per window that p gives for n_tokens
 * tokens (after max_windows).  Fails with a message when the text is
 * shorter than one window or p is out of range. */
PLUME_API int plume_ppl_plan(size_t n_tokens, const plume_ppl_params *p, int32_t *n_windows,
                   int32_t *per_window, plume_error *err);

/* Runs the evaluation of m (and, when base is non-NULL, of base on the same
 * windows; both need the same vocabulary size) over tokens.  bos is the id
 * that replaces the first token of each window, or -1 to keep the text's
 * token.  progress (may be NULL) is called after each window; the final
 * statistics go to *out. */
PLUME_API int plume_perplexity(const plume_model *m, const plume_model *base, const int32_t *tokens,
                     size_t n_tokens, int32_t bos, const plume_ppl_params *p,
                     plume_ppl_progress_fn progress, void *user, plume_ppl_stats *out,
                     plume_error *err);

#endif
