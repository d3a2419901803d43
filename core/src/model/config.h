/* The model's hyperparameters, filled from GGUF metadata or HF config.json. */
#ifndef PLUME_MODEL_CONFIG_H
#define PLUME_MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/error.h"

/* How query/key rows are paired for rotation.  GGUF checkpoints of llama
 * were permuted by convert_hf_to_gguf.py so that pairs are adjacent rows
 * (2i, 2i+1); HF checkpoints rotate (i, i + head_dim/2).  formats.md §3.5. */
typedef enum plume_rope_style {
    PLUME_ROPE_ADJACENT = 0,
    PLUME_ROPE_HALF = 1,
} plume_rope_style;

typedef enum plume_arch {
    PLUME_ARCH_LLAMA = 0, /* Llama 2/3, SmolLM, Mistral */
    PLUME_ARCH_QWEN2 = 1, /* Llama + q/k/v bias */
} plume_arch;

typedef struct plume_model_config {
    plume_arch arch;
    char arch_name[32];
    int32_t n_vocab;
    int32_t n_embd;     /* hidden size */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;
    int32_t n_ff;       /* MLP intermediate size */
    int32_t n_ctx_train;
    float rms_eps;
    float rope_theta;
    plume_rope_style rope_style;
    bool qkv_bias;
    bool tied_embeddings; /* no separate output head */
} plume_model_config;

/* Parses an HF config.json (architectures / model_type, hidden_size, ...).
 * Unknown architectures are "unsupported architecture X". */
int plume_config_from_hf_json(const char *path, plume_model_config *cfg, plume_error *err);

/* Checks sizes for consistency (head_dim * n_head, n_head % n_head_kv, ...). */
int plume_config_validate(const plume_model_config *cfg, plume_error *err);

#endif
