/* HF config.json -> plume_model_config, and consistency checks on a config.
 * Supported: llama (LlamaForCausalLM), mistral (MistralForCausalLM, run as
 * llama), qwen2 (Qwen2ForCausalLM: llama with q/k/v bias), qwen3
 * (Qwen3ForCausalLM: q/k norms), gemma3_text (Gemma3ForCausalLM) and the
 * mixtures of experts mixtral (MixtralForCausalLM), qwen3_moe
 * (Qwen3MoeForCausalLM), qwen2_moe (Qwen2MoeForCausalLM: a shared expert)
 * olmoe (OlmoeForCausalLM) and gpt_oss (GptOssForCausalLM: attention sinks,
 * biased router and experts, clamped SwiGLU); RoPE
 * scalings default/linear/dynamic/yarn/llama3; sliding windows. */
#include "model/config.h"

#include "formats/json_file.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hf_arch {
    const char *model_type;   /* config.json "model_type" */
    const char *architecture; /* config.json "architectures"[0] */
    plume_arch arch;
    bool qkv_bias; /* default when the config has no attention_bias */
} hf_arch;

static const hf_arch hf_archs[] = {
    {"llama", "LlamaForCausalLM", PLUME_ARCH_LLAMA, false},
    {"mistral", "MistralForCausalLM", PLUME_ARCH_LLAMA, false},
    {"smollm3", "SmolLM3ForCausalLM", PLUME_ARCH_LLAMA, false},
    {"qwen2", "Qwen2ForCausalLM", PLUME_ARCH_QWEN2, true},
    {"qwen3", "Qwen3ForCausalLM", PLUME_ARCH_QWEN3, false},
    {"gemma3_text", "Gemma3ForCausalLM", PLUME_ARCH_GEMMA3, false},
    {"mixtral", "MixtralForCausalLM", PLUME_ARCH_LLAMA, false},
    {"qwen3_moe", "Qwen3MoeForCausalLM", PLUME_ARCH_QWEN3MOE, false},
    {"olmoe", "OlmoeForCausalLM", PLUME_ARCH_OLMOE, false},
    {"qwen2_moe", "Qwen2MoeForCausalLM", PLUME_ARCH_QWEN2MOE, true},
    {"gpt_oss", "GptOssForCausalLM", PLUME_ARCH_GPT_OSS, true},
};

/* Mixture-of-experts families plume does not run, by model_type and
 * architecture, for hf_refused's message. */
#define MOE_NOT_YET                                                                                \
    "this mixture-of-experts family is not supported (supported MoE families: mixtral, "          \
    "qwen3_moe, qwen2_moe, olmoe, gpt_oss)"


/* Families refused by name, with the reason. */
static const struct {
    const char *name;
    const char *why;
} hf_refused[] = {
    {"deepseek_v2", MOE_NOT_YET},        {"DeepseekV2ForCausalLM", MOE_NOT_YET},
    {"deepseek_v3", MOE_NOT_YET},        {"DeepseekV3ForCausalLM", MOE_NOT_YET},
    {"dbrx", MOE_NOT_YET},               {"DbrxForCausalLM", MOE_NOT_YET},
    {"phimoe", MOE_NOT_YET},             {"PhimoeForCausalLM", MOE_NOT_YET},
    {"granitemoe", MOE_NOT_YET},         {"GraniteMoeForCausalLM", MOE_NOT_YET},
    {"jetmoe", MOE_NOT_YET},             {"JetMoeForCausalLM", MOE_NOT_YET},
    {"jamba", MOE_NOT_YET},              {"JambaForCausalLM", MOE_NOT_YET},
    {"glm4_moe", MOE_NOT_YET},           {"Glm4MoeForCausalLM", MOE_NOT_YET},
    {"llama4", MOE_NOT_YET},             {"Llama4ForConditionalGeneration", MOE_NOT_YET},
    {"gemma3", "the multimodal Gemma 3 (Gemma3ForConditionalGeneration) is not supported; the "
               "text-only Gemma3ForCausalLM (model_type gemma3_text) is"},
    {"Gemma3ForConditionalGeneration",
     "the multimodal Gemma 3 is not supported; the text-only Gemma3ForCausalLM (gemma3_text) is"},
};

/* A field that is absent or JSON null counts as missing. */
static json_t *hf_get(json_t *root, const char *key)
{
    json_t *v = json_object_get(root, key);
    return json_is_null(v) ? NULL : v;
}

