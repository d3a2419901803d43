/* GGUF quantization presets and llama-quantize's per-tensor rules (without
 * an importance matrix), learned from llama.cpp src/llama-quant.cpp
 * (llama_tensor_get_type_impl, tensor_type_fallback): see gguf_mix.h and
 * docs/quantization.md. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "plume/tensor.h"
#include "quant/gguf_mix.h"
#include "quant/gguf_quant.h"

static const gguf_mix MIXES[] = {
    {"Q4_0", GQ_Q4_0, 2},     {"Q4_1", GQ_Q4_1, 3},     {"Q8_0", GQ_Q8_0, 7},
    {"Q5_0", GQ_Q5_0, 8},     {"Q5_1", GQ_Q5_1, 9},     {"Q2_K", GQ_Q2_K, 10},
    {"Q3_K_M", GQ_Q3_K, 12},  {"Q4_K_S", GQ_Q4_K, 14},  {"Q4_K_M", GQ_Q4_K, 15},
    {"Q5_K_S", GQ_Q5_K, 16},  {"Q5_K_M", GQ_Q5_K, 17},  {"Q6_K", GQ_Q6_K, 18},
    {"IQ4_NL", GQ_IQ4_NL, 25}, {"IQ4_XS", GQ_IQ4_XS, 30}, {"MXFP4_MOE", GQ_MXFP4, 38},
};
#define N_MIXES (sizeof MIXES / sizeof MIXES[0])

const gguf_mix *gguf_mix_find(const char *name)
{
    for (size_t i = 0; i < N_MIXES; i++)
        if (strcasecmp(MIXES[i].name, name) == 0)
            return &MIXES[i];
    return NULL;
}

const char *plume_gguf_mix_names(void)
{
    return "Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q3_K_M, Q2_K, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0, "
           "Q5_1, IQ4_NL, IQ4_XS, MXFP4_MOE";
}

static bool ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* llama-quant.cpp use_more_bits: the first and last eighth of the layers
 * and every third one in between. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool is_mix(const gguf_mix *m, const char *name) { return strcmp(m->name, name) == 0; }

/* The type the preset's rules give a quantized tensor of layer `layer`
 * (the counters llama-quantize keeps equal the layer index, as its loader
 * visits tensors by layer). */
static uint32_t rule_type(const gguf_mix *mix, const gguf_mix_model *m, const char *name,
                          int layer, int64_t ne0)
{
    uint32_t t = mix->base;
    const int n = m->n_layer;
    bool head = strcmp(name, "output.weight") == 0 ||
                (m->tied && strcmp(name, "token_embd.weight") == 0);
    if (head) {
        if (ne0 % (int64_t)plume_dtype_block_elems(t) != 0)
            return GQ_Q8_0;
        return t == GQ_Q8_0 ? GQ_Q8_0 : GQ_Q6_K;
    }
    if (strcmp(name, "token_embd.weight") == 0)
        return t;
    const bool moe8 = m->n_expert == 8; /* llama-quant.cpp: "the 8-expert model" */
    if (strstr(name, "attn_k.weight") && moe8)
        return GQ_Q8_0;
    if (strstr(name, "attn_v.weight")) {
        if (moe8)
            return GQ_Q8_0;
        if (is_mix(mix, "Q2_K"))
            return m->n_gqa >= 4 ? GQ_Q4_K : GQ_Q3_K;
        if (is_mix(mix, "Q3_K_M"))
            return layer < 2 ? GQ_Q5_K : GQ_Q4_K;
        if ((is_mix(mix, "IQ4_NL") || is_mix(mix, "IQ4_XS")) && m->n_gqa >= 4)
            return GQ_Q5_K;
        if ((is_mix(mix, "Q4_K_M") || is_mix(mix, "Q5_K_M")) && more_bits(layer, n))
            return GQ_Q6_K;
        if (is_mix(mix, "Q4_K_S") && layer < 4)
            return GQ_Q5_K;
        return t;
    }
    if (strstr(name, "ffn_down")) {
        if (is_mix(mix, "Q2_K"))
            return GQ_Q3_K;
        if (is_mix(mix, "Q3_K_M"))
            return layer < n / 16 ? GQ_Q5_K : GQ_Q4_K; /* non-Falcon: Q4_K */
        if (is_mix(mix, "Q4_K_M"))
            return more_bits(layer, n) ? GQ_Q6_K : t;
        if (layer < n / 8 && (is_mix(mix, "IQ4_NL") || is_mix(mix, "IQ4_XS")))
            return GQ_Q5_K; /* without an importance matrix */
        if (is_mix(mix, "Q5_K_M") && more_bits(layer, n))
            return GQ_Q6_K;
        if (is_mix(mix, "Q4_K_S") && layer < n / 8)
            return GQ_Q5_K;
        return t;
    }
    if (strstr(name, "attn_output.weight")) {
        if (moe8)
            return is_mix(mix, "Q2_K") || is_mix(mix, "Q3_K_M") || is_mix(mix, "IQ4_NL") ||
                           is_mix(mix, "Q4_K_S") || is_mix(mix, "Q4_K_M") ||
                           is_mix(mix, "IQ4_XS")
                       ? GQ_Q5_K
                       : t;
        if (is_mix(mix, "Q2_K"))
            return GQ_Q3_K;
        if (is_mix(mix, "Q3_K_M"))
            return GQ_Q4_K;
        return t;
    }
    return t;
}

/* llama-quant.cpp tensor_type_fallback. */
static uint32_t fallback(uint32_t t, int64_t ne0)
{
    if (ne0 % (int64_t)plume_dtype_block_elems(t) == 0)
        return t;
    uint32_t f;
    switch (t) {
    case GQ_IQ4_XS: f = GQ_IQ4_NL; break;
    case GQ_Q2_K: case GQ_Q3_K: f = GQ_Q4_0; break;
    case GQ_Q4_K: f = GQ_Q5_0; break;
    case GQ_Q5_K: f = GQ_Q5_1; break;
    case GQ_Q6_K: f = GQ_Q8_0; break;
    default: f = GQ_F16; break;
    }
    return ne0 % (int64_t)plume_dtype_block_elems(f) == 0 ? f : GQ_F16;
}

gguf_mix_choice gguf_mix_tensor_type(const gguf_mix *mix, const gguf_mix_model *m,
                                     const char *name, int n_dims, const int64_t *ne)
{
    gguf_mix_choice c = {GQ_F32, GQ_F32, false};
    /* llama-quant.cpp tensor_allows_quantization: 2-D+ "*weight", not norms,
     * not the experts' router */
    if (n_dims < 2 || !ends_with(name, "weight") || strstr(name, "_norm.weight") ||
        strstr(name, "ffn_gate_inp.weight"))
        return c;
    int layer = 0;
    sscanf(name, "blk.%d.", &layer);
    c.quantized = true;
    /* llama-quant.cpp MXFP4_MOE: the 3-D expert tensors MXFP4, every other
     * quantized tensor (the head included) Q8_0 */
    if (is_mix(mix, "MXFP4_MOE"))
        c.wanted = n_dims >= 3 && ne[2] > 1 ? GQ_MXFP4 : GQ_Q8_0;
    else
        c.wanted = rule_type(mix, m, name, layer, ne[0]);
    c.type = fallback(c.wanted, ne[0]);
    return c;
}

bool plume_gguf_mix_known(const char *name) { return name && gguf_mix_find(name) != NULL; }
