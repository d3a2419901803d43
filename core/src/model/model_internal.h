/* The loaded model: config, mapped checkpoint, tokenizer and per-layer
 * weight views.  Shared by the loader and the forward pass only. */
#ifndef PLUME_MODEL_INTERNAL_H
#define PLUME_MODEL_INTERNAL_H

#include "backend/cpu/ops.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "plume/model.h"

typedef struct plume_layer {
    const plume_tensor *wq, *wk, *wv, *wo;  /* [out][in] matrices */
    const plume_tensor *w_gate, *w_up, *w_down;
    float *attn_norm, *ffn_norm;            /* owned f32 copies, n_embd */
    float *bq, *bk, *bv, *bo;               /* owned f32 biases or NULL */
    /* the matrices prepared for the CPU matmul (repacked copies) */
    plume_cpu_weight cq, ck, cv, co, cgate, cup, cdown;
} plume_layer;

struct plume_model {
    plume_model_config cfg;
    char *path;
    gguf_file *gguf;      /* exactly one of gguf / st is set */
    safetensors *st;
    plume_tokenizer *tok;
    const plume_tensor *tok_embd; /* [n_vocab][n_embd] */
    const plume_tensor *output;   /* [n_vocab][n_embd]; == tok_embd when tied */
    float *out_norm;              /* owned, n_embd */
    plume_cpu_weight coutput;     /* output prepared for the CPU matmul */
    plume_layer *layers;
    float *rope_inv_freq;         /* head_dim/2 */
    int64_t n_params;
    int64_t weight_bytes;
};

/* Fills cfg from GGUF metadata (keys prefixed by general.architecture). */
int plume_config_from_gguf(const gguf_file *f, plume_model_config *cfg, plume_error *err);

#endif
