/* Loading a Llama-family model from a GGUF file or an HF directory into
 * plume_model: config, tokenizer, and shape-checked views of every weight. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/hf_quant_config.h"
#include "model/model_internal.h"
#include "runtime/builtin.h"
#include "tokenizer/gguf_vocab.h"

/* Where a tensor lives under each naming scheme (formats.md §3.4). */
typedef struct tensor_name {
    const char *gguf; /* "%d" is the layer */
    const char *hf;
} tensor_name;

enum { T_ATTN_NORM, T_FFN_NORM, T_Q_NORM, T_K_NORM, T_POST_ATTN_NORM, T_POST_FFN_NORM, T_COUNT };

static const tensor_name layer_names[T_COUNT] = {
    [T_ATTN_NORM] = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    [T_FFN_NORM] = {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
    [T_Q_NORM] = {"blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight"},
    [T_K_NORM] = {"blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight"},
    [T_POST_ATTN_NORM] = {"blk.%d.post_attention_norm.weight",
                          "model.layers.%d.post_attention_layernorm.weight"},
    [T_POST_FFN_NORM] = {"blk.%d.post_ffw_norm.weight",
                         "model.layers.%d.post_feedforward_layernorm.weight"},
};

/* Gemma names its pre-MLP norm differently in HF checkpoints (its
 * post_attention_layernorm is the norm of the attention output). */
static const char *const gemma_hf_ffn_norm = "model.layers.%d.pre_feedforward_layernorm.weight";

/* gpt-oss GGUFs name the pre-MLP norm LLM_TENSOR_ATTN_POST_NORM
 * (openai-moe.cpp), and keep one sink logit per query head. */
static const char *const gpt_oss_gguf_ffn_norm = "blk.%d.post_attention_norm.weight";
static const tensor_name sinks_name = {"blk.%d.attn_sinks.weight",
                                       "model.layers.%d.self_attn.sinks"};

/* The linear layers of a decoder layer by name prefix: the matrix is
 * "<prefix>.weight" (or a quant method's tensors), the bias "<prefix>.bias". */
enum { L_Q, L_K, L_V, L_O, L_GATE, L_UP, L_DOWN, L_COUNT };

static const tensor_name linear_names[L_COUNT] = {
    [L_Q] = {"blk.%d.attn_q", "model.layers.%d.self_attn.q_proj"},
    [L_K] = {"blk.%d.attn_k", "model.layers.%d.self_attn.k_proj"},
    [L_V] = {"blk.%d.attn_v", "model.layers.%d.self_attn.v_proj"},
    [L_O] = {"blk.%d.attn_output", "model.layers.%d.self_attn.o_proj"},
    [L_GATE] = {"blk.%d.ffn_gate", "model.layers.%d.mlp.gate_proj"},
    [L_UP] = {"blk.%d.ffn_up", "model.layers.%d.mlp.up_proj"},
    [L_DOWN] = {"blk.%d.ffn_down", "model.layers.%d.mlp.down_proj"},
};

/* The open checkpoint as the weight-format interface sees it. */
static plume_weights weights_of(const plume_model *m) { return (plume_weights){m->fmt, m->ck}; }

static const plume_tensor *find(const plume_model *m, const char *name)
{
    plume_weights w = weights_of(m);
    return plume_weights_find(&w, name, NULL);
}

static const char *source_path(const plume_model *m) { return m->path; }

/* A weight that must exist with ne = {ne0, ne1} and a computable type. */
static int get_matrix(plume_model *m, const char *name, int64_t ne0, int64_t ne1,
                      const plume_tensor **out, plume_error *err)
{
    const plume_tensor *t = find(m, name);
    if (!t)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' is missing", source_path(m), name);
    if (!plume_dtype_supported(t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: tensor '%s' has type %s, which plume cannot compute with yet "
                         "(supported: %s)",
                         source_path(m), name, plume_dtype_name(t->type),
                         plume_dtype_supported_names());
    if (t->n_dims != 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' has shape (ggml order) [%lld, %lld] with %d dims; the "
                         "config needs [%lld, %lld]",
                         source_path(m), name, (long long)t->ne[0], (long long)t->ne[1],
                         t->n_dims, (long long)ne0, (long long)ne1);
    if (plume_dtype_row_bytes(t->type, ne0) == 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' rows of %lld elements are not a whole number of %s blocks",
                         source_path(m), name, (long long)ne0, plume_dtype_name(t->type));
    if (!m->bvt->supports(m->b, PLUME_FEAT_WEIGHT_TYPE, t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: tensor '%s' has type %s, which backend %s cannot run; choose "
                         "another backend (cpu runs every type plume reads)",
                         source_path(m), name, plume_dtype_name(t->type), m->bvt->name);
    m->n_params += ne0 * ne1;
    m->weight_bytes += (int64_t)t->nbytes;
    *out = t;
    return 0;
}

/* A 1-D float weight of n elements, prepared by the backend.  Absent
 * optional vectors give *out = NULL. */
/* Keeps p (malloc'd) until the model is freed. */
static int own(plume_model *m, float *p, plume_error *err)
{
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 16;
        float **o = realloc(m->owned, sizeof *o * (size_t)cap);
        if (!o) {
            free(p);
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        }
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return 0;
}

static int get_vector_ex(plume_model *m, const char *name, int64_t n, bool required,
                         bool plus_one, plume_bweight **out, plume_error *err);

/* A norm weight: stored as w - 1 when the config says so (HF Gemma:
 * output * (1 + w)), then prepared as 1 + w in f32. */
static int get_norm(plume_model *m, const char *name, int64_t n, bool required,
                    plume_bweight **out, plume_error *err)
{
    return get_vector_ex(m, name, n, required, m->cfg.norm_plus_one, out, err);
}

static int get_vector_ex(plume_model *m, const char *name, int64_t n, bool required,
                         bool plus_one, plume_bweight **out, plume_error *err)
{
    *out = NULL;
    const plume_tensor *t = find(m, name);
    if (!t) {
        if (required)
            return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' is missing",
                             source_path(m), name);
        return 0;
    }
    if (!plume_dtype_supported(t->type) || plume_tensor_nelements(t) != n ||
        plume_dtype_block_elems(t->type) != 1)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' should be a vector of %lld elements in a float type, "
                         "found %lld elements of type %s",
                         source_path(m), name, (long long)n,
                         (long long)plume_tensor_nelements(t), plume_dtype_name(t->type));
    plume_tensor v = *t; /* as a 1-D vector, whatever shape the file gave it */
    v.n_dims = 1;
    v.ne[0] = n;
    v.ne[1] = v.ne[2] = v.ne[3] = 1;
    if (plus_one) { /* 1 + w, in f32 as transformers computes it */
        float *p = malloc(sizeof(float) * (size_t)n);
        if (!p || own(m, p, err))
            return p ? -1 : plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        plume_dequantize(t->type, t->data, p, n);
        for (int64_t i = 0; i < n; i++)
            p[i] = 1.0f + p[i];
        v.type = PLUME_DTYPE_F32;
        v.data = p;
        v.nbytes = sizeof(float) * (size_t)n;
    }
    if (m->bvt->weight_prepare(m->b, &v, out, err))
        return plume_err_prefix(err, "%s: backend %s preparing '%s'", source_path(m),
                                m->bvt->name, name);
    m->n_params += n;
    m->weight_bytes += (int64_t)t->nbytes;
    return 0;
}

/* Bytes of every tensor named "<prefix>.*" (a plugin layer's storage). */
static int64_t prefix_bytes(const plume_model *m, const char *prefix)
{
    plume_weights w = weights_of(m);
    size_t n = strlen(prefix);
    int64_t total = 0;
    for (size_t i = 0, c = w.fmt->n_tensors(w.ck); i < c; i++) {
        const plume_tensor *t = w.fmt->tensor(w.ck, i);
        if (strncmp(t->name, prefix, n) == 0 && t->name[n] == '.')
            total += (int64_t)t->nbytes;
    }
    return total;
}

/* The non-native linear method whose probe of prefix scores highest (and
 * above the native method's 1 when "<prefix>.weight" is a plain matrix),
 * or NULL for native. */
static const plume_linear_vtable *pick_method(const plume_model *m, const plume_registry *reg,
                                              const char *prefix)
{
    if (!reg)
        return NULL; /* no registry: the native method only */
    plume_weights w = weights_of(m);
    const plume_linear_vtable *best = NULL;
    int best_score = 0;
    const plume_tensor *t = plume_weights_find(&w, prefix, "weight");
    if (t && t->n_dims == 2 && plume_dtype_supported(t->type))
        best_score = 1; /* the native method's score */
    for (size_t i = 0, n = plume_registry_n_providers(reg); i < n; i++) {
        plume_provider_info info;
        if (plume_registry_provider(reg, i, &info) || info.kind != PLUME_KIND_LINEAR ||
            strcmp(info.plugin, "core") == 0)
            continue;
        const plume_linear_vtable *vt = info.vtable;
        /* a quantized checkpoint's layers belong to the method its config
         * names (GPTQ and AWQ tensors share names) */
        if (m->quant_method[0] && strcmp(vt->name, m->quant_method) != 0)
            continue;
        int score = vt->probe(&w, prefix);
        if (score > best_score) {
            best = vt;
            best_score = score;
        }
    }
    return best;
}

int plume_model_dummy_prepare(plume_model *m, const plume_tensor *t, plume_bweight **out,
                              plume_error *err)
{
    const plume_dummy_tensor *e = plume_dummy_entry(m->dummy, t);
    int rc;
    if (e && e->random && !t->data && PLUME_BACKEND_HAS_OP(m->bvt, weight_fill))
        rc = m->bvt->weight_fill(m->b, t, &e->spec, out, err);
    else
        rc = plume_dummy_make(m->dummy, t, err) ? -1 : m->bvt->weight_prepare(m->b, t, out, err);
    return rc ? plume_err_prefix(err, "%s: backend %s preparing dummy '%s'", source_path(m),
                                 m->bvt->name, t->name)
              : 0;
}

/* The native layer of a dummy checkpoint's matrix t (and bias). */
static int dummy_linear(plume_model *m, const char *prefix, const plume_tensor *t, plume_lin *L,
                        plume_error *err)
{
    char name[512];
    snprintf(name, sizeof name, "%s.bias", prefix);
    const plume_tensor *bt = find(m, name);
    plume_bweight *w = NULL, *bias = NULL;
    if (plume_model_dummy_prepare(m, t, &w, err))
        return -1;
    if (bt && m->bvt->weight_prepare(m->b, bt, &bias, err)) {
        m->bvt->weight_free(m->b, w);
        return -1;
    }
    if (plume_native_linear_adopt(m->bvt, m->b, w, bias, t->ne[0], t->ne[1], &L->pl, err))
        return -1;
    L->vt = &plume_builtin_native_linear;
    return 0;
}

/* Loads the linear layer at prefix with in -> out features into L: a
 * plugin's method when one claims it, else the native matrix (whose
 * errors name the missing or malformed tensor). */
static int get_linear(plume_model *m, const plume_registry *reg, const char *prefix, int64_t in,
                      int64_t out, plume_lin *L, plume_error *err)
{
    const plume_linear_vtable *vt = pick_method(m, reg, prefix);
    plume_weights w = weights_of(m);
    if (!vt) {
        char name[512];
        snprintf(name, sizeof name, "%s.weight", prefix);
        bool quantized = !find(m, name) && plume_weights_find(&w, prefix, "qweight");
        if (quantized && !m->quant)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: layer %s is quantized (it has %s.qweight) but the checkpoint "
                             "has no quantization_config (config.json) or quantize_config.json "
                             "naming its method and settings",
                             source_path(m), prefix, prefix);
        if (quantized)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: layer %s is quantized (it has %s.qweight) but the linear method "
                             "\"%s\" does not claim it (its tensors are not what that method "
                             "reads)",
                             source_path(m), prefix, prefix, m->quant_method);
        const plume_tensor *t;
        if (get_matrix(m, name, in, out, &t, err))
            return -1;
        if (m->dummy)
            return dummy_linear(m, prefix, t, L, err);
        vt = &plume_builtin_native_linear;
        if (vt->load(&w, prefix, NULL, m->bvt, m->b, &L->pl, err))
            return plume_err_prefix(err, "%s", source_path(m));
        L->vt = vt;
        return 0;
    }
    if (!m->quant)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: layer %s has %s-style tensors but the checkpoint has no "
                         "quantization_config (config.json) or quantize_config.json giving its "
                         "bits, group_size, sym and format",
                         source_path(m), prefix, vt->name);
    if (vt->load(&w, prefix, m->quant, m->bvt, m->b, &L->pl, err))
        return plume_err_prefix(err, "%s: linear method %s on backend %s", source_path(m),
                                vt->name, m->bvt->name);
    L->vt = vt;
    int64_t li, lo;
    vt->shape(L->pl, &li, &lo);
    if (li != in || lo != out)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: layer %s has %lld inputs and %lld outputs (by its %s tensors); the "
                         "config needs %lld and %lld",
                         source_path(m), prefix, (long long)li, (long long)lo, vt->name,
                         (long long)in, (long long)out);
    m->n_params += in * out;
    m->weight_bytes += prefix_bytes(m, prefix);
    m->n_plugin_linears++;
    return 0;
}

