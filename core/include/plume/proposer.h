/* plume — the proposer provider interface (speculative decoding).
 *
 * A proposer drafts up to k tokens for each decoding sequence of a step;
 * the engine verifies them all in one target forward (k+1 positions per
 * sequence) and tells the proposer how many were accepted.  vLLM's
 * spec-decode proposers (ngram_proposer.py, the draft-model proposer) have
 * the same shape.  Learned from: vllm/v1/spec_decode/.
 *
 * create receives the host (plume_proposer_host): the registry, the
 * target's backend instance, the target model and the engine's limits.  A
 * proposer that runs a model of its own (a draft model) loads it with
 * plume_proposer_host_load_model (same loader, same registry, same backend
 * instance as the target: GGUF, HF, or a quantized HF checkpoint through
 * its quant plugin) and runs it over all the step's sequences at once with
 * a plume_seq_runner (plume/seq_runner.h): one batched forward per draft
 * position, its own paged KV cache, plume_seq_runner_truncate after the
 * verifier rejected drafts (accepted), plume_seq_runner_release when a
 * sequence ends (release).  Free both in destroy: the engine destroys the
 * proposer before the target model and its backend go. */
#ifndef PLUME_PROPOSER_H
#define PLUME_PROPOSER_H

#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/backend.h"
#include "plume/error.h"
#include "plume/model.h"
#include "plume/sampler.h"
#include "plume/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: create receives the host (plume_proposer_host) and plume_propose_seq
 * carries the request's sampling parameters (version 1's create took only
 * n_vocab; the registry and the engine refuse it). */
#define PLUME_PROPOSER_INTERFACE_VERSION 2

/* What the engine gives a proposer's create.  Valid during create only,
 * except what it points to: the registry, the backend instance and the
 * target model outlive the proposer.  Read a field only when struct_size
 * says the host has it (fields are only ever appended). */
typedef struct plume_proposer_host {
    uint32_t struct_size;        /* sizeof(plume_proposer_host) of the engine's build */
    /* The registry the target was loaded with (plume_engine_params.registry,
     * which plume_pipeline_build sets), for loading models and looking up
     * providers; NULL when the program gave none (then a load sees the
     * built-in providers only). */
    plume_registry *registry;
    /* The target's backend: its vtable and the instance the target's
     * weights and KV cache live on.  Load a draft model onto this same
     * instance (plume_proposer_host_load_model does); its parallel_for
     * (when set) runs a function on the backend's host threads. */
    const plume_backend_vtable *backend_vt;
    plume_backend *backend;
    /* The target model: plume_model_tokenizer for vocabulary checks
     * against a draft model's (ids the target does not have end a draft). */
    const plume_model *target;
    int32_t n_vocab;             /* the target's vocabulary size: draft ids are < n_vocab,
                                    plume_draft.probs rows have n_vocab entries */
    int32_t n_ctx_train;         /* the target's training context */
    int32_t max_seq_len;         /* the longest sequence the engine serves (tokens) */
    int32_t max_tokens_per_step; /* positions of one target forward (max_batched_tokens) */
    int32_t max_seqs;            /* sequences in one step, so in one propose call */
    int32_t k;                   /* num_speculative_tokens: no seq asks for more drafts */
    void *host_private;          /* the engine's own (it counts the proposer's model
                                    loads through it): leave it alone */
} plume_proposer_host;

/* Loads the model at path (GGUF, an HF directory, a quantized HF checkpoint
 * whose quant plugin the host's registry has or can load) onto the host's
 * backend instance with the host's registry: plume_model_load_ex with
 * registry = host->registry and backend = host->backend.  The model borrows
 * the backend instance: free it (plume_model_free) in the proposer's
 * destroy at the latest.  It does not compare vocabularies: check
 * plume_model_n_vocab (and the tokenizer) against the target's yourself. */
PLUME_API int plume_proposer_host_load_model(const plume_proposer_host *host, const char *path,
                                             plume_model **out, plume_error *err);

/* What the proposer sees of one decoding sequence. */
typedef struct plume_propose_seq {
    int64_t seq_id;            /* stable for the sequence's lifetime */
    const int32_t *tokens;     /* prompt and committed output so far */
    int32_t n_tokens;
    int32_t k;                 /* draft at most this many */
    /* The request's sampling parameters (plume_request_params.sampling:
     * temperature, top-k/p, min-p, repetition penalty, seed), valid during
     * the call, never NULL.  For a request sampled by a provider other than
     * the built-in standard one they are what the request passed (that
     * provider's settings decide its law; the seed is the one it uses).
     * Drafts that follow the request's law (sampled at its temperature,
     * with q rows in plume_draft.probs) are accepted more often. */
    const plume_sampling_params *sampling;
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

/* What a proposer holds (the vtable's optional memory callback), in bytes;
 * -1 where it does not know.  A proposer that loads no model reports 0
 * weights and KV. */
typedef struct plume_proposer_memory {
    int64_t weight_bytes;  /* the models it loaded, as plume_model_weight_bytes
                              counts them (weights as stored) */
    int64_t kv_bytes;      /* its KV cache(s), as allocated (not as used) */
    int64_t scratch_bytes; /* activations, logits and its own buffers */
} plume_proposer_memory;

typedef struct plume_proposer_vtable {
    uint32_t struct_size;        /* sizeof(plume_proposer_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_PROPOSER_INTERFACE_VERSION */
    const char *name;            /* "ngram", "draft", ... */

    /* Optional: checks the proposer's settings (the keys of the pipeline's
     * `speculative` section other than method and num_speculative_tokens)
     * before anything loads.  NULL: it takes none. */
    int (*validate)(const plume_settings *s, plume_error *err);

    /* Creates an instance from validated settings (NULL = defaults) for the
     * engine host describes (see plume_proposer_host). */
    int (*create)(const plume_proposer_host *host, const plume_settings *s,
                  plume_proposer **out, plume_error *err);
    void (*destroy)(plume_proposer *p);

    /* Drafts for n sequences at once; drafts[i] has capacity seqs[i].k. */
    int (*propose)(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                   plume_draft *drafts, plume_error *err);

    /* Optional: the verifier accepted n_accepted of the drafted tokens of
     * seq_id (the sequence then continues with one more target token). */
    void (*accepted)(plume_proposer *p, int64_t seq_id, int32_t n_drafted, int32_t n_accepted);

    /* Optional: the sequence finished or was preempted: free its state. */
    void (*release)(plume_proposer *p, int64_t seq_id);

    /* Optional (appended: read it only when struct_size covers it): fills
     * out with what the instance holds now (plume_proposer_memory). */
    void (*memory)(const plume_proposer *p, plume_proposer_memory *out);
} plume_proposer_vtable;

/* What the engine's current proposer has cost since it was set
 * (plume_engine_set_proposer), for plume bench spec and metrics. */
typedef struct plume_proposer_usage {
    double seconds;         /* wall time inside its propose, accepted and release
                               calls (the engine times each call) */
    int64_t propose_calls;  /* propose calls (one per step that drafted) */
    plume_proposer_memory memory; /* its memory callback's answer; all -1 when
                                     it has none */
    int64_t engine_bytes;   /* the engine's own buffers for speculation (drafts,
                               their q rows, k more logits rows per sequence) */
} plume_proposer_usage;

/* Fills out for engine e's proposer; all zero when speculation is off. */
struct plume_engine;
PLUME_API void plume_engine_proposer_usage(const struct plume_engine *e,
                                           plume_proposer_usage *out);

#ifdef __cplusplus
}
#endif
#endif
