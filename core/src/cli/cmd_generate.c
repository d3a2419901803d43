/* plume generate: one prompt streamed, or a JSONL file of prompts served
 * together by the engine (continuous batching). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/engine_args.h"
#include "cli/jsonl_request.h"
#include "cli/pipeline_args.h"
#include "plume/pipeline.h"
#include "plume/engine.h"
#include "plume/model.h"
#include "plume/registry.h"
#include "plume/sampler.h"
#include "plume/sampler_provider.h"
#include "plume/structured_request.h"

static const char help[] =
    "usage: plume generate (--model PATH | --pipeline FILE)\n"
    "                      (--prompt TEXT | --prompt-ids IDS | --prompts-file F) [options]\n"
    "\n"
    "Generates a continuation of the prompt and streams it to stdout; prompt and\n"
    "generation speed (tokens/s) go to stderr.  With --prompts-file, serves every\n"
    "prompt of a JSONL file together and writes one JSON result per line, in input\n"
    "order.\n"
    "\n"
    "model and providers:\n"
    CLI_PIPELINE_HELP
    "  Settings given on the command line override the pipeline's.\n"
    "\n"
    "input:\n"
    "  --prompt TEXT         the prompt; special-token texts such as <|im_start|> are\n"
    "                        recognised, and BOS is prepended when the model asks for it\n"
    "  --prompt-ids IDS      the prompt as comma-separated token ids, used as given\n"
    "  --prompts-file F      JSONL, one object per line: {\"prompt\": TEXT} plus any of\n"
    "                        max_tokens, temperature, top_k, top_p, min_p,\n"
    "                        repeat_penalty, repeat_last_n, presence_penalty,\n"
    "                        frequency_penalty, seed, stop (list of strings), chat (bool),\n"
    "                        system, speculative (bool: false = no speculative decoding\n"
    "                        for this line), num_speculative_tokens (-1 the pipeline's k,\n"
    "                        0 none, 1..k a cap), and one structured-output constraint:\n"
    "                        json_schema, regex, choice (list), grammar (GBNF),\n"
    "                        response_format (OpenAI's), guided_json|regex|choice|grammar\n"
    "                        (vLLM's); docs/structured-outputs.md.  Unset fields take the\n"
    "                        command-line values\n"
    "  --chat                wrap the prompt as a user message in the model's chat template\n"
    "                        (SmolLM2: ChatML) and generate the assistant's reply\n"
    "  --system TEXT         system message for --chat (default: the template's own)\n"
    "  --chat-template FILE  render --chat with this Jinja chat template instead of the\n"
    "                        model's (implies --chat)\n"
    "\n"
    "generation (defaults: the pipeline's `sampling`, else these):\n"
    "  --max-tokens N        tokens to generate at most (default 256)\n"
    "  --temperature T       0 = greedy (default 0.8; configs/default.yaml sets 0)\n"
    "  --top-k K             keep the K most likely tokens, 0 = off (default 40)\n"
    "  --top-p P             nucleus sampling, 1 = off (default 0.95)\n"
    "  --min-p P             drop tokens below P x the top probability, 0 = off (default 0.05)\n"
    "  --repeat-penalty R    penalise the last 64 tokens, 1 = off (default 1)\n"
    "  --presence-penalty P  subtract P from the logit of every token already generated,\n"
    "                        in [-2, 2], 0 = off (default 0; OpenAI's, not the prompt)\n"
    "  --frequency-penalty F subtract F x its count from the logit of every token already\n"
    "                        generated, in [-2, 2], 0 = off (default 0)\n"
    "  --seed S              RNG seed; the same seed gives the same output (default: random)\n"
    "  --stop TEXT           stop before this text (repeatable)\n"
    "  --ignore-eos          keep going past end-of-generation tokens\n"
    "\n"
    "engine (defaults: the pipeline's kv_cache, scheduler and threads, else these):\n"
    "  --threads N           the backend's threads (default: the pipeline's `threads`, else\n"
    "                        the backend's choice; cpu: PLUME_THREADS, else physical cores)\n"
    "  --ctx-size N          KV cache capacity in tokens (default 16384, or the pipeline's\n"
    "                        kv_cache.max_tokens); also bounds one sequence's context\n"
    "                        (with the model's trained length)\n"
    "  --block-size N        tokens per KV block (default 16)\n"
    "  --kv-dtype f32|f16|int8  KV cache storage (default: the pipeline's kv_cache.dtype,\n"
    "                        else f16, half of f32's memory; f32 is exact, int8 with a\n"
    "                        scale per token and head about a quarter of f32)\n"
    "  --max-num-seqs N      sequences per step (default 64)\n"
    "  --max-batched-tokens N  positions per step (default 512)\n"
    "  --no-prefix-caching   do not share KV blocks between prompts with a common prefix\n"
    "  --separate-batches    never mix prefill chunks and decode tokens in one step\n"
    "\n"
    "output:\n"
    "  --json                print one JSON object instead of streaming: text, token_ids,\n"
    "                        prompt_token_ids, prompt_tokens, generated_tokens,\n"
    "                        finish_reason, prefill_tok_s, decode_tok_s, seed, kv_dtype,\n"
    "                        kv_bytes_per_token (of the KV cache), and with\n"
    "                        speculative decoding (pipeline `speculative:`) a \"spec\"\n"
    "                        object: method, drafted, accepted, acceptance_rate,\n"
    "                        tokens_per_forward\n"
    "  --logits-out FILE     write the logits of the last prompt position to FILE as\n"
    "                        raw little-endian float32 (n_vocab values)\n";

#define MAX_STOP CLI_JSONL_MAX_STOP

/* The sampling options and the parameter each sets.  Option k given on
 * the command line sets bit 1 << k of gen_opts.set: it overrides the
 * pipeline's value (the engine options' bits: gen_opts.engine_set). */