/* Finds the architecture from model_type (preferred) or architectures[0]. */
static int hf_pick_arch(const char *path, json_t *root, const hf_arch **out, plume_error *err)
{
    json_t *mt = hf_get(root, "model_type");
    json_t *archs = hf_get(root, "architectures");
    json_t *a0 = json_is_array(archs) ? json_array_get(archs, 0) : NULL;
    const char *name = NULL;
    bool by_type = false;
    if (json_is_string(mt)) {
        name = json_string_value(mt);
        by_type = true;
    } else if (json_is_string(a0)) {
        name = json_string_value(a0);
    } else {
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: missing required field 'model_type' (or 'architectures')", path);
    }
    for (size_t i = 0; i < sizeof hf_refused / sizeof hf_refused[0]; i++)
        if (strcmp(name, hf_refused[i].name) == 0)
            return plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: architecture %s: %s", path, name,
                             hf_refused[i].why);
    for (size_t i = 0; i < sizeof hf_archs / sizeof hf_archs[0]; i++) {
        if (strcmp(name, by_type ? hf_archs[i].model_type : hf_archs[i].architecture) == 0) {
            *out = &hf_archs[i];
            return 0;
        }
    }
    return plume_err(err, PLUME_ERR_UNSUPPORTED,
                     "%s: unsupported architecture %s (supported: llama, mistral, qwen2, qwen3, "
                     "gemma3_text, mixtral, qwen3_moe, qwen2_moe, olmoe, gpt_oss)",
                     path, name);
}

/* Reads a non-negative integer field that fits int32.  A missing field is
 * an error when `def` < 0, otherwise gives `def`. */
static int hf_int(const char *path, json_t *root, const char *key, int64_t def, int32_t *out,
                  plume_error *err)
{
    json_t *v = hf_get(root, key);
    if (!v) {
        if (def < 0)
            return plume_err(err, PLUME_ERR_FORMAT, "%s: missing required field '%s'", path, key);
        *out = (int32_t)def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: field '%s' must be an integer in [0, %d]", path, key, INT32_MAX);
    *out = (int32_t)json_integer_value(v);
    return 0;
}

/* Reads a numeric field (integer or real) as float; a missing one gives def. */
static int hf_float(const char *path, json_t *root, const char *key, double def, float *out,
                    plume_error *err)
{
    json_t *v = hf_get(root, key);
    if (v && !json_is_number(v))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: field '%s' must be a number", path, key);
    *out = v ? (float)json_number_value(v) : (float)def;
    return 0;
}

/* Reads a boolean field; a missing one gives def. */
static int hf_bool(const char *path, json_t *root, const char *key, bool def, bool *out,
                   plume_error *err)
{
    json_t *v = hf_get(root, key);
    if (v && !json_is_boolean(v))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: field '%s' must be true or false", path, key);
    *out = v ? json_is_true(v) : def;
    return 0;
}

/* Reads the RoPE of one rope_parameters / rope_scaling object (NULL: none)
 * into r, exactly as transformers' standardize_rope_params fills its
 * defaults.  theta: the rope_theta to use when the object has none. */
static int hf_rope_obj(const char *path, json_t *root, json_t *rs, const char *what, double theta,
                       int32_t n_ctx, plume_rope_cfg *r, plume_error *err)
{
    memset(r, 0, sizeof *r);
    r->truncate = true;
    if (rs && !json_is_object(rs))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: %s must be an object", path, what);
    if (hf_float(path, rs && hf_get(rs, "rope_theta") ? rs : root, "rope_theta", theta, &r->theta,
                 err))
        return -1;
    if (!rs)
        return 0;
    json_t *t = hf_get(rs, "rope_type");
    if (!t)
        t = hf_get(rs, "type");
    if (t && !json_is_string(t))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: %s.rope_type must be a string", path, what);
    const char *type = t ? json_string_value(t) : "default";
    static const struct {
        const char *name;
        plume_rope_scaling type;
    } types[] = {
        {"default", PLUME_ROPE_SCALING_NONE},   {"linear", PLUME_ROPE_SCALING_LINEAR},
        {"dynamic", PLUME_ROPE_SCALING_DYNAMIC}, {"yarn", PLUME_ROPE_SCALING_YARN},
        {"llama3", PLUME_ROPE_SCALING_LLAMA3},
    };
    size_t i = 0;
    while (i < sizeof types / sizeof types[0] && strcmp(types[i].name, type) != 0)
        i++;
    if (i == sizeof types / sizeof types[0])
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: %s rope_type '%.64s' is not supported (supported: default, "
                         "linear, dynamic, yarn, llama3; longrope and su are not)",
                         path, what, type);
    r->type = types[i].type;
    json_t *prf = hf_get(rs, "partial_rotary_factor");
    if (prf && (!json_is_number(prf) || json_number_value(prf) != 1.0))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: %s partial_rotary_factor != 1 (partial rotary embeddings) is not "
                         "supported",
                         path, what);
    if (r->type == PLUME_ROPE_SCALING_NONE)
        return 0;
    /* original_max_position_embeddings: the object's, else the top level's
     * (Phi-3 style), else max_position_embeddings */
    int32_t orig;
    if (hf_int(path, root, "original_max_position_embeddings", n_ctx, &orig, err) ||
        hf_int(path, rs, "original_max_position_embeddings", orig, &r->orig_ctx, err))
        return -1;
    if (r->type == PLUME_ROPE_SCALING_YARN && !hf_get(rs, "factor"))
        r->factor = (float)((double)n_ctx / (r->orig_ctx > 0 ? r->orig_ctx : 1)); /* its default */
    else if (hf_float(path, rs, "factor", -1.0, &r->factor, err))
        return -1;
    if (hf_float(path, rs, "low_freq_factor", 0.0, &r->low_freq_factor, err) ||
        hf_float(path, rs, "high_freq_factor", 0.0, &r->high_freq_factor, err) ||
        hf_float(path, rs, "beta_fast", 32.0, &r->beta_fast, err) ||
        hf_float(path, rs, "beta_slow", 1.0, &r->beta_slow, err) ||
        hf_float(path, rs, "attention_factor", 0.0, &r->attn_factor, err) ||
        hf_float(path, rs, "mscale", 0.0, &r->mscale, err) ||
        hf_float(path, rs, "mscale_all_dim", 0.0, &r->mscale_all_dim, err))
        return -1;
    json_t *tr = hf_get(rs, "truncate");
    if (tr && !json_is_boolean(tr))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: %s.truncate must be true or false", path,
                         what);
    r->truncate = !tr || json_is_true(tr);
    if (r->beta_fast == 0)
        r->beta_fast = 32; /* transformers: `get("beta_fast") or 32` */
    if (r->beta_slow == 0)
        r->beta_slow = 1;
    if (plume_rope_cfg_validate(r, what, err))
        return plume_err_prefix(err, "%s", path);
    return 0;
}

