/* The type of each tensor in a GGUF quantization preset ("Q4_K_M", ...),
 * as llama.cpp's llama-quantize chooses it without an importance matrix
 * (src/llama-quant.cpp llama_tensor_get_type; docs/quantization.md lists
 * the rules). */
#ifndef PLUME_GGUF_MIX_H
#define PLUME_GGUF_MIX_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/quantize_gguf.h"

typedef struct gguf_mix {
    const char *name;      /* "Q4_K_M" */
    uint32_t base;         /* default ggml type of the quantized tensors */
    uint32_t file_type;    /* general.file_type (llama_ftype) */
} gguf_mix;

/* The preset called name (case-insensitive), NULL when unknown. */
const gguf_mix *gguf_mix_find(const char *name);
/* plume_gguf_mix_names and plume_gguf_mix_known (the public side) are
 * declared in plume/quantize_gguf.h. */

/* What the rules need to know about the model. */
typedef struct gguf_mix_model {
    int n_layer;
    int n_gqa;   /* n_head / n_head_kv */
    bool tied;   /* no output.weight: token_embd is also the head */
    int n_expert; /* <arch>.expert_count (0: a dense model) */
} gguf_mix_model;

/* Why a tensor got its type. */
typedef struct gguf_mix_choice {
    uint32_t type;
    uint32_t wanted;       /* the rule's type before the shape fallback */
    bool quantized;        /* false: kept in float (1-D, norms) */
} gguf_mix_choice;

/* The type of the GGUF tensor `name` (n_dims, ne in ggml order) under mix:
 * 1-D tensors and norms stay F32; the head (or the tied embedding) gets
 * Q6_K (Q8_0 in Q8_0 files, and when its rows do not fit 256-blocks);
 * attn_v / ffn_down / attn_output get the preset's extra bits by layer;
 * a type whose block does not divide the row length falls back as
 * llama-quantize does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL; F16 when even that does not fit).
 * Mixtures of experts: the router (ffn_gate_inp) stays in float, 3-D
 * expert tensors (ffn_{gate,up,down}_exps) follow the ffn_* rules of their
 * layer, and with 8 experts attn_k / attn_v get Q8_0 and attn_output Q5_K
 * in the K/IQ4 presets, as llama-quantize does.  MXFP4_MOE: 3-D expert
 * tensors MXFP4, every other quantized tensor Q8_0. */
gguf_mix_choice gguf_mix_tensor_type(const gguf_mix *mix, const gguf_mix_model *m,
                                     const char *name, int n_dims, const int64_t *ne);

#endif