static const struct sampling_opt {
    const char *opt, *param;
} SAMPLING_OPTS[] = {
    {"--temperature", "temperature"},
    {"--top-k", "top_k"},
    {"--top-p", "top_p"},
    {"--min-p", "min_p"},
    {"--repeat-penalty", "repetition_penalty"},
    {"--presence-penalty", "presence_penalty"},
    {"--frequency-penalty", "frequency_penalty"},
};
#define N_SAMPLING_OPTS (sizeof SAMPLING_OPTS / sizeof SAMPLING_OPTS[0])

typedef struct gen_opts {
    cli_pipeline_opts po;
    unsigned set, engine_set; /* engine_set: CLI_ENGINE_* bits (engine_args.h) */
    const char *prompt, *prompt_ids, *prompts_file, *system, *logits_out, *chat_template;
    plume_chat_template *tmpl; /* --chat-template, loaded once */
    const char *stop[MAX_STOP];
    size_t n_stop;
    bool chat, json, ignore_eos, seed_given;
    int max_tokens, threads;
    plume_sampling_params sp;
    plume_engine_params ep;
} gen_opts;

/* Matches argv[*i] against the sampling options; stores the value and
 * marks it given. */
static bool sampling_opt(int argc, char **argv, int *i, gen_opts *o)
{
    for (size_t k = 0; k < N_SAMPLING_OPTS; k++)
        if (cli_sampling_opt(argc, argv, i, SAMPLING_OPTS[k].opt, SAMPLING_OPTS[k].param,
                             &o->sp)) {
            o->set |= 1u << k;
            return true;
        }
    return false;
}

