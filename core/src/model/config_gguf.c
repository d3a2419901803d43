/* Model hyperparameters from GGUF metadata (formats.md §3.3). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"

enum { KEY_CAP = 128 };

/* Writes the key <arch>.<suffix> into key (KEY_CAP bytes) and returns its
 * value, NULL when the file has none. */
static const gguf_value *arch_value(const gguf_file *f, const char *arch, const char *suffix,
                                    char *key)
{
    snprintf(key, KEY_CAP, "%s.%s", arch, suffix);
    return gguf_get(f, key);
}

/* Fails saying that metadata key, of v's type, must be `must`. */
static int bad_value(const gguf_file *f, const char *key, const gguf_value *v, const char *must,
                     plume_error *err)
{
    return plume_err(err, PLUME_ERR_FORMAT, "%s: metadata '%s' (%s) must be %s; fix the metadata",
                     gguf_path(f), key, gguf_type_name(v->type), must);
}

static int need_u32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out,
                    plume_error *err)
{
    char key[KEY_CAP];
    arch_value(f, arch, suffix, key);
    uint32_t v;
    if (!gguf_get_u32(f, key, &v))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: required metadata key '%s' is missing or not an integer; the file "
                         "was not written by a llama.cpp-compatible converter",
                         gguf_path(f), key);
    if (v > INT32_MAX)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: metadata '%s' = %u is too large",
                         gguf_path(f), key, v);
    *out = (int32_t)v;
    return 0;
}

/* Reads the optional key <arch>.<suffix> into *out, or def when it is
 * absent.  A value that is not an integer in [0, INT32_MAX] is an error
 * naming the key, not a silent default. */
static int opt_u32(const gguf_file *f, const char *arch, const char *suffix, int32_t def,
                   int32_t *out, plume_error *err)
{
    char key[KEY_CAP];
    const gguf_value *v = arch_value(f, arch, suffix, key);
    uint32_t x;
    *out = def;
    if (!v)
        return 0;
    if (!gguf_get_u32(f, key, &x) || x > INT32_MAX)
        return bad_value(f, key, v, "an integer in [0, 2147483647]", err); /* INT32_MAX */
    *out = (int32_t)x;
    return 0;
}

/* Reads the optional key <arch>.<suffix> into *out, or def when it is
 * absent; a value that is not a number is an error naming the key. */
static int opt_f32(const gguf_file *f, const char *arch, const char *suffix, float def,
                   float *out, plume_error *err)
{
    char key[KEY_CAP];
    const gguf_value *v = arch_value(f, arch, suffix, key);
    *out = def;
    if (v && !gguf_get_f32(f, key, out))
        return bad_value(f, key, v, "a number", err);
    return 0;
}

/* The RoPE scaling of llama.cpp's keys <arch>.rope.scaling.*: none,
 * linear (factor; as in llama.cpp, a file without the type key is linear
 * by rope.scaling.factor or the older rope.scale_linear, and no factor
 * scales nothing) and yarn (factor, original_context_length,
 * yarn_beta_fast/slow, attn_factor; llama.cpp's rope_yarn is transformers'
 * yarn with truncation and attention factor attn_factor x (1 + 0.1 ln
 * factor)).  Llama 3.1's scaling is not a key but the tensor
 * rope_freqs.weight, which model_load.c applies.  Gemma 3's local layers
 * use rope.freq_base_swa (llama.cpp's default 10000), unscaled. */
