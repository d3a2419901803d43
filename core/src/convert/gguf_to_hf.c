/* GGUF -> HF checkpoint: tensor names, dequantization, the inverse of
 * llama's Q/K row permutation, and the order in which the files of the
 * output directory are written. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/fp16.h"
#include "convert/convert_internal.h"
#include "convert/st_writer.h"
#include "model/model_internal.h"

/* GGUF tensor-name suffixes of a layer and their HF names (formats.md §3.4). */
static const struct {
    const char *gguf, *hf;
} LAYER_NAMES[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

/* One output tensor. */
typedef struct conv_job {
    const plume_tensor *src;
    char hf_name[160];
    int32_t perm_heads; /* > 0: undo the Q/K permutation over this many heads */
    int32_t head_dim;
    plume_convert_dtype dtype;
} conv_job;

bool conv_gguf_name_to_hf(const char *g, int32_t n_layer, char *hf, size_t cap, char *qk)
{
    *qk = 0;
    if (strcmp(g, "token_embd.weight") == 0)
        return snprintf(hf, cap, "model.embed_tokens.weight") > 0;
    if (strcmp(g, "output_norm.weight") == 0)
        return snprintf(hf, cap, "model.norm.weight") > 0;
    if (strcmp(g, "output.weight") == 0)
        return snprintf(hf, cap, "lm_head.weight") > 0;
    int layer, used = 0;
    if (sscanf(g, "blk.%d.%n", &layer, &used) != 1 || used == 0 || layer < 0 ||
        layer >= n_layer)
        return false;
    const char *rest = g + used;
    for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0]; i++)
        if (strcmp(rest, LAYER_NAMES[i].gguf) == 0) {
            if (strncmp(rest, "attn_q.", 7) == 0)
                *qk = 'q';
            else if (strncmp(rest, "attn_k.", 7) == 0)
                *qk = 'k';
            return snprintf(hf, cap, "model.layers.%d.%s", layer, LAYER_NAMES[i].hf) > 0;
        }
    return false;
}

/* Source row of HF row r: within each head of d rows, HF row i < d/2 was
 * written to GGUF row 2i and HF row i + d/2 to row 2i + 1 (§3.5). */
static int64_t src_row(const conv_job *j, int64_t r)
{
    if (j->perm_heads <= 0)
        return r;
    int64_t d = j->head_dim, h = r / d, i = r % d;
    return h * d + (i < d / 2 ? 2 * i : 2 * (i - d / 2) + 1);
}