static void parse(int argc, char **argv, gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->sp = plume_sampling_defaults();
    o->ep = plume_engine_defaults();
    o->ep.kv_max_tokens = 8192;
    for (int i = 1; i < argc; i++) {
        const char *v;
        unsigned set;
        cli_exit_if_help(argv, i, help);
        if (cli_pipeline_opt("generate", argc, argv, &i, &o->po)) {
            continue;
        } else if (cli_opt(argc, argv, &i, "--prompt", &v) || cli_opt(argc, argv, &i, "-p", &v)) {
            o->prompt = v;
        } else if (cli_opt(argc, argv, &i, "--prompt-ids", &v)) {
            o->prompt_ids = v;
        } else if (cli_opt(argc, argv, &i, "--prompts-file", &v)) {
            o->prompts_file = v;
        } else if (cli_opt(argc, argv, &i, "--system", &v)) {
            o->system = v;
        } else if (cli_flag(argv, i, "--chat")) {
            o->chat = true;
        } else if (cli_opt(argc, argv, &i, "--chat-template", &v)) {
            o->chat_template = v;
            o->chat = true;
        } else if (cli_opt(argc, argv, &i, "--max-tokens", &v) || cli_opt(argc, argv, &i, "-n", &v)) {
            o->max_tokens = (int)cli_int("--max-tokens", v, 1, 1 << 24);
        } else if (sampling_opt(argc, argv, &i, o)) {
            continue;
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            o->sp.seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
            o->seed_given = true;
        } else if (cli_opt(argc, argv, &i, "--stop", &v)) {
            if (o->n_stop == MAX_STOP || !v[0]) {
                fprintf(stderr, "plume generate: --stop takes a non-empty text, at most %d times\n",
                        MAX_STOP);
                exit(2);
            }
            o->stop[o->n_stop++] = v;
        } else if (cli_flag(argv, i, "--ignore-eos")) {
            o->ignore_eos = true;
        } else if (cli_opt(argc, argv, &i, "--threads", &v) || cli_opt(argc, argv, &i, "-t", &v)) {
            o->threads = (int)cli_int("--threads", v, 1, 1024);
        } else if ((set = cli_engine_opt("generate", argc, argv, &i, true, &o->ep))) {
            o->engine_set |= set;
        } else if (cli_flag(argv, i, "--json")) {
            o->json = true;
        } else if (cli_opt(argc, argv, &i, "--logits-out", &v)) {
            o->logits_out = v;
        } else {
            cli_unknown("generate", argv[i]);
        }
    }
    int inputs = !!o->prompt + !!o->prompt_ids + !!o->prompts_file;
    if ((!o->po.model && !o->po.pipeline) || inputs == 0) {
        fprintf(stderr, "plume generate: --model or --pipeline, and one of --prompt, "
                        "--prompt-ids, --prompts-file are required\n\n%s", help);
        exit(2);
    }
    if (inputs > 1) {
        fprintf(stderr, "plume generate: give only one of --prompt, --prompt-ids, --prompts-file\n");
        exit(2);
    }
    if (o->chat && o->prompt_ids) {
        fprintf(stderr, "plume generate: --chat needs --prompt text, not --prompt-ids\n");
        exit(2);
    }
    if (o->prompts_file && o->logits_out) {
        fprintf(stderr, "plume generate: --logits-out works with a single prompt only\n");
        exit(2);
    }
}

/* Pipeline values first, then whatever the command line set. */
static void merge(gen_opts *o, const plume_pipeline *p)
{
    plume_engine_params ep;
    plume_sampling_params sp;
    bool seed_given = false;
    plume_pipeline_engine_params(p, &ep);
    plume_pipeline_sampling_params(p, &sp, &seed_given);
    cli_engine_merge(&ep, &o->ep, o->engine_set);
    for (size_t k = 0; k < N_SAMPLING_OPTS; k++)
        if (o->set & (1u << k)) {
            const plume_sampling_param *f = plume_sampling_param_find(SAMPLING_OPTS[k].param);
            plume_sampling_param_store(&sp, f, plume_sampling_param_load(&o->sp, f));
        }
    if (o->seed_given)
        sp.seed = o->sp.seed;
    else if (!seed_given)
        sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    o->seed_given = o->seed_given || seed_given;
    o->ep = ep;
    o->sp = sp;
}

/* Parses "1,2,3" into a malloc'd array; prints the problem and returns -1. */
static int parse_ids(const char *s, int32_t **ids, size_t *n)
{
    size_t cap = 16, len = 0;
    int32_t *a = malloc(cap * sizeof *a);
    const char *p = s;
    while (a && *p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "plume generate: --prompt-ids expects comma-separated non-negative "
                            "integers, got '%s'\n", s);
            free(a);
            return -1;
        }
        if (len == cap) {
            int32_t *b = realloc(a, (cap *= 2) * sizeof *a);
            if (!b) {
                free(a);
                return -1;
            }
            a = b;
        }
        a[len++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (!a || len == 0) {
        fprintf(stderr, "plume generate: --prompt-ids is empty\n");
        free(a);
        return -1;
    }
    *ids = a;
    *n = len;
    return 0;
}

/* The text to tokenize: the prompt, or the chat template (tmpl, else the
 * model's) applied to it. */