static int gguf_rope(const gguf_file *f, const char *arch, plume_model_config *cfg,
                     plume_error *err)
{
    plume_rope_cfg *r = &cfg->rope;
    memset(r, 0, sizeof *r);
    r->theta = cfg->rope_theta;
    r->truncate = true;
    char key[KEY_CAP];
    gguf_str st;
    const gguf_value *sv = arch_value(f, arch, "rope.scaling.type", key);
    if (sv && !gguf_get_str(f, key, &st))
        return bad_value(f, key, sv, "a string", err);
    /* as llama.cpp: no type key means linear, by rope.scaling.factor or the
     * older rope.scale_linear, and no factor (or 1) means no scaling */
    bool none = sv && st.len == 4 && memcmp(st.ptr, "none", 4) == 0;
    if (!sv || (!none && st.len == 6 && memcmp(st.ptr, "linear", 6) == 0))
        r->type = PLUME_ROPE_SCALING_LINEAR;
    else if (!none && st.len == 4 && memcmp(st.ptr, "yarn", 4) == 0)
        r->type = PLUME_ROPE_SCALING_YARN;
    else if (!none)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: rope scaling '%.*s%s' (%s) is not supported (supported: none, "
                         "linear, yarn, and Llama 3.1's rope_freqs.weight)",
                         gguf_path(f), (int)(st.len > 64 ? 64 : st.len), st.ptr,
                         st.len > 64 ? "..." : "", key);
    if (r->type != PLUME_ROPE_SCALING_NONE) {
        float attn, log_mul;
        if (opt_f32(f, arch, "rope.scaling.factor", 0.0f, &r->factor, err) ||
            opt_u32(f, arch, "rope.scaling.original_context_length", cfg->n_ctx_train,
                    &r->orig_ctx, err) ||
            opt_f32(f, arch, "rope.scaling.yarn_beta_fast", 32.0f, &r->beta_fast, err) ||
            opt_f32(f, arch, "rope.scaling.yarn_beta_slow", 1.0f, &r->beta_slow, err) ||
            opt_f32(f, arch, "rope.scaling.attn_factor", 1.0f, &attn, err) ||
            opt_f32(f, arch, "rope.scaling.yarn_log_multiplier", 0.0f, &log_mul, err))
            return -1;
        if (r->factor == 0.0f && !arch_value(f, arch, "rope.scaling.factor", key) &&
            opt_f32(f, arch, "rope.scale_linear", 0.0f, &r->factor, err))
            return -1;
        if (r->type == PLUME_ROPE_SCALING_LINEAR && (r->factor == 0.0f || r->factor == 1.0f)) {
            r->type = PLUME_ROPE_SCALING_NONE; /* llama.cpp's freq_scale 1 */
            r->factor = 0.0f;
        }
        if (log_mul != 0.0f)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: %s.rope.scaling.yarn_log_multiplier (DeepSeek-style yarn "
                             "mscale) is not supported",
                             gguf_path(f), arch);
        if (r->type == PLUME_ROPE_SCALING_YARN)
            r->attn_factor =
                attn * (r->factor > 1.0f ? 1.0f + 0.1f * logf(r->factor) : 1.0f);
    }
    cfg->rope_local = *r;
    /* gpt-oss (openai-moe.cpp): the windowed layers' base is
     * rope.freq_base_swa when present, with the same scaling */
    if (cfg->arch == PLUME_ARCH_GPT_OSS &&
        opt_f32(f, arch, "rope.freq_base_swa", r->theta, &cfg->rope_local.theta, err))
        return -1;
    if (cfg->arch == PLUME_ARCH_GEMMA3) {
        memset(&cfg->rope_local, 0, sizeof cfg->rope_local);
        if (opt_f32(f, arch, "rope.freq_base_swa", 10000.0f, &cfg->rope_local.theta, err))
            return -1;
    }
    return plume_rope_cfg_validate(r, gguf_path(f), err);
}

/* Sliding windows from <arch>.attention.sliding_window: every layer for
 * llama-arch (Mistral v0.1) files; Gemma 3 all but every
 * attention.sliding_window_pattern-th layer (llama.cpp's default 6).
 * Qwen2 GGUFs carry no window (llama.cpp runs them with full attention). */
