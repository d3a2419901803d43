/* plume quantize --to gguf: the driver (gguf_model_quant.h).  Sources: a
 * GGUF file (metadata copied) or an HF directory (metadata and tokenizer
 * written from config.json / tokenizer.json); per tensor: float rows ->
 * preset type (gguf_mix.h) -> reference quantizer (gguf_quant.h) -> the
 * GGUF writer, one tensor in memory at a time, rows split across threads. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "convert/convert_internal.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "quant/gguf_hparams.h"
#include "model/model_internal.h" /* plume_config_from_gguf */
#include "plume/clock.h"
#include "plume/tensor.h"
#include "plume/tokenizer.h"
#include "plume/quantize_gguf.h"
#include "quant/gguf_mix.h"
#include "quant/gguf_quant.h"
#include "tokenizer/tok_internal.h"

/* One output tensor and where its rows come from. */
typedef struct job {
    char name[72];
    const plume_tensor *src;
    int n_dims;
    int64_t ne[4];
    int32_t perm_head_dim; /* > 0: llama's Q/K row permutation, heads of this size */
    gguf_mix_choice c;
} job;

typedef struct qsrc {
    gguf_file *gguf;
    safetensors *st;
    plume_tokenizer *tok;
    plume_model_config cfg;
    job *jobs;
    int n_jobs;
} qsrc;

static bool is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int add_job(qsrc *s, const char *name, const plume_tensor *t, int32_t perm, plume_error *err)
{
    job *j = &s->jobs[s->n_jobs++];
    memset(j, 0, sizeof *j);
    if (snprintf(j->name, sizeof j->name, "%s", name) >= (int)sizeof j->name)
        return plume_err(err, PLUME_ERR_INVALID, "tensor name %s is too long for GGUF", name);
    j->src = t;
    j->n_dims = t->n_dims;
    for (int d = 0; d < 4; d++)
        j->ne[d] = d < t->n_dims ? t->ne[d] : 1;
    j->perm_head_dim = perm;
    return 0;
}

