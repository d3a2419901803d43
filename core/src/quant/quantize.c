/* The quantization driver: calibration windows, the layer-by-layer pass
 * (formats.md §1.7's driver, true-sequential inside each layer), and the
 * checkpoint. */
#include "quant/quantize.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"
#include "model/activations.h"
#include "model/model_internal.h"
#include "model/paged_attention.h"
#include "plume/model.h"
#include "quant/hessian.h"
#include "quant/quant_output.h"
#include "runtime/builtin.h"

typedef struct qrun {
    plume_model *m;
    const plume_quantize_opts *o;
    plume_pool *pool;
    int64_t S, T, n;        /* samples, tokens per sample, n = S·T (0: no calibration) */
    plume_acts a;           /* activations [n][dim] */
    double *Hbase, *H;      /* [Kmax][Kmax] */
    float *w, *wdeq;        /* [max out][max in] */
    int32_t *blocks;        /* [S] = s: sample s is "block" s of T slots */
    plume_attn_row *rows;   /* [n] */
    quant_output out;
    plume_quantize_report *rep;
    struct timespec t0;
    int layer;
} qrun;

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* ---- calibration windows ---- */

/* The whole file at path, NUL-terminated, in *text (*len bytes). */
static int read_text(const char *path, char **text, size_t *len, plume_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return plume_err(err, PLUME_ERR_IO, "the calibration text %s is not a readable file",
                         path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return plume_err(err, PLUME_ERR_IO, "cannot open the calibration text %s", path);
    char *t = malloc((size_t)sb.st_size + 1);
    size_t n = t ? fread(t, 1, (size_t)sb.st_size, f) : 0;
    bool bad = !t || ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(t);
        return plume_err(err, t ? PLUME_ERR_IO : PLUME_ERR_NOMEM,
                         "error reading the calibration text %s", path);
    }
    t[n] = 0;
    *text = t;
    *len = n;
    return 0;
}

/* Tokenizes each calibration text (special-token texts such as ChatML's
 * <|im_start|> become their ids, so chat transcripts calibrate the chat
 * format too), cuts each into consecutive windows of seq_len tokens (a
 * window never spans two files), and keeps at most n_samples of them,
 * evenly spread over all windows in file order; *ids gets them ([S][T]). */
static int calib_windows(const plume_model *m, const char *const *paths, int n_paths,
                         int32_t n_samples, int32_t seq_len, int32_t **ids, int64_t *S,
                         plume_error *err)
{
    int32_t *all = NULL; /* every window of every file, back to back */
    int64_t n_win = 0;
    for (int f = 0; f < n_paths; f++) {
        char *text = NULL;
        size_t len = 0, nt = 0;
        int32_t *tok = NULL;
        if (read_text(paths[f], &text, &len, err))
            goto fail;
        int rc = plume_tokenize(m->tok, text, len, false, true, &tok, &nt, err);
        free(text);
        if (rc) {
            plume_err_prefix(err, "tokenizing %s", paths[f]);
            goto fail;
        }
        int64_t w = (int64_t)nt / seq_len;
        int32_t *grown = w ? realloc(all, sizeof *all * (size_t)((n_win + w) * seq_len)) : all;
        if (!grown) {
            free(tok);
            plume_err(err, PLUME_ERR_NOMEM, "out of memory for the calibration tokens");
            goto fail;
        }
        all = grown;
        memcpy(all + n_win * seq_len, tok, sizeof *all * (size_t)(w * seq_len));
        n_win += w;
        free(tok);
    }
    if (n_win < 1) {
        plume_err(err, PLUME_ERR_INVALID,
                  "the calibration text has no window of --seq-len %d tokens; give a longer "
                  "text or a shorter --seq-len",
                  seq_len);
        goto fail;
    }
    int64_t keep = n_win < n_samples ? n_win : n_samples;
    for (int64_t i = 0; i < keep; i++) { /* evenly spread; in place, i <= src */
        int64_t src = i * n_win / keep;
        memmove(all + i * seq_len, all + src * seq_len, sizeof *all * (size_t)seq_len);
    }
    *ids = all;
    *S = keep;
    return 0;
fail:
    free(all);
    return -1;
}

/* ---- the layer pass ---- */

