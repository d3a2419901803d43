/* plume — the sampler provider interface: logits -> token, with the
 * sampler's own parameters.
 *
 * Built in: "standard" (plume/sampler.h: greedy at temperature 0,
 * otherwise temperature, top-k, top-p, min-p and repetition penalty).  The
 * engine samples every request through a vtable of this kind: the
 * request's provider, else the engine's default (plume_engine_set_sampler),
 * else the standard one with the request's plume_sampling_params.
 * A pipeline selects one with `sampling: { method: NAME, ... }`; `seed` is
 * the pipeline's, every other key in that section is the provider's. */
#ifndef PLUME_SAMPLER_PROVIDER_H
#define PLUME_SAMPLER_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/sampler.h"
#include "plume/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_SAMPLER_INTERFACE_VERSION 1

typedef struct plume_sampler_state plume_sampler_state; /* one sequence's sampler */
struct plume_tokenizer;

/* What the engine gives create_ex (a struct so that fields can be appended;
 * struct_size says how many this build of the engine filled). */
typedef struct plume_sampler_create_args {
    uint32_t struct_size;                  /* sizeof(plume_sampler_create_args) of the engine */
    const plume_settings *settings;        /* validated settings, or NULL (defaults) */
    int32_t n_vocab;
    uint64_t seed;
    const plume_sampling_params *sampling; /* the request's own sampling parameters (a
                                              provider may take them as its defaults) */
    const struct plume_tokenizer *tokenizer; /* the model's tokenizer (outlives the state) */
    void *shared;                          /* this engine's shared_create object, or NULL */
    size_t n_prompt;                       /* history entries before the first generated one */
} plume_sampler_create_args;

typedef struct plume_sampler_vtable {
    uint32_t struct_size;        /* sizeof(plume_sampler_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_SAMPLER_INTERFACE_VERSION */
    const char *name;            /* "standard", "typical", ... */

    /* Optional: checks the provider's settings before anything loads (NULL:
     * it takes none). */
    int (*validate)(const plume_settings *s, plume_error *err);

    /* A sampler for one sequence over n_vocab tokens from validated
     * settings (NULL = defaults), drawing from an RNG seeded with seed: the
     * same seed and logits give the same tokens. */
    int (*create)(const plume_settings *s, int32_t n_vocab, uint64_t seed,
                  plume_sampler_state **out, plume_error *err);
    void (*destroy)(plume_sampler_state *st);

    /* Picks the next token from logits (n_vocab floats, not modified);
     * history holds the sequence's tokens so far (prompt included). */
    int32_t (*sample)(plume_sampler_state *st, const float *logits, const int32_t *history,
                      size_t n_history);

    /* Optional: writes the distribution sample() draws from into probs
     * (n_vocab floats summing to 1) and returns the number of nonzero
     * entries.  Lets speculative drafts be verified by rejection sampling;
     * NULL: the engine verifies by drawing from sample() at each drafted
     * position and keeping drafts while they match the draw (exact, but
     * fewer drafts are accepted). */
    int32_t (*probs)(plume_sampler_state *st, const float *logits, const int32_t *history,
                     size_t n_history, float *probs);

    /* Appended after interface version 1's first release (absent = NULL): */

    /* Optional: the RNG sample() draws from; verification by rejection
     * sampling (probs set) then draws from this same stream, so that one
     * seed gives one sequence of tokens with or without speculation.  NULL:
     * verification draws from an RNG of the engine's, seeded from seed. */
    plume_rng *(*rng)(plume_sampler_state *st);

    /* Appended for constrained decoding (absent = NULL; a provider that
     * leaves them NULL is driven exactly as before): */

    /* Optional: one object the provider shares among all the sequences of
     * one engine that use it (a vocabulary index, a cache of compiled
     * grammars), made by the engine the first time a request names the
     * provider and freed with shared_free when the engine is freed.  The
     * engine calls the provider from one thread at a time. */
    int (*shared_create)(const struct plume_tokenizer *tok, int32_t n_vocab, void **out,
                         plume_error *err);
    void (*shared_free)(void *shared);

    /* Optional: used instead of create when set, with the tokenizer, the
     * request's sampling parameters and the shared object. */
    int (*create_ex)(const plume_sampler_create_args *args, plume_sampler_state **out,
                     plume_error *err);

    /* Optional: the engine appended token to the sequence (every generated
     * token, in order, end-of-generation included).  Returns 0, or -1 with
     * err set when the token cannot follow what came before (the engine
     * then finishes the request with an error). */
    int (*accept)(plume_sampler_state *st, int32_t token, plume_error *err);
    /* Optional: forgets the last n accepted tokens.  Speculative
     * verification accepts each draft before asking for the next
     * position's distribution, then rolls them back and accepts the tokens
     * it emits. */
    void (*rollback)(plume_sampler_state *st, int32_t n);
} plume_sampler_vtable;

/* True when vt's build has the slot (a vtable from an older build ends
 * before it) and sets it. */
#define PLUME_SAMPLER_HAS(vt, slot)                                                              \
    ((vt)->struct_size >= offsetof(plume_sampler_vtable, slot) + sizeof((vt)->slot) && (vt)->slot)

#ifdef __cplusplus
}
#endif
#endif
