/* The quantization driver: calibration windows, the layer-by-layer pass
 * (formats.md §1.7's driver, true-sequential inside each layer), and the
 * checkpoint. */
#include "plume/clock.h"
#include "plume/quantize.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "model/model_internal.h"
#include "model/runner.h"
#include "plume/model.h"
#include "quant/awq_driver.h"
#include "quant/hessian.h"
#include "quant/quant_output.h"
#include "runtime/builtin.h"

/* The seven linears of a decoder layer, in the pass's order, by HF name. */
static const char *const lin_names[7] = {"self_attn.q_proj", "self_attn.k_proj",
                                         "self_attn.v_proj", "self_attn.o_proj",
                                         "mlp.gate_proj",    "mlp.up_proj",
                                         "mlp.down_proj"};

typedef struct qrun {
    plume_model *m;
    const plume_quantize_opts *o;
    int64_t S, T, n;        /* samples, tokens per sample, n = S·T (0: no calibration) */
    double *Hbase, *H;      /* [Kmax][Kmax] */
    float *w;               /* [max out][max in] */
    float *deq[7];          /* the current layer's dequantized weights, which its
                               linears now compute with */
    plume_tensor deq_t[7];
    quant_output out;
    plume_quantize_report *rep;
    awq_driver *awq;        /* the "awq" method's scale search and folds, else NULL */
    double t0; /* plume_clock_seconds() at the start */
    int layer;
} qrun;

static double since(double t0) { return plume_clock_seconds() - t0; }

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

static void report(qrun *r, const char *name, int idx, double loss)
{
    if (!r->o->progress)
        return;
    plume_quant_progress p = {r->layer, r->m->cfg.n_layer, name, idx, 7, loss, since(r->t0)};
    r->o->progress(r->o->user, &p);
}

static plume_lin *layer_lin(plume_model *m, int l, int i)
{
    plume_layer *L = &m->layers[l];
    plume_lin *lins[7] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
    return lins[i];
}

/* The checkpoint tensor "model.layers.<l>.<name>.<suffix>", or NULL. */
static const plume_tensor *layer_tensor(const plume_model *m, int l, int i, const char *suffix)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "model.layers.%d.%s", l, lin_names[i]);
    plume_weights w = {m->fmt, m->ck};
    return plume_weights_find(&w, prefix, suffix);
}

/* Quantizes linear i of layer l with Hessian Hbase (NULL without
 * calibration).  With calibration, the layer's linear then computes with
 * the dequantized result (a native f32 layer over r->deq[i]), so that the
 * rest of the pass sees the quantized model. */
static int do_linear(qrun *r, int l, int i, plume_error *err)
{
    char prefix[160];
    snprintf(prefix, sizeof prefix, "model.layers.%d.%s", l, lin_names[i]);
    const plume_tensor *t = layer_tensor(r->m, l, i, "weight");
    const int64_t in = t->ne[0], out = t->ne[1];
    plume_dequantize((plume_dtype)t->type, t->data, r->w, in * out);
    if (r->n)
        memcpy(r->H, r->Hbase, sizeof(double) * (size_t)(in * in));
    if (r->awq && awq_driver_prepare(r->awq, i, r->w, in, out, r->H, err))
        return plume_err_prefix(err, "quantizing %s", prefix);
    if (r->n && !(r->deq[i] = malloc(sizeof(float) * (size_t)(in * out))))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory quantizing %s", prefix);
    plume_quant_job job = {prefix, in, out, r->w, r->n ? r->H : NULL, r->n};
    plume_quant_result res;
    memset(&res, 0, sizeof res);
    res.w_deq = r->n ? r->deq[i] : r->w;
    res.loss = -1;
    int rc = r->o->method->quantize(r->o->settings, &job, &res, err);
    for (int j = 0; j < res.n_tensors; j++) {
        if (!rc && quant_output_take(&r->out, prefix, &res.tensors[j], err))
            rc = -1;
        free(res.tensors[j].data);
    }
    if (rc)
        return plume_err_prefix(err, "quantizing %s", prefix);
    if (r->awq)
        awq_driver_finish(r->awq, res.w_deq, in, out);
    if (r->n) {
        r->deq_t[i] = (plume_tensor){.name = t->name, .type = PLUME_DTYPE_F32, .n_dims = 2,
                                     .ne = {in, out, 1, 1}, .data = r->deq[i],
                                     .nbytes = sizeof(float) * (size_t)(in * out)};
        const plume_tensor *bias = layer_tensor(r->m, l, i, "bias");
        plume_tensor bv;
        if (bias) {
            bv = *bias;
            bv.n_dims = 1;
            bv.ne[0] = out;
            bv.ne[1] = bv.ne[2] = bv.ne[3] = 1;
        }
        plume_lin *L = layer_lin(r->m, l, i);
        plume_linear *pl;
        if (plume_native_linear_create(r->m->bvt, r->m->b, &r->deq_t[i], bias ? &bv : NULL, &pl,
                                       err))
            return -1;
        L->vt->destroy(L->pl);
        L->pl = pl;
        L->vt = &plume_builtin_native_linear;
    }
    r->rep->n_linears++;
    if (res.loss >= 0)
        r->rep->total_loss += res.loss;
    report(r, lin_names[i], i + 1, res.loss);
    return 0;
}