static int gguf_windows(const gguf_file *f, const char *arch, plume_model_config *cfg,
                        plume_error *err)
{
    bool gemma = cfg->arch == PLUME_ARCH_GEMMA3, gpt_oss = cfg->arch == PLUME_ARCH_GPT_OSS;
    if (opt_u32(f, arch, "attention.sliding_window", gemma ? 4096 : 0, &cfg->sliding_window, err))
        return -1;
    if (gpt_oss && cfg->sliding_window == 0) /* openai-moe.cpp: a required key */
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: architecture gpt-oss needs '%s.attention.sliding_window' (the "
                         "window of its alternate layers); fix the metadata",
                         gguf_path(f), arch);
    if (cfg->sliding_window == 0)
        return 0;
    if (cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: sliding-window models with more than %d layers are not supported",
                         gguf_path(f), PLUME_MAX_LAYERS);
    char key[KEY_CAP];
    const gguf_value *pv = arch_value(f, arch, "attention.sliding_window_pattern", key);
    gguf_type et;
    uint64_t n;
    const gguf_value *items;
    if (pv && gguf_get_arr(f, key, &et, &n, &items)) {
        if (et != GGUF_TYPE_BOOL || n != (uint64_t)cfg->n_layer)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: metadata '%s' must be %d booleans (true: a sliding layer)",
                             gguf_path(f), key, cfg->n_layer);
        for (int l = 0; l < cfg->n_layer; l++)
            cfg->swa_layer[l] = items[l].b;
        return 0;
    }
    /* llama.cpp's set_swa_pattern(n): layer il slides iff il % n < n - 1
     * (gemma3: n = 6; openai-moe: load_swa_pattern(ml, 2)) */
    int32_t period = 0;
    if ((gemma || gpt_oss) && opt_u32(f, arch, "attention.sliding_window_pattern",
                                      gemma ? 6 : 2, &period, err))
        return -1;
    for (int l = 0; l < cfg->n_layer; l++)
        cfg->swa_layer[l] = !(gemma || gpt_oss) || period == 0 || (l + 1) % period != 0;
    return 0;
}

/* Gemma 3 as llama.cpp runs it: embeddings x sqrtf(n_embd) in f32, softmax
 * scale 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 62-layer 27B, whose
 * query_pre_attn_scalar is that), optional final_logit_softcapping;
 * attention soft-capping refused. */
static int gguf_gemma(const gguf_file *f, const char *arch, plume_model_config *cfg,
                      plume_error *err)
{
    float cap, attn_cap;
    if (opt_f32(f, arch, "final_logit_softcapping", 0.0f, &cap, err) ||
        opt_f32(f, arch, "attn_logit_softcapping", 0.0f, &attn_cap, err))
        return -1;
    if (attn_cap != 0.0f)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: %s.attn_logit_softcapping (attention soft-capping) is not supported",
                         gguf_path(f), arch);
    if (!(cap >= 0.0f) || !isfinite(cap))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: %s.final_logit_softcapping must be >= 0",
                         gguf_path(f), arch);
    cfg->final_softcap = cap;
    cfg->embed_scale = sqrtf((float)cfg->n_embd);
    double qpas = cfg->n_layer == 62 && cfg->n_head > 0 ? (double)(cfg->n_embd / cfg->n_head)
                                                        : (double)cfg->head_dim;
    cfg->attn_scale = qpas > 0 ? (float)(1.0 / sqrt(qpas)) : 0.0f;
    return 0;
}

/* Mixture-of-experts metadata, as llama.cpp reads it: <arch>.expert_count
 * (0 or absent: a dense model; llama-arch files with experts are Mixtral),
 * expert_used_count, expert_feed_forward_length (default: the
 * feed_forward_length), expert_weights_norm (default: llama and qwen3moe
 * renormalize the top-k probabilities, olmoe does not).  Shared experts,
 * sigmoid gating and weight scales are refused by key. */