/* The GGUF tensors of an HF llama/qwen2 directory, in llama.cpp's order. */
static int plan_hf(qsrc *s, const char *dir, plume_error *err)
{
    static const char *const LAYER[] = {
        "attn_norm.weight", "attn_q.weight",   "attn_q.bias",     "attn_k.weight",
        "attn_k.bias",      "attn_v.weight",   "attn_v.bias",     "attn_output.weight",
        "attn_output.bias", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
        "ffn_down.weight"};
    const plume_model_config *c = &s->cfg;
    int cap = 4 + c->n_layer * 13;
    if (!(s->jobs = calloc((size_t)cap, sizeof *s->jobs)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    /* llama GGUFs rotate adjacent rows: permute q/k as convert_hf_to_gguf.py */
    const bool permute = c->arch == PLUME_ARCH_LLAMA;
    for (int l = -1; l <= c->n_layer; l++) {
        int n = l < 0 || l == c->n_layer ? 2 : 13;
        for (int i = 0; i < n; i++) {
            char g[96], hf[160], qk;
            if (l < 0 && i == 1)
                break;
            if (l < 0)
                snprintf(g, sizeof g, "token_embd.weight");
            else if (l == c->n_layer)
                snprintf(g, sizeof g, "%s", i == 0 ? "output_norm.weight" : "output.weight");
            else
                snprintf(g, sizeof g, "blk.%d.%s", l, LAYER[i]);
            if (l == c->n_layer && i == 1 && c->tied_embeddings)
                continue;
            if (!conv_gguf_name_to_hf(g, c->n_layer, hf, sizeof hf, &qk))
                return plume_err(err, PLUME_ERR_INTERNAL, "no HF name for %s", g);
            const plume_tensor *t = safetensors_find(s->st, hf);
            bool bias = strstr(g, ".bias") != NULL;
            if (!t && bias)
                continue;
            if (!t)
                return plume_err(err, PLUME_ERR_FORMAT,
                                 "%s has no tensor %s (GGUF %s); is it a complete llama/qwen2 "
                                 "checkpoint?",
                                 dir, hf, g);
            if (add_job(s, g, t, permute && qk ? c->head_dim : 0, err))
                return -1;
        }
    }
    return 0;
}

static int plan_gguf(qsrc *s, plume_error *err)
{
    size_t n = gguf_n_tensors(s->gguf);
    if (!(s->jobs = calloc(n ? n : 1, sizeof *s->jobs)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const plume_tensor *t = gguf_tensor(s->gguf, i);
        if (add_job(s, t->name, t, 0, err))
            return -1;
    }
    return 0;
}

static int open_source(qsrc *s, const char *in, plume_error *err)
{
    char p[4096], p2[4096];
    if (!is_dir(in)) {
        if (gguf_open(in, &s->gguf, err) || plume_config_from_gguf(s->gguf, &s->cfg, err))
            return -1;
        return plan_gguf(s, err);
    }
    snprintf(p, sizeof p, "%s/config.json", in);
    if (plume_config_from_hf_json(p, &s->cfg, err) || plume_config_validate(&s->cfg, err) ||
        safetensors_open(in, &s->st, err))
        return -1;
    bool every4;
    if (plume_config_nope_layers(&s->cfg, &every4) > 0 && !every4)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: its layers without RoPE (no_rope_layers) are not every 4th layer, "
                         "which is all a GGUF (llama.cpp's smollm3) can say",
                         in);
    if (s->cfg.n_expert > 0)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s is a mixture-of-experts checkpoint (%s, %d experts); writing its "
                         "experts as GGUF (stacked ffn_*_exps tensors) from an HF directory is "
                         "not supported yet: convert it with llama.cpp's convert_hf_to_gguf.py "
                         "(--outtype f16) and run plume quantize on that GGUF",
                         in, s->cfg.arch_name, s->cfg.n_expert);
    snprintf(p, sizeof p, "%s/tokenizer.json", in);
    snprintf(p2, sizeof p2, "%s/tokenizer_config.json", in);
    if (plume_tokenizer_from_hf_sized(p, access(p2, R_OK) == 0 ? p2 : NULL, s->cfg.n_vocab,
                                      &s->tok, err))
        return -1;
    if (s->tok->kind != TOK_KIND_BPE)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s has a SentencePiece tokenizer; writing it as GGUF is not supported "
                         "yet: quantize the model's F16/F32 GGUF instead",
                         in);
    if (!s->tok->pre_name || strcmp(s->tok->pre_name, "custom") == 0)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: the tokenizer's pre-tokenizer is not one GGUF names (%s); quantize "
                         "the model's F16/F32 GGUF instead",
                         in, tok_pretok_supported());
    return plan_hf(s, in, err);
}

static void close_source(qsrc *s)
{
    free(s->jobs);
    plume_tokenizer_free(s->tok);
    if (s->st)
        safetensors_close(s->st);
    gguf_close(s->gguf);
}

static int by_rank(const void *a, const void *b)
{
    int32_t x = ((const tok_merge_entry *)a)->rank, y = ((const tok_merge_entry *)b)->rank;
    return (x > y) - (x < y);
}

