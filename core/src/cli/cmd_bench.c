/* plume bench roofline: this machine's streaming bandwidth and arithmetic
 * peaks measured with plume's own kernels, then a model's decode and
 * prefill speed as a fraction of the roofline they imply. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"
#include "plume/backend.h"
#include "plume/cpu.h"
#include "plume/model.h"
#include "plume/registry.h"
#include "plume/seq_runner.h"

static const char help[] =
    "usage: plume bench roofline [--model PATH] [options]\n"
    "\n"
    "Measures, with plume's own CPU kernels at the active dispatch level, this\n"
    "machine's streaming read bandwidth (all threads, a 1 GiB buffer, far larger\n"
    "than the last-level cache), peak f32 FMA rate and peak int8 dot-product rate\n"
    "(AMX-INT8 tile multiplies at the amx level, 512-bit vpdpbusd at avx512,\n"
    "vpmaddubsw+vpmaddwd at avx2, plain C at scalar; at the amx level also the\n"
    "vpdpbusd peak, its vector units').  With --model it then runs, through the\n"
    "public API, one sequence on a sequence runner with the engine's defaults\n"
    "(an f16 KV cache, up to 512 positions per forward pass: what plume generate\n"
    "and plume serve use):\n"
    "  decode:  a 32-token prompt, then 128 single-token steps (batch 1, greedy);\n"
    "           tokens/s of those 128 steps, and the roofline\n"
    "           bandwidth / weight bytes (every weight read once per token; of a\n"
    "           mixture of experts, only the experts a token is routed to)\n"
    "  prefill: one 512-token prompt; tokens/s, and the roofline\n"
    "           peak / (2 x P) using the int8 peak when the weights are quantized\n"
    "           (below 2 bytes per parameter), else the f32 peak; P counts the\n"
    "           parameters every token multiplies by: all but the token embedding\n"
    "           and the output head (which prefill runs for the last position only),\n"
    "           and of a mixture of experts only the routed experts; at the amx\n"
    "           level also against the vpdpbusd peak\n"
    "Each figure is the median of --reps repetitions.  The kernel level follows\n"
    "PLUME_CPU_FEATURES (scalar|avx2|avx512|amx; default: the best this CPU has).\n"
    "\n"
    "options:\n"
    "  --load-format dummy [--dummy-dtype T --dummy-seed N --dummy-tokenizer F]\n"
    "                 random weights for the config.json in --model\n"
    "                 (docs/dummy-weights.md)\n"
    "  --model PATH   a .gguf file or an HF model directory (without it, only the\n"
    "                 machine is measured)\n"
    "  --reps N       repetitions per measurement (default 5)\n"
    "  --threads N    worker threads (default: PLUME_THREADS, else physical cores)\n"
    "  --json         print {\"machine\": {cpu, threads, bandwidth_gbs, f32_gflops,\n"
    "                 int8_gops, int8_vec_gops, features, level}, \"decode\":\n"
    "                 {tok_s, roofline_pct}, \"prefill\": {tok_s, roofline_pct,\n"
    "                 vec_roofline_pct}} (vec: against int8_vec_gops, the vpdpbusd\n"
    "                 peak; decode/prefill null without --model)\n"
    "\n"
    "On a device backend (a pipeline whose backend measures its device, e.g.\n"
    "backend: cuda):\n"
    "  --pipeline FILE   the pipeline's backend measures its device memory read\n"
    "                    bandwidth and f16 matrix-multiply peak itself; decode and\n"
    "                    prefill run the pipeline's model on it, their rooflines\n"
    "                    bandwidth / weight bytes (as above) and f16 peak /\n"
    "                    (2 x P, P as above).  --json prints {\"device\": {backend,\n"
    "                    bandwidth_gbs, f16_tflops}, \"decode\", \"prefill\"}.\n"
    "  --plugin-dir DIR, --plugin NAME   as for the other commands\n";

#define BW_BYTES ((size_t)1 << 30)
#define DECODE_PROMPT 32
#define DECODE_STEPS 128
#define PREFILL_TOKENS 512

typedef struct bench_opts {
    const char *model;
    int reps, threads;
    bool json;
    cli_pipeline_opts po; /* --pipeline: the device branch */
} bench_opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int32_t bench_argmax(const float *v, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void cpu_name(char *buf, size_t size)
{
    snprintf(buf, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, size, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

typedef struct model_result {
    double decode_tok_s, prefill_tok_s;
} model_result;

/* Runs n tokens of sequence 0 in forward passes of at most chunk
 * positions, the last position's logits into logits. */
static int bench_run(plume_seq_runner *r, const int32_t *tokens, int n, int chunk,
                     float *logits, plume_error *err)
{
    for (int p = 0; p < n; p += chunk) {
        const int k = n - p < chunk ? n - p : chunk;
        const plume_seq_run run = {0, tokens + p, k, p + k == n};
        if (plume_seq_runner_run(r, &run, 1, logits, err))
            return -1;
    }
    return 0;
}

static int bench_model(const bench_opts *o, plume_model *m, model_result *res)
{
    plume_error err;
    plume_seq_runner_params rp = plume_seq_runner_defaults();
    rp.kv_max_tokens = PREFILL_TOKENS + DECODE_PROMPT + DECODE_STEPS + rp.block_size;
    rp.max_seqs = 1;
    plume_seq_runner *run = NULL;
    if (plume_seq_runner_create(m, &rp, &run, &err)) {
        fprintf(stderr, "plume bench: %s\n", err.msg);
        return -1;
    }
    const int32_t nv = plume_model_n_vocab(m);
    float *logits = malloc(sizeof(float) * (size_t)nv);
    int32_t *prompt = malloc(sizeof(int32_t) * PREFILL_TOKENS);
    double *dec = malloc(sizeof(double) * (size_t)o->reps);
    double *pre = malloc(sizeof(double) * (size_t)o->reps);
    if (!logits || !prompt || !dec || !pre) {
        fprintf(stderr, "plume bench: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < PREFILL_TOKENS; i++) /* arbitrary ids spread over the vocabulary */
        prompt[i] = (int32_t)((1 + (int64_t)i * 7919) % nv);
    int rc = 0;
    for (int r = 0; r < o->reps && rc == 0; r++) {
        (void)plume_seq_runner_release(run, 0, NULL);
        if ((rc = bench_run(run, prompt, DECODE_PROMPT, rp.max_batch_tokens, logits, &err)))
            break;
        double t0 = plume_clock_seconds();
        for (int s = 0; s < DECODE_STEPS && rc == 0; s++) {
            int32_t next = bench_argmax(logits, nv);
            rc = bench_run(run, &next, 1, 1, logits, &err);
        }
        dec[r] = DECODE_STEPS / (plume_clock_seconds() - t0);
        (void)plume_seq_runner_release(run, 0, NULL);
        t0 = plume_clock_seconds();
        if (rc == 0)
            rc = bench_run(run, prompt, PREFILL_TOKENS, rp.max_batch_tokens, logits, &err);
        pre[r] = PREFILL_TOKENS / (plume_clock_seconds() - t0);
    }
    if (rc)
        fprintf(stderr, "plume bench: %s\n", err.msg);
    else {
        res->decode_tok_s = bench_median(dec, o->reps);
        res->prefill_tok_s = bench_median(pre, o->reps);
    }
    free(logits);
    free(prompt);
    free(dec);
    free(pre);
    plume_seq_runner_free(run);
    return rc;
}

int bench_machine_measure(int threads, int reps, bench_machine *out)
{
    plume_registry *reg = NULL;
    plume_backend *b = NULL;
    const plume_backend_vtable *vt = NULL;
    plume_error err = {0};
    int rc = -1;
    if (plume_registry_create(&reg, &err))
        goto done;
    vt = plume_registry_find_backend(reg, "cpu");
    if (!vt) {
        plume_err(&err, PLUME_ERR_INTERNAL, "the built-in cpu backend is not registered");
        goto done;
    }
    if (vt->create(NULL, threads, &b, &err))
        goto done;
    /* The backend's units (GB/s, GFLOP/s, GOP/s) back to bytes and operations per second. */
    if (vt->microbench(b, PLUME_MB_READ_GBS, reps, &out->bw, &err) ||
        vt->microbench(b, PLUME_MB_F32_GFLOPS, reps, &out->f32, &err) ||
        vt->microbench(b, PLUME_MB_INT8_GOPS, reps, &out->i8, &err))
        goto done;
    out->level = plume_cpu_level_str(plume_cpu_active_level());
    out->i8vec = out->i8; /* one peak below the amx level: not measured twice */
    if (strcmp(out->level, "amx") == 0 &&
        vt->microbench(b, PLUME_MB_INT8_VEC_GOPS, reps, &out->i8vec, &err))
        goto done;
    out->bw *= 1e9;
    out->f32 *= 1e9;
    out->i8 *= 1e9;
    out->i8vec *= 1e9;
    cpu_name(out->cpu, sizeof out->cpu);
    plume_cpu_features_string(out->feats, sizeof out->feats);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "plume bench: %s\n", err.msg);
    if (b)
        vt->destroy(b);
    plume_registry_free(reg);
    return rc;
}

double bench_linear_peak(const bench_machine *mach, const plume_model *m, bool vec, bool *int8)
{
    const bool q = (double)plume_model_weight_bytes(m) < 2.0 * (double)plume_model_n_params(m);
    if (int8)
        *int8 = q;
    return q ? (vec ? mach->i8vec : mach->i8) : mach->f32;
}

bool bench_machine_opt(int argc, char **argv, int *i, int *reps, int *threads, bool *json)
{
    const char *v;
    if (cli_opt(argc, argv, i, "--reps", &v)) {
        *reps = (int)cli_int("--reps", v, 1, 1000);
        return true;
    }
    if (cli_opt(argc, argv, i, "--threads", &v) || cli_opt(argc, argv, i, "-t", &v)) {
        *threads = (int)cli_int("--threads", v, 1, 256);
        return true;
    }
    if (cli_flag(argv, *i, "--json")) {
        *json = true;
        return true;
    }
    return false;
}

static int roofline(const bench_opts *o)
{
    bench_machine mach;
    if (bench_machine_measure(o->threads, o->reps, &mach))
        return 1;
    const double bw = mach.bw, f32 = mach.f32, i8 = mach.i8, i8vec = mach.i8vec;
    const char *cpu = mach.cpu, *feats = mach.feats;

    model_result mr = {0};
    double dec_roof = 0, pre_roof = 0, pre_roof_vec = 0;
    bool have_model = false, int8_roof = false;
    if (o->model) {
        plume_model *m;
        plume_registry *lreg;
        if (cli_load_model("bench roofline", &o->po, o->model, o->threads, &m, &lreg))
            return 1;
        if (bench_model(o, m, &mr)) {
            plume_model_free(m);
            plume_registry_free(lreg);
            return 1;
        }
        dec_roof = bw / (double)plume_model_decode_bytes(m); /* a MoE: its active experts */
        const double ppt = 2.0 * (double)plume_model_n_params_per_token(m);
        pre_roof = bench_linear_peak(&mach, m, false, &int8_roof) / ppt;
        pre_roof_vec = bench_linear_peak(&mach, m, true, NULL) / ppt;
        have_model = true;
        plume_model_free(m);
        plume_registry_free(lreg); /* after the model: it holds the format's vtable */
    }

    const char *level = mach.level;
    if (o->json) {
        json_t *root = json_pack("{s:{s:s,s:i,s:f,s:f,s:f,s:f,s:s,s:s}}", "machine", "cpu", cpu,
                                 "threads", o->threads, "bandwidth_gbs", bw / 1e9, "f32_gflops",
                                 f32 / 1e9, "int8_gops", i8 / 1e9, "int8_vec_gops",
                                 i8vec / 1e9, "features", feats, "level", level);
        if (have_model) {
            json_object_set_new(root, "decode",
                                json_pack("{s:f,s:f}", "tok_s", mr.decode_tok_s, "roofline_pct",
                                          100.0 * mr.decode_tok_s / dec_roof));
            json_object_set_new(root, "prefill",
                                json_pack("{s:f,s:f,s:f}", "tok_s", mr.prefill_tok_s,
                                          "roofline_pct", 100.0 * mr.prefill_tok_s / pre_roof,
                                          "vec_roofline_pct",
                                          100.0 * mr.prefill_tok_s / pre_roof_vec));
        } else {
            json_object_set_new(root, "decode", json_null());
            json_object_set_new(root, "prefill", json_null());
        }
        char *s = json_dumps(root, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(root);
    } else {
        printf("machine: %s, %d threads, level %s (%s)\n", cpu, o->threads, level, feats);
        printf("  read bandwidth   %8.1f GB/s\n", bw / 1e9);
        printf("  f32 FMA peak     %8.1f GFLOP/s\n", f32 / 1e9);
        const bool tiles = strcmp(level, "amx") == 0;
        printf("  int8 %s peak   %8.1f GOP/s\n", tiles ? "tile" : "dot ", i8 / 1e9);
        if (tiles)
            printf("  int8 dot peak    %8.1f GOP/s (vpdpbusd)\n", i8vec / 1e9);
        if (have_model) {
            printf("decode  (batch 1, %d steps after a %d-token prompt): %8.1f tok/s = %5.1f%% of "
                   "%.1f tok/s (bandwidth / weight bytes)\n",
                   DECODE_STEPS, DECODE_PROMPT, mr.decode_tok_s,
                   100.0 * mr.decode_tok_s / dec_roof, dec_roof);
            printf("prefill (one %d-token prompt):                %8.1f tok/s = %5.1f%% of "
                   "%.1f tok/s (%s peak / 2 x per-token parameters)\n",
                   PREFILL_TOKENS, mr.prefill_tok_s, 100.0 * mr.prefill_tok_s / pre_roof,
                   pre_roof, int8_roof ? (tiles ? "int8 tile" : "int8") : "f32");
            if (tiles && int8_roof)
                printf("        %5.1f%% of %.1f tok/s (int8 dot peak / 2 x per-token "
                       "parameters)\n",
                       100.0 * mr.prefill_tok_s / pre_roof_vec, pre_roof_vec);
        }
    }
    return 0;
}

/* The roofline of a device backend: its own microbenchmarks, then the
 * pipeline's model on it. */
static int roofline_device(const bench_opts *o)
{
    plume_registry *reg = NULL;
    plume_pipeline *pipe = NULL;
    plume_model *m = NULL;
    plume_error err = {0};
    int status = 1;
    if (cli_pipeline_resolve("bench roofline", &o->po, &reg, &pipe))
        return 1;
    plume_build_opts bo = {.n_threads = o->threads};
    if (plume_pipeline_build(pipe, reg, &bo, &m, NULL, &err)) {
        cli_print_error("bench roofline", o->po.pipeline, err.msg);
        goto done;
    }
    plume_backend *b;
    const plume_backend_vtable *vt = plume_model_backend(m, &b);
    double bw = 0, f16 = 0;
    if (!vt->microbench ||
        (vt->microbench(b, PLUME_MB_F16_TFLOPS, o->reps, &f16, &err) &&
         err.code == PLUME_ERR_UNSUPPORTED)) {
        fprintf(stderr, "plume bench roofline: backend %s measures no device (it runs on the "
                        "host); use --model PATH for the host's roofline\n", vt->name);
        goto done;
    }
    if (err.code || vt->microbench(b, PLUME_MB_READ_GBS, o->reps, &bw, &err)) {
        fprintf(stderr, "plume bench roofline: %s\n", err.msg);
        goto done;
    }
    model_result mr = {0};
    if (bench_model(o, m, &mr))
        goto done;
    const double dec_roof = bw * 1e9 / (double)plume_model_decode_bytes(m);
    const double pre_roof = f16 * 1e12 / (2.0 * (double)plume_model_n_params_per_token(m));
    if (o->json) {
        json_t *root = json_pack("{s:{s:s,s:f,s:f},s:{s:f,s:f},s:{s:f,s:f}}", "device", "backend",
                                 vt->name, "bandwidth_gbs", bw, "f16_tflops", f16, "decode",
                                 "tok_s", mr.decode_tok_s, "roofline_pct",
                                 100.0 * mr.decode_tok_s / dec_roof, "prefill", "tok_s",
                                 mr.prefill_tok_s, "roofline_pct",
                                 100.0 * mr.prefill_tok_s / pre_roof);
        char *js = json_dumps(root, JSON_COMPACT);
        puts(js);
        free(js);
        json_decref(root);
    } else {
        printf("device (backend %s), measured by the backend:\n", vt->name);
        printf("  read bandwidth   %8.1f GB/s\n", bw);
        printf("  f16 matmul peak  %8.1f TFLOP/s\n", f16);
        printf("decode  (batch 1, %d steps after a %d-token prompt): %8.1f tok/s = %5.1f%% of "
               "%.1f tok/s (bandwidth / weight bytes)\n",
               DECODE_STEPS, DECODE_PROMPT, mr.decode_tok_s, 100.0 * mr.decode_tok_s / dec_roof,
               dec_roof);
        printf("prefill (one %d-token prompt):                %8.1f tok/s = %5.1f%% of "
               "%.1f tok/s (f16 peak / 2 x per-token parameters)\n",
               PREFILL_TOKENS, mr.prefill_tok_s, 100.0 * mr.prefill_tok_s / pre_roof, pre_roof);
    }
    status = 0;
done:
    plume_model_free(m);
    plume_pipeline_free(pipe);
    plume_registry_free(reg);
    return status;
}

static const char bench_usage[] =
    "usage: plume bench <benchmark> [options]\n"
    "\n"
    "benchmarks:\n"
    "  roofline     this machine's bandwidth and arithmetic peaks, and a model's decode\n"
    "               and prefill speed as a percentage of the roofline they imply\n"
    "  throughput   continuous batching of many random requests, optionally against\n"
    "               serving them one at a time\n"
    "  context      decode and prefill speed at context depths beside their rooflines\n"
    "               (weights + KV bytes read; linears + causal attention FLOPs)\n"
    "  spec         speculative decoding variants on one live engine, against off\n"
    "\n"
    "Run `plume bench <benchmark> --help` for its options.\n";

int cmd_bench(int argc, char **argv)
{
    if (argc < 2 || cli_flag(argv, 1, "--help") || cli_flag(argv, 1, "-h")) {
        fputs(bench_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "throughput") == 0)
        return bench_throughput(argc - 1, argv + 1);
    if (strcmp(argv[1], "spec") == 0)
        return bench_spec(argc - 1, argv + 1);
    if (strcmp(argv[1], "serve") == 0)
        return bench_serve(argc - 1, argv + 1);
    if (strcmp(argv[1], "context") == 0)
        return bench_context(argc - 1, argv + 1);
    if (strcmp(argv[1], "roofline") != 0) {
        fprintf(stderr, "plume bench: unknown benchmark '%s' (roofline, context, throughput, spec, "
                "serve)\n",
                argv[1]);
        return 2;
    }
    bench_opts o = {.reps = 5, .threads = plume_cpu_count()};
    for (int i = 2; i < argc; i++) {
        cli_exit_if_help(argv, i, help);
        if (!cli_pipeline_opt("bench roofline", argc, argv, &i, &o.po) &&
            !bench_machine_opt(argc, argv, &i, &o.reps, &o.threads, &o.json))
            cli_unknown("bench roofline", argv[i]);
    }
    if (o.po.pipeline)
        return roofline_device(&o);
    o.model = o.po.model;
    return roofline(&o);
}
