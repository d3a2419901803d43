/* Loading a Llama-family model from a GGUF file or an HF directory into
 * plume_model: config, tokenizer, and shape-checked views of every weight. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/cpu/ops.h"
#include "formats/hf_quant_config.h"
#include "model/model_internal.h"
#include "runtime/builtin.h"
#include "tokenizer/gguf_vocab.h"

/* Where a tensor lives under each naming scheme (formats.md §3.4). */
typedef struct tensor_name {
    const char *gguf; /* "%d" is the layer */
    const char *hf;
} tensor_name;

enum { T_ATTN_NORM, T_FFN_NORM, T_COUNT };

static const tensor_name layer_names[T_COUNT] = {
    [T_ATTN_NORM] = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    [T_FFN_NORM] = {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
};

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

static const plume_tensor *find(const plume_model *m, const char *name)
{
    return m->gguf ? gguf_find_tensor(m->gguf, name) : safetensors_find(m->st, name);
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
                         "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)",
                         source_path(m), name, plume_dtype_name(t->type));
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
    m->n_params += ne0 * ne1;
    m->weight_bytes += (int64_t)t->nbytes;
    *out = t;
    return 0;
}

/* A 1-D weight of n elements, copied to an owned f32 array.  Absent
 * optional vectors give *out = NULL. */
static int get_vector(plume_model *m, const char *name, int64_t n, bool required, float **out,
                      plume_error *err)
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
        plume_dtype_row_bytes(t->type, n) == 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' should be a vector of %lld elements in a float type, "
                         "found %lld elements of type %s",
                         source_path(m), name, (long long)n,
                         (long long)plume_tensor_nelements(t), plume_dtype_name(t->type));
    float *v = malloc(sizeof(float) * (size_t)n);
    if (!v)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory loading '%s'", name);
    plume_tensor row = *t;
    row.ne[0] = n;
    row.ne[1] = row.ne[2] = row.ne[3] = 1;
    plume_cpu_get_row(&row, 0, v);
    m->n_params += n;
    m->weight_bytes += (int64_t)t->nbytes;
    *out = v;
    return 0;
}

/* The open checkpoint as the weight-format interface sees it. */
static plume_weights weights_of(const plume_model *m)
{
    if (m->gguf)
        return (plume_weights){&plume_builtin_gguf, (plume_checkpoint *)m->gguf};
    return (plume_weights){&plume_builtin_safetensors, (plume_checkpoint *)m->st};
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
        return get_matrix(m, name, in, out, &L->w, err);
    }
    if (!m->quant)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: layer %s has %s-style tensors but the checkpoint has no "
                         "quantization_config (config.json) or quantize_config.json giving its "
                         "bits, group_size, sym and format",
                         source_path(m), prefix, vt->name);
    if (vt->load(&w, prefix, m->quant, &plume_builtin_cpu, NULL, &L->pl, err))
        return plume_err_prefix(err, "%s: linear method %s", source_path(m), vt->name);
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
        if (get_vector(m, n[T_ATTN_NORM], E, true, &L->attn_norm, err) ||
            get_vector(m, n[T_FFN_NORM], E, true, &L->ffn_norm, err))
            return -1;
        for (int i = 0; i < L_COUNT; i++) {
            snprintf(p[i], sizeof p[i], m->gguf ? linear_names[i].gguf : linear_names[i].hf, l);
            if (get_linear(m, reg, p[i], dims[i][0], dims[i][1], lins[i], err))
                return -1;
        }
        /* biases of native q/k/v/o (a plugin's method adds its own) */
        float **bias[4] = {&L->bq, &L->bk, &L->bv, &L->bo};
        for (int i = L_Q; i <= L_O; i++) {
            snprintf(b, sizeof b, "%.159s.bias", p[i]);
            if (lins[i]->vt) {
                if (c->qkv_bias && i != L_O && !find(m, b))
                    return plume_err(err, PLUME_ERR_FORMAT,
                                     "%s: tensor '%s' is missing (the config has q/k/v biases)",
                                     source_path(m), b);
                continue;
            }
            if (get_vector(m, b, dims[i][1], c->qkv_bias && i != L_O, bias[i], err))
                return -1;
        }
    }
    return 0;
}

/* Load-time preparation of every native matrix for the CPU matmul
 * (repack.h). */