/* Checks the config's layer count against what the checkpoint holds before
 * anything is sized by it: each layer needs at least 9 tensors (two norms,
 * seven linears) and the last layer's attention norm must exist.  The error
 * names the field (GGUF <arch>.block_count, config.json num_hidden_layers). */
static int check_layer_count(const plume_model *m, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    plume_weights w = weights_of(m);
    size_t n_tensors = w.fmt->n_tensors(w.ck);
    char field[64], last[160];
    if (m->gguf)
        snprintf(field, sizeof field, "%s.block_count", c->arch_name);
    else
        snprintf(field, sizeof field, "config.json num_hidden_layers");
    if ((uint64_t)c->n_layer * 9 > n_tensors)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: %s is %d, but the checkpoint has only %zu tensors, too few for "
                         "that many layers (each needs at least 9); fix the layer count",
                         source_path(m), field, c->n_layer, n_tensors);
    snprintf(last, sizeof last, m->gguf ? layer_names[T_ATTN_NORM].gguf
                                        : layer_names[T_ATTN_NORM].hf, c->n_layer - 1);
    if (!find(m, last))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: %s is %d, but the last layer's tensor '%s' is missing; fix the "
                         "layer count",
                         source_path(m), field, c->n_layer, last);
    return 0;
}

static int load_layers(plume_model *m, const plume_registry *reg, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, Q = (int64_t)c->n_head * c->head_dim,
                  KV = (int64_t)c->n_head_kv * c->head_dim, F = c->n_ff;
    const int64_t dims[L_COUNT][2] = {
        [L_Q] = {E, Q}, [L_K] = {E, KV}, [L_V] = {E, KV}, [L_O] = {Q, E},
        [L_GATE] = {E, F}, [L_UP] = {E, F}, [L_DOWN] = {F, E},
    };
    if (check_layer_count(m, err))
        return -1;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory allocating %d layers", c->n_layer);
    for (int l = 0; l < c->n_layer; l++) {
        plume_layer *L = &m->layers[l];
        plume_lin *lins[L_COUNT] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
        char n[T_COUNT][160], p[L_COUNT][160], b[176];
        for (int i = 0; i < T_COUNT; i++)
            snprintf(n[i], sizeof n[i], m->gguf ? layer_names[i].gguf : layer_names[i].hf, l);
        if (!m->gguf && c->arch == PLUME_ARCH_GEMMA3)
            snprintf(n[T_FFN_NORM], sizeof n[T_FFN_NORM], gemma_hf_ffn_norm, l);
        if (m->gguf && c->arch == PLUME_ARCH_GPT_OSS)
            snprintf(n[T_FFN_NORM], sizeof n[T_FFN_NORM], gpt_oss_gguf_ffn_norm, l);
        if (c->attn_sinks) {
            char sn[160];
            snprintf(sn, sizeof sn, m->gguf ? sinks_name.gguf : sinks_name.hf, l);
            if (get_vector_ex(m, sn, c->n_head, true, false, &L->sinks, err))
                return -1;
        }
        if (get_norm(m, n[T_ATTN_NORM], E, true, &L->attn_norm, err) ||
            get_norm(m, n[T_FFN_NORM], E, true, &L->ffn_norm, err))
            return -1;
        if (c->qk_norm && (get_norm(m, n[T_Q_NORM], c->head_dim, true, &L->q_norm, err) ||
                           get_norm(m, n[T_K_NORM], c->head_dim, true, &L->k_norm, err)))
            return -1;
        if (c->qk_norm_full && (get_norm(m, n[T_Q_NORM], Q, true, &L->q_norm, err) ||
                                get_norm(m, n[T_K_NORM], KV, true, &L->k_norm, err)))
            return -1;
        if (c->post_norms &&
            (get_norm(m, n[T_POST_ATTN_NORM], E, true, &L->post_attn_norm, err) ||
             get_norm(m, n[T_POST_FFN_NORM], E, true, &L->post_ffn_norm, err)))
            return -1;
        /* RoPE, softmax scale and window of the layer (prepare_rope ran) */
        L->window = plume_config_layer_window(c, l);
        float mult = L->window > 0 ? m->rope_local_attn_mult : m->rope_attn_mult;
        L->rope_freq = l < PLUME_MAX_LAYERS && c->nope_layer[l] ? NULL /* SmolLM3's NoPE */
                       : L->window > 0                        ? m->rope_local_freq
                                                              : m->rope_freq;
        /* the softmax scale: 0 (the op's 1/sqrt(head_dim)) unless the
         * config sets one (Gemma) or yarn scales attention (mult) */
        L->attn_scale = c->attn_scale == 0.0f && mult == 1.0f
                            ? 0.0f
                            : (float)((c->attn_scale > 0 ? (double)c->attn_scale
                                                         : 1.0 / sqrt((double)c->head_dim)) *
                                      mult);
        /* a mixture-of-experts layer: router and experts instead of the MLP */
        const bool moe = plume_config_layer_moe(c, l);
        if (moe && plume_moe_load(m, l, L, err))
            return -1;
        for (int i = 0; i < (moe ? L_GATE : L_COUNT); i++) {
            snprintf(p[i], sizeof p[i], m->gguf ? linear_names[i].gguf : linear_names[i].hf, l);
            if (get_linear(m, reg, p[i], dims[i][0], dims[i][1], lins[i], err))
                return -1;
        }
        /* every method owns its layer's bias; the config says q/k/v have one */
        for (int i = L_Q; i < L_O && c->qkv_bias; i++) {
            snprintf(b, sizeof b, "%.159s.bias", p[i]);
            if (!find(m, b))
                return plume_err(err, PLUME_ERR_FORMAT,
                                 "%s: tensor '%s' is missing (the config has q/k/v biases)",
                                 source_path(m), b);
        }
    }
    return 0;
}

