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
    PLUME_ARCH_QWEN3 = 2, /* Llama + per-head RMSNorm of q and k before RoPE */
    PLUME_ARCH_GEMMA3 = 3, /* Gemma 3 text: see plume_model_config's gemma fields */
    PLUME_ARCH_QWEN3MOE = 4, /* Qwen3 attention, mixture-of-experts MLP */
    PLUME_ARCH_OLMOE = 5,    /* q/k RMSNorm over the whole projection, MoE MLP */
    PLUME_ARCH_QWEN2MOE = 6, /* Qwen2 attention (q/k/v bias), MoE MLP with a shared expert */
    PLUME_ARCH_GPT_OSS = 7,  /* q/k/v/o bias, attention sinks, biased router and experts with
                                the clamped SwiGLU (see plume_model_config's gpt-oss fields) */
} plume_arch;
/* Mixtral is PLUME_ARCH_LLAMA with n_expert > 0. */

/* Experts per layer above this are refused (the router's host scratch). */
#define PLUME_MAX_EXPERTS 1024

/* RoPE frequency scalings, each exactly as transformers'
 * modeling_rope_utils.py computes inv_freq (docs/models.md). */
typedef enum plume_rope_scaling {
    PLUME_ROPE_SCALING_NONE = 0,
    PLUME_ROPE_SCALING_LINEAR,  /* inv_freq / factor */
    PLUME_ROPE_SCALING_DYNAMIC, /* NTK base, fixed at factor x max_position (see rope_freqs.c) */
    PLUME_ROPE_SCALING_YARN,    /* ramped inter/extrapolation + attention factor */
    PLUME_ROPE_SCALING_LLAMA3,  /* Llama 3.1 low/high frequency bands */
} plume_rope_scaling;

/* One RoPE: base and scaling.  Fields a type does not use stay 0. */
typedef struct plume_rope_cfg {
    plume_rope_scaling type;
    float theta;
    float factor;
    int32_t orig_ctx;                 /* original_max_position_embeddings (yarn, llama3) */
    float low_freq_factor, high_freq_factor; /* llama3 */
    float beta_fast, beta_slow;       /* yarn (defaults 32, 1) */
    float attn_factor;                /* yarn: the factor on cos/sin; 0 = derived from factor */
    float mscale, mscale_all_dim;     /* yarn, DeepSeek style; 0 = unset */
    bool truncate;                    /* yarn: floor/ceil the correction range (default true) */
} plume_rope_cfg;

typedef enum plume_ffn_act {
    PLUME_FFN_SILU = 0,      /* silu(gate) * up */
    PLUME_FFN_GELU_TANH = 1, /* gelu_pytorch_tanh(gate) * up (Gemma) */
} plume_ffn_act;

/* Sliding-window layers above this count are refused (the per-layer table
 * is a fixed array). */
