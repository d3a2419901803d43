/* plume perplexity (--model PATH | --pipeline FILE) --text FILE [--kl-base BASE] */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"
#include "plume/perplexity.h"
#include "plume/model.h"

static const char help[] =
    "usage: plume perplexity (--model PATH | --pipeline FILE) --text FILE [options]\n"
    "\n"
    "Perplexity of a model over a text, computed as llama.cpp's llama-perplexity\n"
    "does.  The whole text is tokenized once (BOS first when the model adds one,\n"
    "special-token texts taken literally) and cut into windows of --ctx tokens,\n"
    "each evaluated from an empty cache; when the model adds BOS, the first token\n"
    "of every window is replaced by BOS.\n"
    "  default:      non-overlapping windows at 0, N, 2N, ... (a shorter tail is\n"
    "                dropped).  Scored: the second half of each window, i.e. the\n"
    "                logits of positions N/2 .. N-2 against the tokens at N/2+1 ..\n"
    "                N-1 (N-1-N/2 predictions per window, each with at least N/2\n"
    "                tokens of context).\n"
    "  --stride S:   windows start every S tokens; each scores its last S tokens\n"
    "                (logits of positions N-S-1 .. N-2), so every scored token is\n"
    "                scored once, with at least N-S tokens of context.\n"
    "PPL = exp(mean negative log-likelihood of the scored tokens), printed with\n"
    "llama-perplexity's error estimate PPL * sqrt(var(NLL) / (count - 1)).\n"
    "Progress (running PPL after each window) goes to stderr.\n"
    "\n"
    "With --kl-base BASE, the base model runs on the same windows and, over the\n"
    "same scored positions, plume reports the mean KL divergence\n"
    "KL(base || model) = sum_v p_base(v) * (log p_base(v) - log p_model(v)) with\n"
    "its standard error, median, 99th percentile and maximum, the base model's\n"
    "PPL, and the top-1 agreement (% of positions where both argmaxes agree), as\n"
    "llama-perplexity's KL-divergence mode.  Both models must tokenize the text\n"
    "to the same ids.\n"
    "\n"
    "The model comes from --model or from the pipeline's `model:` and is loaded as\n"
    "the pipeline says (weight format, backend, `threads`, the default for\n"
    "--threads); the base model runs on the same backend.  Evaluation runs the\n"
    "core's forward pass on them.\n"
    "\n"
    "options:\n"
    CLI_PIPELINE_HELP
    "  --text FILE           UTF-8 text to evaluate\n"
    "  --ctx N               window length in tokens (default 512)\n"
    "  --stride S            strided windows, see above (1 <= S < N)\n"
    "  --chunks K            evaluate only the first K windows\n"
    "  --threads N           the backend's threads (default: the pipeline's `threads`)\n"
    "  --kv-dtype T          the model's KV cache: f32, f16 or int8 (default: the\n"
    "                        pipeline's kv_cache.dtype, else f16, what generate and serve\n"
    "                        run); the KL base always runs with f32, so --kl-base on the\n"
    "                        same model measures what the cache's rounding costs, and\n"
    "                        --kv-dtype f32 compares the weights alone\n"
    "  --kl-base BASE        base model for KL divergence: a .gguf file, an HF directory,\n"
    "                        or a pipeline file (.yaml/.yml: its model is used)\n"
    "  --json                print the result as one JSON object on stdout\n";

typedef struct ppl_opts {
    cli_pipeline_opts po;
    const char *text, *base;
    const char *model_path, *base_path; /* resolved */
    plume_ppl_params p;
    int threads;
    bool json, kv_set; /* kv_set: --kv-dtype given */
} ppl_opts;