/* y = x·wᵀ (+ bias) for the run's n rows, w [out][in] f32. */
static void linear_f32(qrun *r, const float *w, int64_t in, int64_t out, const float *bias,
                       const float *x, float *y)
{
    plume_tensor t = {.name = "quantized", .type = PLUME_DTYPE_F32, .n_dims = 2,
                      .ne = {in, out, 1, 1}, .data = w,
                      .nbytes = sizeof(float) * (size_t)(in * out)};
    enum { ROWS = 4096 }; /* rows per product */
    for (int64_t i = 0; i < r->n; i += ROWS) {
        int64_t c = r->n - i < ROWS ? r->n - i : ROWS;
        plume_cpu_matmul(r->pool, &t, x + i * in, (int)c, y + i * out);
    }
    if (bias)
        for (int64_t i = 0; i < r->n; i++)
            for (int64_t j = 0; j < out; j++)
                y[i * out + j] += bias[j];
}

static void report(qrun *r, const char *name, int idx, double loss)
{
    if (!r->o->progress)
        return;
    plume_quant_progress p = {r->layer, r->m->cfg.n_layer, name, idx, 7, loss, since(&r->t0)};
    r->o->progress(r->o->user, &p);
}

/* Quantizes one linear of the current layer with Hessian Hbase (NULL
 * without calibration); with calibration, then y = xin·w_deqᵀ (+ bias).
 * idx counts the linears done in this layer (for progress). */
static int do_linear(qrun *r, const char *prefix, const char *short_name, int idx,
                     const plume_lin *L, const float *bias, const float *xin, float *y,
                     plume_error *err)
{
    const plume_tensor *t = L->w;
    const int64_t in = t->ne[0], out = t->ne[1];
    plume_dequantize((plume_dtype)t->type, t->data, r->w, in * out);
    if (r->n)
        memcpy(r->H, r->Hbase, sizeof(double) * (size_t)(in * in));
    plume_quant_job job = {prefix, in, out, r->w, r->n ? r->H : NULL, r->n};
    plume_quant_result res;
    memset(&res, 0, sizeof res);
    res.w_deq = r->wdeq;
    res.loss = -1;
    int rc = r->o->method->quantize(r->o->settings, &job, &res, err);
    for (int i = 0; i < res.n_tensors; i++) {
        if (!rc && quant_output_take(&r->out, prefix, &res.tensors[i], err))
            rc = -1;
        free(res.tensors[i].data);
    }
    if (rc)
        return plume_err_prefix(err, "quantizing %s", prefix);
    if (r->n)
        linear_f32(r, r->wdeq, in, out, bias, xin, y);
    r->rep->n_linears++;
    if (res.loss >= 0)
        r->rep->total_loss += res.loss;
    report(r, short_name, idx, res.loss);
    return 0;
}

/* The Hessian of xin ([n][K]) into Hbase (nothing without calibration). */
static int stage_hessian(qrun *r, const float *xin, int64_t K, plume_error *err)
{
    return r->n ? plume_hessian(r->pool, xin, r->n, K, r->Hbase, err) : 0;
}

static void rmsnorm_rows(qrun *r, const float *w)
{
    const int E = r->m->cfg.n_embd;
    for (int64_t i = 0; i < r->n; i++)
        plume_cpu_rmsnorm(r->a.xn + i * E, r->a.x + i * E, w, E, r->m->cfg.rms_eps);
}

static void add_rows(float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] += y[i];
}

/* One decoder layer: q/k/v, o, gate/up, down, each quantized on inputs
 * that went through the already quantized linears before it. */