/* Fills cfg->rope (and rope_local) from transformers-5 rope_parameters or
 * the older rope_scaling + rope_theta.  Gemma 3: full_attention /
 * sliding_attention sub-objects (or, in older configs, rope_scaling for
 * the global layers and rope_local_base_freq for the local ones). */
static int hf_rope(const char *path, json_t *root, plume_model_config *cfg, plume_error *err)
{
    const bool gemma = cfg->arch == PLUME_ARCH_GEMMA3;
    const bool gpt_oss = cfg->arch == PLUME_ARCH_GPT_OSS;
    json_t *rp = hf_get(root, "rope_parameters"), *rs = hf_get(root, "rope_scaling");
    if (rp && !json_is_object(rp))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: rope_parameters must be an object", path);
    /* GptOssConfig: default_theta 150000 and, without rope_parameters, yarn
     * (configuration_gpt_oss.py's __post_init__) */
    double theta = gemma ? 1000000.0 : gpt_oss ? 150000.0 : 10000.0;
    if (gpt_oss && !rp && !rs) {
        json_t *d = json_pack("{s:s, s:f, s:f, s:f, s:b, s:i}", "rope_type", "yarn", "factor", 32.0,
                              "beta_fast", 32.0, "beta_slow", 1.0, "truncate", 0,
                              "original_max_position_embeddings", 4096);
        if (!d)
            return plume_err(err, PLUME_ERR_NOMEM, "%s: out of memory", path);
        int rc = hf_rope_obj(path, root, d, "rope_parameters (GptOssConfig's default)", theta,
                             cfg->n_ctx_train, &cfg->rope, err);
        json_decref(d);
        cfg->rope_local = cfg->rope;
        cfg->rope_theta = cfg->rope.theta;
        return rc;
    }
    if (gemma && rp && (hf_get(rp, "full_attention") || hf_get(rp, "sliding_attention"))) {
        float local_theta = 0;
        if (hf_float(path, root, "rope_local_base_freq", 10000.0, &local_theta, err) ||
            hf_rope_obj(path, root, hf_get(rp, "full_attention"),
                        "rope_parameters.full_attention", theta, cfg->n_ctx_train, &cfg->rope,
                        err) ||
            hf_rope_obj(path, root, hf_get(rp, "sliding_attention"),
                        "rope_parameters.sliding_attention", local_theta, cfg->n_ctx_train,
                        &cfg->rope_local, err))
            return -1;
    } else {
        /* rope_scaling wins over rope_parameters, as in convert_rope_params_to_dict */
        json_t *obj = rs ? rs : rp;
        if (hf_rope_obj(path, root, obj, rs ? "rope_scaling" : "rope_parameters", theta,
                        cfg->n_ctx_train, &cfg->rope, err))
            return -1;
        if (!hf_get(root, "rope_theta") && rs && rp && hf_get(rp, "rope_theta") &&
            hf_float(path, rp, "rope_theta", theta, &cfg->rope.theta, err))
            return -1;
        cfg->rope_local = cfg->rope;
        if (gemma) {
            memset(&cfg->rope_local, 0, sizeof cfg->rope_local);
            if (hf_float(path, root, "rope_local_base_freq", 10000.0, &cfg->rope_local.theta, err))
                return -1;
        }
    }
    cfg->rope_theta = cfg->rope.theta;
    return 0;
}

