/* The loaded model: config, mapped checkpoint, tokenizer and per-layer
 * weight views.  Shared by the loader and the forward pass only. */
#ifndef PLUME_MODEL_INTERNAL_H
#define PLUME_MODEL_INTERNAL_H

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "model/dummy.h"
#include "plume/backend.h"
#include "plume/linear.h"
#include "plume/model.h"
#include "plume/registry.h"

/* One linear layer, loaded by a method (the core's "native" or a plugin's,
 * chosen by probing the checkpoint, linear.h), which owns its bias. */
typedef struct plume_lin {
    const plume_linear_vtable *vt; /* NULL only while unloaded */
    plume_linear *pl;
} plume_lin;

/* A mixture-of-experts MLP: the router (n_embd -> n_expert logits) and
 * n_expert SwiGLU experts, each three native linears over 2-D views of the
 * checkpoint (a GGUF's 3-D ffn_*_exps slabs, or an HF checkpoint's
 * per-expert matrices). */
typedef struct plume_moe {
    plume_lin router;
    plume_lin *gate, *up, *down; /* [n_expert] */
    plume_tensor *views;         /* [3 * n_expert]: the views the experts were made from */
    int32_t n_expert;
    /* Qwen2-MoE's shared expert and its gate (n_embd -> 1), else unloaded */
    plume_lin sh_gate, sh_up, sh_down, sh_router;
    plume_tensor sh_router_view; /* the gate as a [1][n_embd] matrix */
    /* gpt-oss: each expert's gate, up and down bias as 1-D views
     * ([3 * n_expert]), and the host memory an HF checkpoint's experts were
     * rearranged into (moe_repack.h; the views point there), else NULL */
    plume_tensor *bias_views;
    void *repacked[5];
} plume_moe;

typedef struct plume_layer {
    plume_lin q, k, v, o, gate, up, down;
    plume_bweight *attn_norm, *ffn_norm; /* n_embd */
    plume_bweight *q_norm, *k_norm;      /* head_dim (Qwen3, Gemma 3), else NULL */
    plume_bweight *post_attn_norm, *post_ffn_norm; /* n_embd (Gemma 3), else NULL */
    plume_bweight *sinks;                /* n_head attention sink logits (gpt-oss), else NULL */
    const plume_bweight *rope_freq;      /* the model's global or local inv_freq; NULL: no
                                          * RoPE in this layer (SmolLM3) */
    float attn_scale;                    /* softmax scale; 0: 1/sqrt(head_dim) */
    int32_t window;                      /* sliding window (0: full attention) */
    plume_moe *moe;                      /* a mixture-of-experts MLP (gate/up/down unused), else NULL */
} plume_layer;

/* Every weight is a handle of the model's backend (backend.h), so the
 * model itself never touches device memory. */
struct plume_model {
    plume_model_config cfg;
    char *path;
    /* the checkpoint, opened by the weight format that won the probe */
    const plume_weight_format_vtable *fmt;
    plume_checkpoint *ck;
    gguf_file *gguf;      /* the built-in formats' own handles (== ck), else NULL */
    safetensors *st;
    plume_dummy *dummy;   /* load_format: dummy (== ck), else NULL */
    plume_tokenizer *tok;
    /* the backend the weights live on */
    const plume_backend_vtable *bvt;
    plume_backend *b;
    bool owns_backend;
    const plume_tensor *tok_embd_t;   /* [n_vocab][n_embd], for shapes and descriptions */
    const plume_bweight *tok_embd;    /* the embedding table: own_embd, or the tied head's */
    plume_bweight *own_embd;
    plume_lin output;                 /* the head (the embedding matrix when tied) */
    plume_bweight *out_norm;          /* n_embd */
    plume_layer *layers;
    float *rope_inv_freq;             /* head_dim/2, host: global layers */
    plume_tensor rope_t;              /* rope_inv_freq as an F32 vector */
    plume_bweight *rope_freq;         /* ... prepared */
    float *rope_local_inv_freq;       /* the same for sliding-window layers */
    plume_tensor rope_local_t;
    plume_bweight *rope_local_freq;
    float rope_attn_mult, rope_local_attn_mult; /* yarn's attention_factor^2, else 1 */
    bool rope_freq_factors;           /* GGUF rope_freqs.weight divided inv_freq (Llama 3.1) */
    float embed_scale;                /* 0: none, else embeddings x this (Gemma 3) */
    /* host copies of vectors changed at load ((1 + w) norms), freed last */
    float **owned;
    int n_owned, cap_owned;
    int64_t n_params;
    int64_t weight_bytes;
    /* of those, the mixture-of-experts layers' experts (all of them) */
    int64_t expert_params, expert_bytes;
    /* of those, the bytes of a token-embedding table separate from the
     * head that a decode step does not read (all rows but one); 0 when the
     * head is the embedding and reads it whole */
    int64_t embd_unread_bytes;
    /* a quantized checkpoint: its method ("gptq") and settings, else "" / NULL */
    char quant_method[32];
    plume_settings *quant;
    plume_registry *own_reg;      /* the registry the model loaded plugins into itself */
    int n_plugin_linears;         /* layers run by a plugin's method */
};

/* A dummy checkpoint's matrix t prepared on the model's backend: filled
 * where it lives by the backend's weight_fill when it has one, else made
 * in host memory and prepared (model_load.c). */
int plume_model_dummy_prepare(plume_model *m, const plume_tensor *t, plume_bweight **out,
                              plume_error *err);

/* Loads layer l's mixture-of-experts MLP into L->moe (moe_load.c): the
 * router and every expert's gate, up and down, shape- and type-checked,
 * counted in m->n_params and m->weight_bytes; errors name the tensor. */
int plume_moe_load(plume_model *m, int l, plume_layer *L, plume_error *err);

/* Frees L->moe (NULL: nothing) and sets it NULL. */
void plume_moe_free(plume_layer *L);

/* Fills cfg from GGUF metadata (keys prefixed by general.architecture). */
int plume_config_from_gguf(const gguf_file *f, plume_model_config *cfg, plume_error *err);

#endif
