/* plume bench throughput: seeded random prompts served by the engine, total
 * generated tokens/s, optionally against the same work served one request
 * at a time. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/engine_args.h"
#include "cli/pipeline_args.h"
#include "plume/engine.h"
#include "plume/model.h"

static const char help[] =
    "usage: plume bench throughput (--model PATH | --pipeline FILE) [options]\n"
    "\n"
    "Serves --num-seqs random prompts (seeded; greedy; end-of-generation ignored so\n"
    "every request produces its drawn output length) after one warm-up request, and\n"
    "prints the total generated tokens/s.  The model and its backend come from the\n"
    "pipeline (the built-in default one with --model alone); the engine settings\n"
    "are this command's own (below), not the pipeline's kv_cache and scheduler.\n"
    "\n"
    "options:\n"
    CLI_PIPELINE_HELP
    "  --num-seqs N            requests (default 64)\n"
    "  --input-len MIN-MAX     prompt lengths, uniform (default 64-512)\n"
    "  --output-len MIN-MAX    output lengths, uniform (default 64-256)\n"
    "  --shared-prefix N       every prompt starts with the same N tokens (default 0)\n"
    "  --seed S                workload seed (default 0)\n"
    "  --compare-sequential    also serve the same requests one at a time and print the\n"
    "                          speedup of continuous batching over that\n"
    "  --threads N, --ctx-size N, --block-size N, --kv-dtype f32|f16|int8, --max-num-seqs N,\n"
    "  --max-batched-tokens N, --no-prefix-caching, --separate-batches\n"
    "                          engine settings, as for plume generate (ctx-size is the\n"
    "                          KV cache capacity; default 16384 here; kv-dtype default f16)\n"
    "  --json                  print {\"throughput_tok_s\", \"sequential_tok_s\", \"speedup\",\n"
    "                          ...} instead of text\n";

typedef struct workload {
    int32_t **prompts;
    int32_t *n_prompt, *n_out;
    int n;
} workload;

/* Token ids drawn uniformly among the model's non-special tokens. */
static int make_workload(const plume_model *m, int n, int in_lo, int in_hi, int out_lo,
                         int out_hi, int shared, uint64_t seed, workload *w)
{
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    int32_t nv = plume_tokenizer_n_vocab(tok);
    plume_rng rng;
    plume_rng_seed(&rng, seed);
    w->n = n;
    w->prompts = calloc((size_t)n, sizeof *w->prompts);
    w->n_prompt = calloc((size_t)n, sizeof *w->n_prompt);
    w->n_out = calloc((size_t)n, sizeof *w->n_out);
    int32_t *prefix = calloc((size_t)shared + 1, sizeof *prefix);
    if (!w->prompts || !w->n_prompt || !w->n_out || !prefix)
        return -1;
    for (int j = 0; j < shared;) {
        int32_t t = (int32_t)(plume_rng_next(&rng) % (uint64_t)nv);
        if (!plume_tokenizer_is_special(tok, t))
            prefix[j++] = t;
    }
    for (int i = 0; i < n; i++) {
        int len = in_lo + (int)(plume_rng_next(&rng) % (uint64_t)(in_hi - in_lo + 1));
        if (len <= shared)
            len = shared + 1;
        w->n_prompt[i] = len;
        w->n_out[i] = out_lo + (int)(plume_rng_next(&rng) % (uint64_t)(out_hi - out_lo + 1));
        w->prompts[i] = malloc(sizeof(int32_t) * (size_t)len);
        if (!w->prompts[i])
            return -1;
        memcpy(w->prompts[i], prefix, sizeof(int32_t) * (size_t)shared);
        for (int j = shared; j < len;) {
            int32_t t = (int32_t)(plume_rng_next(&rng) % (uint64_t)nv);
            if (!plume_tokenizer_is_special(tok, t))
                w->prompts[i][j++] = t;
        }
    }
    free(prefix);
    return 0;
}

static void free_workload(workload *w)
{
    for (int i = 0; w->prompts && i < w->n; i++)
        free(w->prompts[i]);
    free(w->prompts);
    free(w->n_prompt);
    free(w->n_out);
}

typedef struct run_result {
    double seconds;
    int64_t generated;
    plume_engine_stats stats;
} run_result;

/* Serves requests [first, first+count) all at once, or one after another
 * when sequential; on a fresh engine each time so caches start cold. */
static int serve(const plume_model *m, const plume_engine_params *ep, const workload *w,
                 int first, int count, bool sequential, run_result *out, plume_error *err)
{
    plume_engine *e;
    if (plume_engine_create(m, ep, &e, err))
        return -1;
    plume_request_params rp = plume_request_defaults();
    rp.ignore_eos = true;
    double t0 = plume_clock_seconds();
    int64_t generated = 0;
    for (int i = first; i < first + count; i++) {
        rp.max_tokens = w->n_out[i];
        int64_t id = plume_engine_add_tokens(e, w->prompts[i], (size_t)w->n_prompt[i], &rp, err);
        if (id < 0)
            goto fail;
        if (sequential || i == first + count - 1) {
            while (plume_engine_has_work(e))
                if (plume_engine_step(e, err) < 0)
                    goto fail;
        }
    }
    for (int64_t id = 0; id < count; id++) {
        plume_request_result r;
        if (plume_engine_result(e, id, &r) == 0)
            generated += (int64_t)r.n_output;
    }
    out->seconds = plume_clock_seconds() - t0;
    out->generated = generated;
    out->stats = plume_engine_get_stats(e);
    plume_engine_free(e);
    return 0;
fail:
    plume_engine_free(e);
    return -1;
}

