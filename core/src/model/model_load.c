/* Loading a Llama-family model from a GGUF file or an HF directory into
 * plume_model: config, tokenizer, and shape-checked views of every weight. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/cpu/ops.h"
#include "model/model_internal.h"

/* Where a tensor lives under each naming scheme (formats.md §3.4). */
typedef struct tensor_name {
    const char *gguf; /* "%d" is the layer */
    const char *hf;
} tensor_name;

enum { T_ATTN_NORM, T_WQ, T_WK, T_WV, T_WO, T_BQ, T_BK, T_BV, T_BO, T_FFN_NORM, T_GATE, T_UP, T_DOWN,
       T_COUNT };

static const tensor_name layer_names[T_COUNT] = {
    [T_ATTN_NORM] = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    [T_WQ] = {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"},
    [T_WK] = {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"},
    [T_WV] = {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"},
    [T_WO] = {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
    [T_BQ] = {"blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias"},
    [T_BK] = {"blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias"},
    [T_BV] = {"blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias"},
    [T_BO] = {"blk.%d.attn_output.bias", "model.layers.%d.self_attn.o_proj.bias"},
    [T_FFN_NORM] = {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
    [T_GATE] = {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
    [T_UP] = {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
    [T_DOWN] = {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
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

static int load_layers(plume_model *m, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, Q = (int64_t)c->n_head * c->head_dim,
                  KV = (int64_t)c->n_head_kv * c->head_dim, F = c->n_ff;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory allocating %d layers", c->n_layer);
    for (int l = 0; l < c->n_layer; l++) {
        plume_layer *L = &m->layers[l];
        char n[T_COUNT][160];
        for (int i = 0; i < T_COUNT; i++)
            snprintf(n[i], sizeof n[i], m->gguf ? layer_names[i].gguf : layer_names[i].hf, l);
        if (get_vector(m, n[T_ATTN_NORM], E, true, &L->attn_norm, err) ||
            get_vector(m, n[T_FFN_NORM], E, true, &L->ffn_norm, err) ||
            get_matrix(m, n[T_WQ], E, Q, &L->wq, err) ||
            get_matrix(m, n[T_WK], E, KV, &L->wk, err) ||
            get_matrix(m, n[T_WV], E, KV, &L->wv, err) ||
            get_matrix(m, n[T_WO], Q, E, &L->wo, err) ||
            get_matrix(m, n[T_GATE], E, F, &L->w_gate, err) ||
            get_matrix(m, n[T_UP], E, F, &L->w_up, err) ||
            get_matrix(m, n[T_DOWN], F, E, &L->w_down, err))
            return -1;
        bool need_bias = c->qkv_bias;
        if (get_vector(m, n[T_BQ], Q, need_bias, &L->bq, err) ||
            get_vector(m, n[T_BK], KV, need_bias, &L->bk, err) ||
            get_vector(m, n[T_BV], KV, need_bias, &L->bv, err) ||
            get_vector(m, n[T_BO], E, false, &L->bo, err))
            return -1;
    }
    return 0;
}

/* Load-time preparation of every matrix for the CPU matmul (repack.h). */
static int prepare_weights(plume_model *m, plume_error *err)
{
    for (int l = 0; l < m->cfg.n_layer; l++) {
        plume_layer *L = &m->layers[l];
        if (plume_cpu_weight_init(&L->cq, L->wq, err) || plume_cpu_weight_init(&L->ck, L->wk, err) ||
            plume_cpu_weight_init(&L->cv, L->wv, err) || plume_cpu_weight_init(&L->co, L->wo, err) ||
            plume_cpu_weight_init(&L->cgate, L->w_gate, err) ||
            plume_cpu_weight_init(&L->cup, L->w_up, err) ||
            plume_cpu_weight_init(&L->cdown, L->w_down, err))
            return -1;
    }
    return plume_cpu_weight_init(&m->coutput, m->output, err);
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
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    snprintf(p2, sizeof p2, "%s/tokenizer_config.json", dir);
    struct stat sb;
    if (stat(p, &sb) != 0)
        return plume_err(err, PLUME_ERR_IO,
                         "%s: no tokenizer.json; an HF model directory needs one next to "
                         "config.json",
                         dir);
    return plume_tokenizer_from_hf(p, stat(p2, &sb) == 0 ? p2 : NULL, &m->tok, err);
}

static int open_gguf(plume_model *m, const char *path, plume_error *err)
{
    if (gguf_open(path, &m->gguf, err))
        return -1;
    if (plume_config_from_gguf(m->gguf, &m->cfg, err))
        return -1;
    return plume_tokenizer_from_gguf(m->gguf, &m->tok, err);
}

int plume_model_load(const char *path, plume_model **out, plume_error *err)
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
    const char *out_name = m->gguf ? "output.weight" : "lm_head.weight";
    /* GGUF: a separate head exists iff output.weight does; HF: the config's
     * tie_word_embeddings decides (a tied checkpoint may still carry lm_head). */
    bool separate_head = m->gguf ? find(m, out_name) != NULL : !c->tied_embeddings;
    if (separate_head) {
        if (get_matrix(m, out_name, c->n_embd, c->n_vocab, &m->output, err))
            goto fail;
        c->tied_embeddings = false;
    } else {
        m->output = m->tok_embd;
        c->tied_embeddings = true;
    }
    if (get_vector(m, m->gguf ? "output_norm.weight" : "model.norm.weight", c->n_embd, true,
                   &m->out_norm, err))
        goto fail;
    if (load_layers(m, err))
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
            plume_cpu_weight_release(&L->cq);
            plume_cpu_weight_release(&L->ck);
            plume_cpu_weight_release(&L->cv);
            plume_cpu_weight_release(&L->co);
            plume_cpu_weight_release(&L->cgate);
            plume_cpu_weight_release(&L->cup);
            plume_cpu_weight_release(&L->cdown);
        }
        free(m->layers);
    }
    free(m->out_norm);
    plume_cpu_weight_release(&m->coutput);
    free(m->rope_inv_freq);
    plume_tokenizer_free(m->tok);
    gguf_close(m->gguf);
    safetensors_close(m->st);
    free(m->path);
    free(m);
}