/* Marks the sliding-window layers: config.json's layer_types when present,
 * else each family's rule (transformers' config classes): Mistral all
 * layers when sliding_window is set; Qwen2/Qwen3 layers >= max_window_layers
 * when use_sliding_window; Gemma 3 all but every sliding_window_pattern-th. */
static int hf_windows(const char *path, json_t *root, const char *model_type,
                      plume_model_config *cfg, plume_error *err)
{
    const bool qwen = cfg->arch == PLUME_ARCH_QWEN2 || cfg->arch == PLUME_ARCH_QWEN3 ||
                      cfg->arch == PLUME_ARCH_QWEN3MOE || cfg->arch == PLUME_ARCH_QWEN2MOE;
    const bool mistral = strcmp(model_type, "mistral") == 0 || strcmp(model_type, "mixtral") == 0;
    const bool gpt_oss = cfg->arch == PLUME_ARCH_GPT_OSS;
    /* Gemma 3 and gpt-oss alternate windowed and full layers by a period */
    const bool gemma = cfg->arch == PLUME_ARCH_GEMMA3 || gpt_oss;
    if (!qwen && !mistral && !gemma)
        return 0; /* Llama has no sliding window (its config ignores the field) */
    bool use = true;
    if (qwen && hf_bool(path, root, "use_sliding_window", false, &use, err))
        return -1;
    if (!use)
        return 0;
    if (hf_int(path, root, "sliding_window", gpt_oss ? 128 : gemma ? 4096 : 0,
               &cfg->sliding_window, err))
        return -1;
    if (cfg->sliding_window == 0)
        return 0;
    if (cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: sliding-window models with more than %d layers are not supported",
                         path, PLUME_MAX_LAYERS);
    json_t *lt = hf_get(root, "layer_types");
    if (lt) {
        if (!json_is_array(lt) || (int64_t)json_array_size(lt) != cfg->n_layer)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: layer_types must be a list of num_hidden_layers (%d) strings",
                             path, cfg->n_layer);
        for (int l = 0; l < cfg->n_layer; l++) {
            const char *t = json_string_value(json_array_get(lt, (size_t)l));
            if (t && strcmp(t, "sliding_attention") == 0)
                cfg->swa_layer[l] = 1;
            else if (!t || strcmp(t, "full_attention") != 0)
                return plume_err(err, PLUME_ERR_UNSUPPORTED,
                                 "%s: layer_types[%d] is '%.64s'; only full_attention and "
                                 "sliding_attention are supported",
                                 path, l, t ? t : "(not a string)");
        }
        return 0;
    }
    int32_t from = 0, period = 0;
    /* Qwen3-MoE slides on every layer (its config has no max_window_layers) */
    if (qwen && cfg->arch != PLUME_ARCH_QWEN3MOE &&
        hf_int(path, root, "max_window_layers", 28, &from, err))
        return -1;
    if (gpt_oss) /* GptOssConfig: "sliding_attention" if (i + 1) % 2 else "full_attention" */
        period = 2;
    else if (gemma && hf_int(path, root, "sliding_window_pattern", 6, &period, err))
        return -1;
    for (int l = 0; l < cfg->n_layer; l++)
        cfg->swa_layer[l] = gemma ? (period == 0 || (l + 1) % period != 0) : l >= from;
    return 0;
}

/* Rejects settings that would change the computation in ways plume does not
 * implement: a wrong activation, llama's mlp_bias, Gemma's attention
 * soft-capping and bidirectional attention.  (quantization_config is read
 * by hf_quant_config.c.) */
