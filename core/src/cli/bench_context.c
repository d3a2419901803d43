/* plume bench context: decode and prefill speed as the context grows, each
 * beside the roofline this machine allows at that depth. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"
#include "plume/cpu.h"
#include "plume/model.h"
#include "plume/registry.h"
#include "plume/seq_runner.h"

static const char help[] =
    "usage: plume bench context --model PATH [options]\n"
    "\n"
    "One prompt (arbitrary ids) is prefilled in chunks through a sequence runner\n"
    "with the chosen KV cache; at each depth D (ascending) it decodes --steps single\n"
    "tokens (batch 1, greedy; llama-bench's -d), then cuts the sequence back to D\n"
    "and goes on.  Prefill of D = the time from position 0 to D.  With --batch N,\n"
    "N such sequences (different prompts) are each brought to D and then decode\n"
    "together, one token each per step (the prefill figure is the first one's).\n"
    "Reports:\n"
    "  decode:  tokens/s of the steps (all sequences), and the roofline\n"
    "           N x bandwidth / (weight bytes + N x KV bytes per token x the\n"
    "           steps' mean depth): the weights are read once per step, every\n"
    "           sequence's KV cache once\n"
    "  prefill: tokens/s of the whole prompt, and the roofline N / (2 x P x N /\n"
    "           int8 peak (f32 peak when the weights are not quantized) +\n"
    "           causal attention FLOPs (4 x layers x heads x head_dim x N(N+1)/2) /\n"
    "           f32 peak), P the parameters every token multiplies by (all but\n"
    "           the token embedding and the output head, which runs for the last\n"
    "           position only)\n"
    "and each as a percentage of its roofline (at the amx level prefill also\n"
    "against the vpdpbusd int8 peak).  Bandwidth and peaks are measured\n"
    "first as `plume bench roofline` does.  Each figure is the median of --reps.\n"
    "\n"
    "options:\n"
    "  --model PATH      a .gguf file or an HF model directory (required)\n"
    "  --load-format dummy [--dummy-dtype T --dummy-seed N --dummy-tokenizer F\n"
    "                    --dummy-pure]  random weights for the config.json in\n"
    "                    --model (docs/dummy-weights.md)\n"
    "  --depths LIST     comma-separated context depths (default 0,512,2048,6144)\n"
    "  --kv-dtype T      KV cache storage: f32, f16, int8 (default f16)\n"
    "  --steps N         decode steps per measurement (default 32)\n"
    "  --batch N         sequences decoding together at each depth (default 1)\n"
    "  --chunk N         prefill chunk, tokens per forward pass (default 512)\n"
    "  --reps N          repetitions (default 3)\n"
    "  --threads N       worker threads (default: PLUME_THREADS, else physical cores)\n"
    "  --json            one JSON object: {machine, model, kv_dtype,\n"
    "                    kv_bytes_per_token, steps, batch, rows: [{depth, decode_tok_s,\n"
    "                    decode_roofline_tok_s, decode_pct, prefill_tok_s,\n"
    "                    prefill_roofline_tok_s, prefill_pct, prefill_vec_pct}]}\n"
    "                    (prefill null at 0; vec: the roofline with the vpdpbusd\n"
    "                    int8 peak, which differs from the level's at amx only)\n";

#define MAX_DEPTHS 32
#define MAX_BATCH 256

typedef struct ctx_opts {
    const char *model;
    cli_pipeline_opts po; /* --load-format and --dummy-* */
    int depths[MAX_DEPTHS], n_depths;
    plume_kv_dtype kv_dtype;
    int steps, batch, chunk, reps, threads;
    bool json;
} ctx_opts;

typedef struct ctx_row {
    int depth;
    double dec, dec_roof, pre, pre_roof, pre_roof_vec; /* vec: against the vpdpbusd peak */
} ctx_row;

static int run_tokens(plume_seq_runner *r, int64_t seq, const int32_t *tokens, int n,
                      bool logits_last, float *logits, plume_error *err)
{
    const plume_seq_run run = {seq, tokens, n, logits_last};
    return plume_seq_runner_run(r, &run, 1, logits, err);
}

/* Decodes o->steps greedy tokens after each sequence's context, one token
 * of every sequence per forward pass (logits holds o->batch rows, the
 * last of each sequence); returns the seconds they took, or -1. */
static double decode_steps(plume_seq_runner *r, const ctx_opts *o, float *logits, int32_t nv,
                           plume_error *err)
{
    int32_t next[MAX_BATCH];
    plume_seq_run runs[MAX_BATCH];
    const double t0 = plume_clock_seconds();
    for (int s = 0; s < o->steps; s++) {
        for (int b = 0; b < o->batch; b++) {
            next[b] = bench_argmax(logits + (size_t)b * (size_t)nv, nv);
            runs[b] = (plume_seq_run){b, &next[b], 1, 1};
        }
        if (plume_seq_runner_run(r, runs, o->batch, logits, err))
            return -1;
    }
    return plume_clock_seconds() - t0;
}