int bench_throughput(int argc, char **argv)
{
    cli_pipeline_opts po = {0};
    int n = 64, in_lo = 64, in_hi = 512, out_lo = 64, out_hi = 256, shared = 0, threads = 0;
    uint64_t seed = 0;
    bool compare = false, as_json = false;
    plume_engine_params ep = plume_engine_defaults();
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_pipeline_opt("bench throughput", argc, argv, &i, &po)) {
            continue;
        } else if (cli_opt(argc, argv, &i, "--num-seqs", &v)) {
            n = (int)cli_int("--num-seqs", v, 1, 100000);
        } else if (cli_opt(argc, argv, &i, "--input-len", &v)) {
            cli_range("bench throughput", "--input-len", v, &in_lo, &in_hi);
        } else if (cli_opt(argc, argv, &i, "--output-len", &v)) {
            cli_range("bench throughput", "--output-len", v, &out_lo, &out_hi);
        } else if (cli_opt(argc, argv, &i, "--shared-prefix", &v)) {
            shared = (int)cli_int("--shared-prefix", v, 0, 1 << 20);
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
        } else if (cli_flag(argv, i, "--compare-sequential")) {
            compare = true;
        } else if (cli_flag(argv, i, "--json")) {
            as_json = true;
        } else if (cli_opt(argc, argv, &i, "--threads", &v)) {
            threads = (int)cli_int("--threads", v, 1, 1024);
        } else if (cli_engine_opt("bench throughput", argc, argv, &i, false, &ep)) {
            continue;
        } else {
            cli_unknown("bench throughput", argv[i]);
        }
    }
    if (!po.model && !po.pipeline) {
        fprintf(stderr, "plume bench throughput: give --model PATH or --pipeline FILE\n\n%s",
                help);
        return 2;
    }
    plume_error err = {0};
    plume_model *m = NULL;
    workload w = {0};
    int status = 1;
    plume_registry *reg = NULL;
    plume_pipeline *pipe = NULL;
    if (cli_pipeline_resolve("bench throughput", &po, &reg, &pipe))
        return 1;
    plume_build_opts bo = {.n_threads = threads};
    if (plume_pipeline_build(pipe, reg, &bo, &m, NULL, &err))
        goto done;
    if (make_workload(m, n + 1, in_lo, in_hi, out_lo, out_hi, shared, seed, &w)) {
        plume_err(&err, PLUME_ERR_NOMEM, "out of memory building the workload");
        goto done;
    }
    run_result warm, batched, seq = {0};
    /* request n is the warm-up: same distribution, not measured */
    if (serve(m, &ep, &w, n, 1, false, &warm, &err) ||
        serve(m, &ep, &w, 0, n, false, &batched, &err) ||
        (compare && serve(m, &ep, &w, 0, n, true, &seq, &err)))
        goto done;
    double tput = (double)batched.generated / batched.seconds;
    double stput = compare ? (double)seq.generated / seq.seconds : 0.0;
    int64_t prompt_total = 0;
    for (int i = 0; i < n; i++)
        prompt_total += w.n_prompt[i];
    if (as_json) {
        json_t *o = json_pack(
            "{s:f,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I,s:i,s:b,s:b}", "throughput_tok_s", tput,
            "generated_tokens", (json_int_t)batched.generated, "prompt_tokens",
            (json_int_t)prompt_total, "seconds", batched.seconds, "steps",
            (json_int_t)batched.stats.steps, "prefill_positions",
            (json_int_t)batched.stats.prefill_tokens, "cached_prompt_tokens",
            (json_int_t)batched.stats.cached_prompt_tokens, "preemptions",
            (json_int_t)batched.stats.preemptions, "num_seqs", (json_int_t)n, "threads",
            threads, "prefix_caching", ep.prefix_caching, "mixed_batches", ep.mixed_batches);
        json_object_set_new(o, "kv_dtype", json_string(plume_kv_dtype_name(ep.kv_dtype)));
        if (compare) {
            json_object_set_new(o, "sequential_tok_s", json_real(stput));
            json_object_set_new(o, "speedup", json_real(tput / stput));
        }
        char *s = json_dumps(o, JSON_ENSURE_ASCII);
        puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("requests:            %d (prompts %d-%d, outputs %d-%d, shared prefix %d; %s KV)\n",
               n, in_lo, in_hi, out_lo, out_hi, shared, plume_kv_dtype_name(ep.kv_dtype));
        printf("continuous batching: %.1f tok/s (%lld tokens in %.2f s, %lld steps)\n", tput,
               (long long)batched.generated, batched.seconds, (long long)batched.stats.steps);
        printf("prefill positions:   %lld of %lld prompt tokens (%lld from the prefix cache)\n",
               (long long)batched.stats.prefill_tokens, (long long)prompt_total,
               (long long)batched.stats.cached_prompt_tokens);
        printf("preemptions:         %lld\n", (long long)batched.stats.preemptions);
        if (compare)
            printf("sequential:          %.1f tok/s (%.2f s) -> speedup %.2fx\n", stput,
                   seq.seconds, tput / stput);
    }
    status = 0;
done:
    if (status)
        fprintf(stderr, "plume bench throughput: %s\n", err.msg[0] ? err.msg : "failed");
    free_workload(&w);
    plume_model_free(m);
    plume_pipeline_free(pipe);
    plume_registry_free(reg);
    return status;
}