/* For a quantized checkpoint: makes sure reg has the method its config
 * names, loading the plugin "quant-<method>" when it does not. */
static int ensure_method(plume_model *m, plume_registry *reg, plume_error *err)
{
    if (!m->quant_method[0] || plume_registry_find_linear(reg, m->quant_method))
        return 0;
    char plugin[64];
    snprintf(plugin, sizeof plugin, "quant-%s", m->quant_method);
    if (plume_registry_load(reg, plugin, err))
        return plume_err_prefix(err,
                                "%s is quantized with quant_method \"%s\", which needs the "
                                "plugin %s (list it under `plugins:` or install it)",
                                source_path(m), m->quant_method, plugin);
    if (!plume_registry_find_linear(reg, m->quant_method))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: plugin %s loaded but registers no linear method \"%s\"",
                         source_path(m), plugin, m->quant_method);
    return 0;
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The HF layout around a checkpoint: config.json, an optional quantization
 * config and tokenizer.json in dir. */
static int open_hf_meta(plume_model *m, const char *dir, plume_error *err)
{
    char p[4096], p2[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (plume_config_from_hf_json(p, &m->cfg, err))
        return -1;
    if (plume_hf_quant_config(dir, &m->quant, m->quant_method, sizeof m->quant_method, err))
        return -1;
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    snprintf(p2, sizeof p2, "%s/tokenizer_config.json", dir);
    struct stat sb;
    if (stat(p, &sb) != 0)
        return plume_err(err, PLUME_ERR_IO,
                         "%s: no tokenizer.json; an HF model directory needs one next to "
                         "config.json",
                         dir);
    /* token ids are bounded by the embedding rows the checkpoint really has */
    const plume_tensor *emb = find(m, "model.embed_tokens.weight");
    int64_t rows = emb && emb->n_dims == 2 ? emb->ne[1] : 0;
    return plume_tokenizer_from_hf_sized(p, stat(p2, &sb) == 0 ? p2 : NULL, rows, &m->tok, err);
}

/* A dummy checkpoint's config (its plan's) and tokenizer: a borrowed
 * GGUF vocabulary or a tokenizer.json. */
static int open_dummy_meta(plume_model *m, plume_error *err)
{
    m->dummy = (plume_dummy *)m->ck;
    m->cfg = *plume_dummy_config(m->dummy);
    const char *tp = plume_dummy_tokenizer_path(m->dummy);
    size_t n = strlen(tp);
    if (n > 5 && strcmp(tp + n - 5, ".gguf") == 0) {
        gguf_file *g;
        if (gguf_open(tp, &g, err))
            return plume_err_prefix(err, "dummy weights: the tokenizer");
        int rc = plume_tokenizer_from_gguf(g, &m->tok, err);
        gguf_close(g);
        return rc ? plume_err_prefix(err, "dummy weights: the tokenizer of %s", tp) : 0;
    }
    return plume_tokenizer_from_hf_sized(tp, NULL, m->cfg.n_vocab, &m->tok, err);
}

/* Opens path with the weight format whose probe scores highest among reg's
 * (the built-ins when reg is NULL).  When none claims it, the built-in that
 * fits its shape (a directory: safetensors, a file: gguf) opens it, so that
 * the error says what is wrong with it.  given: the caller's choice, used
 * without probing.  gguf carries config and tokenizer
 * in its metadata; any other format's checkpoint is a tensor container in
 * an HF directory (config.json and tokenizer.json beside it, HF names). */
static int open_checkpoint(plume_model *m, const plume_registry *reg,
                           const plume_weight_format_vtable *given, const plume_settings *settings,
                           const char *path, plume_error *err)
{
    const plume_weight_format_vtable *fmt = given;
    int best = 0;
    for (size_t i = 0, n = reg && !given ? plume_registry_n_providers(reg) : 0; i < n; i++) {
        plume_provider_info info;
        if (plume_registry_provider(reg, i, &info) || info.kind != PLUME_KIND_WEIGHT_FORMAT)
            continue;
        const plume_weight_format_vtable *f = info.vtable;
        int score = f->probe(path);
        if (score > best) {
            best = score;
            fmt = f;
        }
    }
    if (!fmt)
        fmt = is_dir(path) ? &plume_builtin_safetensors : &plume_builtin_gguf;
    if (fmt->open(path, settings, &m->ck, err))
        return plume_err_prefix(err, "weight format %s", fmt->name);
    m->fmt = fmt;
    if (strcmp(fmt->name, "gguf") == 0 && fmt->open == plume_builtin_gguf.open) {
        m->gguf = (gguf_file *)m->ck;
        if (plume_config_from_gguf(m->gguf, &m->cfg, err))
            return -1;
        return plume_tokenizer_from_gguf(m->gguf, &m->tok, err);
    }
    if (fmt->open == plume_builtin_dummy.open)
        return open_dummy_meta(m, err);
    if (fmt->open == plume_builtin_safetensors.open)
        m->st = (safetensors *)m->ck;
    if (!is_dir(path))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: weight format %s opened it, but plume reads the config and "
                         "tokenizer of a non-GGUF checkpoint from config.json and "
                         "tokenizer.json in its directory; give the model directory",
                         path, fmt->name);
    return open_hf_meta(m, path, err);
}