static int hf_check_unsupported(const char *path, json_t *root, plume_arch arch, plume_error *err)
{
    const bool gemma = arch == PLUME_ARCH_GEMMA3;
    const char *act_key =
        gemma && hf_get(root, "hidden_activation") ? "hidden_activation" : "hidden_act";
    json_t *act = hf_get(root, act_key);
    const char *a = json_is_string(act) ? json_string_value(act) : NULL;
    bool ok = !act || (a && (gemma ? strcmp(a, "gelu_pytorch_tanh") == 0 ||
                                         strcmp(a, "gelu_tanh") == 0
                                   : strcmp(a, "silu") == 0));
    if (!ok)
        return plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: %s %.64s is not supported (only %s)",
                         path, act_key, a ? a : "(not a string)",
                         gemma ? "gelu_pytorch_tanh" : "silu");
    json_t *mlp_bias = hf_get(root, "mlp_bias");
    if (json_is_true(mlp_bias))
        return plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: mlp_bias true is not supported yet", path);
    json_t *asc = hf_get(root, "attn_logit_softcapping");
    if (asc && !(json_is_number(asc) && json_number_value(asc) == 0))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: attn_logit_softcapping (attention soft-capping, Gemma 2 style) is "
                         "not supported",
                         path);
    if (json_is_true(hf_get(root, "use_bidirectional_attention")))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: use_bidirectional_attention true (an embedding model) is not "
                         "supported",
                         path);
    return 0;
}

/* Gemma 3's own settings: (1 + w) norms, post norms, q/k norms, GELU,
 * embeddings x sqrt(hidden), query_pre_attn_scalar, final soft-capping. */
static int hf_gemma(const char *path, json_t *root, plume_model_config *cfg, plume_error *err)
{
    float qpas = 0, cap = 0;
    if (hf_float(path, root, "query_pre_attn_scalar", 256.0, &qpas, err) ||
        hf_float(path, root, "final_logit_softcapping", 0.0, &cap, err))
        return -1;
    if (!(qpas > 0) || !isfinite(qpas) || cap < 0 || !isfinite(cap))
        return plume_err(err, PLUME_ERR_RANGE,
                         "%s: query_pre_attn_scalar must be positive and "
                         "final_logit_softcapping non-negative",
                         path);
    cfg->qk_norm = true;
    cfg->norm_plus_one = true;
    cfg->post_norms = true;
    cfg->ffn_act = PLUME_FFN_GELU_TANH;
    /* HF casts the scale to the embedding dtype; model_load.c rounds it
     * once it knows that dtype */
    cfg->embed_scale = (float)sqrt((double)cfg->n_embd);
    cfg->attn_scale = (float)(1.0 / sqrt((double)qpas));
    cfg->final_softcap = cap;
    return 0;
}

/* gpt-oss's experts (GptOssConfig): num_local_experts (128),
 * num_experts_per_tok (4), each expert intermediate_size wide; the router's
 * top-k logits then softmax over them (GptOssTopKRouter: plume's
 * moe_norm_topk); biases everywhere; the clamped SwiGLU with swiglu_alpha
 * (1.702) and swiglu_limit (7.0), which older configs do not write. */
static int hf_gpt_oss(const char *path, json_t *root, plume_model_config *cfg, plume_error *err)
{
    if (hf_int(path, root, "num_local_experts", 128, &cfg->n_expert, err) ||
        hf_int(path, root, "num_experts_per_tok", 4, &cfg->n_expert_used, err) ||
        hf_float(path, root, "swiglu_alpha", 1.702, &cfg->swiglu_alpha, err) ||
        hf_float(path, root, "swiglu_limit", 7.0, &cfg->swiglu_limit, err))
        return -1;
    cfg->n_ff_exp = cfg->n_ff;
    cfg->moe_norm_topk = true;
    cfg->attn_sinks = cfg->moe_bias = cfg->swiglu_oai = true;
    return 0;
}

/* The mixture-of-experts fields of Mixtral (num_local_experts, always
 * renormalized), Qwen3-MoE (num_experts or num_local_experts, moe_intermediate_size,
 * norm_topk_prob, mlp_only_layers, decoder_sparse_step) and OLMoE
 * (num_experts, norm_topk_prob, no clip_qkv), with the config classes'
 * defaults. */
