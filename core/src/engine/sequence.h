/* One request as the engine tracks it: its tokens, how many of them have KV
 * in the cache, its block table, sampler and detokenized text. */
#ifndef PLUME_SEQUENCE_H
#define PLUME_SEQUENCE_H

#include <stdint.h>

#include "engine/block_manager.h"
#include "plume/engine.h"
#include "plume/sampler_provider.h"
#include "plume/tokenizer.h"

typedef enum plume_seq_status {
    PLUME_SEQ_WAITING,
    PLUME_SEQ_WAITING_REMOTE_KV, /* decode worker: its prompt KV is being loaded from a
                                    prefill worker (kv_glue.c); in neither queue */
    PLUME_SEQ_RUNNING,
    PLUME_SEQ_FINISHED,
} plume_seq_status;

typedef struct plume_seq {
    int64_t id;
    plume_seq_status status;
    int32_t *tokens;          /* prompt then generated ids */
    int32_t n_tokens, cap, n_prompt;
    int32_t n_computed;       /* leading positions whose K/V are in the cache */
    int32_t max_total;        /* n_prompt + max_tokens, capped by the context */
    plume_block_table bt;
    plume_request_params params;
    char **stop;              /* owned copies of params.stop */
    size_t max_stop_len;
    const plume_sampler_vtable *svt;      /* the sampler provider (the built-in
                                             "standard" when the request names none) */
    plume_sampler_state *sst;             /* its state for this sequence */
    plume_rng vrng;                       /* verification draws for providers
                                             without an rng slot */
    plume_detok detok;
    char *text;
    size_t text_len, text_cap;
    size_t text_emitted;      /* bytes of text already given to on_token */
    bool stopped_by_string;
    bool dropped;             /* taken out of the scheduler after finishing */
    int64_t sched_step;       /* the scheduler step that last scheduled it (0: none) */
    plume_finish_reason finish;
    char *error;
    int32_t n_cached_prompt;
    int32_t n_preemptions;
    int32_t n_drafted, n_accepted; /* speculative decoding */
    float spec_rate;          /* moving average of accepted / drafted (adaptive k) */
    int32_t n_forwards;            /* forwards that produced tokens for it */
    /* prefill/decode disaggregation (kv_glue.c) */
    bool has_kv_xfer;              /* params.kv_transfer was given: kv_xfer holds its copy */
    plume_kv_transfer_params kv_xfer;
    bool has_kv_out;               /* prefill worker: kv_out says where the KV went */
    plume_kv_transfer_params kv_out;
    int32_t kv_n_remote;           /* decode worker: prompt positions being loaded (0: none
                                      asked yet) */
} plume_seq;

/* Creates a waiting sequence holding a copy of the prompt and stop strings,
 * with p->sampler's state (through its create_ex, given shared, when it has
 * one), or the built-in standard sampler's from p->sampling when
 * p->sampler is NULL. */
int plume_seq_create(int64_t id, const int32_t *prompt, int32_t n, int32_t max_total,
                     const plume_request_params *p, const plume_tokenizer *tok, int32_t n_vocab,
                     void *shared, plume_seq **out, plume_error *err);
/* Frees everything the sequence owns (its blocks must be released first). */
void plume_seq_free(plume_seq *s);

/* Picks the next token from one row of logits with the sequence's sampler
 * provider. */
int32_t plume_seq_sample(plume_seq *s, const float *logits);

/* Verifies n_draft drafted tokens (already written after s->tokens) against
 * n_draft+1 rows of logits with the sequence's sampler; writes the accepted
 * drafts plus one more token to out, returns their count, stores the
 * accepted count.  work: 2 x n_vocab floats. */
int32_t plume_seq_verify(plume_seq *s, const float *logits, const int32_t *draft, int32_t n_draft,
                         const float *draft_probs, int32_t n_vocab, int32_t *out,
                         int32_t *n_accepted, float *work);

/* Appends a generated token, its text, and checks stop conditions; returns
 * the finish reason it caused (NONE to go on).  Calls on_event (with lp,
 * the token's log-probabilities, when the request asked for them) or
 * on_token. */
plume_finish_reason plume_seq_append(plume_seq *s, int32_t token, const plume_token_logprobs *lp,
                                     const plume_tokenizer *tok);

/* The log-probabilities of token in one row of raw logits (n_vocab floats):
 * its log-softmax value and the n_top most likely ids, most likely first,
 * ties by lower id (n_top <= PLUME_MAX_TOP_LOGPROBS, clipped to n_vocab). */
void plume_logprobs_of(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top,
                       plume_token_logprobs *out);

/* Marks the sequence finished with reason r (flushes held-back text and
 * calls on_event or on_token with token -1). */
void plume_seq_finish(plume_seq *s, plume_finish_reason r);

#endif