/* The backend of p: a borrowed instance, or a new one the model owns. */
static int open_backend(plume_model *m, const plume_load_params *p, plume_error *err)
{
    if (p->backend && !p->backend_vt)
        return plume_err(err, PLUME_ERR_INVALID,
                         "plume_load_params: a backend instance needs its backend_vt too");
    m->bvt = p->backend_vt ? p->backend_vt : &plume_builtin_cpu;
    if (p->backend) {
        m->b = p->backend;
        return 0;
    }
    if (m->bvt->create(p->backend_settings, p->n_threads, &m->b, err))
        return plume_err_prefix(err, "backend %s", m->bvt->name);
    m->owns_backend = true;
    return 0;
}

/* Asks the backend about everything the forward pass needs beyond weight
 * types (those are asked tensor by tensor). */
static int check_backend(const plume_model *m, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    int adjacent = c->rope_style == PLUME_ROPE_ADJACENT;
    if (!m->bvt->supports(m->b, PLUME_FEAT_HEAD_DIM, c->head_dim))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: backend %s cannot run attention heads of %d values; choose "
                         "another backend",
                         source_path(m), m->bvt->name, c->head_dim);
    const char *op = NULL;
    if (c->ffn_act == PLUME_FFN_GELU_TANH && !PLUME_BACKEND_HAS_OP(m->bvt, geglu))
        op = "geglu";
    if (c->embed_scale != 0.0f && !PLUME_BACKEND_HAS_OP(m->bvt, scale))
        op = "scale";
    if (c->swiglu_oai && !PLUME_BACKEND_HAS_OP(m->bvt, swiglu_oai))
        op = "swiglu_oai";
    if (op)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: backend %s lacks the op '%s' that %s models need; choose another "
                         "backend (cpu has it)",
                         source_path(m), m->bvt->name, op, c->arch_name);
    if (c->n_expert > 0 &&
        (!PLUME_BACKEND_HAS_OP(m->bvt, gather_rows) ||
         !PLUME_BACKEND_HAS_OP(m->bvt, scatter_add_rows) ||
         !m->bvt->supports(m->b, PLUME_FEAT_MOE, c->n_expert_used)))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: backend %s cannot run mixture-of-experts layers (%s, %d of %d "
                         "experts per token): it lacks gather_rows/scatter_add_rows or says no to "
                         "PLUME_FEAT_MOE; choose another backend (cpu runs them)",
                         source_path(m), m->bvt->name, c->arch_name, c->n_expert_used,
                         c->n_expert);
    if (c->attn_sinks && !m->bvt->supports(m->b, PLUME_FEAT_ATTN_SINKS, c->n_head))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: backend %s cannot run attention sinks (PLUME_FEAT_ATTN_SINKS), "
                         "which %s models need; choose another backend (cpu runs them)",
                         source_path(m), m->bvt->name, c->arch_name);
    if (!m->bvt->supports(m->b, PLUME_FEAT_ROPE_ADJACENT, adjacent))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: backend %s cannot run the model's rope style (%s pairs); choose "
                         "another backend",
                         source_path(m), m->bvt->name, adjacent ? "adjacent" : "half-split");
    return 0;
}