/* st_fill_fn: dequantizes row by row (in HF row order) and stores. */
static int fill_tensor(void *user, void *dst, size_t nbytes, plume_error *err)
{
    const conv_job *j = user;
    const plume_tensor *t = j->src;
    int64_t ne0 = t->ne[0], rows = plume_tensor_nelements(t) / ne0;
    size_t esz = j->dtype == PLUME_CONVERT_F32 ? 4 : 2;
    if (nbytes != (size_t)(ne0 * rows) * esz)
        return plume_err(err, PLUME_ERR_INTERNAL, "size mismatch (%zu bytes)", nbytes);
    size_t rb = plume_dtype_row_bytes(t->type, ne0);
    /* A 1-D bias of a permuted projection is one "row" per element. */
    bool vec_perm = t->n_dims == 1 && j->perm_heads > 0;
    float *row = malloc(sizeof(float) * (size_t)ne0);
    if (!row)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    float *perm = NULL;
    if (vec_perm) {
        if (!(perm = malloc(sizeof(float) * (size_t)ne0))) {
            free(row);
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = (const uint8_t *)t->data + (size_t)src_row(j, r) * rb;
        plume_dequantize((plume_dtype)t->type, src, row, ne0);
        const float *out = row;
        if (vec_perm) {
            for (int64_t e = 0; e < ne0; e++)
                perm[e] = row[src_row(j, e)];
            out = perm;
        }
        if (j->dtype == PLUME_CONVERT_F32) {
            memcpy((float *)dst + r * ne0, out, sizeof(float) * (size_t)ne0);
        } else {
            uint16_t *h = (uint16_t *)dst + r * ne0;
            for (int64_t e = 0; e < ne0; e++)
                h[e] = plume_fp32_to_fp16(out[e]);
        }
    }
    free(perm);
    free(row);
    return 0;
}

/* Builds one job per GGUF tensor, checking names, types and shapes. */
static int plan_jobs(const conv_model *cm, plume_convert_dtype dtype, conv_job *jobs,
                     plume_error *err)
{
    const gguf_file *f = cm->gguf;
    const plume_model_config *c = &cm->cfg;
    bool permuted = c->rope_style == PLUME_ROPE_ADJACENT;
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const plume_tensor *t = gguf_tensor(f, i);
        conv_job *j = &jobs[i];
        char qk;
        if (!conv_gguf_name_to_hf(t->name, c->n_layer, j->hf_name, sizeof j->hf_name, &qk))
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has no Hugging Face counterpart that plume knows "
                             "(formats.md §3.4); refusing to drop it silently",
                             gguf_path(f), t->name);
        if (!plume_dtype_supported(t->type))
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has type %s, which plume cannot dequantize "
                             "(supported: %s)",
                             gguf_path(f), t->name, plume_dtype_name(t->type),
                             plume_dtype_supported_names());
        if (t->n_dims < 1 || t->n_dims > 2 || plume_dtype_row_bytes(t->type, t->ne[0]) == 0)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: tensor '%s' has %d dims / rows of %lld elements, not a 1-D or "
                             "2-D tensor of whole %s blocks",
                             gguf_path(f), t->name, t->n_dims, (long long)t->ne[0],
                             plume_dtype_name(t->type));
        j->src = t;
        j->dtype = dtype;
        j->head_dim = c->head_dim;
        if (permuted && qk) {
            j->perm_heads = qk == 'q' ? c->n_head : c->n_head_kv;
            int64_t rows = t->n_dims == 1 ? t->ne[0] : t->ne[1];
            if (rows != (int64_t)j->perm_heads * c->head_dim)
                return plume_err(err, PLUME_ERR_FORMAT,
                                 "%s: tensor '%s' has %lld rows; %d heads of %d expected",
                                 gguf_path(f), t->name, (long long)rows, j->perm_heads,
                                 c->head_dim);
        }
    }
    return 0;
}

static void say(const plume_convert_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const plume_convert_opts *o, const char *fmt, ...)
{
    if (!o->log)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    o->log(o->user, line);
}

typedef struct progress_ctx {
    const plume_convert_opts *o;
    const conv_job *jobs;
    size_t n;
} progress_ctx;

static void on_tensor(void *user, size_t index, size_t count, const char *name, const char *dtype)
{
    const progress_ctx *p = user;
    const char *from = "?";
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->jobs[i].hf_name, name) == 0)
            from = plume_dtype_name(p->jobs[i].src->type);
    say(p->o, "[%3zu/%zu] %-48s %s -> %s", index + 1, count, name, from, dtype);
}

/* Registers every job with the writer (HF shape = reversed ggml ne). */
static int add_jobs(st_writer *w, conv_job *jobs, size_t n, plume_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const plume_tensor *t = jobs[i].src;
        int64_t shape[2] = {t->n_dims == 2 ? t->ne[1] : t->ne[0], t->ne[0]};
        if (st_writer_add(w, jobs[i].hf_name, jobs[i].dtype == PLUME_CONVERT_F32 ? "F32" : "F16",
                          shape, t->n_dims, fill_tensor, &jobs[i], err))
            return -1;
    }
    return 0;
}