/* The runner's hook: the Hessian of a group's input, then each linear of
 * the group quantized (q/k/v, then o, then gate/up, then down: the
 * reference's true-sequential order). */
static int calib_hook(void *ctx, int l, int which, const plume_buf *x, int32_t n,
                      plume_error *err)
{
    qrun *r = ctx;
    static const int first[] = {[PLUME_LIN_QKV] = 0, [PLUME_LIN_O] = 3, [PLUME_LIN_GATE_UP] = 4,
                                [PLUME_LIN_DOWN] = 6};
    static const int count[] = {[PLUME_LIN_QKV] = 3, [PLUME_LIN_O] = 1, [PLUME_LIN_GATE_UP] = 2,
                                [PLUME_LIN_DOWN] = 1};
    const float *hx = r->m->bvt->host_ptr ? r->m->bvt->host_ptr(r->m->b, x) : NULL;
    if (!hx)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "the calibration pass needs a backend with host memory (cpu)");
    int64_t K = layer_tensor(r->m, l, first[which], "weight")->ne[0];
    if (plume_hessian(r->m->bvt, r->m->b, hx, n, K, r->Hbase, err))
        return -1;
    if (r->awq && awq_driver_group(r->awq, &r->out, l, which, hx, n, K, r->Hbase, err))
        return plume_err_prefix(err, "layer %d", l);
    for (int i = first[which]; i < first[which] + count[which]; i++)
        if (do_linear(r, l, i, err))
            return -1;
    return 0;
}

/* Drops the dequantized weights of the layer just done: its linears are
 * not run again. */
static void layer_done(qrun *r, int l)
{
    for (int i = 0; i < 7; i++) {
        plume_lin *L = layer_lin(r->m, l, i);
        if (r->deq[i] && L->vt) {
            L->vt->destroy(L->pl);
            L->vt = NULL;
            L->pl = NULL;
        }
        free(r->deq[i]);
        r->deq[i] = NULL;
    }
}

/* Every layer's linears quantized in order; with calibration, the windows'
 * hidden states go through the forward pass's own layer code (runner.h),
 * all S windows as one batch of S sequences, each in its own cache block of
 * T slots, one cache layer reused by every layer. */
static int run_layers(qrun *r, const int32_t *ids, plume_error *err)
{
    const int n_layer = r->m->cfg.n_layer;
    if (!r->n) {
        for (int l = 0; l < n_layer; l++) {
            r->layer = l;
            report(r, NULL, 0, -1);
            for (int i = 0; i < 7; i++)
                if (do_linear(r, l, i, err))
                    return -1;
        }
        return 0;
    }
    plume_kv_cache *kv = NULL;
    plume_runner *run = NULL;
    plume_batch_seq *seqs = calloc((size_t)r->S, sizeof *seqs);
    int32_t *blocks = malloc(sizeof(int32_t) * (size_t)r->S);
    int rc = -1;
    if (!seqs || !blocks) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t s = 0; s < r->S; s++) {
        blocks[s] = (int32_t)s;
        seqs[s] = (plume_batch_seq){ids + s * r->T, (int32_t)r->T, 0, &blocks[s], 0};
    }
    if (plume_kv_cache_create_layers(r->m, 1, (int32_t)r->S, (int32_t)r->T, PLUME_KV_F32, &kv,
                                      err) ||
        plume_runner_create(r->m, kv, (int32_t)r->n, &run, err)) {
        plume_err_prefix(err, "%lld calibration tokens (lower --samples or --seq-len)",
                         (long long)r->n);
        goto out;
    }
    if (plume_runner_begin(run, seqs, (int32_t)r->S, err))
        goto out;
    for (int l = 0; l < n_layer; l++) {
        r->layer = l;
        report(r, NULL, 0, -1);
        if (plume_runner_layer(run, l, 0, calib_hook, r, err)) {
            plume_runner_end(run, NULL, NULL);
            goto out;
        }
        layer_done(r, l);
    }
    rc = plume_runner_end(run, NULL, err);