static int hf_moe(const char *path, json_t *root, const char *model_type, plume_model_config *cfg,
                  plume_error *err)
{
    if (cfg->arch == PLUME_ARCH_GPT_OSS) /* GptOssConfig's fields and defaults */
        return hf_gpt_oss(path, root, cfg, err);
    const bool mixtral = strcmp(model_type, "mixtral") == 0;
    const bool qwen2 = cfg->arch == PLUME_ARCH_QWEN2MOE;
    const bool qwen = cfg->arch == PLUME_ARCH_QWEN3MOE || qwen2;
    /* Qwen3-MoE's and OLMoE's config classes alias num_experts and
     * num_local_experts (attribute_map); transformers 5 saves Qwen3-MoE's as
     * num_local_experts, published checkpoints have num_experts. */
    const char *xkey = mixtral ? "num_local_experts" : "num_experts";
    if ((cfg->arch == PLUME_ARCH_QWEN3MOE || cfg->arch == PLUME_ARCH_OLMOE) &&
        !hf_get(root, xkey))
        xkey = "num_local_experts";
    if (hf_int(path, root, xkey,
               mixtral ? 8 : qwen2 ? 60 : qwen ? 128 : 64, &cfg->n_expert, err) ||
        hf_int(path, root, "num_experts_per_tok", mixtral ? 2 : qwen2 ? 4 : 8,
               &cfg->n_expert_used, err) ||
        hf_int(path, root, qwen ? "moe_intermediate_size" : "intermediate_size",
               qwen2 ? 1408 : qwen ? 768 : -1, &cfg->n_ff_exp, err) ||
        (qwen2 && hf_int(path, root, "shared_expert_intermediate_size", 5632, &cfg->n_ff_shexp,
                         err)) ||
        hf_bool(path, root, "norm_topk_prob", mixtral, &cfg->moe_norm_topk, err))
        return -1;
    if (mixtral)
        cfg->moe_norm_topk = true; /* MixtralTopKRouter always renormalizes */
    if (cfg->arch == PLUME_ARCH_OLMOE) {
        json_t *clip = hf_get(root, "clip_qkv");
        if (clip)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: clip_qkv (clamping q, k and v) is not supported; only OLMoE "
                             "configs with clip_qkv null run",
                             path);
        cfg->qk_norm_full = true;
    }
    if (!qwen)
        return 0;
    int32_t step = 1;
    if (hf_int(path, root, "decoder_sparse_step", 1, &step, err))
        return -1;
    if (cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: mixture-of-experts models with more than %d layers are not supported",
                         path, PLUME_MAX_LAYERS);
    json_t *only = hf_get(root, "mlp_only_layers");
    if (only && !json_is_array(only))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: mlp_only_layers must be a list of layer indices",
                         path);
    for (int l = 0; l < cfg->n_layer; l++)
        cfg->dense_layer[l] = cfg->n_expert == 0 || step <= 0 || (l + 1) % step != 0;
    for (size_t i = 0; only && i < json_array_size(only); i++) {
        json_t *v = json_array_get(only, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= cfg->n_layer)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: mlp_only_layers[%zu] is not a layer index in [0, %d)", path, i,
                             cfg->n_layer);
        cfg->dense_layer[json_integer_value(v)] = 1;
    }
    return 0;
}

/* SmolLM3's layers without RoPE: no_rope_layers (per layer, 1 = RoPE), else
 * every no_rope_layer_interval-th layer (default 4), as SmolLM3Config. */
static int hf_nope(const char *path, json_t *root, plume_model_config *cfg, plume_error *err)
{
    bool swa = false;
    if (hf_bool(path, root, "use_sliding_window", false, &swa, err))
        return -1;
    if (swa)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: SmolLM3 with use_sliding_window is not supported", path);
    if (cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: SmolLM3 models with more than %d layers are not supported", path,
                         PLUME_MAX_LAYERS);
    json_t *nr = hf_get(root, "no_rope_layers");
    if (nr) {
        if (!json_is_array(nr) || (int64_t)json_array_size(nr) != cfg->n_layer)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: no_rope_layers must be a list of num_hidden_layers (%d) 0/1 "
                             "flags",
                             path, cfg->n_layer);
        for (int l = 0; l < cfg->n_layer; l++) {
            json_t *v = json_array_get(nr, (size_t)l);
            if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1))
                return plume_err(err, PLUME_ERR_FORMAT,
                                 "%s: no_rope_layers[%d] is not 0 or 1", path, l);
            cfg->nope_layer[l] = json_integer_value(v) == 0;
        }
        return 0;
    }
    int32_t every = 4;
    if (hf_int(path, root, "no_rope_layer_interval", 4, &every, err))
        return -1;
    if (every < 1)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: no_rope_layer_interval must be >= 1", path);
    for (int l = 0; l < cfg->n_layer; l++)
        cfg->nope_layer[l] = (l + 1) % every == 0;
    return 0;
}