static int parse(int argc, char **argv, ppl_opts *o)
{
    const char *v;
    o->p.n_ctx = 512;
    for (int i = 1; i < argc; i++) {
        cli_exit_if_help(argv, i, help);
        if (cli_pipeline_opt("perplexity", argc, argv, &i, &o->po)) {
            continue;
        } else if (cli_opt(argc, argv, &i, "--text", &v)) {
            o->text = v;
        } else if (cli_opt(argc, argv, &i, "--ctx", &v)) {
            o->p.n_ctx = (int32_t)cli_int("--ctx", v, 4, 1 << 20);
        } else if (cli_opt(argc, argv, &i, "--stride", &v)) {
            o->p.stride = (int32_t)cli_int("--stride", v, 1, 1 << 20);
        } else if (cli_opt(argc, argv, &i, "--chunks", &v)) {
            o->p.max_windows = (int32_t)cli_int("--chunks", v, 1, 1 << 30);
        } else if (cli_opt(argc, argv, &i, "--threads", &v)) {
            o->threads = (int)cli_int("--threads", v, 1, 1024);
        } else if (cli_opt(argc, argv, &i, "--kv-dtype", &v)) {
            o->p.kv_dtype = (plume_kv_dtype)cli_kv_dtype("perplexity", v);
            o->kv_set = true;
        } else if (cli_opt(argc, argv, &i, "--kl-base", &v)) {
            o->base = v;
        } else if (cli_flag(argv, i, "--json")) {
            o->json = true;
        } else {
            cli_unknown("perplexity", argv[i]);
        }
    }
    if ((!o->po.model && !o->po.pipeline) || !o->text) {
        fprintf(stderr, "plume perplexity: --model or --pipeline, and --text, are required\n\n%s",
                help);
        return 2;
    }
    if (o->p.stride >= o->p.n_ctx) {
        fprintf(stderr, "plume perplexity: --stride %d must be below --ctx %d\n", o->p.stride,
                o->p.n_ctx);
        return 2;
    }
    return -1; /* go on */
}

/* Reads a whole file; NULL (message printed) on failure. */
static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "plume perplexity: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "plume perplexity: cannot read %s\n", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void on_window(void *user, const plume_ppl_stats *s)
{
    (void)user;
    fprintf(stderr, "[%d/%d] PPL %.4f +/- %.4f", s->window, s->n_windows, s->ppl, s->ppl_err);
    if (s->has_base)
        fprintf(stderr, "  KL %.6f  top-1 %.2f%%", s->kl_mean, s->top1_pct);
    fprintf(stderr, "  (%lld scored, %.1f s)\n", (long long)s->n_scored, s->seconds);
}

static void print_text(const ppl_opts *o, const plume_ppl_stats *s)
{
    printf("%s: %lld tokens, %d window(s) of %d, %lld scored tokens\n", o->text,
           (long long)s->n_tokens, s->n_windows, o->p.n_ctx, (long long)s->n_scored);
    printf("PPL = %.4f +/- %.5f (%s KV cache)\n", s->ppl, s->ppl_err,
           plume_kv_dtype_name(o->p.kv_dtype));
    if (s->has_base) {
        printf("base PPL = %.4f +/- %.5f (%s, f32 KV cache)\n", s->base_ppl, s->base_ppl_err,
               o->base_path);
        printf("mean ln(PPL/base PPL) = %.6f\n", s->nll_mean - s->base_nll_mean);
        printf("mean KL(base || model) = %.6g +/- %.2g (median %.6g, p99 %.6g, max %.6g)\n",
               s->kl_mean, s->kl_err, s->kl_median, s->kl_p99, s->kl_max);
        printf("top-1 agreement = %.3f +/- %.3f %%\n", s->top1_pct, s->top1_err);
    }
    printf("%.1f s, %.1f tokens/s evaluated\n", s->seconds,
           s->seconds > 0 ? (double)s->n_windows * o->p.n_ctx * (s->has_base ? 2 : 1) /
                                s->seconds
                          : 0.0);
}

static void print_json(const ppl_opts *o, const plume_ppl_stats *s)
{
    json_t *r = json_pack(
        "{s:s,s:s,s:i,s:i,s:s,s:I,s:i,s:I,s:f,s:f,s:f,s:f}", "model", o->model_path, "text",
        o->text, "ctx", o->p.n_ctx, "stride", o->p.stride, "kv_dtype",
        plume_kv_dtype_name(o->p.kv_dtype), "n_tokens", (json_int_t)s->n_tokens, "n_windows",
        s->n_windows, "n_scored", (json_int_t)s->n_scored, "nll_mean", s->nll_mean, "ppl", s->ppl,
        "ppl_err", s->ppl_err, "seconds", s->seconds);
    if (s->has_base)
        json_object_set_new(
            r, "kl",
            json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "base", o->base_path,
                      "base_kv_dtype", plume_kv_dtype_name(PLUME_KV_F32),
                      "base_ppl", s->base_ppl, "base_ppl_err", s->base_ppl_err, "base_nll_mean",
                      s->base_nll_mean, "mean", s->kl_mean, "err", s->kl_err, "median",
                      s->kl_median, "p99", s->kl_p99, "max", s->kl_max, "top1_pct", s->top1_pct,
                      "top1_err", s->top1_err));
    char *str = json_dumps(r, JSON_ENSURE_ASCII | JSON_REAL_PRECISION(10));
    puts(str);
    free(str);
    json_decref(r);
}