/* One inv_freq vector (plume_rope_inv_freq), on the host and prepared;
 * factors (GGUF rope_freqs.weight, NULL if none) divide it as llama.cpp's
 * rope does with freq_factors. */
static int prepare_inv_freq(plume_model *m, const plume_rope_cfg *r, const plume_tensor *factors,
                            float **host, float *mult, plume_tensor *t, plume_bweight **out,
                            plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    int half = c->head_dim / 2;
    *host = malloc(sizeof(float) * (size_t)(half > 0 ? half : 1));
    if (!*host)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    plume_rope_inv_freq(r, c->head_dim, c->n_ctx_train, *host, mult);
    if (factors) {
        float *ff = malloc(sizeof(float) * (size_t)half);
        if (!ff)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        plume_dequantize(factors->type, factors->data, ff, half);
        for (int i = 0; i < half; i++)
            (*host)[i] /= ff[i];
        free(ff);
    }
    *t = (plume_tensor){.name = "rope.inv_freq", .type = PLUME_DTYPE_F32, .n_dims = 1,
                        .ne = {half, 1, 1, 1}, .data = *host,
                        .nbytes = sizeof(float) * (size_t)half};
    return m->bvt->weight_prepare(m->b, t, out, err);
}

/* The global and the sliding-window layers' rope frequencies.  A GGUF's
 * rope_freqs.weight (Llama 3.1 scaling written by convert_hf_to_gguf.py)
 * must be head_dim/2 positive factors. */