/* Fills cfg from a parsed config object; every error names path. */
static int hf_fill(const char *path, json_t *root, plume_model_config *cfg, plume_error *err)
{
    const hf_arch *arch = NULL;
    if (hf_pick_arch(path, root, &arch, err) || hf_check_unsupported(path, root, arch->arch, err))
        return -1;
    memset(cfg, 0, sizeof *cfg);
    cfg->arch = arch->arch;
    snprintf(cfg->arch_name, sizeof cfg->arch_name, "%s", arch->model_type);
    cfg->rope_style = PLUME_ROPE_HALF;
    const bool gemma = arch->arch == PLUME_ARCH_GEMMA3;
    if (hf_int(path, root, "vocab_size", -1, &cfg->n_vocab, err) ||
        hf_int(path, root, "hidden_size", -1, &cfg->n_embd, err) ||
        hf_int(path, root, "num_hidden_layers", -1, &cfg->n_layer, err) ||
        hf_int(path, root, "num_attention_heads", -1, &cfg->n_head, err) ||
        hf_int(path, root, "num_key_value_heads", cfg->n_head, &cfg->n_head_kv, err) ||
        hf_int(path, root, "intermediate_size", -1, &cfg->n_ff, err) ||
        hf_int(path, root, "max_position_embeddings", -1, &cfg->n_ctx_train, err))
        return -1;
    if (cfg->n_head == 0)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: field 'num_attention_heads' must be positive",
                         path);
    /* head_dim defaults of transformers' config classes */
    const bool moe = strcmp(arch->model_type, "mixtral") == 0 ||
                     arch->arch == PLUME_ARCH_QWEN3MOE || arch->arch == PLUME_ARCH_OLMOE ||
                     arch->arch == PLUME_ARCH_QWEN2MOE || arch->arch == PLUME_ARCH_GPT_OSS;
    if (moe && cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: mixture-of-experts models with more than %d layers are not supported",
                         path, PLUME_MAX_LAYERS);
    const bool gpt_oss = arch->arch == PLUME_ARCH_GPT_OSS;
    const bool smollm3 = strcmp(arch->model_type, "smollm3") == 0;
    if (smollm3 && hf_nope(path, root, cfg, err))
        return -1;
    int64_t hd_default = arch->arch == PLUME_ARCH_QWEN3 ? 128
                         : gemma                       ? 256
                         : gpt_oss                     ? 64 /* GptOssConfig.head_dim */
                                                       : cfg->n_embd / cfg->n_head;
    if (hf_int(path, root, "head_dim", hd_default, &cfg->head_dim, err) ||
        hf_float(path, root, "rms_norm_eps", gpt_oss ? 1e-5 : 1e-6, &cfg->rms_eps, err) ||
        hf_bool(path, root, "tie_word_embeddings", gemma || smollm3, &cfg->tied_embeddings,
                err) ||
        hf_rope(path, root, cfg, err) || hf_windows(path, root, arch->model_type, cfg, err))
        return -1;
    if (arch->arch == PLUME_ARCH_QWEN2)
        cfg->qkv_bias = true; /* Qwen2 always has q/k/v bias; no config field */
    else if (hf_bool(path, root,
                     arch->arch == PLUME_ARCH_QWEN2MOE ? "qkv_bias" : "attention_bias",
                     arch->qkv_bias, &cfg->qkv_bias, err))
        return -1;
    if (arch->arch == PLUME_ARCH_QWEN3 || arch->arch == PLUME_ARCH_QWEN3MOE)
        cfg->qk_norm = true;
    if (gemma && hf_gemma(path, root, cfg, err))
        return -1;
    if (moe && hf_moe(path, root, arch->model_type, cfg, err))
        return -1;
    return 0;
}

int plume_config_from_hf_json(const char *path, plume_model_config *cfg, plume_error *err)
{
    if (!path || !cfg)
        return plume_err(err, PLUME_ERR_INVALID, "plume_config_from_hf_json: NULL argument");
    json_t *root = json_file_load(path, err);
    if (!root)
        return -1;
    int rc;
    if (!json_is_object(root))
        rc = plume_err(err, PLUME_ERR_FORMAT, "%s: not a JSON object", path);
    else
        rc = hf_fill(path, root, cfg, err);
    json_decref(root);
    if (rc)
        return -1;
    if (plume_config_validate(cfg, err))
        return plume_err_prefix(err, "%s", path);
    return 0;
}

/* Checks one size is positive; names the plume and HF field. */
static int hf_positive(int32_t v, const char *field, const char *hf_name, plume_error *err)
{
    if (v > 0)
        return 0;
    return plume_err(err, PLUME_ERR_RANGE, "%s (%s) must be positive, got %d", field, hf_name, v);
}

