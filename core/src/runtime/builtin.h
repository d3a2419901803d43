/* The core's own providers, registered as the built-in plugin "core". */
#ifndef PLUME_RUNTIME_BUILTIN_H
#define PLUME_RUNTIME_BUILTIN_H

#include "plume/plugin.h"
#include "plume/sampler.h"

extern const plume_weight_format_vtable plume_builtin_gguf;
extern const plume_weight_format_vtable plume_builtin_safetensors;
/* load_format: dummy (model/dummy.h): chosen by name, never by probing */
extern const plume_weight_format_vtable plume_builtin_dummy;
extern const plume_backend_vtable plume_builtin_cpu;
extern const plume_linear_vtable plume_builtin_native_linear;
extern const plume_sampler_vtable plume_builtin_standard_sampler;
extern const plume_scheduler_vtable plume_builtin_continuous;

/* The prepared matrix of a layer the native method loaded (the model's
 * embedding gather shares the tied head's weight). */
const plume_bweight *plume_native_linear_weight(const plume_linear *l);

/* Its prepared bias, or NULL when the layer has none. */
const plume_bweight *plume_native_linear_bias(const plume_linear *l);

/* A native layer over the matrix w (and the 1-D bias, when non-NULL) that
 * is not in a checkpoint (the quantizer's dequantized weights); their data
 * must stay valid until the layer is destroyed. */
/* A native layer over weights already prepared on bvt (w, and bias when
 * non-NULL: the dummy loader's device-filled matrices); the layer owns
 * them from then on, also when this fails. */
int plume_native_linear_adopt(const plume_backend_vtable *bvt, plume_backend *b, plume_bweight *w,
                              plume_bweight *bias, int64_t in, int64_t out, plume_linear **res,
                              plume_error *err);

int plume_native_linear_create(const plume_backend_vtable *bvt, plume_backend *b,
                               const plume_tensor *w, const plume_tensor *bias,
                               plume_linear **out, plume_error *err);

#define PLUME_BUILTIN_SAMPLER "standard"
#define PLUME_BUILTIN_SCHEDULER "continuous"

/* The standard sampler's parameters from its settings (NULL: defaults);
 * seed is left at 0 (it is the pipeline's, not the provider's). */
int builtin_standard_params(const plume_settings *s, plume_sampling_params *p, plume_error *err);

/* A standard sampler state from plume_sampling_params (seed included), to
 * be used through plume_builtin_standard_sampler: how a request that names
 * no sampler provider gets its sampler. */
int builtin_standard_create_params(const plume_sampling_params *p, int32_t n_vocab,
                                   plume_sampler_state **out, plume_error *err);

/* The continuous scheduler's mixed_batches setting (default true). */
int builtin_continuous_mixed(const plume_settings *s, bool *mixed, plume_error *err);
/* A continuous scheduler instance with mixed_batches = mixed (the engine's
 * default scheduler; engine/sched_continuous.c). */
int builtin_continuous_create(bool mixed, plume_sched_policy **out, plume_error *err);

#endif
