/* plume — the serving engine: requests in, tokens streamed out.
 *
 * nano-vllm's shape: sequences, a block manager over a paged KV cache, a
 * scheduler that packs prefill chunks and decode tokens into each step
 * within token and block budgets, and one batched forward per step.
 * Requests that share a prompt prefix share its KV blocks (prefix caching). */
#ifndef PLUME_ENGINE_H
#define PLUME_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/backend.h"
#include "plume/error.h"
#include "plume/kv_connector.h"
#include "plume/model.h"
#include "plume/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plume_engine plume_engine;
struct plume_scheduler_vtable;
struct plume_settings;

typedef struct plume_engine_params {
    int32_t block_size;          /* tokens per KV block (default 16) */
    int64_t kv_max_tokens;       /* KV cache capacity in tokens (default 16384) */
    plume_kv_dtype kv_dtype;     /* default PLUME_KV_F16 (half of f32's memory and
                                    bandwidth; docs/long-context.md has its quality
                                    cost); PLUME_KV_F32 for the exact cache */
    int32_t max_num_seqs;        /* sequences per step (default 64) */
    int32_t max_batched_tokens;  /* positions per step (default 512) */
    bool prefix_caching;         /* default true */
    /* The scheduler provider (plume/scheduler.h; a vtable from the
     * registry, e.g. a plugin's, or the program's own) and its settings,
     * which plume_engine_create validates and passes to its create; the
     * vtable must outlive the engine, the settings only the create call.
     * Default NULL: the built-in "continuous" scheduler with mixed_batches
     * below.  plume_pipeline_engine_params sets these for a pipeline whose
     * scheduler is not the built-in one. */
    const struct plume_scheduler_vtable *scheduler;
    const struct plume_settings *scheduler_settings;
    bool mixed_batches;          /* prefill chunks and decode tokens share a step
                                    (vLLM v1); false = nano-vllm's separate steps.
                                    The built-in scheduler's setting, used when
                                    scheduler is NULL or has no plan.
                                    Default true: decode never waits behind a long
                                    prefill; throughput is within noise of separate
                                    steps (docs/engine.md has the measurements) */
    /* The registry the model was loaded with: the proposer's host gets it
     * (plume_proposer_host.registry) to load a draft model with the same
     * providers.  It must outlive the engine.  Default NULL (the proposer
     * then loads with the built-in providers only); plume_pipeline_build
     * sets it to the pipeline's registry. */
    plume_registry *registry;
    /* Adaptive speculation (pipeline `speculative: {adaptive: ...,
     * disable_above_batch: ...}`; docs/engine.md has the rules and the
     * measurements).  spec_adaptive: each sequence drafts
     * clamp(round(r * k) + 1, 1, k) tokens, r its moving average of
     * accepted / drafted (starts at 1, so a new sequence drafts k).
     * Default false.  spec_disable_above_batch: a step with more decoding
     * sequences than this drafts nothing; 0 = never (the default),
     * -1 = auto: the engine's measured cost model (forward time per
     * position count, mean drafted and accepted tokens, proposer time)
     * decides each step whether drafts pay.  Change both on a live engine
     * with plume_engine_set_spec_policy. */
    bool spec_adaptive;
    int32_t spec_disable_above_batch;
    /* Prefill/decode disaggregation (pipeline `kv_connector`; plume/
     * kv_connector.h, docs/disaggregation.md): the connector provider, its
     * settings (passed to its create; they need only outlive the create
     * call) and this worker's role.  Default NULL: no connector, and a
     * request's kv_transfer is then refused.  kv_recompute_on_failure: a
     * failed load computes the prompt locally (logged) instead of failing
     * the request (the default, `on_failure: fail`). */
    const plume_kv_connector_vtable *kv_connector;
    const struct plume_settings *kv_connector_settings;
    plume_kv_role kv_role;
    bool kv_recompute_on_failure;
} plume_engine_params;

/* The defaults listed above. */
PLUME_API plume_engine_params plume_engine_defaults(void);

