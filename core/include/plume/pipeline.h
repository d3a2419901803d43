/* plume — pipelines: a YAML file naming the model and the provider of each
 * slot with that provider's settings (docs/pipelines.md has the format).
 *
 *     model: models/SmolLM2-135M-Instruct.Q4_1.gguf
 *     backend: cpu
 *     plugins: [typical]
 *     kv_cache: { block_size: 16, dtype: f16, max_tokens: 16384 }
 *     scheduler: { max_num_seqs: 64, max_batched_tokens: 512 }
 *     sampling: { method: typical, typical_p: 0.9, seed: 7 }
 *
 * Loading a pipeline parses it, loads its plugins into the registry and
 * validates every section (each provider validates its own settings) before
 * any weight is read.  Every error is one line "file:line:column: message";
 * an unknown key lists the accepted keys, an unknown provider lists the
 * registered providers of that kind.  A relative model path resolves against
 * the pipeline file's directory first, then the current directory.
 *
 * The resolved pipeline maps onto plume_engine_params and
 * plume_sampling_params, and hands out the vtable and settings of each slot
 * so that the engine can be given providers.  It borrows the registry's
 * vtables: free the pipeline before the registry. */
#ifndef PLUME_PIPELINE_H
#define PLUME_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/engine.h"
#include "plume/error.h"
#include "plume/registry.h"
#include "plume/sampler.h"
#include "plume/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plume_pipeline plume_pipeline;

/* Reads, parses and validates the pipeline file at path. */
PLUME_API int plume_pipeline_load(plume_registry *reg, const char *path, plume_pipeline **out,
                                  plume_error *err);

/* plume_pipeline_load with model (e.g. a --model option next to
 * --pipeline) replacing the file's `model:`, which may then be absent and
 * is not looked at; a relative model resolves against the current
 * directory.  model NULL: the same as plume_pipeline_load. */
PLUME_API int plume_pipeline_load_with_model(plume_registry *reg, const char *path,
                                             const char *model, plume_pipeline **out,
                                             plume_error *err);

/* Parses and validates len bytes of YAML text; name is used in messages and
 * base_dir resolves a relative model path (NULL: the current directory).
 * With check_model false the model path is not looked at (no existence
 * check, no format probe): for tools and fuzzing. */
PLUME_API int plume_pipeline_parse(plume_registry *reg, const char *text, size_t len,
                                   const char *name, const char *base_dir, bool check_model,
                                   plume_pipeline **out, plume_error *err);

/* The built-in default pipeline on model_path: its format's provider, the
 * best backend, the continuous scheduler and the standard sampler with the
 * engine's and sampler's defaults. */
PLUME_API int plume_pipeline_for_model(plume_registry *reg, const char *model_path,
                                       plume_pipeline **out, plume_error *err);

/* plume_pipeline_for_model with the model opened by the weight format
 * named load_format (the pipeline key load_format: e.g. "dummy", random
 * weights from a config.json) with the settings s (copied; NULL: none),
 * without probing the path.  load_format NULL: plume_pipeline_for_model. */
PLUME_API int plume_pipeline_for_model_as(plume_registry *reg, const char *model_path,
                                          const char *load_format, const plume_settings *s,
                                          plume_pipeline **out, plume_error *err);

PLUME_API void plume_pipeline_free(plume_pipeline *p);

/* The file the pipeline came from ("(default)" for plume_pipeline_for_model). */
PLUME_API const char *plume_pipeline_file(const plume_pipeline *p);
/* The resolved model path. */
PLUME_API const char *plume_pipeline_model(const plume_pipeline *p);
/* `threads`, passed to the backend's create (0 = the backend's choice; cpu:
 * PLUME_THREADS, else the physical cores). */
PLUME_API int plume_pipeline_threads(const plume_pipeline *p);

/* Fills the engine's parameters from kv_cache and scheduler (threads are
 * the backend's: plume_pipeline_threads, plume_build_opts).  A
 * scheduler other than the built-in "continuous" goes into
 * out->scheduler and out->scheduler_settings (settings owned by the
 * pipeline: keep it until plume_engine_create returns; the vtable is the
 * registry's); for "continuous" they stay NULL and out->mixed_batches
 * holds its setting. */
PLUME_API void plume_pipeline_engine_params(const plume_pipeline *p, plume_engine_params *out);

/* Fills the built-in sampler's parameters from `sampling`.  Returns true
 * when the pipeline's sampler is the built-in "standard" (so the params say
 * everything), false when it is another provider (then the params hold the
 * defaults and the seed; use plume_pipeline_sampler).  *seed_given (may be
 * NULL) tells whether the pipeline fixed the seed. */
PLUME_API bool plume_pipeline_sampling_params(const plume_pipeline *p, plume_sampling_params *out,
                                              bool *seed_given);

/* Each slot's provider (vtable in the registry's layout) and its settings
 * (NULL settings: none given).  Never NULL except the optional slots. */
PLUME_API const plume_weight_format_vtable *plume_pipeline_weight_format(const plume_pipeline *p,
                                                                         const plume_settings **s);
PLUME_API const plume_backend_vtable *plume_pipeline_backend(const plume_pipeline *p,
                                                             const plume_settings **s);
PLUME_API const plume_scheduler_vtable *plume_pipeline_scheduler(const plume_pipeline *p,
                                                                 const plume_settings **s);
PLUME_API const plume_sampler_vtable *plume_pipeline_sampler(const plume_pipeline *p,
                                                             const plume_settings **s);
/* NULL when the pipeline has no `speculative` section. */
PLUME_API const plume_proposer_vtable *plume_pipeline_proposer(const plume_pipeline *p,
                                                               const plume_settings **s,
                                                               int32_t *num_speculative_tokens);
/* NULL when the pipeline has no `kv_connector` section; else the provider,
 * its settings and the role (plume_pipeline_engine_params carries them to
 * the engine). */
PLUME_API const plume_kv_connector_vtable *plume_pipeline_kv_connector(const plume_pipeline *p,
                                                                       const plume_settings **s,
                                                                       plume_kv_role *role);

/* What a caller changes of a pipeline when building from it (the command
 * line's flags); zeroed fields keep the pipeline's values. */
typedef struct plume_build_opts {
    const plume_engine_params *engine; /* NULL: the pipeline's kv_cache and scheduler */
    int n_threads;                     /* 0: the pipeline's `threads` */
} plume_build_opts;

/* Assembles what the pipeline describes, with the providers of reg (the
 * registry the pipeline was resolved against):
 *   - a new instance of its backend (settings, threads),
 *   - the model, opened by its weight format and loaded onto that backend
 *     with reg's linear methods (plume_model_load_ex),
 *   - when engine is non-NULL, an engine on that model (KV cache on the
 *     backend) with the pipeline's scheduler, sampler and proposer; its
 *     params' registry is reg (unless o->engine names one), which the
 *     proposer's host hands on for loading a draft model.
 * o may be NULL.  On failure nothing is left allocated.  Free the engine,
 * then the model, then (after both) the registry. */
PLUME_API int plume_pipeline_build(const plume_pipeline *p, plume_registry *reg,
                                   const plume_build_opts *o, plume_model **model,
                                   plume_engine **engine, plume_error *err);

/* Writes the resolved pipeline as YAML to f (a FILE *): every slot with its
 * provider, where the provider comes from, and every setting with its
 * value, defaults marked. */
PLUME_API void plume_pipeline_print(const plume_pipeline *p, void *f);

#ifdef __cplusplus
}
#endif
#endif