static int prepare_weights(plume_model *m, plume_error *err)
{
    for (int l = 0; l < m->cfg.n_layer; l++) {
        plume_layer *L = &m->layers[l];
        plume_lin *lins[L_COUNT] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
        for (int i = 0; i < L_COUNT; i++)
            if (!lins[i]->vt && plume_cpu_weight_init(&lins[i]->cw, lins[i]->w, err))
                return -1;
    }
    return m->output.vt ? 0 : plume_cpu_weight_init(&m->output.cw, m->output.w, err);
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

/* Opens the HF directory layout: config.json, safetensors, tokenizer.json. */
static int open_hf(plume_model *m, const char *dir, plume_error *err)
{
    char p[4096], p2[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (plume_config_from_hf_json(p, &m->cfg, err))
        return -1;
    if (safetensors_open(dir, &m->st, err))
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
    const plume_tensor *emb = safetensors_find(m->st, "model.embed_tokens.weight");
    int64_t rows = emb && emb->n_dims == 2 ? emb->ne[1] : 0;
    return plume_tokenizer_from_hf_sized(p, stat(p2, &sb) == 0 ? p2 : NULL, rows, &m->tok, err);
}

static int open_gguf(plume_model *m, const char *path, plume_error *err)
{
    if (gguf_open(path, &m->gguf, err))
        return -1;
    if (plume_config_from_gguf(m->gguf, &m->cfg, err))
        return -1;
    return plume_tokenizer_from_gguf(m->gguf, &m->tok, err);
}

int plume_model_load_with(const char *path, plume_registry *reg, plume_model **out,
                          plume_error *err)
{
    *out = NULL;
    plume_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory loading %s", path);
    }
    struct stat sb;
    int rc;
    if (stat(path, &sb) != 0)
        rc = plume_err(err, PLUME_ERR_IO,
                       "%s: no such file or directory (give a .gguf file or an HF model "
                       "directory; `scripts/fetch-model` downloads the default model)",
                       path);
    else if (is_dir(path))
        rc = open_hf(m, path, err);
    else
        rc = open_gguf(m, path, err);
    if (rc)
        goto fail;
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
    if (get_matrix(m, m->gguf ? "token_embd.weight" : "model.embed_tokens.weight", c->n_embd,
                   c->n_vocab, &m->tok_embd, err))
        goto fail;
    const char *out_prefix = m->gguf ? "output" : "lm_head";
    /* GGUF: a separate head exists iff output.weight does; HF: the config's
     * tie_word_embeddings decides (a tied checkpoint may still carry lm_head). */
    bool separate_head = m->gguf ? find(m, "output.weight") != NULL : !c->tied_embeddings;
    if (separate_head) {
        if (get_linear(m, reg, out_prefix, c->n_embd, c->n_vocab, &m->output, err))
            goto fail;
        c->tied_embeddings = false;
    } else {
        m->output.w = m->tok_embd;
        c->tied_embeddings = true;
    }
    if (get_vector(m, m->gguf ? "output_norm.weight" : "model.norm.weight", c->n_embd, true,
                   &m->out_norm, err))
        goto fail;
    if (load_layers(m, reg, err))
        goto fail;
    if (prepare_weights(m, err))
        goto fail;
    int half = c->head_dim / 2;
    m->rope_inv_freq = malloc(sizeof(float) * (size_t)half);
    if (!m->rope_inv_freq) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < half; i++)
        m->rope_inv_freq[i] = (float)pow((double)c->rope_theta, -2.0 * i / c->head_dim);
    *out = m;
    return 0;
fail:
    plume_model_free(m);
    return -1;
}

int plume_model_load(const char *path, plume_model **out, plume_error *err)
{
    return plume_model_load_with(path, NULL, out, err);
}

const char *plume_model_quant_method(const plume_model *m)
{
    return m->quant_method[0] ? m->quant_method : NULL;
}

/* Releases one linear layer (either kind). */
static void lin_release(plume_lin *L)
{
    if (L->vt)
        L->vt->destroy(L->pl);
    else
        plume_cpu_weight_release(&L->cw);
}

void plume_model_free(plume_model *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layer; l++) {
            plume_layer *L = &m->layers[l];
            free(L->attn_norm);
            free(L->ffn_norm);
            free(L->bq);
            free(L->bk);
            free(L->bv);
            free(L->bo);
            plume_lin *lins[L_COUNT] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
            for (int i = 0; i < L_COUNT; i++)
                lin_release(lins[i]);
        }
        free(m->layers);
    }
    free(m->out_norm);
    lin_release(&m->output);
    free(m->rope_inv_freq);
    plume_tokenizer_free(m->tok);
    gguf_close(m->gguf);
    safetensors_close(m->st);
    plume_settings_free(m->quant);
    plume_registry_free(m->own_reg); /* after every plugin layer is gone */
    free(m->path);
    free(m);
}