typedef enum plume_finish_reason {
    PLUME_FINISH_NONE = 0,   /* still running */
    PLUME_FINISH_STOP,       /* end-of-generation token or a stop string */
    PLUME_FINISH_LENGTH,     /* max_tokens or the context limit */
    PLUME_FINISH_ABORT,      /* plume_engine_abort */
    PLUME_FINISH_ERROR,      /* the request could not be served; see its message */
} plume_finish_reason;

/* "stop", "length", "abort", "error" ("" for NONE). */
PLUME_API const char *plume_finish_reason_name(plume_finish_reason r);

/* Called for every generated token (text holds the bytes it completes,
 * possibly empty while a UTF-8 character is split across tokens) and once
 * more when the request finishes (token -1, reason set).  It may call
 * plume_engine_abort (on any request); it must not call
 * plume_engine_release, plume_engine_step or plume_engine_free. */
typedef void (*plume_token_fn)(void *user, int64_t request_id, int32_t token, const char *text,
                               size_t text_len, plume_finish_reason reason);

/* The most alternatives a request may ask log-probabilities for. */
#define PLUME_MAX_TOP_LOGPROBS 20

/* Log-probabilities of one generated token (natural log), from the
 * log-softmax of the model's raw logits at that position (before penalties,
 * temperature and truncation: what vLLM returns by default). */
typedef struct plume_token_logprobs {
    float logprob;                                   /* of the generated token */
    int32_t n_top;                                   /* = the request's logprobs */
    int32_t top_ids[PLUME_MAX_TOP_LOGPROBS];         /* most likely first */
    float top_logprobs[PLUME_MAX_TOP_LOGPROBS];
} plume_token_logprobs;

/* One event of a request, for plume_request_params.on_event: a generated
 * token (token >= 0, text the bytes it completes, logprobs non-NULL when the
 * request asked for them) or, once, the end (token -1, reason set). */
typedef struct plume_token_event {
    int32_t token;
    const char *text;
    size_t text_len;
    plume_finish_reason reason;
    const plume_token_logprobs *logprobs;
} plume_token_event;

/* Called like plume_token_fn (same rules), with the whole event. */
typedef void (*plume_event_fn)(void *user, int64_t request_id, const plume_token_event *ev);

typedef struct plume_request_params {
    plume_sampling_params sampling;
    int32_t max_tokens;          /* default 256 */
    bool ignore_eos;
    const char *const *stop;     /* stop strings (copied); the text ends before them */
    size_t n_stop;
    plume_token_fn on_token;     /* may be NULL */
    void *user;
    /* The sampler provider for this request (a vtable from the registry,
     * e.g. a plugin's) and its settings; NULL: the engine's default
     * (plume_engine_set_sampler), else the built-in "standard" provider
     * with `sampling`.  sampling.seed seeds either. */
    const struct plume_sampler_vtable *sampler;
    const struct plume_settings *sampler_settings;
    float *first_logits;         /* if non-NULL (n_vocab floats): receives the logits
                                    the first generated token was sampled from, i.e.
                                    those of the last prompt position */
    /* -1 (the default): no log-probabilities; 0..PLUME_MAX_TOP_LOGPROBS:
     * each generated token's logprob plus this many top alternatives, given
     * to on_event. */
    int32_t logprobs;
    /* Called instead of on_token when set (user is passed to it too). */
    plume_event_fn on_event;
    /* true: this request is never speculated on, even while the engine has
     * a proposer (its decode steps verify no drafts). */
    bool no_speculation;
    /* The most tokens drafted for this request per step: -1 (the default)
     * the engine's num_speculative_tokens (k), 0 none (as no_speculation),
     * 1..k at most that many.  Checked when the request is added: above
     * the engine's k is an error while a proposer is set; without one,
     * every value from -1 up is accepted (there is nothing to draft). */
    int32_t num_speculative_tokens;
    /* Prefill/decode transfer parameters (copied), or NULL.  On a prefill
     * worker do_remote_decode keeps the prompt's KV for a decode worker
     * (the result's kv_transfer says where); on a decode worker
     * do_remote_prefill loads it from there.  Refused when the engine has
     * no connector of the matching role. */
    const plume_kv_transfer_params *kv_transfer;
    /* true: the output text includes special tokens (<|channel|>, <|end|>,
     * ...) as their text, for a reader that parses them (the server's
     * gpt-oss harmony reader); false (the default): they are left out, as
     * vLLM's skip_special_tokens does.  The tokens that end generation are
     * never part of the text. */
    bool render_special;
} plume_request_params;