/* GGUF keys of an HF model: formats.md §3.3. */
static int write_hf_metadata(gguf_writer *w, const qsrc *s, const char *in, const gguf_mix *mix,
                             plume_error *err)
{
    const plume_model_config *c = &s->cfg;
    const char *a = c->arch_name;
    char k[128];
    gguf_writer_kv_str(w, "general.architecture", a, strlen(a));
    const char *base = strrchr(in, '/');
    base = base && base[1] ? base + 1 : in;
    gguf_writer_kv_str(w, "general.name", base, strlen(base));
    gguf_write_hparams(w, a, c);
    gguf_writer_kv_u32(w, "general.file_type", mix->file_type);
    gguf_writer_kv_u32(w, "general.quantization_version", 2);

    const plume_tokenizer *t = s->tok;
    const tok_vocab *v = &t->vocab;
    gguf_writer_kv_str(w, "tokenizer.ggml.model", t->model_name, strlen(t->model_name));
    gguf_writer_kv_str(w, "tokenizer.ggml.pre", t->pre_name, strlen(t->pre_name));
    gguf_writer_kv_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, (uint64_t)v->n);
    for (int32_t i = 0; i < v->n; i++)
        gguf_writer_arr_str(w, tok_vocab_text(v, i), v->len[i]);
    gguf_writer_kv_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, (uint64_t)v->n);
    for (int32_t i = 0; i < v->n; i++)
        gguf_writer_arr_i32(w, v->type[i]);
    /* merges in rank order, "left right" (formats.md §3.3) */
    const tok_merges *m = &t->merges;
    tok_merge_entry *e = malloc(sizeof *e * (m->n ? m->n : 1));
    if (!e)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory writing the tokenizer");
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->n_slots; i++)
        if (m->slots[i].key != UINT64_MAX)
            e[n++] = m->slots[i];
    qsort(e, n, sizeof *e, by_rank);
    gguf_writer_kv_arr(w, "tokenizer.ggml.merges", GGUF_TYPE_STRING, n);
    char *buf = NULL;
    size_t cap = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t l = (int32_t)(e[i].key >> 32), r = (int32_t)(e[i].key & 0xffffffffu);
        size_t need = v->len[l] + 1 + v->len[r];
        if (need > cap) {
            char *nb = realloc(buf, need * 2);
            if (!nb) {
                free(buf);
                free(e);
                return plume_err(err, PLUME_ERR_NOMEM, "out of memory writing the merges");
            }
            buf = nb;
            cap = need * 2;
        }
        memcpy(buf, tok_vocab_text(v, l), v->len[l]);
        buf[v->len[l]] = ' ';
        memcpy(buf + v->len[l] + 1, tok_vocab_text(v, r), v->len[r]);
        gguf_writer_arr_str(w, buf, need);
    }
    free(buf);
    free(e);
    static const char *const IDS[] = {"bos", "eos", "unknown", "padding", "eot", "eom"};
    const int32_t ids[] = {t->bos, t->eos, t->unk, t->pad, t->eot, t->eom};
    for (int i = 0; i < 6; i++)
        if (ids[i] >= 0) {
            snprintf(k, sizeof k, "tokenizer.ggml.%s_token_id", IDS[i]);
            gguf_writer_kv_u32(w, k, (uint32_t)ids[i]);
        }
    gguf_writer_kv_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos);
    gguf_writer_kv_bool(w, "tokenizer.ggml.add_space_prefix", t->add_space_prefix);
    if (t->chat_template)
        gguf_writer_kv_str(w, "tokenizer.chat_template", t->chat_template,
                           strlen(t->chat_template));
    return 0;
}

/* Every pair of the source GGUF except those the quantized file sets anew
 * (file type, quantization version, alignment, split bookkeeping). */
static void copy_gguf_metadata(gguf_writer *w, const gguf_file *f, const gguf_mix *mix)
{
    for (size_t i = 0; i < gguf_n_kv(f); i++) {
        gguf_str k = gguf_kv_key(f, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(k.len < 255 ? k.len : 255), k.ptr);
        if (strcmp(key, "general.file_type") == 0 ||
            strcmp(key, "general.quantization_version") == 0 ||
            strcmp(key, "general.alignment") == 0 || strncmp(key, "split.", 6) == 0)
            continue;
        gguf_writer_kv_value(w, k.ptr, (size_t)k.len, gguf_kv_value(f, i));
    }
    gguf_writer_kv_u32(w, "general.file_type", mix->file_type);
    gguf_writer_kv_u32(w, "general.quantization_version", 2);
}

/* HF row of GGUF row r under llama's permutation (formats.md §3.5): within
 * each head of d rows, GGUF row 2i is HF row i and 2i + 1 is HF row i + d/2. */
