/* plume — loading a model and running its forward pass. */
#ifndef PLUME_MODEL_H
#define PLUME_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"
#include "plume/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct plume_model plume_model;
typedef struct plume_context plume_context;

/* Loads a model from a GGUF file or an HF directory (config.json,
 * model.safetensors or a sharded index, tokenizer.json).  Weights stay
 * memory-mapped.  Errors name the file and what was missing or wrong. */
PLUME_API int plume_model_load(const char *path, plume_model **out, plume_error *err);

typedef struct plume_registry plume_registry;
/* plume_model_load with the linear methods of reg: each linear layer is
 * loaded by the registered method whose probe of the checkpoint scores
 * highest (the core's "native" for float and GGUF block types).  A
 * checkpoint whose config names a quant_method with no provider in reg gets
 * the plugin "quant-<method>" loaded into reg from its search path.  reg
 * NULL: the native method only, except for a checkpoint whose config names
 * a quant_method, which gets a registry of the model's own (default search
 * path) to load that plugin into. */
PLUME_API int plume_model_load_with(const char *path, plume_registry *reg, plume_model **out,
                                    plume_error *err);
/* The quantization method of a quantized checkpoint ("gptq"), or NULL. */
PLUME_API const char *plume_model_quant_method(const plume_model *m);

PLUME_API void plume_model_free(plume_model *m);

PLUME_API const plume_tokenizer *plume_model_tokenizer(const plume_model *m);
PLUME_API int32_t plume_model_n_vocab(const plume_model *m);
PLUME_API int32_t plume_model_n_ctx_train(const plume_model *m);
/* "llama", "qwen2". */
PLUME_API const char *plume_model_arch(const plume_model *m);
/* Number of parameters and bytes of weights as stored. */
PLUME_API int64_t plume_model_n_params(const plume_model *m);
PLUME_API int64_t plume_model_weight_bytes(const plume_model *m);
/* Prints a human-readable description (architecture, sizes, tensor types,
 * tokenizer) to the stream f (a FILE *). */
PLUME_API void plume_model_describe(const plume_model *m, void *f);

/* A context: KV cache for one sequence of up to n_ctx tokens, activation
 * buffers and a thread pool of n_threads (0 = all online CPUs). */
PLUME_API int plume_context_create(const plume_model *m, int n_ctx, int n_threads,
                                   plume_context **out, plume_error *err);
PLUME_API void plume_context_free(plume_context *c);
PLUME_API int plume_context_n_ctx(const plume_context *c);
/* Number of positions already in the cache. */
PLUME_API int plume_context_n_past(const plume_context *c);
/* Forgets every cached position. */
PLUME_API void plume_context_reset(plume_context *c);

/* Runs the forward pass over n tokens appended at the current position and
 * writes the logits of the last one to logits (n_vocab floats) when
 * non-NULL.  Fails with PLUME_ERR_RANGE if the context would overflow and
 * PLUME_ERR_INVALID for an id outside the vocabulary. */
PLUME_API int plume_decode(plume_context *c, const int32_t *tokens, size_t n, float *logits,
                           plume_error *err);

#ifdef __cplusplus
}
#endif
#endif
