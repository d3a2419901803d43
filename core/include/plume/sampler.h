/* plume — the built-in sampler: greedy, temperature, top-k, top-p, min-p and
 * repetition penalty, with a seeded RNG (same seed, same tokens). */
#ifndef PLUME_SAMPLER_H
#define PLUME_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plume_sampling_params {
    float temperature;        /* 0 = greedy (argmax) */
    int32_t top_k;            /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off; divides positive logits, multiplies negative */
    int32_t repeat_last_n;    /* how many recent tokens the penalty looks at; -1 = all */
    uint64_t seed;
    /* OpenAI's penalties over the generated tokens so far (not the prompt):
     * logit[t] -= presence_penalty * (count(t) > 0) + frequency_penalty *
     * count(t), applied with the repetition penalty, before temperature.
     * Each in [-2, 2]; 0 = off (the default). */
    float presence_penalty;
    float frequency_penalty;
} plume_sampling_params;

/* One sampling parameter as every reader of it (the sampler, pipelines,
 * the server, JSONL requests, the commands' options) accepts it: the one
 * table of names, types, ranges and defaults.  The seed is not in it (any
 * 64-bit value is a seed). */
typedef struct plume_sampling_param {
    const char *name;     /* "temperature": the key in pipelines and JSON requests */
    bool integer;         /* an integer (top_k, repeat_last_n), else a real */
    double lo, hi;        /* accepted: lo <= v <= hi, or lo < v <= hi when lo_open */
    bool lo_open;
    double def;           /* the default (plume_sampling_defaults) */
    const char *neutral;  /* what turns it off, for messages: "0 = greedy", "1 = off" */
} plume_sampling_param;

/* The table: *n entries (temperature, top_k, top_p, min_p,
 * repetition_penalty, repeat_last_n, presence_penalty, frequency_penalty). */
PLUME_API const plume_sampling_param *plume_sampling_param_list(size_t *n);
/* The entry called name, or NULL when there is none. */
PLUME_API const plume_sampling_param *plume_sampling_param_find(const char *name);
/* True when v is in f's range (and integral for an integer parameter). */
PLUME_API bool plume_sampling_param_ok(const plume_sampling_param *f, double v);
/* f's range as text for messages, "[0, 100]" or "(0, 1]", into buf. */
PLUME_API void plume_sampling_param_range(const plume_sampling_param *f, char *buf, size_t cap);
/* Stores v (in f's range) into the field of p that f names, and reads it back; f
 * must be an entry of the table (plume_sampling_param_list or _find).  A real
 * entry is stored in single precision; a v that param_ok accepts stays
 * accepted once stored (it takes the nearest float inside the range when it
 * would round onto an open end or past an end). */
PLUME_API void plume_sampling_param_store(plume_sampling_params *p, const plume_sampling_param *f,
                                          double v);
PLUME_API double plume_sampling_param_load(const plume_sampling_params *p,
                                           const plume_sampling_param *f);

/* Every parameter at the table's default (temperature 0.8, top_k 40, top_p
 * 0.95, min_p 0.05, no penalty: llama.cpp's CLI defaults), seed 0. */
PLUME_API plume_sampling_params plume_sampling_defaults(void);

/* Checks every parameter against the table; the message names the first
 * field out of range, its range and what turns it off. */
PLUME_API int plume_sampling_validate(const plume_sampling_params *p, plume_error *err);

/* xoshiro256** generator state. */
typedef struct plume_rng {
    uint64_t s[4];
} plume_rng;

PLUME_API void plume_rng_seed(plume_rng *r, uint64_t seed);
PLUME_API uint64_t plume_rng_next(plume_rng *r);
/* Uniform in [0, 1). */
PLUME_API double plume_rng_uniform(plume_rng *r);

typedef struct plume_sampler plume_sampler;

PLUME_API int plume_sampler_create(const plume_sampling_params *p, int32_t n_vocab,
                                   plume_sampler **out, plume_error *err);