static int run_layer(qrun *r, int l, plume_error *err)
{
    const plume_model_config *c = &r->m->cfg;
    const plume_layer *L = &r->m->layers[l];
    const int E = c->n_embd, hd = c->head_dim, Hn = c->n_head, HKV = c->n_head_kv;
    const int Q = Hn * hd, KV = HKV * hd, F = c->n_ff;
    char p[7][160];
    static const char *const names[7] = {"self_attn.q_proj", "self_attn.k_proj",
                                         "self_attn.v_proj", "self_attn.o_proj",
                                         "mlp.gate_proj",    "mlp.up_proj",
                                         "mlp.down_proj"};
    for (int i = 0; i < 7; i++)
        snprintf(p[i], sizeof p[i], "model.layers.%d.%s", l, names[i]);
    r->layer = l;
    report(r, NULL, 0, -1);

    if (r->n)
        rmsnorm_rows(r, L->attn_norm);
    if (stage_hessian(r, r->a.xn, E, err) ||
        do_linear(r, p[0], names[0], 1, &L->q, L->bq, r->a.xn, r->a.q, err) ||
        do_linear(r, p[1], names[1], 2, &L->k, L->bk, r->a.xn, r->a.k, err) ||
        do_linear(r, p[2], names[2], 3, &L->v, L->bv, r->a.xn, r->a.v, err))
        return -1;
    if (r->n) {
        const int adjacent = c->rope_style == PLUME_ROPE_ADJACENT;
        for (int64_t i = 0; i < r->n; i++) {
            int pos = (int)(i % r->T);
            plume_cpu_rope_heads(r->a.q + i * Q, Hn, hd, pos, r->m->rope_inv_freq, adjacent);
            plume_cpu_rope_heads(r->a.k + i * KV, HKV, hd, pos, r->m->rope_inv_freq, adjacent);
        }
        /* sample s's K/V rows are "block" s of T slots: rows i = s·T + pos */
        plume_paged_attention(r->pool, r->a.q, r->a.k, r->a.v, 0, r->rows, (int32_t)r->n,
                              (int32_t)r->T, Hn, HKV, hd, r->a.attn);
    }
    if (stage_hessian(r, r->a.attn, Q, err) ||
        do_linear(r, p[3], names[3], 4, &L->o, L->bo, r->a.attn, r->a.xn, err))
        return -1;
    if (r->n) {
        add_rows(r->a.x, r->a.xn, r->n * E);
        rmsnorm_rows(r, L->ffn_norm);
    }
    if (stage_hessian(r, r->a.xn, E, err) ||
        do_linear(r, p[4], names[4], 5, &L->gate, NULL, r->a.xn, r->a.gate, err) ||
        do_linear(r, p[5], names[5], 6, &L->up, NULL, r->a.xn, r->a.up, err))
        return -1;
    if (r->n)
        for (int64_t i = 0; i < r->n; i++) /* per row: n·F may exceed an int */
            plume_cpu_swiglu(r->a.gate + i * F, r->a.up + i * F, F);
    if (stage_hessian(r, r->a.gate, F, err) ||
        do_linear(r, p[6], names[6], 7, &L->down, NULL, r->a.gate, r->a.xn, err))
        return -1;
    if (r->n)
        add_rows(r->a.x, r->a.xn, r->n * E);
    return 0;
}

/* ---- set-up ---- */

/* The model must be a float HF checkpoint: every linear native and float. */
static int check_input(const plume_model *m, const char *in_dir, plume_error *err)
{
    if (!m->st)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s is a GGUF file; plume quantize reads a float HF directory: "
                         "run `plume convert %s --to hf DIR` first and quantize DIR",
                         in_dir, in_dir);
    if (m->quant_method[0])
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s is already quantized (quant_method %s); quantize a float "
                         "checkpoint",
                         in_dir, m->quant_method);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const plume_layer *L = &m->layers[l];
        const plume_lin *lins[7] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
        for (int i = 0; i < 7; i++) {
            const plume_tensor *t = lins[i]->w;
            if (lins[i]->vt || (t->type != PLUME_DTYPE_F32 && t->type != PLUME_DTYPE_F16 &&
                                t->type != PLUME_DTYPE_BF16))
                return plume_err(err, PLUME_ERR_UNSUPPORTED,
                                 "%s: layer %d has a linear that is not F32/F16/BF16 (%s); "
                                 "quantize from a float checkpoint",
                                 in_dir, l, t ? t->name : "a plugin's method");
        }
    }
    return 0;
}

static int alloc_run(qrun *r, plume_error *err)
{
    const plume_model_config *c = &r->m->cfg;
    const size_t n = (size_t)r->n, E = (size_t)c->n_embd, Q = (size_t)c->n_head * c->head_dim,
                 F = (size_t)c->n_ff;
    size_t kmax = E > Q ? E : Q;
    kmax = kmax > F ? kmax : F;
    size_t wmax = E * (Q > F ? Q : F); /* the largest matrix: [F][E], [E][F] or [Q][E] */
    r->w = malloc(sizeof(float) * wmax);
    r->wdeq = malloc(sizeof(float) * wmax);
    bool ok = r->w && r->wdeq;
    if (n) {
        r->Hbase = malloc(sizeof(double) * kmax * kmax);
        r->H = malloc(sizeof(double) * kmax * kmax);
        r->blocks = malloc(sizeof(int32_t) * (size_t)r->S);
        r->rows = malloc(sizeof *r->rows * n);
        ok = ok && plume_acts_alloc(c, n, &r->a) == 0 && r->Hbase && r->H && r->blocks &&
             r->rows;
    }
    if (!ok)
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory for %lld calibration tokens; lower --samples or "
                         "--seq-len",
                         (long long)n);
    for (int64_t s = 0; s < r->S; s++)
        r->blocks[s] = (int32_t)s;
    for (int64_t i = 0; i < r->n; i++)
        r->rows[i] = (plume_attn_row){(int32_t)(i % r->T), &r->blocks[i / r->T]};
    return 0;
}

