/* HF config.json -> plume_model_config, and consistency checks on a config.
 * Supported: llama (LlamaForCausalLM), mistral (MistralForCausalLM, run as
 * llama) and qwen2 (Qwen2ForCausalLM: llama with q/k/v bias). */
#include "model/config.h"

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
    {"qwen2", "Qwen2ForCausalLM", PLUME_ARCH_QWEN2, true},
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
    for (size_t i = 0; i < sizeof hf_archs / sizeof hf_archs[0]; i++) {
        if (strcmp(name, by_type ? hf_archs[i].model_type : hf_archs[i].architecture) == 0) {
            *out = &hf_archs[i];
            return 0;
        }
    }
    return plume_err(err, PLUME_ERR_UNSUPPORTED,
                     "%s: unsupported architecture %s (supported: llama, mistral, qwen2)", path, name);
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
    if (!v) {
        *out = (float)def;
        return 0;
    }
    if (!json_is_number(v))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: field '%s' must be a number", path, key);
    *out = (float)json_number_value(v);
    return 0;
}

/* Reads a boolean field; a missing one gives def. */
static int hf_bool(const char *path, json_t *root, const char *key, bool def, bool *out,
                   plume_error *err)
{
    json_t *v = hf_get(root, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return plume_err(err, PLUME_ERR_FORMAT, "%s: field '%s' must be true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

/* Rejects a rope_scaling (or transformers-5 rope_parameters) object whose
 * rope_type / type is anything but "default". */
static int hf_check_rope(const char *path, json_t *root, const char *key, plume_error *err)
{
    json_t *rs = hf_get(root, key);
    if (rs) {
        json_t *t = json_object_get(rs, "rope_type");
        if (!json_is_string(t))
            t = json_object_get(rs, "type");
        const char *type = json_is_string(t) ? json_string_value(t) : NULL;
        if (!type || strcmp(type, "default") != 0) {
            char *dump = type ? NULL : json_dumps(rs, JSON_COMPACT);
            plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: %s %s is not supported yet", path, key,
                      type ? type : dump ? dump : "(unreadable)");
            free(dump);
            return -1;
        }
    }
    return 0;
}

/* Rejects settings that would change the computation in ways plume does not
 * implement: RoPE scaling, a non-SiLU activation, llama's mlp_bias and
 * Qwen2's sliding-window attention.  (quantization_config is read by
 * hf_quant_config.c.) */
static int hf_check_unsupported(const char *path, json_t *root, plume_error *err)
{
    json_t *rp = hf_get(root, "rope_parameters");
    if (rp && (!json_is_object(rp) || json_object_get(rp, "rope_type")))
        if (hf_check_rope(path, root, "rope_parameters", err))
            return -1;
    if (hf_check_rope(path, root, "rope_scaling", err))
        return -1;
    json_t *act = hf_get(root, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu") != 0))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: hidden_act %s is not supported (only silu)", path,
                         json_is_string(act) ? json_string_value(act) : "(not a string)");
    json_t *mlp_bias = hf_get(root, "mlp_bias");
    if (json_is_true(mlp_bias))
        return plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: mlp_bias true is not supported yet", path);
    if (json_is_true(hf_get(root, "use_sliding_window")))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: use_sliding_window true is not supported yet", path);
    return 0;
}

/* The object holding rope_theta: the top level, or transformers 5's
 * rope_parameters when only that has it. */
static json_t *hf_rope_source(json_t *root)
{
    json_t *rp = hf_get(root, "rope_parameters");
    if (!hf_get(root, "rope_theta") && json_is_object(rp) && hf_get(rp, "rope_theta"))
        return rp;
    return root;
}

/* Fills cfg from a parsed config object; every error names path. */
static int hf_fill(const char *path, json_t *root, plume_model_config *cfg, plume_error *err)
{
    const hf_arch *arch = NULL;
    if (hf_pick_arch(path, root, &arch, err) || hf_check_unsupported(path, root, err))
        return -1;
    memset(cfg, 0, sizeof *cfg);
    cfg->arch = arch->arch;
    snprintf(cfg->arch_name, sizeof cfg->arch_name, "%s", arch->model_type);
    cfg->rope_style = PLUME_ROPE_HALF;
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
    if (hf_int(path, root, "head_dim", cfg->n_embd / cfg->n_head, &cfg->head_dim, err) ||
        hf_float(path, root, "rms_norm_eps", 1e-6, &cfg->rms_eps, err) ||
        hf_float(path, hf_rope_source(root), "rope_theta", 10000.0, &cfg->rope_theta, err) ||
        hf_bool(path, root, "tie_word_embeddings", false, &cfg->tied_embeddings, err))
        return -1;
    if (arch->arch == PLUME_ARCH_QWEN2)
        cfg->qkv_bias = true; /* Qwen2 always has q/k/v bias; no config field */
    else if (hf_bool(path, root, "attention_bias", arch->qkv_bias, &cfg->qkv_bias, err))
        return -1;
    return 0;
}

int plume_config_from_hf_json(const char *path, plume_model_config *cfg, plume_error *err)
{
    if (!path || !cfg)
        return plume_err(err, PLUME_ERR_INVALID, "plume_config_from_hf_json: NULL argument");
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        if (json_error_code(&jerr) == json_error_cannot_open_file)
            return plume_err(err, PLUME_ERR_IO, "%s: cannot read: %s", path, jerr.text);
        return plume_err(err, PLUME_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", path,
                         jerr.text, jerr.line, jerr.column);
    }
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
    if (cfg->arch != PLUME_ARCH_LLAMA && cfg->arch != PLUME_ARCH_QWEN2)
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
    if (cfg->rope_style != PLUME_ROPE_ADJACENT && cfg->rope_style != PLUME_ROPE_HALF)
        return plume_err(err, PLUME_ERR_RANGE, "rope_style %d is not known", (int)cfg->rope_style);
    return 0;
}