PLUME_API void plume_sampler_free(plume_sampler *s);

/* Says that the first n_prompt entries of every history given to this
 * sampler are the prompt: the presence and frequency penalties count only
 * the entries after them (the generated tokens).  Default 0: the whole
 * history counts as output.  The engine sets it for the built-in sampler of
 * each request. */
PLUME_API void plume_sampler_set_prompt_len(plume_sampler *s, size_t n_prompt);

/* Turns logits into the final distribution the sampler draws from, in
 * vLLM's order: the repetition penalty (over the last repeat_last_n tokens of
 * history), the presence and frequency penalties (over the history after its
 * prompt, plume_sampler_set_prompt_len), temperature, then on the tempered
 * probabilities top-k, min-p and top-p (on the distribution top-k and min-p
 * left, renormalised):
 * probs[i] sums to 1 over the kept tokens and is 0 elsewhere.  With
 * temperature 0 the distribution is a point mass on the argmax.  Returns the
 * number of tokens with nonzero probability. */
PLUME_API int32_t plume_sampler_probs(plume_sampler *s, const float *logits, const int32_t *history,
                                      size_t n_history, float *probs);

/* Picks the next token from logits (n_vocab floats, not modified). */
PLUME_API int32_t plume_sampler_sample(plume_sampler *s, const float *logits,
                                       const int32_t *history, size_t n_history);

/* Draws a token from a distribution over n_vocab ids (one uniform draw from
 * the sampler's RNG). */
PLUME_API int32_t plume_sampler_draw(plume_sampler *s, const float *probs);
PLUME_API bool plume_sampler_is_greedy(const plume_sampler *s);
PLUME_API int32_t plume_sampler_n_vocab(const plume_sampler *s);

/* The sampler's RNG (for verification that must share its stream). */
PLUME_API plume_rng *plume_sampler_rng(plume_sampler *s);

/* ---- speculative verification (rejection sampling) ----
 *
 * Verifies n_draft drafted tokens against the target's logits at the n_draft+1
 * positions that scored them (row i scores the token after history + the
 * first i drafts).  Greedy (temperature 0): drafts are accepted while they
 * equal the target's argmax; then the argmax follows.  Sampling: the rule of
 * Leviathan et al. 2023 and Chen et al. 2023, applied to the distributions
 * after repetition penalty, temperature, top-k, top-p and min-p: draft d_i
 * is accepted with probability min(1, p(d_i)/q(d_i)); on the first
 * rejection a token is drawn from normalize(max(0, p - q)); if every draft
 * is accepted a bonus token is drawn from the last row.  draft_probs
 * (n_draft rows of n_vocab) may be NULL: the draft is then a point mass.
 * history must have room for n_draft more ids after n_history (the accepted
 * drafts are appended there as the rows advance).  Writes the accepted drafts
 * followed by one target token to out and returns their count (1..n_draft+1);
 * *n_accepted receives the accepted draft count.  work: 2 x n_vocab floats. */
PLUME_API int32_t plume_sampler_verify(plume_sampler *s, const float *logits, const int32_t *draft,
                                       int32_t n_draft, const float *draft_probs, int32_t *history,
                                       size_t n_history, int32_t *out, int32_t *n_accepted,
                                       float *work);

/* The same rule for any sampler that can state its distribution: probs()
 * writes the distribution it samples from after its own transformations;
 * draws come from rng (a point mass is taken without a draw). */
typedef struct plume_verify_target {
    int32_t (*probs)(void *ctx, const float *logits, const int32_t *history, size_t n_history,
                     float *probs);
    void *ctx;
    plume_rng *rng;
    int32_t n_vocab;
} plume_verify_target;

PLUME_API int32_t plume_spec_verify(const plume_verify_target *t, const float *logits,
                                    const int32_t *draft, int32_t n_draft, const float *draft_probs,
                                    int32_t *history, size_t n_history, int32_t *out,
                                    int32_t *n_accepted, float *work);

#ifdef __cplusplus
}
#endif
#endif