/* Brings sequence b from position cur to d in chunks of o->chunk, the last
 * position's logits into row b of logits. */
static int prefill(plume_seq_runner *r, const ctx_opts *o, int b, const int32_t *prompt, int cur,
                   int d, float *logits, int32_t nv, plume_error *err)
{
    for (int p = cur; p < d;) {
        const int end = (p / o->chunk + 1) * o->chunk < d ? (p / o->chunk + 1) * o->chunk : d;
        if (run_tokens(r, b, prompt + p, end - p, end == d, logits + (size_t)b * (size_t)nv, err))
            return -1;
        p = end;
    }
    return 0;
}

/* One repetition of the whole sweep.  The depths (ascending) are reached
 * by one prompt per sequence prefilled in chunks from position 0: the
 * prefill time of depth d is sequence 0's time from position 0 to d, the
 * same work as a prompt of d tokens alone (the other sequences follow it,
 * untimed); after each depth's decode steps every sequence is cut back to d
 * (plume_seq_runner_truncate) before the prompts go on.  Depth 0 is a
 * one-token prompt.  prompts holds o->batch prompts of max_d ids. */
static int run_rep(plume_seq_runner *r, const ctx_opts *o, const int32_t *prompts, int max_d,
                   float *logits, int32_t nv, double *t_pre, double *t_dec, plume_error *err)
{
    for (int b = 0; b < o->batch; b++)
        (void)plume_seq_runner_release(r, b, NULL);
    int cur = 0;
    double t_cum = 0;
    for (int di = 0; di < o->n_depths; di++) {
        const int d = o->depths[di];
        if (d == 0) {
            for (int b = 0; b < o->batch; b++)
                if (prefill(r, o, b, prompts + (size_t)b * (size_t)max_d, 0, 1, logits, nv, err))
                    return -1;
            if ((t_dec[di] = decode_steps(r, o, logits, nv, err)) < 0)
                return -1;
            for (int b = 0; b < o->batch; b++)
                (void)plume_seq_runner_release(r, b, NULL);
            t_pre[di] = 0;
            continue;
        }
        const double t0 = plume_clock_seconds();
        if (prefill(r, o, 0, prompts, cur, d, logits, nv, err))
            return -1;
        t_cum += plume_clock_seconds() - t0;
        t_pre[di] = t_cum;
        for (int b = 1; b < o->batch; b++)
            if (prefill(r, o, b, prompts + (size_t)b * (size_t)max_d, cur, d, logits, nv, err))
                return -1;
        if ((t_dec[di] = decode_steps(r, o, logits, nv, err)) < 0)
            return -1;
        for (int b = 0; b < o->batch; b++)
            if (plume_seq_runner_truncate(r, b, d, err))
                return -1;
        cur = d;
    }
    return 0;
}