static int gguf_moe(const gguf_file *f, const char *arch, plume_model_config *cfg,
                    plume_error *err)
{
    bool moe_arch = cfg->arch == PLUME_ARCH_QWEN3MOE || cfg->arch == PLUME_ARCH_OLMOE ||
                    cfg->arch == PLUME_ARCH_QWEN2MOE || cfg->arch == PLUME_ARCH_GPT_OSS;
    if (!moe_arch && cfg->arch != PLUME_ARCH_LLAMA)
        return 0; /* llama.cpp's qwen2/qwen3/gemma3 graphs have no experts: keys ignored */
    if (opt_u32(f, arch, "expert_count", 0, &cfg->n_expert, err))
        return -1;
    if (cfg->n_expert == 0) {
        if (moe_arch)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: architecture %s needs the metadata key '%s.expert_count' (the "
                             "experts per layer); the file was not written by llama.cpp's "
                             "converter",
                             gguf_path(f), arch, arch);
        return 0;
    }
    int32_t shared, gating;
    float scale;
    if (opt_u32(f, arch, "expert_used_count", 0, &cfg->n_expert_used, err) ||
        opt_u32(f, arch, "expert_feed_forward_length", cfg->n_ff, &cfg->n_ff_exp, err) ||
        opt_u32(f, arch, "expert_shared_count", 0, &shared, err) ||
        opt_u32(f, arch, "expert_shared_feed_forward_length", 0, &cfg->n_ff_shexp, err) ||
        opt_u32(f, arch, "expert_gating_func", 1, &gating, err) ||
        opt_f32(f, arch, "expert_weights_scale", 1.0f, &scale, err))
        return -1;
    if (cfg->n_expert > PLUME_MAX_EXPERTS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: '%s.expert_count' is %d; plume runs at most %d experts per layer",
                         gguf_path(f), arch, cfg->n_expert, PLUME_MAX_EXPERTS);
    if (cfg->n_expert_used > cfg->n_expert)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: '%s.expert_used_count' (experts per token) is %d, more than "
                         "'%s.expert_count' %d; fix the metadata",
                         gguf_path(f), arch, cfg->n_expert_used, arch, cfg->n_expert);
    if (cfg->n_expert_used == 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: '%s.expert_count' is %d but '%s.expert_used_count' (experts per "
                         "token) is missing or 0; fix the metadata",
                         gguf_path(f), arch, cfg->n_expert, arch);
    if (cfg->arch == PLUME_ARCH_QWEN2MOE) {
        if (cfg->n_ff_shexp == 0)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: architecture qwen2moe needs '%s.expert_shared_feed_forward_length' "
                             "(the shared expert's size); fix the metadata",
                             gguf_path(f), arch);
        shared = shared == 1 ? 0 : shared; /* the one shared expert qwen2moe has */
    } else {
        cfg->n_ff_shexp = 0;
    }
    if (shared != 0 || gating != 1 || scale != 1.0f)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: %s", gguf_path(f),
                         shared ? "shared experts (expert_shared_count) are not supported"
                         : gating != 1 ? "expert_gating_func other than softmax (1) is not "
                                         "supported"
                                       : "expert_weights_scale other than 1 is not supported");
    /* llama.cpp's graphs: llama and qwen3moe renormalize, olmoe and qwen2moe do not;
     * gpt-oss's SOFTMAX_WEIGHT gating is a softmax over the k chosen logits,
     * the same numbers */
    cfg->moe_norm_topk = cfg->arch != PLUME_ARCH_OLMOE && cfg->arch != PLUME_ARCH_QWEN2MOE;
    if (cfg->arch == PLUME_ARCH_GPT_OSS) {
        /* openai-moe.cpp: biases everywhere; llama-graph.cpp's
         * LLM_FFN_SWIGLU_OAI_MOE fixes alpha 1.702 and limit 7.0 */
        cfg->attn_sinks = cfg->moe_bias = cfg->swiglu_oai = true;
        cfg->swiglu_alpha = 1.702f;
        cfg->swiglu_limit = 7.0f;
        return cfg->n_layer > PLUME_MAX_LAYERS
                   ? plume_err(err, PLUME_ERR_UNSUPPORTED,
                               "%s: mixture-of-experts models with more than %d layers are not "
                               "supported",
                               gguf_path(f), PLUME_MAX_LAYERS)
                   : 0;
    }
    char key[KEY_CAP];
    const gguf_value *v = arch_value(f, arch, "expert_weights_norm", key);
    if (v && !gguf_get_bool(f, key, &cfg->moe_norm_topk))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: metadata '%s' (%s) must be a boolean",
                         gguf_path(f), key, gguf_type_name(v->type));
    if (cfg->n_layer > PLUME_MAX_LAYERS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: mixture-of-experts models with more than %d layers are not supported",
                         gguf_path(f), PLUME_MAX_LAYERS);
    return 0;
}