/* Greedy defaults: temperature 0, max_tokens 256, no stop strings. */
PLUME_API plume_request_params plume_request_defaults(void);

PLUME_API int plume_engine_create(const plume_model *m, const plume_engine_params *p,
                                  plume_engine **out, plume_error *err);
/* Frees the engine and every request still in it. */
PLUME_API void plume_engine_free(plume_engine *e);

/* Queues a request from token ids.  Returns its id (>= 0), or -1 when it can
 * never be served (longer than the context or than the whole KV cache,
 * bad sampling parameters): then err says why. */
PLUME_API int64_t plume_engine_add_tokens(plume_engine *e, const int32_t *ids, size_t n,
                                          const plume_request_params *p, plume_error *err);
/* Queues a request from text (tokenized with BOS as the model wants and
 * special tokens recognised). */
PLUME_API int64_t plume_engine_add_text(plume_engine *e, const char *text,
                                        const plume_request_params *p, plume_error *err);

/* Runs one step: the scheduler provider plans the batch (the engine
 * allocates KV blocks, admits, preempts), drafts are proposed when
 * speculation is on, one batched forward runs, then every sequence that
 * reached its end gets its next token(s) through its sampler provider.
 * Returns the number of requests still unfinished, or -1 (err set) when
 * the forward fails or the scheduler's plan breaks the rules of
 * plume/scheduler.h. */
PLUME_API int plume_engine_step(plume_engine *e, plume_error *err);

/* True while any request is waiting or running. */
PLUME_API bool plume_engine_has_work(const plume_engine *e);

/* Finishes a request with reason abort and frees its blocks; 0 if it was
 * unfinished, -1 if unknown or already finished. */
PLUME_API int plume_engine_abort(plume_engine *e, int64_t request_id);

/* A finished or running request's outcome so far.  Pointers stay valid
 * until plume_engine_release or the next step. */
typedef struct plume_request_result {
    plume_finish_reason finish;
    const int32_t *prompt_ids;
    size_t n_prompt;
    const int32_t *output_ids;
    size_t n_output;
    const char *text;            /* detokenized output (stop string removed) */
    size_t text_len;
    const char *error;           /* message when finish == ERROR */
    int32_t n_cached_prompt;     /* prompt tokens served from the prefix cache */
    int32_t n_preemptions;
    int32_t n_drafted;           /* speculative tokens drafted for this request */
    int32_t n_accepted;          /* of those, accepted by verification */
    int32_t n_forwards;          /* target forwards that produced its tokens */
    /* Prefill worker: what a decode worker needs to load this request's
     * prompt KV (do_remote_prefill set), once it finished; else NULL. */
    const plume_kv_transfer_params *kv_transfer;
} plume_request_result;

/* Turns speculative decoding on with proposer vt (settings are passed to
 * its create; k = tokens drafted per step), replaces the current proposer,
 * or turns it off (vt NULL).  Only between runs: fails while requests are
 * waiting or running.  The model's weights are untouched. */
struct plume_proposer_vtable;
PLUME_API int plume_engine_set_proposer(plume_engine *e, const struct plume_proposer_vtable *vt,
                                        const struct plume_settings *settings, int32_t k,
                                        plume_error *err);
/* Adaptive speculation on a live engine (plume_engine_params.spec_adaptive
 * and spec_disable_above_batch: -1 auto, 0 never, N > 0 a fixed bound).
 * Only between runs; the proposer stays as it is. */
PLUME_API int plume_engine_set_spec_policy(plume_engine *e, bool adaptive,
                                           int32_t disable_above_batch, plume_error *err);
/* Makes vt (with settings) the sampler of requests that name none, or goes
 * back to the built-in "standard" sampler with each request's `sampling`
 * (vt NULL).  Only between runs. */