#define PLUME_MAX_LAYERS 1024

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
    /* RoPE of full-attention layers (rope.theta == rope_theta), and of
     * sliding-window layers (Gemma 3's local base; else equal to rope) */
    plume_rope_cfg rope;
    plume_rope_cfg rope_local;
    /* sliding window: layers l with swa_layer[l] attend to the last
     * sliding_window positions (row p: p-window+1 .. p); 0 = none */
    int32_t sliding_window;
    uint8_t swa_layer[PLUME_MAX_LAYERS];
    /* SmolLM3: layers l with nope_layer[l] apply no RoPE to q and k (HF
     * no_rope_layers[l] == 0; llama.cpp: every 4th layer) */
    uint8_t nope_layer[PLUME_MAX_LAYERS];
    /* Qwen3, Gemma 3: RMSNorm over each head of q and k before RoPE */
    bool qk_norm;
    /* Gemma 3 */
    bool norm_plus_one;   /* RMSNorm weights are stored as w - 1 (HF): add 1 at load */
    bool post_norms;      /* RMSNorm of the attention and MLP outputs before the residual add */
    plume_ffn_act ffn_act;
    float embed_scale;    /* 0: none; else embeddings x this */
    float attn_scale;     /* 0: 1/sqrt(head_dim); else the softmax scale */
    float final_softcap;  /* 0: none; else logits = cap * tanh(logits / cap) */
    /* OLMoE: RMSNorm over the whole q and k projections (weights of
     * n_head * head_dim and n_head_kv * head_dim) before RoPE */
    bool qk_norm_full;
    /* Mixture of experts (n_expert > 0): each MoE layer's router picks
     * n_expert_used of n_expert SwiGLU experts (intermediate n_ff_exp) per
     * token by softmax over the router logits, then top-k; with
     * moe_norm_topk the k probabilities are renormalized to sum 1 (Mixtral,
     * Qwen3-MoE's norm_topk_prob), else used as they are (OLMoE).  Layers
     * with dense_layer[l] set run the dense MLP of n_ff instead (Qwen3-MoE's
     * mlp_only_layers / decoder_sparse_step). */
    int32_t n_expert;
    int32_t n_expert_used;
    int32_t n_ff_exp;
    bool moe_norm_topk;
    /* Qwen2-MoE: every MoE layer also runs a shared SwiGLU expert of this
     * intermediate size on every token, its output scaled by sigmoid of a
     * one-output linear (shared_expert_gate); 0: none */
    int32_t n_ff_shexp;
    uint8_t dense_layer[PLUME_MAX_LAYERS];
    /* gpt-oss (transformers' modeling_gpt_oss.py, llama.cpp's openai-moe.cpp):
     * a per-head learned sink logit in every attention softmax
     * (self_attn.sinks, GGUF blk.N.attn_sinks.weight); the router and
     * every expert's gate, up and down have biases; the experts' activation
     * is the clamped SwiGLU g·sigmoid(alpha·g)·(u + 1) with g = min(gate,
     * limit), u = clamp(up, ±limit) (backend op swiglu_oai).  The router's
     * top-k then softmax over the k is moe_norm_topk's computation. */
    bool attn_sinks;
    bool moe_bias;
    bool swiglu_oai;
    float swiglu_alpha, swiglu_limit;
} plume_model_config;

/* True when layer l of cfg is a mixture-of-experts layer. */
static inline bool plume_config_layer_moe(const plume_model_config *cfg, int l)
{
    return cfg->n_expert > 0 && !(l < PLUME_MAX_LAYERS && cfg->dense_layer[l]);
}

/* The number of cfg's layers without RoPE (SmolLM3); *every4 tells whether
 * they are exactly every 4th layer, the only pattern a GGUF (llama.cpp's
 * smollm3) can express. */
int plume_config_nope_layers(const plume_model_config *cfg, bool *every4);

/* The window of layer l: cfg->sliding_window when the layer slides, else 0. */
int32_t plume_config_layer_window(const plume_model_config *cfg, int l);

/* Fills inv_freq[0 .. head_dim/2) for rope r, and *attn_mult, the factor
 * the attention logits get from it (yarn: attention_factor^2, else 1).
 * Exactly transformers' _compute_*_parameters (float32 arithmetic there;
 * here double, rounded once).  n_ctx_train: max_position_embeddings. */
void plume_rope_inv_freq(const plume_rope_cfg *r, int32_t head_dim, int32_t n_ctx_train,
                         float *inv_freq, float *attn_mult);

/* "none", "linear", "dynamic", "yarn", "llama3". */
const char *plume_rope_scaling_name(plume_rope_scaling t);

/* Checks one RoPE's fields (factor >= 1 where used, orig_ctx, betas);
 * what names the field's source in errors. */
int plume_rope_cfg_validate(const plume_rope_cfg *r, const char *what, plume_error *err);

/* Parses an HF config.json (architectures / model_type, hidden_size, ...).
 * Unknown architectures are "unsupported architecture X". */
int plume_config_from_hf_json(const char *path, plume_model_config *cfg, plume_error *err);

/* llama.cpp's GGUF architecture name for a family (the name the GGUF
 * reader accepts for it: "llama" for Llama, Mistral and Mixtral), or NULL
 * for one GGUF cannot name. */
const char *plume_config_gguf_arch(plume_arch arch);

/* Checks sizes for consistency (head_dim * n_head, n_head % n_head_kv, ...). */
int plume_config_validate(const plume_model_config *cfg, plume_error *err);

#endif