/* Fills cm from the GGUF: config, biases, tying. */
static int describe(const gguf_file *f, plume_convert_dtype dtype, conv_model *cm,
                    plume_error *err)
{
    memset(cm, 0, sizeof *cm);
    cm->gguf = f;
    if (plume_config_from_gguf(f, &cm->cfg, err) || plume_config_validate(&cm->cfg, err))
        return -1;
    /* the writer knows llama and qwen2 only: anything more would be dropped */
    const plume_model_config *cc = &cm->cfg;
    bool every4;
    if ((cc->arch != PLUME_ARCH_LLAMA && cc->arch != PLUME_ARCH_QWEN2) ||
        plume_config_nope_layers(cc, &every4) > 0 ||
        cc->rope.type != PLUME_ROPE_SCALING_NONE || cc->sliding_window > 0 ||
        gguf_find_tensor(f, "rope_freqs.weight"))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: plume convert writes llama and qwen2 checkpoints without RoPE "
                         "scaling or sliding windows; this %s model has more (run it from the "
                         "GGUF directly)",
                         gguf_path(f), cc->arch_name);
    if (cc->n_expert > 0)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: plume convert does not write mixture-of-experts checkpoints (this "
                         "one has %d experts per layer); run it from the GGUF directly",
                         gguf_path(f), cc->n_expert);
    cm->tied = gguf_find_tensor(f, "output.weight") == NULL;
    cm->attn_bias = gguf_find_tensor(f, "blk.0.attn_q.bias") != NULL;
    cm->torch_dtype = dtype == PLUME_CONVERT_F32 ? "float32" : "float16";
    const plume_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->ne[0] != cm->cfg.n_embd)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: token_embd.weight is missing or not [%d, n_vocab]", gguf_path(f),
                         cm->cfg.n_embd);
    if (emb->ne[1] != cm->cfg.n_vocab)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: token_embd.weight has %lld rows but the vocabulary is %d",
                         gguf_path(f), (long long)emb->ne[1], cm->cfg.n_vocab);
    return 0;
}

int plume_convert_gguf_to_hf(const char *src_path, const char *out_dir,
                             const plume_convert_opts *opts, plume_error *err)
{
    plume_convert_opts none = {0};
    const plume_convert_opts *o = opts ? opts : &none;
    gguf_file *f = NULL;
    conv_job *jobs = NULL;
    st_writer *w = NULL;
    int rc = -1;
    if (gguf_open(src_path, &f, err))
        return -1;
    conv_model cm;
    if (describe(f, o->dtype, &cm, err) || conv_check_tokenizer(f, err))
        goto out;
    size_t n = gguf_n_tensors(f);
    jobs = calloc(n ? n : 1, sizeof *jobs);
    w = st_writer_new();
    if (!jobs || !w) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (plan_jobs(&cm, o->dtype, jobs, err) || add_jobs(w, jobs, n, err) ||
        st_writer_meta(w, "format", "pt", err))
        goto out;
    say(o, "%s: %s, %d layers, %d heads (%d kv) x %d, vocab %d%s%s", gguf_path(f),
        cm.cfg.arch_name, cm.cfg.n_layer, cm.cfg.n_head, cm.cfg.n_head_kv, cm.cfg.head_dim,
        cm.cfg.n_vocab, cm.tied ? ", tied embeddings" : "",
        cm.cfg.rope_style == PLUME_ROPE_ADJACENT ? ", undoing the Q/K row permutation" : "");
    say(o, "writing %zu tensors (%.1f MB of %s) to %s/model.safetensors", n,
        (double)st_writer_data_bytes(w) / 1e6, o->dtype == PLUME_CONVERT_F32 ? "F32" : "F16",
        out_dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    progress_ctx pc = {o, jobs, n};
    if (st_writer_write(w, path, on_tensor, &pc, err))
        goto out;
    if (conv_write_config(&cm, out_dir, err) || conv_write_tokenizer(&cm, out_dir, err))
        goto out;
    say(o, "wrote config.json, generation_config.json, tokenizer.json, tokenizer_config.json");
    rc = 0;
out:
    st_writer_free(w);
    free(jobs);
    gguf_close(f);
    return rc;
}

double conv_float_repr(float f)
{
    char buf[64];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
        if ((float)strtod(buf, NULL) == f)
            return strtod(buf, NULL);
    }
    return (double)f;
}

int conv_dump_json(json_t *root, const char *dir, const char *name, plume_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!root)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory building %s", path);
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (rc)
        return plume_err(err, PLUME_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}