/* The GGUF architectures plume runs and the settings each implies.  Only
 * llama's q/k rows are permuted by the converter; llama.cpp runs the others
 * with NEOX rope (LLAMA_ROPE_TYPE_NEOX), unpermuted. */
typedef struct gguf_arch {
    const char *name;
    plume_arch arch;
    plume_rope_style rope_style;
    bool qkv_bias; /* gpt-oss: and attn_output.bias, the native linears' */
    bool qk_norm, qk_norm_full, post_norms;
    plume_ffn_act ffn_act;
} gguf_arch;

static const gguf_arch gguf_archs[] = {
    {.name = "llama", .arch = PLUME_ARCH_LLAMA, .rope_style = PLUME_ROPE_ADJACENT},
    /* Llama with no RoPE on every 4th layer (llama.cpp's smollm3.cpp) */
    {.name = "smollm3", .arch = PLUME_ARCH_LLAMA, .rope_style = PLUME_ROPE_ADJACENT},
    {.name = "qwen2", .arch = PLUME_ARCH_QWEN2, .rope_style = PLUME_ROPE_HALF, .qkv_bias = true},
    {.name = "qwen3", .arch = PLUME_ARCH_QWEN3, .rope_style = PLUME_ROPE_HALF, .qk_norm = true},
    {.name = "gemma3", .arch = PLUME_ARCH_GEMMA3, .rope_style = PLUME_ROPE_HALF, .qk_norm = true,
     .post_norms = true, .ffn_act = PLUME_FFN_GELU_TANH},
    {.name = "qwen3moe", .arch = PLUME_ARCH_QWEN3MOE, .rope_style = PLUME_ROPE_HALF,
     .qk_norm = true},
    {.name = "qwen2moe", .arch = PLUME_ARCH_QWEN2MOE, .rope_style = PLUME_ROPE_HALF,
     .qkv_bias = true},
    {.name = "gpt-oss", .arch = PLUME_ARCH_GPT_OSS, .rope_style = PLUME_ROPE_HALF,
     .qkv_bias = true},
    {.name = "olmoe", .arch = PLUME_ARCH_OLMOE, .rope_style = PLUME_ROPE_HALF,
     .qk_norm_full = true},
};

const char *plume_config_gguf_arch(plume_arch arch)
{
    for (size_t i = 0; i < sizeof gguf_archs / sizeof gguf_archs[0]; i++)
        if (gguf_archs[i].arch == arch)
            return gguf_archs[i].name;
    return NULL;
}

/* GGUF architectures of mixture-of-experts families plume does not run. */
static const char *const gguf_moe_refused[] = {
    "deepseek2", "deepseek", "dbrx", "grok", "arctic", "phimoe",
    "granitemoe", "granitehybrid", "llama4", "jamba", "glm4moe", "minimax-m2", "ernie4_5-moe",
    "hunyuan-moe", "bailingmoe", "bailingmoe2", "dots1", "smallthinker", "lfm2moe",
    "qwen3vlmoe", "qwen3next",
};