out:
    plume_runner_free(run);
    plume_kv_cache_free(kv);
    free(seqs);
    free(blocks);
    return rc;
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
    if (m->cfg.n_expert > 0)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s is a mixture-of-experts model (%s, %d experts per layer); per-expert "
                         "GPTQ/AWQ quantization is not supported (plume cannot load such a "
                         "checkpoint either): use a GGUF preset instead (`plume quantize --to "
                         "gguf` on its F16/F32 GGUF)",
                         in_dir, m->cfg.arch_name, m->cfg.n_expert);
    for (int l = 0; l < m->cfg.n_layer; l++)
        for (int i = 0; i < 7; i++) {
            const plume_tensor *t = layer_tensor(m, l, i, "weight");
            if (!t || (t->type != PLUME_DTYPE_F32 && t->type != PLUME_DTYPE_F16 &&
                       t->type != PLUME_DTYPE_BF16))
                return plume_err(err, PLUME_ERR_UNSUPPORTED,
                                 "%s: layer %d has a linear that is not F32/F16/BF16 (%s); "
                                 "quantize from a float checkpoint",
                                 in_dir, l, t ? t->name : lin_names[i]);
        }
    return 0;
}

static int alloc_run(qrun *r, plume_error *err)
{
    const plume_model_config *c = &r->m->cfg;
    const size_t E = (size_t)c->n_embd, Q = (size_t)c->n_head * c->head_dim,
                 F = (size_t)c->n_ff;
    size_t kmax = E > Q ? E : Q;
    kmax = kmax > F ? kmax : F;
    size_t wmax = E * (Q > F ? Q : F); /* the largest matrix: [F][E], [E][F] or [Q][E] */
    r->w = malloc(sizeof(float) * wmax);
    bool ok = r->w != NULL;
    if (r->n) {
        r->Hbase = malloc(sizeof(double) * kmax * kmax);
        r->H = malloc(sizeof(double) * kmax * kmax);
        ok = ok && r->Hbase && r->H;
    }
    if (!ok)
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory for %lld calibration tokens; lower --samples or "
                         "--seq-len",
                         (long long)r->n);
    return 0;
}

static void free_run(qrun *r)
{
    free(r->w);
    for (int i = 0; i < 7; i++)
        free(r->deq[i]);
    free(r->Hbase);
    free(r->H);
    quant_output_free(&r->out);
    awq_driver_free(r->awq);
}

/* Every input tensor except the quantized linears' weights, as float. */
static int copy_float_tensors(qrun *r, plume_error *err)
{
    const plume_model *m = r->m;
    for (size_t i = 0, n = m->fmt->n_tensors(m->ck); i < n; i++) {
        const plume_tensor *t = m->fmt->tensor(m->ck, i);
        bool quantized = false;
        for (int l = 0; l < m->cfg.n_layer && !quantized; l++)
            for (int j = 0; j < 7; j++)
                quantized = quantized || layer_tensor(m, l, j, "weight") == t;
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
    r.t0 = plume_clock_seconds();
    int32_t *ids = NULL;
    int rc = -1;
    plume_load_params lp = plume_load_defaults();
    lp.registry = reg;
    lp.n_threads = o->n_threads;
    if (plume_model_load_ex(in_dir, &lp, &r.m, err) || check_input(r.m, in_dir, err))
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
    if (strcmp(o->method->name, "awq") == 0 && awq_driver_create(r.m, o->settings, &r.awq, err))
        goto done;
    if (alloc_run(&r, err) || copy_float_tensors(&r, err) || run_layers(&r, ids, err))
        goto done;
    if (quant_output_write(&r.out, out_dir, &rep->bytes_written, err) ||
        quant_output_configs(in_dir, out_dir, qconfig, o->float_f16, err))
        goto done;
    rep->seconds = since(r.t0);
    rc = 0;
done:
    free(ids);
    free_run(&r);
    plume_model_free(r.m);
    return rc;
}