int plume_config_validate(const plume_model_config *cfg, plume_error *err)
{
    if (!cfg)
        return plume_err(err, PLUME_ERR_INVALID, "plume_config_validate: NULL config");
    if (cfg->arch < PLUME_ARCH_LLAMA || cfg->arch > PLUME_ARCH_GPT_OSS)
        return plume_err(err, PLUME_ERR_RANGE, "arch %d is not a known architecture", (int)cfg->arch);
    if (hf_positive(cfg->n_vocab, "n_vocab", "vocab_size", err) ||
        hf_positive(cfg->n_embd, "n_embd", "hidden_size", err) ||
        hf_positive(cfg->n_layer, "n_layer", "num_hidden_layers", err) ||
        hf_positive(cfg->n_head, "n_head", "num_attention_heads", err) ||
        hf_positive(cfg->n_head_kv, "n_head_kv", "num_key_value_heads", err) ||
        hf_positive(cfg->head_dim, "head_dim", "head_dim", err) ||
        hf_positive(cfg->n_ff, "n_ff", "intermediate_size", err) ||
        hf_positive(cfg->n_ctx_train, "n_ctx_train", "max_position_embeddings", err))
        return -1;
    if (cfg->n_head % cfg->n_head_kv != 0)
        return plume_err(err, PLUME_ERR_RANGE,
                         "n_head_kv (num_key_value_heads) %d does not divide n_head "
                         "(num_attention_heads) %d",
                         cfg->n_head_kv, cfg->n_head);
    if (cfg->head_dim % 2 != 0)
        return plume_err(err, PLUME_ERR_RANGE, "head_dim %d must be even for rotary embeddings",
                         cfg->head_dim);
    if ((int64_t)cfg->head_dim * cfg->n_head > INT32_MAX)
        return plume_err(err, PLUME_ERR_RANGE, "head_dim %d * n_head %d is too large",
                         cfg->head_dim, cfg->n_head);
    if (!(cfg->rms_eps > 0.0f) || !isfinite(cfg->rms_eps))
        return plume_err(err, PLUME_ERR_RANGE, "rms_eps (rms_norm_eps) must be positive, got %g",
                         (double)cfg->rms_eps);
    if (!(cfg->rope_theta > 0.0f) || !isfinite(cfg->rope_theta))
        return plume_err(err, PLUME_ERR_RANGE, "rope_theta must be positive, got %g",
                         (double)cfg->rope_theta);
    if (plume_rope_cfg_validate(&cfg->rope, "rope", err) ||
        plume_rope_cfg_validate(&cfg->rope_local, "local rope", err))
        return -1;
    if (cfg->sliding_window < 0)
        return plume_err(err, PLUME_ERR_RANGE, "sliding_window must be >= 0, got %d",
                         cfg->sliding_window);
    if (cfg->sliding_window > 0 && cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "sliding-window models with more than %d layers are not supported",
                         PLUME_MAX_LAYERS);
    if (cfg->n_expert < 0 || cfg->n_expert > PLUME_MAX_EXPERTS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "n_expert (num_experts / num_local_experts) %d is outside [0, %d]",
                         cfg->n_expert, PLUME_MAX_EXPERTS);
    if (cfg->n_expert > 0 &&
        (cfg->n_expert_used < 1 || cfg->n_expert_used > cfg->n_expert || cfg->n_ff_exp <= 0))
        return plume_err(err, PLUME_ERR_RANGE,
                         "experts per token (num_experts_per_tok) %d must be in [1, %d] and the "
                         "expert intermediate size %d positive",
                         cfg->n_expert_used, cfg->n_expert, cfg->n_ff_exp);
    if (cfg->n_ff_shexp < 0 || (cfg->n_ff_shexp > 0 && cfg->n_expert == 0))
        return plume_err(err, PLUME_ERR_RANGE,
                         "shared_expert_intermediate_size %d needs experts and must be >= 0",
                         cfg->n_ff_shexp);
    if (cfg->n_expert > 0 && cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "mixture-of-experts models with more than %d layers are not supported",
                         PLUME_MAX_LAYERS);
    if (cfg->swiglu_oai && (!(cfg->swiglu_limit > 0.0f) || !isfinite(cfg->swiglu_limit) ||
                            !isfinite(cfg->swiglu_alpha)))
        return plume_err(err, PLUME_ERR_RANGE,
                         "swiglu_limit %g must be positive and swiglu_alpha %g finite",
                         (double)cfg->swiglu_limit, (double)cfg->swiglu_alpha);
    if ((cfg->attn_sinks || cfg->swiglu_oai || cfg->moe_bias) &&
        cfg->arch != PLUME_ARCH_GPT_OSS)
        return plume_err(err, PLUME_ERR_RANGE,
                         "attention sinks, expert biases and the clamped SwiGLU are gpt-oss's "
                         "alone; arch %d has them set",
                         (int)cfg->arch);
    if (cfg->rope_style != PLUME_ROPE_ADJACENT && cfg->rope_style != PLUME_ROPE_HALF)
        return plume_err(err, PLUME_ERR_RANGE, "rope_style %d is not known", (int)cfg->rope_style);
    return 0;
}