static int sweep(const ctx_opts *o, const bench_machine *mach, ctx_row *rows, int64_t *kvb_out)
{
    plume_error err;
    plume_model *m;
    plume_registry *lreg;
    if (cli_load_model("bench context", &o->po, o->model, o->threads, &m, &lreg))
        return -1;
    int max_d = 1;
    for (int i = 0; i < o->n_depths; i++)
        max_d = o->depths[i] > max_d ? o->depths[i] : max_d;
    plume_seq_runner_params rp = plume_seq_runner_defaults();
    /* each sequence's context plus its steps, and a block's rounding */
    rp.kv_max_tokens = o->batch * (max_d + o->steps + 32);
    rp.max_batch_tokens = o->chunk > o->batch ? o->chunk : o->batch;
    rp.max_seqs = o->batch;
    rp.kv_dtype = o->kv_dtype;
    plume_seq_runner *r;
    if (plume_seq_runner_create(m, &rp, &r, &err)) {
        fprintf(stderr, "plume bench context: %s\n", err.msg);
        plume_model_free(m);
        plume_registry_free(lreg);
        return -1;
    }
    const int32_t nv = plume_model_n_vocab(m);
    int32_t n_layer, n_head, n_head_kv, hd;
    plume_model_attn_shape(m, &n_layer, &n_head, &n_head_kv, &hd);
    const double lin_peak = bench_linear_peak(mach, m, false, NULL);
    const double lin_peak_vec = bench_linear_peak(mach, m, true, NULL);
    /* per prompt token: the layers' products (the head runs for the last
     * token only: one token's worth, left out) */
    const double tok_params = (double)plume_model_n_params_per_token(m);
    const int64_t kvb = plume_seq_runner_kv_bytes_per_token(r);
    *kvb_out = kvb;
    float *logits = malloc(sizeof(float) * (size_t)nv * (size_t)o->batch);
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)max_d * (size_t)o->batch);
    const size_t nd = (size_t)o->n_depths, nr = (size_t)o->reps;
    double *tp = malloc(sizeof(double) * nd * nr), *td = malloc(sizeof(double) * nd * nr);
    double *pre = malloc(sizeof(double) * nr), *dec = malloc(sizeof(double) * nr);
    if (!logits || !prompt || !tp || !td || !pre || !dec) {
        fprintf(stderr, "plume bench context: out of memory\n");
        exit(1);
    }
    for (int b = 0; b < o->batch; b++) /* arbitrary ids spread over the vocabulary */
        for (int i = 0; i < max_d; i++)
            prompt[(size_t)b * (size_t)max_d + (size_t)i] =
                (int32_t)((1 + (int64_t)i * 7919 + (int64_t)b * 104729) % nv);
    int rc = 0;
    for (int rep = 0; rep < o->reps && rc == 0; rep++)
        rc = run_rep(r, o, prompt, max_d, logits, nv, tp + (size_t)rep * nd, td + (size_t)rep * nd,
                     &err);
    for (int di = 0; di < o->n_depths && rc == 0; di++) {
        const int d = o->depths[di];
        for (int rep = 0; rep < o->reps; rep++) {
            pre[rep] = d > 0 ? d / tp[(size_t)rep * nd + (size_t)di] : 0;
            dec[rep] = (double)o->steps * o->batch / td[(size_t)rep * nd + (size_t)di];
        }
        ctx_row *row = &rows[di];
        row->depth = d;
        row->dec = bench_median(dec, o->reps);
        row->pre = bench_median(pre, o->reps);
        /* the steps read the context at depths d+1 .. d+steps: their mean */
        const double mean_depth = (d > 0 ? d : 1) + 0.5 * (o->steps + 1);
        row->dec_roof = o->batch * mach->bw /
                        ((double)plume_model_decode_bytes(m) + (double)o->batch * (double)kvb * mean_depth);
        const double attn_flops = 4.0 * n_layer * n_head * hd * 0.5 * (double)d * (d + 1.0);
        row->pre_roof = d > 0 ? d / (2.0 * tok_params * d / lin_peak + attn_flops / mach->f32) : 0;
        row->pre_roof_vec =
            d > 0 ? d / (2.0 * tok_params * d / lin_peak_vec + attn_flops / mach->f32) : 0;
    }
    if (rc)
        fprintf(stderr, "plume bench context: %s\n", err.msg);
    free(logits);
    free(prompt);
    free(pre);
    free(dec);
    free(tp);
    free(td);
    plume_seq_runner_free(r);
    plume_model_free(m);
    plume_registry_free(lreg); /* after the model: it holds the format's vtable */
    return rc;
}

