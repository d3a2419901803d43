/* plume — the proposer provider interface (speculative decoding).
 *
 * A proposer drafts up to k tokens for each decoding sequence of a step;
 * the engine verifies them all in one target forward (k+1 positions per
 * sequence) and tells the proposer how many were accepted.  vLLM's
 * spec-decode proposers (ngram_proposer.py, the draft-model proposer) have
 * the same shape.  Learned from: vllm/v1/spec_decode/. */
#ifndef PLUME_PROPOSER_H
#define PLUME_PROPOSER_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_PROPOSER_INTERFACE_VERSION 1

/* What the proposer sees of one decoding sequence. */
typedef struct plume_propose_seq {
    int64_t seq_id;            /* stable for the sequence's lifetime */
    const int32_t *tokens;     /* prompt and committed output so far */
    int32_t n_tokens;
    int32_t k;                 /* draft at most this many */
} plume_propose_seq;

/* Where the proposer writes one sequence's draft. */
typedef struct plume_draft {
    int32_t *tokens;           /* capacity k */
    int32_t n;                 /* drafted count, 0..k */
    float *probs;              /* optional: k rows of n_vocab draft probabilities,
                                  row i for tokens[i]: the distribution q_i that
                                  tokens[i] was sampled from, given tokens[0..i-1]
                                  (the verifier accepts with min(1, p/q) and
                                  resamples from max(0, p - q)); the proposer
                                  sets has_probs when it filled them.  A
                                  proposer that picks its tokens deterministically
                                  (argmax, lookup) must leave has_probs 0: each
                                  draft is then a point mass, which is exact;
                                  a softmax passed with argmax drafts is not. */
    int has_probs;
} plume_draft;

typedef struct plume_proposer plume_proposer; /* a proposer instance */

typedef struct plume_proposer_vtable {
    uint32_t struct_size;        /* sizeof(plume_proposer_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_PROPOSER_INTERFACE_VERSION */
    const char *name;            /* "ngram", "draft", ... */

    /* Optional: checks the proposer's settings (the keys of the pipeline's
     * `speculative` section other than method and num_speculative_tokens)
     * before anything loads.  NULL: it takes none. */
    int (*validate)(const plume_settings *s, plume_error *err);

    /* Creates an instance for a target with n_vocab tokens from validated
     * settings (NULL = defaults). */
    int (*create)(const plume_settings *s, int32_t n_vocab, plume_proposer **out,
                  plume_error *err);
    void (*destroy)(plume_proposer *p);

    /* Drafts for n sequences at once; drafts[i] has capacity seqs[i].k. */
    int (*propose)(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                   plume_draft *drafts, plume_error *err);

    /* Optional: the verifier accepted n_accepted of the drafted tokens of
     * seq_id (the sequence then continues with one more target token). */
    void (*accepted)(plume_proposer *p, int64_t seq_id, int32_t n_drafted, int32_t n_accepted);

    /* Optional: the sequence finished or was preempted: free its state. */
    void (*release)(plume_proposer *p, int64_t seq_id);
} plume_proposer_vtable;

#ifdef __cplusplus
}
#endif
#endif