/* A pipeline file rather than a model: a .yaml or .yml name. */
static bool is_pipeline_file(const char *path)
{
    size_t n = strlen(path);
    return (n > 5 && strcmp(path + n - 5, ".yaml") == 0) ||
           (n > 4 && strcmp(path + n - 4, ".yml") == 0);
}

/* Tokenizes text as llama-perplexity does: BOS when the model adds one,
 * special-token texts not parsed. */
static int tokenize(const plume_model *m, const char *path, const char *text, size_t len,
                    int32_t **ids, size_t *n)
{
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    plume_error err = {0};
    if (plume_tokenize(tok, text, len, plume_tokenizer_add_bos(tok), false, ids, n, &err)) {
        fprintf(stderr, "plume perplexity: %s: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

int cmd_perplexity(int argc, char **argv)
{
    ppl_opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    rc = 1;
    size_t len = 0, n = 0, nb = 0;
    char *text = read_text(o.text, &len);
    plume_model *m = NULL, *base = NULL;
    int32_t *ids = NULL, *bids = NULL;
    plume_error err = {0};
    plume_registry *reg = NULL;
    plume_pipeline *pipe = NULL, *bpipe = NULL;
    if (!text)
        return 1;
    if (cli_pipeline_resolve("perplexity", &o.po, &reg, &pipe))
        goto out;
    o.model_path = plume_pipeline_model(pipe);
    if (o.threads == 0)
        o.threads = plume_pipeline_threads(pipe);
    if (!o.kv_set) {
        plume_engine_params ep;
        plume_pipeline_engine_params(pipe, &ep);
        o.p.kv_dtype = ep.kv_dtype;
    }
    o.base_path = o.base;
    if (o.base && is_pipeline_file(o.base)) {
        if (plume_pipeline_load(reg, o.base, &bpipe, &err)) {
            cli_print_error("perplexity", o.base, err.msg);
            goto out;
        }
        o.base_path = plume_pipeline_model(bpipe);
    }
    /* the model as the pipeline assembles it (format, backend, threads); the
     * base model on the same backend, its format by probing */
    plume_build_opts bo = {.n_threads = o.threads};
    plume_load_params lp = plume_load_defaults();
    lp.registry = reg;
    lp.backend_vt = plume_pipeline_backend(pipe, &lp.backend_settings);
    lp.n_threads = o.threads;
    if (plume_pipeline_build(pipe, reg, &bo, &m, NULL, &err) ||
        (o.base && plume_model_load_ex(o.base_path, &lp, &base, &err))) {
        fprintf(stderr, "plume perplexity: %s\n", err.msg);
        goto out;
    }
    if (tokenize(m, o.model_path, text, len, &ids, &n) ||
        (base && tokenize(base, o.base_path, text, len, &bids, &nb)))
        goto out;
    if (base && (n != nb || memcmp(ids, bids, n * sizeof *ids) != 0)) {
        fprintf(stderr,
                "plume perplexity: the model and the base model tokenize %s differently (%zu vs "
                "%zu tokens); KL divergence needs the same tokens\n",
                o.text, n, nb);
        goto out;
    }
    int32_t n_windows, per_window;
    if (plume_ppl_plan(n, &o.p, &n_windows, &per_window, &err)) {
        fprintf(stderr, "plume perplexity: %s: %s\n", o.text, err.msg);
        goto out;
    }
    if (o.p.n_ctx > plume_model_n_ctx_train(m))
        fprintf(stderr, "plume perplexity: warning: --ctx %d exceeds the model's training "
                        "context of %d\n",
                o.p.n_ctx, plume_model_n_ctx_train(m));
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    int32_t bos = plume_tokenizer_add_bos(tok) ? plume_tokenizer_bos(tok) : -1;
    fprintf(stderr,
            "%s: %zu tokens; %d windows of %d tokens%s, scoring %d predictions per window; "
            "%s KV cache%s\n",
            o.text, n, n_windows, o.p.n_ctx, o.p.stride ? " (strided)" : "", per_window,
            plume_kv_dtype_name(o.p.kv_dtype),
            base ? "; KL against the base model (f32 KV cache)" : "");
    plume_ppl_stats s;
    if (plume_perplexity(m, base, ids, n, bos, &o.p, on_window, NULL, &s, &err)) {
        fprintf(stderr, "plume perplexity: %s\n", err.msg);
        goto out;
    }
    if (o.json)
        print_json(&o, &s);
    else
        print_text(&o, &s);
    rc = 0;
out:
    free(ids);
    free(bids);
    plume_model_free(m);
    plume_model_free(base);
    plume_pipeline_free(bpipe);
    plume_pipeline_free(pipe);
    plume_registry_free(reg);
    free(text);
    return rc;
}