static int prepare_rope(plume_model *m, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const plume_tensor *ff = m->gguf ? find(m, "rope_freqs.weight") : NULL;
    if (ff) {
        int64_t half = c->head_dim / 2;
        if (!plume_dtype_supported(ff->type) || plume_dtype_block_elems(ff->type) != 1 ||
            plume_tensor_nelements(ff) != half)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: tensor 'rope_freqs.weight' should be %lld float factors "
                             "(head_dim/2), found %lld of type %s",
                             source_path(m), (long long)half,
                             (long long)plume_tensor_nelements(ff), plume_dtype_name(ff->type));
        float *tmp = malloc(sizeof(float) * (size_t)half);
        if (!tmp)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        plume_dequantize(ff->type, ff->data, tmp, half);
        int bad = -1;
        for (int64_t i = 0; i < half && bad < 0; i++)
            if (!(tmp[i] > 0.0f) || !isfinite(tmp[i]))
                bad = (int)i;
        free(tmp);
        if (bad >= 0)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: rope_freqs.weight[%d] is not a positive number", source_path(m),
                             bad);
        if (c->rope.type != PLUME_ROPE_SCALING_NONE)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: rope_freqs.weight together with rope scaling %s is not "
                             "supported",
                             source_path(m), plume_rope_scaling_name(c->rope.type));
        m->rope_freq_factors = true;
    }
    if (prepare_inv_freq(m, &c->rope, ff, &m->rope_inv_freq, &m->rope_attn_mult, &m->rope_t,
                         &m->rope_freq, err))
        return -1;
    return prepare_inv_freq(m, &c->rope_local, NULL, &m->rope_local_inv_freq,
                            &m->rope_local_attn_mult, &m->rope_local_t, &m->rope_local_freq, err);
}