static void print(const ctx_opts *o, const bench_machine *mach, const ctx_row *rows, int64_t kvb)
{
    if (o->json) {
        json_t *arr = json_array();
        for (int i = 0; i < o->n_depths; i++) {
            const ctx_row *r = &rows[i];
            json_t *pre = r->depth > 0 ? json_real(r->pre) : json_null();
            json_t *pre_roof = r->depth > 0 ? json_real(r->pre_roof) : json_null();
            json_t *pre_pct = r->depth > 0 ? json_real(100.0 * r->pre / r->pre_roof) : json_null();
            json_t *pre_vec =
                r->depth > 0 ? json_real(100.0 * r->pre / r->pre_roof_vec) : json_null();
            json_array_append_new(
                arr, json_pack("{s:i,s:f,s:f,s:f,s:o,s:o,s:o,s:o}", "depth", r->depth,
                               "decode_tok_s", r->dec, "decode_roofline_tok_s", r->dec_roof,
                               "decode_pct", 100.0 * r->dec / r->dec_roof, "prefill_tok_s", pre,
                               "prefill_roofline_tok_s", pre_roof, "prefill_pct", pre_pct,
                               "prefill_vec_pct", pre_vec));
        }
        json_t *root = json_pack(
            "{s:{s:s,s:i,s:f,s:f,s:f,s:f,s:s,s:s},s:s,s:s,s:I,s:i,s:i,s:o}", "machine", "cpu",
            mach->cpu, "threads", o->threads, "bandwidth_gbs", mach->bw / 1e9, "f32_gflops",
            mach->f32 / 1e9, "int8_gops", mach->i8 / 1e9, "int8_vec_gops", mach->i8vec / 1e9,
            "features", mach->feats, "level", mach->level, "model",
            o->model, "kv_dtype", plume_kv_dtype_name(o->kv_dtype), "kv_bytes_per_token",
            (json_int_t)kvb, "steps", o->steps, "batch", o->batch, "rows", arr);
        char *s = json_dumps(root, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(root);
        return;
    }
    const bool tiles = strcmp(mach->level, "amx") == 0;
    printf("machine: %s, %d threads, level %s; %.1f GB/s, %.1f f32 GFLOP/s, %.1f int8 GOP/s",
           mach->cpu, o->threads, mach->level, mach->bw / 1e9, mach->f32 / 1e9, mach->i8 / 1e9);
    if (tiles)
        printf(" (tiles; vpdpbusd %.1f)", mach->i8vec / 1e9);
    printf("\n");
    printf("kv cache %s: %lld bytes per token; decode %d steps of %d sequence%s, prefill in "
           "chunks of %d; medians of %d\n",
           plume_kv_dtype_name(o->kv_dtype), (long long)kvb, o->steps, o->batch,
           o->batch > 1 ? "s" : "", o->chunk, o->reps);
    printf("%7s  %10s %10s %6s  %10s %10s %6s%s\n", "depth", "decode", "roofline", "%", "prefill",
           "roofline", "%", tiles ? "  % of vpdpbusd roofline" : "");
    for (int i = 0; i < o->n_depths; i++) {
        const ctx_row *r = &rows[i];
        printf("%7d  %10.1f %10.1f %5.1f%%", r->depth, r->dec, r->dec_roof,
               100.0 * r->dec / r->dec_roof);
        if (r->depth > 0) {
            printf("  %10.1f %10.1f %5.1f%%", r->pre, r->pre_roof, 100.0 * r->pre / r->pre_roof);
            if (tiles)
                printf("  %22.1f%%", 100.0 * r->pre / r->pre_roof_vec);
            printf("\n");
        } else {
            printf("  %10s %10s %6s\n", "-", "-", "-");
        }
    }
}

static void parse_depths(ctx_opts *o, const char *v)
{
    o->n_depths = 0;
    const char *p = v;
    while (*p) {
        char buf[32];
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof buf || o->n_depths == MAX_DEPTHS) {
            fprintf(stderr, "plume bench context: --depths wants up to %d comma-separated "
                            "numbers, got '%s'\n", MAX_DEPTHS, v);
            exit(2);
        }
        memcpy(buf, p, n);
        buf[n] = '\0';
        o->depths[o->n_depths++] = (int)cli_int("--depths", buf, 0, 1 << 20);
        p += n;
        if (*p == ',')
            p++;
    }
    if (o->n_depths == 0) {
        fprintf(stderr, "plume bench context: --depths is empty\n");
        exit(2);
    }
    for (int i = 1; i < o->n_depths; i++)
        if (o->depths[i] <= o->depths[i - 1]) {
            fprintf(stderr, "plume bench context: --depths must be ascending, got '%s'\n", v);
            exit(2);
        }
}

int bench_context(int argc, char **argv)
{
    ctx_opts o = {.depths = {0, 512, 2048, 6144}, .n_depths = 4,
                  .kv_dtype = plume_seq_runner_defaults().kv_dtype, .steps = 32, .batch = 1,
                  .chunk = 512, .reps = 3, .threads = plume_cpu_count()};
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_opt(argc, argv, &i, "--model", &v) || cli_opt(argc, argv, &i, "-m", &v)) {
            o.model = v;
        } else if (cli_opt(argc, argv, &i, "--depths", &v)) {
            parse_depths(&o, v);
        } else if (cli_opt(argc, argv, &i, "--kv-dtype", &v)) {
            o.kv_dtype = (plume_kv_dtype)cli_kv_dtype("bench context", v);
        } else if (cli_opt(argc, argv, &i, "--steps", &v)) {
            o.steps = (int)cli_int("--steps", v, 1, 100000);
        } else if (cli_opt(argc, argv, &i, "--batch", &v)) {
            o.batch = (int)cli_int("--batch", v, 1, MAX_BATCH);
        } else if (cli_opt(argc, argv, &i, "--chunk", &v)) {
            o.chunk = (int)cli_int("--chunk", v, 1, 1 << 16);
        } else if (bench_machine_opt(argc, argv, &i, &o.reps, &o.threads, &o.json)) {
            continue;
        } else if (!cli_load_format_opt(argc, argv, &i, &o.po)) {
            cli_unknown("bench context", argv[i]);
        }
    }
    if (!o.model) {
        fprintf(stderr, "plume bench context: --model PATH is required (see --help)\n");
        return 2;
    }
    bench_machine mach;
    if (bench_machine_measure(o.threads, o.reps, &mach))
        return 1;
    ctx_row rows[MAX_DEPTHS];
    int64_t kvb = 0;
    if (sweep(&o, &mach, rows, &kvb))
        return 1;
    print(&o, &mach, rows, kvb);
    return 0;
}