static int64_t hf_row(int64_t r, int32_t d)
{
    if (d <= 0)
        return r;
    int64_t h = r / d, i = r % d;
    return h * d + (i % 2 == 0 ? i / 2 : i / 2 + d / 2);
}

typedef struct qwork {
    const job *j;
    float *x;
    uint8_t *y;
    int64_t r0, r1, ne0;
    size_t src_rb, dst_rb;
    int64_t bad_row; /* first row holding a NaN or infinity, -1 if none */
} qwork;

static void *quant_range(void *arg)
{
    qwork *q = arg;
    const job *j = q->j;
    bool vec = j->n_dims == 1 && j->perm_head_dim > 0; /* a permuted bias: one row */
    for (int64_t r = q->r0; r < q->r1; r++) {
        float *x = q->x + r * q->ne0;
        if (vec) {
            float *tmp = malloc(sizeof(float) * (size_t)q->ne0);
            if (!tmp)
                return (void *)1;
            plume_dequantize((plume_dtype)j->src->type, j->src->data, tmp, q->ne0);
            for (int64_t e = 0; e < q->ne0; e++)
                x[e] = tmp[hf_row(e, j->perm_head_dim)];
            free(tmp);
        } else {
            const uint8_t *src = (const uint8_t *)j->src->data +
                                 (size_t)hf_row(r, j->perm_head_dim) * q->src_rb;
            plume_dequantize((plume_dtype)j->src->type, src, x, q->ne0);
        }
        for (int64_t e = 0; e < q->ne0; e++)
            if (!isfinite(x[e])) {
                q->bad_row = r;
                return NULL;
            }
        gguf_quantize_rows(j->c.type, x, q->y + (size_t)r * q->dst_rb, 1, q->ne0);
    }
    return NULL;
}

static int quantize_job(const job *j, float *x, uint8_t *y, int n_threads, plume_error *err)
{
    int64_t ne0 = j->ne[0], rows = j->ne[1] * j->ne[2] * j->ne[3];
    enum { MAXT = 64 };
    qwork w[MAXT];
    pthread_t th[MAXT];
    int nt = n_threads < 1 ? 1 : n_threads > MAXT ? MAXT : n_threads;
    if (nt > rows)
        nt = (int)rows;
    bool started[MAXT] = {false};
    bool fail = false;
    for (int i = 0; i < nt; i++)
        w[i] = (qwork){j, x, y, rows * i / nt, rows * (i + 1) / nt, ne0,
                       plume_dtype_row_bytes(j->src->type, ne0),
                       plume_dtype_row_bytes(j->c.type, ne0), -1};
    for (int i = 1; i < nt; i++)
        started[i] = pthread_create(&th[i], NULL, quant_range, &w[i]) == 0;
    fail = quant_range(&w[0]) != NULL;
    for (int i = 1; i < nt; i++) {
        void *rv = NULL;
        if (started[i])
            pthread_join(th[i], &rv);
        else
            rv = quant_range(&w[i]); /* no thread: this one does the range */
        fail = fail || rv != NULL;
    }
    if (fail)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory quantizing %s", j->name);
    for (int i = 0; i < nt; i++)
        if (w[i].bad_row >= 0)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "tensor %s has a NaN or infinite weight in row %lld; the model is "
                             "damaged (check the source file)",
                             j->name, (long long)w[i].bad_row);
    return 0;
}

static bool float_type(uint32_t t) { return t == GQ_F32 || t == GQ_F16 || t == 30 /* BF16 */; }