static void free_run(qrun *r)
{
    free(r->w);
    free(r->wdeq);
    plume_acts_free(&r->a);
    free(r->Hbase);
    free(r->H);
    free(r->blocks);
    free(r->rows);
    quant_output_free(&r->out);
    plume_pool_free(r->pool);
}

/* Every input tensor except the quantized linears' weights, as float. */
static int copy_float_tensors(qrun *r, plume_error *err)
{
    const plume_model *m = r->m;
    const plume_weight_format_vtable *fmt = &plume_builtin_safetensors;
    const plume_checkpoint *ck = (const plume_checkpoint *)m->st;
    for (size_t i = 0, n = fmt->n_tensors(ck); i < n; i++) {
        const plume_tensor *t = fmt->tensor(ck, i);
        bool quantized = false;
        for (int l = 0; l < m->cfg.n_layer && !quantized; l++) {
            const plume_layer *L = &m->layers[l];
            const plume_lin *lins[7] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
            for (int j = 0; j < 7; j++)
                quantized = quantized || lins[j]->w == t;
        }
        if (!quantized && quant_output_copy(&r->out, t, err))
            return -1;
    }
    return 0;
}

int plume_quantize_model(const char *in_dir, const char *out_dir, plume_registry *reg,
                         const plume_quantize_opts *o, plume_quantize_report *rep,
                         plume_error *err)
{
    memset(rep, 0, sizeof *rep);
    if (!o->method || !o->method->quant_begin || !o->method->quantize)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "linear method %s cannot make checkpoints (it has no quantizer)",
                         o->method ? o->method->name : "(none)");
    bool needs_h = false;
    char qconfig[4096];
    if (o->method->quant_begin(o->settings, &needs_h, qconfig, sizeof qconfig, err))
        return -1;
    if (o->seq_len <= 0 || o->n_samples <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "--samples and --seq-len must be positive");
    qrun r = {0};
    r.o = o;
    r.rep = rep;
    r.out.float_f16 = o->float_f16;
    clock_gettime(CLOCK_MONOTONIC, &r.t0);
    int32_t *ids = NULL;
    int rc = -1;
    if (plume_model_load_with(in_dir, reg, &r.m, err) || check_input(r.m, in_dir, err))
        goto done;
    if (needs_h && o->n_calib == 0) {
        plume_err(err, PLUME_ERR_INVALID,
                  "this method needs calibration data: give --calib FILE (a plain text, e.g. "
                  "bench/data/calib.txt)");
        goto done;
    }
    if (o->n_calib > 0) {
        if (calib_windows(r.m, o->calib_paths, o->n_calib, o->n_samples, o->seq_len, &ids, &r.S,
                          err))
            goto done;
        r.T = o->seq_len;
        r.n = r.S * r.T;
        if (r.n > INT32_MAX) {
            plume_err(err, PLUME_ERR_RANGE,
                      "%lld calibration tokens are more than the pass can index; lower "
                      "--samples or --seq-len",
                      (long long)r.n);
            goto done;
        }
    }
    rep->n_samples = (int32_t)r.S;
    rep->seq_len = (int32_t)r.T;
    rep->n_tokens = r.n;
    rep->total_loss = r.n ? 0 : -1;
    int nth = o->n_threads > 0 ? o->n_threads : plume_cpu_count();
    if (plume_pool_create(nth, &r.pool, err) || alloc_run(&r, err))
        goto done;
    const int E = r.m->cfg.n_embd;
    for (int64_t i = 0; i < r.n; i++)
        plume_cpu_get_row(r.m->tok_embd, ids[i], r.a.x + i * E);
    if (copy_float_tensors(&r, err))
        goto done;
    for (int l = 0; l < r.m->cfg.n_layer; l++)
        if (run_layer(&r, l, err))
            goto done;
    if (quant_output_write(&r.out, out_dir, &rep->bytes_written, err) ||
        quant_output_configs(in_dir, out_dir, qconfig, o->float_f16, err))
        goto done;
    rep->seconds = since(&r.t0);
    rc = 0;
done:
    free(ids);
    free_run(&r);
    plume_model_free(r.m);
    return rc;
}
