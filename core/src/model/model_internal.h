/* The loaded model: config, mapped checkpoint, tokenizer and per-layer
 * weight views.  Shared by the loader and the forward pass only. */
#ifndef PLUME_MODEL_INTERNAL_H
#define PLUME_MODEL_INTERNAL_H

#include "backend/cpu/ops.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "plume/linear.h"
#include "plume/model.h"
#include "plume/registry.h"

/* One linear layer: either the core's own ("native": a float or GGUF
 * block-type matrix run by the CPU matmul) or a method a plugin provides
 * (chosen by probing the checkpoint, linear.h), which owns its bias. */
typedef struct plume_lin {
    const plume_tensor *w;          /* native: the [out][in] matrix */
    plume_cpu_weight cw;            /* native: prepared for the CPU matmul */
    const plume_linear_vtable *vt;  /* a plugin's method, NULL when native */
    plume_linear *pl;
} plume_lin;

typedef struct plume_layer {
    plume_lin q, k, v, o, gate, up, down;
    float *attn_norm, *ffn_norm;            /* owned f32 copies, n_embd */
    float *bq, *bk, *bv, *bo;               /* owned f32 biases of native q/k/v/o, or NULL */
} plume_layer;

struct plume_model {
    plume_model_config cfg;
    char *path;
    gguf_file *gguf;      /* exactly one of gguf / st is set */
    safetensors *st;
    plume_tokenizer *tok;
    const plume_tensor *tok_embd; /* [n_vocab][n_embd] */
    plume_lin output;             /* the head; its w == tok_embd when tied */
    float *out_norm;              /* owned, n_embd */
    plume_layer *layers;
    float *rope_inv_freq;         /* head_dim/2 */
    int64_t n_params;
    int64_t weight_bytes;
    /* a quantized checkpoint: its method ("gptq") and settings, else "" / NULL */
    char quant_method[32];
    plume_settings *quant;
    plume_registry *own_reg;      /* the registry the model loaded plugins into itself */
    int n_plugin_linears;         /* layers run by a plugin's method */
};

/* Fills cfg from GGUF metadata (keys prefixed by general.architecture). */
int plume_config_from_gguf(const gguf_file *f, plume_model_config *cfg, plume_error *err);

#endif
