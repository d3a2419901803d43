/* Model hyperparameters from GGUF metadata (formats.md §3.3). */
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"

static int need_u32(const gguf_file *f, const char *arch, const char *suffix, int32_t *out,
                    plume_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
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
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_value *v = gguf_get(f, key);
    uint32_t x;
    *out = def;
    if (!v)
        return 0;
    if (!gguf_get_u32(f, key, &x) || x > INT32_MAX)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: metadata '%s' (%s) must be an integer in [0, %d]; fix the metadata",
                         gguf_path(f), key, gguf_type_name(v->type), INT32_MAX);
    *out = (int32_t)x;
    return 0;
}

/* Reads the optional key <arch>.<suffix> into *out, or def when it is
 * absent; a value that is not a number is an error naming the key. */
static int opt_f32(const gguf_file *f, const char *arch, const char *suffix, float def,
                   float *out, plume_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_value *v = gguf_get(f, key);
    *out = def;
    if (v && !gguf_get_f32(f, key, out))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: metadata '%s' (%s) must be a number; fix the metadata",
                         gguf_path(f), key, gguf_type_name(v->type));
    return 0;
}

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
    if (strcmp(arch, "llama") == 0) {
        cfg->arch = PLUME_ARCH_LLAMA;
        cfg->rope_style = PLUME_ROPE_ADJACENT; /* q/k rows permuted by the converter */
    } else if (strcmp(arch, "qwen2") == 0) {
        cfg->arch = PLUME_ARCH_QWEN2;
        cfg->rope_style = PLUME_ROPE_HALF; /* llama.cpp runs qwen2 with NEOX rope, no permutation */
        cfg->qkv_bias = true;
    } else {
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: unsupported architecture '%s' (supported: llama, qwen2)",
                         gguf_path(f), arch);
    }
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
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    gguf_str st;
    const gguf_value *sv = gguf_get(f, key);
    if (sv && !gguf_get_str(f, key, &st))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: metadata '%s' (%s) must be a string; fix the metadata",
                         gguf_path(f), key, gguf_type_name(sv->type));
    if (sv && !(st.len == 4 && memcmp(st.ptr, "none", 4) == 0))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: rope scaling '%.*s%s' (%s) is not supported yet", gguf_path(f),
                         (int)(st.len > 64 ? 64 : st.len), st.ptr, st.len > 64 ? "..." : "",
                         key);
    if (gguf_find_tensor(f, "rope_freqs.weight"))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: per-frequency rope factors (rope_freqs.weight, Llama 3.1 rope "
                         "scaling) are not supported yet",
                         gguf_path(f));
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