/* Gemma's sqrt(hidden) embedding scale as the checkpoint's runtime applies
 * it: transformers casts it to the embedding dtype (BF16/F16 checkpoints
 * get a rounded scale), llama.cpp keeps sqrtf(n_embd) in f32. */
static float embed_scale_for(const plume_model *m)
{
    float s = m->cfg.embed_scale;
    uint32_t ty = m->tok_embd_t->type;
    if (s == 0.0f || m->gguf || (ty != PLUME_DTYPE_BF16 && ty != PLUME_DTYPE_F16))
        return s;
    int e;
    double mant = frexp((double)s, &e); /* [0.5, 1) */
    double steps = ty == PLUME_DTYPE_BF16 ? 256.0 : 2048.0; /* significand bits 8 / 11 */
    return (float)ldexp(nearbyint(mant * steps) / steps, e);
}

plume_load_params plume_load_defaults(void)
{
    plume_load_params p;
    memset(&p, 0, sizeof p);
    return p;
}



int plume_model_load_ex(const char *path, const plume_load_params *p, plume_model **out,
                        plume_error *err)
{
    *out = NULL;
    plume_load_params d = plume_load_defaults();
    if (!p)
        p = &d;
    plume_registry *reg = p->registry;
    plume_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory loading %s", path);
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        plume_err(err, PLUME_ERR_IO,
                  "%s: no such file or directory (give a .gguf file or an HF model "
                  "directory; `scripts/fetch-model` downloads the default model)",
                  path);
        goto fail;
    }
    if (open_checkpoint(m, reg, p->format, p->format_settings, path, err))
        goto fail;
    if (strcmp(m->quant_method, "mxfp4") == 0) {
        /* OpenAI's MXFP4 experts (_blocks/_scales) are read natively
         * (moe_load.c); every other layer of such a checkpoint is plain */
        if (m->cfg.arch != PLUME_ARCH_GPT_OSS) {
            plume_err(err, PLUME_ERR_UNSUPPORTED,
                      "%s: quant_method \"mxfp4\" is supported for gpt_oss checkpoints only "
                      "(this one is %s); use an unquantized checkpoint of this model, or a "
                      "GGUF of it",
                      path, m->cfg.arch_name);
            goto fail;
        }
        m->quant_method[0] = 0;
        plume_settings_free(m->quant);
        m->quant = NULL;
    }
    if (m->quant_method[0] && m->cfg.n_expert > 0) { /* before any plugin is looked for */
        plume_err(err, PLUME_ERR_UNSUPPORTED,
                  "%s: a %s-quantized mixture-of-experts checkpoint is not supported (per-expert "
                  "%s layers have no loader); use the unquantized checkpoint or a GGUF "
                  "quantization",
                  path, m->quant_method, m->quant_method);
        goto fail;
    }
    if (!reg && m->quant_method[0]) { /* only a quantized checkpoint needs plugins */
        if (plume_registry_create(&m->own_reg, err) ||
            plume_registry_add_default_search_path(m->own_reg, err))
            goto fail;
        reg = m->own_reg;
    }
    if (ensure_method(m, reg, err))
        goto fail;
    plume_model_config *c = &m->cfg;
    if (plume_config_validate(c, err))
        goto fail;
    if (plume_tokenizer_n_vocab(m->tok) > c->n_vocab) {
        plume_err(err, PLUME_ERR_FORMAT,
                  "%s: the tokenizer has %d tokens but the model's vocabulary is %d",
                  path, plume_tokenizer_n_vocab(m->tok), c->n_vocab);
        goto fail;
    }
    if (open_backend(m, p, err) || check_backend(m, err))
        goto fail;
    if (m->dummy) /* matrices made on the device when the backend can */
        plume_dummy_set_deferred(m->dummy, PLUME_BACKEND_HAS_OP(m->bvt, weight_fill));
    const char *embd_name = m->gguf ? "token_embd.weight" : "model.embed_tokens.weight";
    if (get_matrix(m, embd_name, c->n_embd, c->n_vocab, &m->tok_embd_t, err))
        goto fail;
    const char *out_prefix = m->gguf ? "output" : "lm_head";
    /* GGUF: a separate head exists iff output.weight does; HF: the config's
     * tie_word_embeddings decides (a tied checkpoint may still carry lm_head). */
    bool separate_head = m->gguf ? find(m, "output.weight") != NULL : !c->tied_embeddings;
    if (separate_head) {
        if (get_linear(m, reg, out_prefix, c->n_embd, c->n_vocab, &m->output, err))
            goto fail;
        c->tied_embeddings = false;
        if (m->dummy ? plume_model_dummy_prepare(m, m->tok_embd_t, &m->own_embd, err)
                     : m->bvt->weight_prepare(m->b, m->tok_embd_t, &m->own_embd, err)) {
            plume_err_prefix(err, "%s: backend %s preparing '%s'", path, m->bvt->name,
                             embd_name);
            goto fail;
        }
        m->tok_embd = m->own_embd;
        m->embd_unread_bytes = (int64_t)m->tok_embd_t->nbytes -
                               (int64_t)plume_dtype_row_bytes(m->tok_embd_t->type, c->n_embd);
    } else {
        /* the head is the embedding matrix, run by the native method */
        plume_weights w = weights_of(m);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s", m->gguf ? "token_embd" : "model.embed_tokens");
        if (m->dummy ? dummy_linear(m, prefix, m->tok_embd_t, &m->output, err)
                     : plume_builtin_native_linear.load(&w, prefix, NULL, m->bvt, m->b,
                                                        &m->output.pl, err)) {
            plume_err_prefix(err, "%s", path);
            goto fail;
        }
        m->output.vt = &plume_builtin_native_linear;
        m->tok_embd = plume_native_linear_weight(m->output.pl);
        c->tied_embeddings = true;
    }
    if (get_norm(m, m->gguf ? "output_norm.weight" : "model.norm.weight", c->n_embd, true,
                   &m->out_norm, err))
        goto fail;
    if (prepare_rope(m, err) || load_layers(m, reg, err))
        goto fail;
    m->embed_scale = embed_scale_for(m);
    *out = m;
    return 0;