struct plume_sampler_vtable;
PLUME_API int plume_engine_set_sampler(plume_engine *e, const struct plume_sampler_vtable *vt,
                                       const struct plume_settings *settings, plume_error *err);
/* The default sampler provider's name ("standard" for the built-in). */
PLUME_API const char *plume_engine_sampler_name(const plume_engine *e);

/* The scheduler provider's name ("continuous" for the built-in). */
PLUME_API const char *plume_engine_scheduler_name(const plume_engine *e);

/* The active proposer's name, or NULL when speculation is off. */
PLUME_API const char *plume_engine_proposer_name(const plume_engine *e);

/* The longest sequence (prompt + generated tokens) one request may reach:
 * the KV cache's capacity in whole blocks (kv_max_tokens rounded up to
 * block_size), capped by the model's trained context when it has one.  A
 * longer prompt is refused by plume_engine_add_tokens; servers report it
 * as max_model_len. */
PLUME_API int32_t plume_engine_n_ctx(const plume_engine *e);

/* The KV cache the engine allocated: its element type (params.kv_dtype) and
 * the bytes one cached position takes in it, K and V of every layer
 * (scales included for PLUME_KV_INT8). */
PLUME_API plume_kv_dtype plume_engine_kv_dtype(const plume_engine *e);
PLUME_API int64_t plume_engine_kv_bytes_per_token(const plume_engine *e);

PLUME_API int plume_engine_result(const plume_engine *e, int64_t request_id,
                                  plume_request_result *out);
/* Forgets a finished request (its result is no longer available). */
PLUME_API void plume_engine_release(plume_engine *e, int64_t request_id);

typedef struct plume_engine_stats {
    int64_t steps;
    int64_t prefill_tokens;      /* positions computed for prompts */
    int64_t decode_tokens;       /* positions computed for generated tokens */
    int64_t cached_prompt_tokens;/* prompt positions skipped thanks to the prefix cache */
    int64_t preemptions;
    int64_t generated_tokens;
    double forward_seconds;
    int64_t spec_drafted;        /* speculative decoding: tokens drafted, */
    int64_t spec_accepted;       /*   accepted, */
    int64_t spec_forwards;       /*   sequence-forwards that verified drafts, */
    int64_t spec_emitted;        /*   tokens those forwards produced */
    int32_t max_step_positions;  /* most positions in one step so far */
    int32_t max_step_seqs;       /* most sequences in one step so far */
    int64_t spec_steps_skipped;  /* steps whose drafts spec_disable_above_batch
                                    turned off (auto or a fixed bound) */
    int64_t proposer_model_loads;/* models the proposers of this engine loaded with
                                    plume_proposer_host_load_model (during create) */
} plume_engine_stats;

PLUME_API plume_engine_stats plume_engine_get_stats(const plume_engine *e);

/* What the engine holds right now (for a server's metrics). */
typedef struct plume_engine_load {
    int32_t running;             /* requests being computed */
    int32_t waiting;             /* requests queued (incl. preempted) */
    int32_t kv_blocks_total;     /* blocks of the KV cache */
    int32_t kv_blocks_used;      /* held by sequences (blocks kept only for the
                                    prefix cache count as free) */
    int64_t prefix_queries;      /* prompt tokens looked up in the prefix cache, */
    int64_t prefix_hits;         /*   and those found there (since creation) */
    /* KV connector (all 0 without one) */
    int32_t kv_waiting_remote;   /* requests waiting for remote KV */
    int32_t kv_blocks_deferred;  /* blocks of finished requests kept until their send is done */
    plume_kv_connector_stats kv; /* the connector's own counts */
} plume_engine_load;
/* The prefix counts are taken when a request is admitted (where its prefix
 * is matched), as vLLM counts them: queries += its tokens, hits += those
 * the cache held (whole blocks; the last token is always computed, so a
 * repeated prompt hits at most its tokens - 1, rounded down to blocks).  A
 * preempted request counts again when it is re-admitted, with the tokens
 * it had generated.  Both stay 0 with prefix caching off. */

PLUME_API plume_engine_load plume_engine_get_load(const plume_engine *e);

#ifdef __cplusplus
}
#endif
#endif
