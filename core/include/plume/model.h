/* plume — loading a model and running its forward pass. */
#ifndef PLUME_MODEL_H
#define PLUME_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/backend.h"
#include "plume/error.h"
#include "plume/tokenizer.h"
#include "plume/weight_format.h"

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
/* plume_model_load with the providers of reg: the checkpoint is opened by
 * the weight format whose probe scores highest, and each linear layer is
 * loaded by the registered method whose probe of the checkpoint scores
 * highest (the core's "native" for float and GGUF block types).  A
 * checkpoint whose config names a quant_method with no provider in reg gets
 * the plugin "quant-<method>" loaded into reg from its search path.  reg
 * NULL: the built-in formats and the native method only, except for a
 * checkpoint whose config names a quant_method, which gets a registry of the
 * model's own (default search path) to load that plugin into.  The weights
 * go to a new instance of the built-in cpu backend. */
PLUME_API int plume_model_load_with(const char *path, plume_registry *reg, plume_model **out,
                                    plume_error *err);

/* Where and how a model is loaded (plume_model_load_ex). */
typedef struct plume_load_params {
    plume_registry *registry;                /* as for plume_model_load_with; NULL allowed */
    /* The weight format to open the checkpoint with (e.g. the pipeline's);
     * NULL: the one whose probe scores highest. */
    const plume_weight_format_vtable *format;
    /* The settings format is opened with (the pipeline's load_format
     * section, e.g. the dummy format's dtype and seed); NULL: none. */
    const plume_settings *format_settings;
    /* The backend the weights are prepared for and the forward pass runs
     * on: an existing instance (borrowed: it must outlive the model), or
     * else a new instance of backend_vt (NULL: the built-in cpu) created
     * with backend_settings and n_threads (0: the backend's default) and
     * owned by the model. */
    const plume_backend_vtable *backend_vt; /* required with backend */
    plume_backend *backend;
    const plume_settings *backend_settings;
    int n_threads;
} plume_load_params;

/* No registry, a new cpu backend with the default thread count. */
PLUME_API plume_load_params plume_load_defaults(void);

/* Loads path onto the backend p names.  Before preparing any weight it asks
 * the backend (supports) whether it can run the model's tensor types, head
 * size and rope style, and fails naming what it cannot. */
PLUME_API int plume_model_load_ex(const char *path, const plume_load_params *p,
                                  plume_model **out, plume_error *err);

/* The backend a model's weights live on, and its instance (when inst is
 * non-NULL).  Every engine and context of the model runs on it, so they
 * share its threads: use them from one thread at a time (or load the model
 * twice). */
PLUME_API const plume_backend_vtable *plume_model_backend(const plume_model *m,
                                                           plume_backend **inst);

/* The quantization method of a quantized checkpoint ("gptq"), or NULL. */
PLUME_API const char *plume_model_quant_method(const plume_model *m);

PLUME_API void plume_model_free(plume_model *m);

PLUME_API const plume_tokenizer *plume_model_tokenizer(const plume_model *m);
PLUME_API int32_t plume_model_n_vocab(const plume_model *m);
/* The context the model runs at: max_position_embeddings (GGUF
 * context_length), x factor for dynamic RoPE scaling, at least original
 * context x factor for yarn. */
PLUME_API int32_t plume_model_n_ctx_train(const plume_model *m);
/* "llama", "qwen2". */
PLUME_API const char *plume_model_arch(const plume_model *m);
/* Number of parameters and bytes of weights as stored. */
PLUME_API int64_t plume_model_n_params(const plume_model *m);
PLUME_API int64_t plume_model_weight_bytes(const plume_model *m);
/* The parameters of the matrix products every token runs: all of them but
 * the token embedding (a gather) and the output head (run for the positions
 * whose logits are wanted, in prefill only the last); of a mixture of
 * experts, only the experts a token is routed to (n_expert_used of
 * n_expert).  Prefill rooflines count 2 FLOPs per such parameter per token. */
PLUME_API int64_t plume_model_n_params_per_token(const plume_model *m);
/* The weight bytes one decode token reads at batch 1: every weight, but of
 * a mixture of experts only the experts it is routed to (n_expert_used of
 * n_expert; the router, attention and any shared expert in full), and of a
 * token-embedding table separate from the output head only the token's
 * row.  Decode rooflines divide the bandwidth by it; it equals
 * plume_model_weight_bytes for a dense model with a tied head. */
PLUME_API int64_t plume_model_decode_bytes(const plume_model *m);
/* The attention shape: layers, query heads, kv heads, head size (for
 * rooflines and KV sizing; any pointer may be NULL). */
PLUME_API void plume_model_attn_shape(const plume_model *m, int32_t *n_layer, int32_t *n_head,
                                      int32_t *n_head_kv, int32_t *head_dim);
/* Prints a human-readable description (architecture, sizes, tensor types,
 * tokenizer) to the stream f (a FILE *). */
PLUME_API void plume_model_describe(const plume_model *m, void *f);

/* A context: KV cache for one sequence of up to n_ctx tokens and
 * activation buffers, on the model's backend (its threads).  Its cache is
 * f32, the exact one (the engine's and the sequence runner's default is
 * f16): a reference the batched paths are compared with. */
PLUME_API int plume_context_create(const plume_model *m, int n_ctx, plume_context **out,
                                   plume_error *err);
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