fail:
    plume_model_free(m);
    return -1;
}

int plume_model_load_with(const char *path, plume_registry *reg, plume_model **out,
                          plume_error *err)
{
    plume_load_params p = plume_load_defaults();
    p.registry = reg;
    return plume_model_load_ex(path, &p, out, err);
}

int plume_model_load(const char *path, plume_model **out, plume_error *err)
{
    return plume_model_load_with(path, NULL, out, err);
}

const char *plume_model_quant_method(const plume_model *m)
{
    return m->quant_method[0] ? m->quant_method : NULL;
}

const plume_backend_vtable *plume_model_backend(const plume_model *m, plume_backend **inst)
{
    if (inst)
        *inst = m->b;
    return m->bvt;
}

static void lin_release(plume_lin *L)
{
    if (L->vt && L->pl)
        L->vt->destroy(L->pl);
    L->vt = NULL;
    L->pl = NULL;
}

static void weight_release(plume_model *m, plume_bweight **w)
{
    if (*w)
        m->bvt->weight_free(m->b, *w);
    *w = NULL;
}

void plume_model_free(plume_model *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layer; l++) {
            plume_layer *L = &m->layers[l];
            weight_release(m, &L->attn_norm);
            weight_release(m, &L->ffn_norm);
            weight_release(m, &L->q_norm);
            weight_release(m, &L->k_norm);
            weight_release(m, &L->post_attn_norm);
            weight_release(m, &L->post_ffn_norm);
            weight_release(m, &L->sinks);
            plume_lin *lins[L_COUNT] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
            for (int i = 0; i < L_COUNT; i++)
                lin_release(lins[i]);
            plume_moe_free(L);
        }
        free(m->layers);
    }
    weight_release(m, &m->out_norm);
    weight_release(m, &m->own_embd);
    weight_release(m, &m->rope_freq);
    weight_release(m, &m->rope_local_freq);
    lin_release(&m->output);
    free(m->rope_inv_freq);
    free(m->rope_local_inv_freq);
    if (m->owns_backend)
        m->bvt->destroy(m->b);
    plume_tokenizer_free(m->tok);
    if (m->ck)
        m->fmt->close(m->ck);
    plume_settings_free(m->quant);
    plume_registry_free(m->own_reg); /* after every plugin layer is gone */
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->path);
    free(m);
}