int plume_quantize_to_gguf(const char *in, const char *out_path, const plume_gguf_quant_opts *o,
                           plume_gguf_quant_report *rep, plume_error *err)
{
    memset(rep, 0, sizeof *rep);
    double t0 = plume_clock_seconds();
    const gguf_mix *mix = gguf_mix_find(o->mix);
    if (!mix)
        return plume_err(err, PLUME_ERR_INVALID, "unknown GGUF type '%s'; choose one of %s",
                         o->mix, plume_gguf_mix_names());
    qsrc s = {0};
    gguf_writer *w = NULL;
    float *x = NULL;
    uint8_t *y = NULL;
    int rc = -1;
    bool opened = false;
    if (open_source(&s, in, err))
        goto done;
    gguf_mix_model mm = {s.cfg.n_layer, s.cfg.n_head_kv ? s.cfg.n_head / s.cfg.n_head_kv : 1,
                         true, s.cfg.n_expert};
    for (int i = 0; i < s.n_jobs; i++)
        if (strcmp(s.jobs[i].name, "output.weight") == 0)
            mm.tied = false;
    size_t max_elems = 1, max_bytes = 1;
    if (!(w = gguf_writer_new())) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < s.n_jobs; i++) {
        job *j = &s.jobs[i];
        j->c = gguf_mix_tensor_type(mix, &mm, j->name, j->n_dims, j->ne);
        if (!plume_dtype_supported(j->src->type)) {
            plume_err(err, PLUME_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which plume cannot "
                      "read", in, j->name, plume_dtype_name(j->src->type));
            goto done;
        }
        if (!j->c.quantized) {
            /* kept in float: F32 as llama.cpp's converter stores 1-D tensors,
             * a 2-D float tensor in its own type */
            j->c.type = j->c.wanted = j->n_dims == 1 || !float_type(j->src->type) ? GQ_F32
                                                                                  : j->src->type;
        } else if (!float_type(j->src->type)) {
            plume_err(err, PLUME_ERR_UNSUPPORTED,
                      "%s: tensor %s is already quantized (%s); quantize from the float model "
                      "(an F32/F16/BF16 GGUF or HF directory): re-quantizing adds a second "
                      "rounding error to the first",
                      in, j->name, plume_dtype_name(j->src->type));
            goto done;
        }
        if (gguf_writer_add_tensor(w, j->name, j->n_dims, j->ne, j->c.type, err))
            goto done;
        size_t elems = (size_t)(j->ne[0] * j->ne[1] * j->ne[2] * j->ne[3]);
        if (elems > max_elems)
            max_elems = elems;
        if (gguf_writer_tensor_bytes(w, (size_t)i) > max_bytes)
            max_bytes = gguf_writer_tensor_bytes(w, (size_t)i);
        rep->bytes_in_weights += j->src->nbytes;
    }
    if (s.gguf)
        copy_gguf_metadata(w, s.gguf, mix);
    else if (write_hf_metadata(w, &s, in, mix, err))
        goto done;
    if (!(x = malloc(sizeof(float) * max_elems)) || !(y = malloc(max_bytes))) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory (%zu floats for the largest tensor)",
                  max_elems);
        goto done;
    }
    if (gguf_writer_open(w, out_path, err))
        goto done;
    opened = true;
    int nt = o->n_threads > 0 ? o->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < s.n_jobs; i++) {
        const job *j = &s.jobs[i];
        double ts = plume_clock_seconds();
        if (quantize_job(j, x, y, nt, err) ||
            gguf_writer_tensor_data(w, y, gguf_writer_tensor_bytes(w, (size_t)i), err))
            goto done;
        rep->n_tensors++;
        rep->n_quantized += j->c.quantized;
        rep->n_fallback += j->c.quantized && j->c.type != j->c.wanted;
        if (o->progress) {
            plume_gguf_quant_progress p = {i, s.n_jobs, j->name, j->ne[0],
                                           j->ne[1] * j->ne[2] * j->ne[3], j->src->type,
                                           j->c.type, j->c.wanted, plume_clock_seconds() - ts};
            o->progress(o->user, &p);
        }
    }
    if (gguf_writer_close(w, &rep->bytes_written, err))
        goto done;
    rep->seconds = plume_clock_seconds() - t0;
    rc = 0;
done:
    gguf_writer_free(w);
    if (rc && opened)
        unlink(out_path);
    free(x);
    free(y);
    close_source(&s);
    return rc;
}