static int prompt_text(const plume_tokenizer *tok, const plume_chat_template *tmpl,
                       const char *prompt, bool chat, const char *system, char **out,
                       plume_error *err)
{
    if (!chat)
        return (*out = strdup(prompt)) ? 0 : plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    json_t *msgs = json_array();
    if (system)
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", system));
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", prompt));
    char *text = json_array_size(msgs) == (system ? 2u : 1u) ? json_dumps(msgs, 0) : NULL;
    json_decref(msgs);
    if (!text)
        return plume_err(err, PLUME_ERR_INVALID, "the prompt or system text is not valid UTF-8");
    plume_chat_request req = {.messages_json = text, .add_generation_prompt = true, .tmpl = tmpl};
    int rc = plume_chat_render(tok, &req, out, err);
    free(text);
    return rc;
}

typedef struct stream_state {
    bool print;
    double t_first; /* when the first token arrived */
    double t_last;
    size_t n_tokens;
} stream_state;

static void on_token(void *user, int64_t id, int32_t token, const char *text, size_t len,
                     plume_finish_reason reason)
{
    (void)id;
    (void)reason;
    stream_state *st = user;
    double t = plume_clock_seconds();
    if (token >= 0) {
        if (st->n_tokens++ == 0)
            st->t_first = t;
        st->t_last = t;
    }
    if (st->print && len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
}

static int write_logits(const char *path, const float *logits, int32_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(logits, sizeof(float), (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "plume generate: cannot write logits to %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f) == 0 ? 0 : -1;
}

static json_t *ids_json(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* A request's outcome as JSON (text replaced by "" if it is not UTF-8). */
static json_t *result_json(const plume_request_result *r, const char *spec_method)
{
    json_t *text = json_stringn(r->text, r->text_len);
    json_t *o = json_pack("{s:o,s:o,s:o,s:I,s:I,s:s,s:I}", "text", text ? text : json_string(""),
                          "token_ids", ids_json(r->output_ids, r->n_output), "prompt_token_ids",
                          ids_json(r->prompt_ids, r->n_prompt), "prompt_tokens",
                          (json_int_t)r->n_prompt, "generated_tokens", (json_int_t)r->n_output,
                          "finish_reason", plume_finish_reason_name(r->finish),
                          "cached_prompt_tokens", (json_int_t)r->n_cached_prompt);
    if (r->error)
        json_object_set_new(o, "error", json_string(r->error));
    if (r->n_drafted > 0 || spec_method) {
        json_t *sp = json_pack("{s:s,s:i,s:i,s:f,s:f}", "method", spec_method ? spec_method : "?",
                               "drafted", r->n_drafted, "accepted", r->n_accepted,
                               "acceptance_rate",
                               r->n_drafted ? (double)r->n_accepted / r->n_drafted : 0.0,
                               "tokens_per_forward",
                               r->n_forwards ? (double)r->n_output / r->n_forwards : 0.0);
        json_object_set_new(o, "spec", sp);
    }
    return o;
}

static int run_engine(plume_engine *e, plume_error *err)
{
    while (plume_engine_has_work(e))
        if (plume_engine_step(e, err) < 0)
            return -1;
    return 0;
}

static int generate_one(const gen_opts *o, const plume_model *m, plume_engine *e,
                        plume_error *err)
{
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    plume_request_params rp = plume_request_defaults();
    rp.sampling = o->sp;
    rp.max_tokens = o->max_tokens;
    rp.ignore_eos = o->ignore_eos;
    rp.stop = o->stop;
    rp.n_stop = o->n_stop;
    stream_state st = {.print = !o->json};
    rp.on_token = on_token;
    rp.user = &st;
    float *logits = NULL;
    if (o->logits_out) {
        logits = malloc(sizeof(float) * (size_t)plume_model_n_vocab(m));
        if (!logits)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        rp.first_logits = logits;
    }
    int64_t id;
    double t0 = plume_clock_seconds();
    if (o->prompt_ids) {
        int32_t *ids;
        size_t n;
        if (parse_ids(o->prompt_ids, &ids, &n)) {
            free(logits);
            return plume_err(err, PLUME_ERR_INVALID, "bad --prompt-ids");
        }
        id = plume_engine_add_tokens(e, ids, n, &rp, err);
        free(ids);
    } else {
        char *text;
        if (prompt_text(tok, o->tmpl, o->prompt, o->chat, o->system, &text, err)) {
            free(logits);
            return -1;
        }
        id = plume_engine_add_text(e, text, &rp, err);
        free(text);
    }
    if (id < 0 || run_engine(e, err)) {
        free(logits);
        return -1;
    }
    plume_request_result r;
    plume_engine_result(e, id, &r);
    if (logits && write_logits(o->logits_out, logits, plume_model_n_vocab(m))) {
        free(logits);
        return plume_err(err, PLUME_ERR_IO, "could not write %s", o->logits_out);
    }
    free(logits);
    double prefill_tok_s = st.n_tokens ? (double)r.n_prompt / (st.t_first - t0) : 0.0;
    double decode_tok_s =
        st.n_tokens > 1 ? (double)(st.n_tokens - 1) / (st.t_last - st.t_first) : 0.0;
    if (o->json) {
        json_t *obj = result_json(&r, plume_engine_proposer_name(e));
        json_object_set_new(obj, "prefill_tok_s", json_real(prefill_tok_s));
        json_object_set_new(obj, "decode_tok_s", json_real(decode_tok_s));
        json_object_set_new(obj, "seed", json_integer((json_int_t)o->sp.seed));
        json_object_set_new(obj, "kv_dtype",
                            json_string(plume_kv_dtype_name(plume_engine_kv_dtype(e))));
        json_object_set_new(obj, "kv_bytes_per_token",
                            json_integer((json_int_t)plume_engine_kv_bytes_per_token(e)));
        char *s = json_dumps(obj, JSON_ENSURE_ASCII);
        puts(s);
        free(s);
        json_decref(obj);
    } else {
        putchar('\n');
        fprintf(stderr, "\nprompt: %zu tokens, %.1f tok/s | generation: %zu tokens, %.1f tok/s | "
                        "finish: %s | seed %llu\n",
                r.n_prompt, prefill_tok_s, r.n_output, decode_tok_s,
                plume_finish_reason_name(r.finish), (unsigned long long)o->sp.seed);
        if (plume_engine_proposer_name(e))
            fprintf(stderr, "speculative (%s): %d drafted, %d accepted (%.1f%%), %.2f tokens per "
                            "forward\n",
                    plume_engine_proposer_name(e), r.n_drafted, r.n_accepted,
                    r.n_drafted ? 100.0 * r.n_accepted / r.n_drafted : 0.0,
                    r.n_forwards ? (double)r.n_output / r.n_forwards : 0.0);
    }
    if (r.finish == PLUME_FINISH_ERROR)
        return plume_err(err, PLUME_ERR_INTERNAL, "%s", r.error ? r.error : "request failed");
    return 0;
}

/* Builds one request from a parsed JSONL line and adds it to the engine.
 * A line with a structured-output constraint samples through the
 * "structured" provider (the sample-structured plugin, loaded on first
 * use). */
static int64_t add_jsonl_request(const plume_model *m, const plume_chat_template *tmpl,
                                 plume_engine *e, plume_registry *reg, cli_jsonl_request *q,
                                 const char *path, int line,
                                 plume_error *err)
{
    if (q->constraint) {
        const plume_sampler_vtable *vt =
            plume_registry_find_sampler(reg, PLUME_STRUCTURED_SAMPLER);
        if (!vt && plume_registry_load(reg, PLUME_STRUCTURED_PLUGIN, err))
            return plume_err_prefix(err, "%s:%d: the line asks for structured output, which "
                                         "needs the %s plugin",
                                    path, line, PLUME_STRUCTURED_PLUGIN);
        if (!vt && !(vt = plume_registry_find_sampler(reg, PLUME_STRUCTURED_SAMPLER)))
            return plume_err(err, PLUME_ERR_INTERNAL, "%s:%d: plugin %s has no sampler %s",
                             path, line, PLUME_STRUCTURED_PLUGIN, PLUME_STRUCTURED_SAMPLER);
        q->rp.sampler = vt;
        q->rp.sampler_settings = q->constraint;
    }
    char *text;
    if (prompt_text(plume_model_tokenizer(m), tmpl, q->prompt, q->chat, q->system, &text, err))
        return -1;
    int64_t id = plume_engine_add_text(e, text, &q->rp, err);
    free(text);
    if (id < 0)
        plume_err_prefix(err, "%s:%d", path, line);
    return id;
}

static int generate_file(const gen_opts *o, const plume_model *m, plume_engine *e,
                         plume_registry *reg, plume_error *err)
{
    FILE *f = fopen(o->prompts_file, "r");
    if (!f)
        return plume_err(err, PLUME_ERR_IO, "cannot open %s", o->prompts_file);
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    int lineno = 0, rc = 0;
    plume_request_params dflt = plume_request_defaults();
    dflt.sampling = o->sp;
    dflt.max_tokens = o->max_tokens;
    dflt.ignore_eos = o->ignore_eos;
    cli_jsonl_defaults d = {.rp = dflt, .stop = o->stop, .n_stop = o->n_stop, .chat = o->chat,
                            .system = o->system};
    ssize_t got;
    while ((got = getline(&line, &lcap, f)) > 0) {
        lineno++;
        cli_jsonl_request q;
        int prc = cli_jsonl_parse(line, (size_t)got, o->prompts_file, lineno, &d, &q, err);
        if (prc == 1)
            continue;
        if (prc < 0) {
            rc = -1;
            break;
        }
        int64_t id = add_jsonl_request(m, o->tmpl, e, reg, &q, o->prompts_file, lineno, err);
        cli_jsonl_request_free(&q); /* the engine copied prompt and stop strings */
        if (id < 0) {
            rc = -1;
            break;
        }
        if (n == cap) {
            int64_t *b = realloc(ids, sizeof *b * (cap = cap ? 2 * cap : 64));
            if (!b) {
                rc = plume_err(err, PLUME_ERR_NOMEM, "out of memory");
                break;
            }
            ids = b;
        }
        ids[n++] = id;
    }
    free(line);
    fclose(f);
    double t0 = plume_clock_seconds();
    if (rc == 0 && n == 0)
        rc = plume_err(err, PLUME_ERR_INVALID, "%s has no prompts", o->prompts_file);
    if (rc == 0)
        rc = run_engine(e, err);
    double dt = plume_clock_seconds() - t0;
    size_t total = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        plume_request_result r;
        plume_engine_result(e, ids[i], &r);
        total += r.n_output;
        json_t *obj = result_json(&r, plume_engine_proposer_name(e));
        json_object_set_new(obj, "index", json_integer((json_int_t)i));
        char *s = json_dumps(obj, JSON_ENSURE_ASCII);
        puts(s);
        free(s);
        json_decref(obj);
    }
    if (rc == 0) {
        plume_engine_stats st = plume_engine_get_stats(e);
        fprintf(stderr, "%zu requests, %zu generated tokens in %.2f s: %.1f tok/s | %lld steps, "
                        "%lld prompt tokens from the prefix cache, %lld preemptions\n",
                n, total, dt, (double)total / dt, (long long)st.steps,
                (long long)st.cached_prompt_tokens, (long long)st.preemptions);
        if (plume_engine_proposer_name(e))
            fprintf(stderr, "speculative (%s): %lld drafted, %lld accepted (%.1f%%)\n",
                    plume_engine_proposer_name(e), (long long)st.spec_drafted,
                    (long long)st.spec_accepted,
                    st.spec_drafted ? 100.0 * (double)st.spec_accepted / (double)st.spec_drafted
                                    : 0.0);
    }
    free(ids);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    gen_opts o;
    parse(argc, argv, &o);
    plume_error err = {0};
    plume_registry *reg = NULL;
    plume_pipeline *pipe = NULL;
    plume_model *m = NULL;
    plume_engine *e = NULL;
    int status = 1;
    if (cli_pipeline_resolve("generate", &o.po, &reg, &pipe))
        return 1;
    merge(&o, pipe);
    if (cli_engine_check_kv(&o.ep, &err))
        goto done;
    if (o.chat_template && plume_chat_template_load(o.chat_template, &o.tmpl, &err))
        goto done;
    plume_build_opts bo = {.engine = &o.ep, .n_threads = o.threads};
    if (plume_pipeline_build(pipe, reg, &bo, &m, &e, &err))
        goto done;
    if (o.prompts_file ? generate_file(&o, m, e, reg, &err) : generate_one(&o, m, e, &err))
        goto done;
    status = 0;
done:
    if (status)
        cli_print_error("generate", plume_pipeline_file(pipe), err.msg[0] ? err.msg : "failed");
    plume_engine_free(e);
    plume_model_free(m);
    plume_pipeline_free(pipe);
    plume_registry_free(reg);
    plume_chat_template_free(o.tmpl);
    return status;
}