int plume_config_from_gguf(const gguf_file *f, plume_model_config *cfg, plume_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    gguf_str a;
    if (!gguf_get_str(f, "general.architecture", &a))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: metadata key 'general.architecture' is missing; not a model file?",
                         gguf_path(f));
    char arch[32];
    snprintf(arch, sizeof arch, "%.*s", (int)(a.len < 31 ? a.len : 31), a.ptr);
    const gguf_arch *ga = NULL;
    for (size_t i = 0; i < sizeof gguf_archs / sizeof gguf_archs[0] && !ga; i++)
        if (strcmp(arch, gguf_archs[i].name) == 0)
            ga = &gguf_archs[i];
    if (!ga) {
        for (size_t i = 0; i < sizeof gguf_moe_refused / sizeof gguf_moe_refused[0]; i++)
            if (strcmp(arch, gguf_moe_refused[i]) == 0)
                return plume_err(err, PLUME_ERR_UNSUPPORTED,
                                 "%s: architecture '%s': this mixture-of-experts family is not "
                                 "supported (supported MoE architectures: llama with experts "
                                 "(Mixtral), qwen3moe, qwen2moe, olmoe, gpt-oss)",
                                 gguf_path(f), arch);
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: unsupported architecture '%s' (supported: llama, smollm3, qwen2, "
                         "qwen3, gemma3, qwen3moe, qwen2moe, olmoe, gpt-oss)",
                         gguf_path(f), arch);
    }
    cfg->arch = ga->arch;
    cfg->rope_style = ga->rope_style;
    cfg->qkv_bias = ga->qkv_bias;
    cfg->qk_norm = ga->qk_norm;
    cfg->qk_norm_full = ga->qk_norm_full;
    cfg->post_norms = ga->post_norms;
    cfg->ffn_act = ga->ffn_act;
    /* Gemma: convert_hf_to_gguf.py already added 1 to every norm weight */
    cfg->norm_plus_one = false;
    snprintf(cfg->arch_name, sizeof cfg->arch_name, "%s", arch);
    if (need_u32(f, arch, "embedding_length", &cfg->n_embd, err) ||
        need_u32(f, arch, "block_count", &cfg->n_layer, err) ||
        need_u32(f, arch, "attention.head_count", &cfg->n_head, err) ||
        need_u32(f, arch, "feed_forward_length", &cfg->n_ff, err))
        return -1;
    int32_t rope_dims;
    if (opt_u32(f, arch, "attention.head_count_kv", cfg->n_head, &cfg->n_head_kv, err) ||
        opt_u32(f, arch, "context_length", 2048, &cfg->n_ctx_train, err) ||
        opt_u32(f, arch, "attention.key_length", cfg->n_head > 0 ? cfg->n_embd / cfg->n_head : 0,
                &cfg->head_dim, err) ||
        opt_u32(f, arch, "rope.dimension_count", cfg->head_dim, &rope_dims, err) ||
        opt_f32(f, arch, "attention.layer_norm_rms_epsilon", 1e-5f, &cfg->rms_eps, err) ||
        opt_f32(f, arch, "rope.freq_base", 10000.0f, &cfg->rope_theta, err) ||
        opt_u32(f, arch, "vocab_size", 0, &cfg->n_vocab, err))
        return -1;
    if (rope_dims != cfg->head_dim)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: partial rotary embeddings (rope.dimension_count %d != head dim %d) "
                         "are not supported",
                         gguf_path(f), rope_dims, cfg->head_dim);
    if (gguf_rope(f, arch, cfg, err) || gguf_windows(f, arch, cfg, err))
        return -1;
    if (strcmp(arch, "smollm3") == 0) {
        if (cfg->n_layer > PLUME_MAX_LAYERS)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: SmolLM3 models with more than %d layers are not supported",
                             gguf_path(f), PLUME_MAX_LAYERS);
        for (int l = 0; l < cfg->n_layer; l++) /* llama.cpp's n_no_rope_layer_step 4 */
            cfg->nope_layer[l] = (l + 1) % 4 == 0;
    }
    if (cfg->arch == PLUME_ARCH_GEMMA3 && gguf_gemma(f, arch, cfg, err))
        return -1;
    if (gguf_moe(f, arch, cfg, err))
        return -1;
    if (cfg->n_vocab == 0) {
        gguf_type et;
        uint64_t n;
        const gguf_value *items;
        if (gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n, &items) && n <= INT32_MAX)
            cfg->n_vocab = (int32_t)n;
    }
    const plume_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (cfg->n_vocab == 0 && emb)
        cfg->n_vocab = (int32_t)emb->ne[1];
    cfg->tied_embeddings = gguf_find_tensor(f, "output.weight") == NULL;
    return 0;
}
