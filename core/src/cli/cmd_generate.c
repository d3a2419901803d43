/* plume generate: one prompt, streamed output, timing on stderr. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "plume/model.h"
#include "plume/sampler.h"

static const char help[] =
    "usage: plume generate --model PATH (--prompt TEXT | --prompt-ids IDS) [options]\n"
    "\n"
    "Generates a continuation of the prompt and streams it to stdout; prompt and\n"
    "generation speed (tokens/s) go to stderr.\n"
    "\n"
    "input:\n"
    "  --model PATH          a .gguf file or an HF model directory\n"
    "  --prompt TEXT         the prompt; special-token texts such as <|im_start|> are\n"
    "                        recognised, and BOS is prepended when the model asks for it\n"
    "  --prompt-ids IDS      the prompt as comma-separated token ids, used as given\n"
    "  --chat                wrap the prompt as a user message in the model's chat template\n"
    "                        (SmolLM2: ChatML) and generate the assistant's reply\n"
    "  --system TEXT         system message for --chat (default: the template's own)\n"
    "\n"
    "generation:\n"
    "  --max-tokens N        tokens to generate at most (default 256)\n"
    "  --temperature T       0 = greedy (default 0.8)\n"
    "  --top-k K             keep the K most likely tokens, 0 = off (default 40)\n"
    "  --top-p P             nucleus sampling, 1 = off (default 0.95)\n"
    "  --min-p P             drop tokens below P x the top probability, 0 = off (default 0.05)\n"
    "  --repeat-penalty R    penalise the last 64 tokens, 1 = off (default 1)\n"
    "  --seed S              RNG seed; the same seed gives the same output (default: random)\n"
    "  --ignore-eos          keep going past end-of-generation tokens\n"
    "\n"
    "runtime:\n"
    "  --threads N           worker threads (default: all online CPUs)\n"
    "  --ctx-size N          context length (default: the model's, at most 4096)\n"
    "\n"
    "output:\n"
    "  --json                print one JSON object instead of streaming: text, token_ids,\n"
    "                        prompt_token_ids, prompt_tokens, finish_reason,\n"
    "                        prefill_tok_s, decode_tok_s\n"
    "  --logits-out FILE     write the logits of the last prompt position to FILE as\n"
    "                        raw little-endian float32 (n_vocab values)\n";

typedef struct gen_opts {
    const char *model, *prompt, *prompt_ids, *system, *logits_out;
    bool chat, json, ignore_eos, seed_given;
    int max_tokens, threads, ctx_size;
    plume_sampling_params sp;
} gen_opts;

static void parse(int argc, char **argv, gen_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->sp = plume_sampling_defaults();
    o->sp.repeat_last_n = 64;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (cli_flag(argv, i, "--help") || cli_flag(argv, i, "-h")) {
            fputs(help, stdout);
            exit(0);
        } else if (cli_opt(argc, argv, &i, "--model", &v) || cli_opt(argc, argv, &i, "-m", &v)) {
            o->model = v;
        } else if (cli_opt(argc, argv, &i, "--prompt", &v) || cli_opt(argc, argv, &i, "-p", &v)) {
            o->prompt = v;
        } else if (cli_opt(argc, argv, &i, "--prompt-ids", &v)) {
            o->prompt_ids = v;
        } else if (cli_opt(argc, argv, &i, "--system", &v)) {
            o->system = v;
        } else if (cli_flag(argv, i, "--chat")) {
            o->chat = true;
        } else if (cli_opt(argc, argv, &i, "--max-tokens", &v) || cli_opt(argc, argv, &i, "-n", &v)) {
            o->max_tokens = (int)cli_int("--max-tokens", v, 0, 1 << 24);
        } else if (cli_opt(argc, argv, &i, "--temperature", &v)) {
            o->sp.temperature = (float)cli_float("--temperature", v, 0, 100);
        } else if (cli_opt(argc, argv, &i, "--top-k", &v)) {
            o->sp.top_k = (int32_t)cli_int("--top-k", v, 0, 1 << 30);
        } else if (cli_opt(argc, argv, &i, "--top-p", &v)) {
            o->sp.top_p = (float)cli_float("--top-p", v, 1e-6, 1);
        } else if (cli_opt(argc, argv, &i, "--min-p", &v)) {
            o->sp.min_p = (float)cli_float("--min-p", v, 0, 0.999999);
        } else if (cli_opt(argc, argv, &i, "--repeat-penalty", &v)) {
            o->sp.repetition_penalty = (float)cli_float("--repeat-penalty", v, 1e-3, 100);
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            o->sp.seed = (uint64_t)cli_int("--seed", v, 0, INT64_MAX);
            o->seed_given = true;
        } else if (cli_flag(argv, i, "--ignore-eos")) {
            o->ignore_eos = true;
        } else if (cli_opt(argc, argv, &i, "--threads", &v) || cli_opt(argc, argv, &i, "-t", &v)) {
            o->threads = (int)cli_int("--threads", v, 1, 1024);
        } else if (cli_opt(argc, argv, &i, "--ctx-size", &v) || cli_opt(argc, argv, &i, "-c", &v)) {
            o->ctx_size = (int)cli_int("--ctx-size", v, 1, 1 << 22);
        } else if (cli_flag(argv, i, "--json")) {
            o->json = true;
        } else if (cli_opt(argc, argv, &i, "--logits-out", &v)) {
            o->logits_out = v;
        } else {
            cli_unknown("generate", argv[i]);
        }
    }
    if (!o->model || (!o->prompt && !o->prompt_ids)) {
        fprintf(stderr, "plume generate: --model and --prompt (or --prompt-ids) are required\n\n%s",
                help);
        exit(2);
    }
    if (o->prompt && o->prompt_ids) {
        fprintf(stderr, "plume generate: give either --prompt or --prompt-ids, not both\n");
        exit(2);
    }
    if (o->chat && o->prompt_ids) {
        fprintf(stderr, "plume generate: --chat needs --prompt text, not --prompt-ids\n");
        exit(2);
    }
    if (!o->seed_given)
        o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
}

/* Parses "1,2,3" into a malloc'd array. */
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

/* The prompt's token ids: given ids, or the (chat-wrapped) text tokenized. */
static int prompt_tokens(const gen_opts *o, const plume_tokenizer *tok, int32_t **ids, size_t *n,
                         plume_error *err)
{
    if (o->prompt_ids)
        return parse_ids(o->prompt_ids, ids, n) ? plume_err(err, PLUME_ERR_INVALID, "bad --prompt-ids") : 0;
    char *text = NULL;
    const char *src = o->prompt;
    if (o->chat) {
        plume_chat_msg msgs[2];
        size_t nm = 0;
        if (o->system)
            msgs[nm++] = (plume_chat_msg){"system", o->system};
        msgs[nm++] = (plume_chat_msg){"user", o->prompt};
        if (plume_chat_apply(tok, msgs, nm, true, &text, err))
            return -1;
        src = text;
    }
    /* no second BOS when the rendered text already starts with it */
    bool add_bos = plume_tokenizer_add_bos(tok);
    int32_t bos = plume_tokenizer_bos(tok);
    if (add_bos && bos >= 0) {
        char buf[256];
        int len = plume_token_bytes(tok, bos, true, buf, sizeof buf);
        if (len > 0 && (size_t)len < sizeof buf && strncmp(src, buf, (size_t)len) == 0)
            add_bos = false;
    }
    int rc = plume_tokenize(tok, src, strlen(src), add_bos, true, ids, n, err);
    free(text);
    return rc;
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

int cmd_generate(int argc, char **argv)
{
    gen_opts o;
    parse(argc, argv, &o);
    plume_error err = {0};
    plume_model *m = NULL;
    plume_context *ctx = NULL;
    plume_sampler *smp = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    char *text = NULL;
    int status = 1;

    if (plume_model_load(o.model, &m, &err))
        goto fail;
    const plume_tokenizer *tok = plume_model_tokenizer(m);
    const int32_t n_vocab = plume_model_n_vocab(m);
    size_t n_prompt;
    if (prompt_tokens(&o, tok, &ids, &n_prompt, &err))
        goto fail;
    int n_ctx = o.ctx_size;
    if (n_ctx == 0) {
        n_ctx = plume_model_n_ctx_train(m);
        if (n_ctx > 4096 || n_ctx <= 0)
            n_ctx = 4096;
    }
    if (n_prompt >= (size_t)n_ctx) {
        plume_err(&err, PLUME_ERR_RANGE,
                  "the prompt has %zu tokens but the context holds %d; shorten it or raise "
                  "--ctx-size (the model was trained with %d)",
                  n_prompt, n_ctx, plume_model_n_ctx_train(m));
        goto fail;
    }
    if (plume_context_create(m, n_ctx, o.threads, &ctx, &err) ||
        plume_sampler_create(&o.sp, n_vocab, &smp, &err))
        goto fail;
    size_t cap = n_prompt + (size_t)o.max_tokens;
    int32_t *all = realloc(ids, sizeof(int32_t) * (cap ? cap : 1));
    logits = malloc(sizeof(float) * (size_t)n_vocab);
    if (!all || !logits) {
        plume_err(&err, PLUME_ERR_NOMEM, "out of memory");
        goto fail;
    }
    ids = all;

    double t0 = cli_now();
    if (plume_decode(ctx, ids, n_prompt, logits, &err))
        goto fail;
    double t1 = cli_now();
    if (o.logits_out && write_logits(o.logits_out, logits, n_vocab))
        goto fail;

    plume_detok dt;
    plume_detok_init(&dt, tok, false);
    size_t text_len = 0, text_cap = 4096;
    text = malloc(text_cap);
    if (!text) {
        plume_err(&err, PLUME_ERR_NOMEM, "out of memory");
        goto fail;
    }
    text[0] = '\0';
    const char *finish = "length";
    size_t n_gen = 0;
    char piece[1024];
    for (int step = 0; step < o.max_tokens; step++) {
        if (n_prompt + n_gen >= (size_t)n_ctx) {
            finish = "length";
            break;
        }
        int32_t next = plume_sampler_sample(smp, logits, ids, n_prompt + n_gen);
        ids[n_prompt + n_gen++] = next;
        if (!o.ignore_eos && plume_tokenizer_is_eog(tok, next)) {
            finish = "stop";
            break;
        }
        int len = plume_detok_push(&dt, next, piece, sizeof piece);
        if (len > 0) {
            if (text_len + (size_t)len + 1 > text_cap) {
                char *t = realloc(text, text_cap = 2 * (text_len + (size_t)len + 1));
                if (!t) {
                    plume_err(&err, PLUME_ERR_NOMEM, "out of memory");
                    goto fail;
                }
                text = t;
            }
            memcpy(text + text_len, piece, (size_t)len + 1);
            text_len += (size_t)len;
            if (!o.json) {
                fwrite(piece, 1, (size_t)len, stdout);
                fflush(stdout);
            }
        }
        if (step + 1 < o.max_tokens && n_prompt + n_gen < (size_t)n_ctx &&
            plume_decode(ctx, &next, 1, logits, &err))
            goto fail;
    }
    int len = plume_detok_flush(&dt, piece, sizeof piece);
    if (len > 0 && !o.json)
        fwrite(piece, 1, (size_t)len, stdout);
    if (len > 0 && text_len + (size_t)len + 1 <= text_cap) {
        memcpy(text + text_len, piece, (size_t)len + 1);
        text_len += (size_t)len;
    }
    double t2 = cli_now();
    /* decode speed counts the forward passes after the first sampled token */
    double prefill_tok_s = (double)n_prompt / (t1 - t0);
    double decode_tok_s = n_gen > 1 ? (double)(n_gen - 1) / (t2 - t1) : 0.0;

    if (o.json) {
        json_t *gen = json_array(), *pr = json_array();
        for (size_t i = 0; i < n_gen; i++)
            json_array_append_new(gen, json_integer(ids[n_prompt + i]));
        for (size_t i = 0; i < n_prompt; i++)
            json_array_append_new(pr, json_integer(ids[i]));
        json_t *obj = json_pack("{s:s%,s:o,s:o,s:I,s:I,s:s,s:f,s:f,s:I}", "text", text, text_len,
                                "token_ids", gen, "prompt_token_ids", pr, "prompt_tokens",
                                (json_int_t)n_prompt, "generated_tokens", (json_int_t)n_gen,
                                "finish_reason", finish, "prefill_tok_s", prefill_tok_s,
                                "decode_tok_s", decode_tok_s, "seed", (json_int_t)o.sp.seed);
        if (!obj) { /* text was not valid UTF-8 (e.g. --ignore-eos on a byte token) */
            obj = json_pack("{s:s,s:o,s:o,s:I,s:I,s:s,s:f,s:f,s:I}", "text", "",
                            "token_ids", gen, "prompt_token_ids", pr, "prompt_tokens",
                            (json_int_t)n_prompt, "generated_tokens", (json_int_t)n_gen,
                            "finish_reason", finish, "prefill_tok_s", prefill_tok_s,
                            "decode_tok_s", decode_tok_s, "seed", (json_int_t)o.sp.seed);
        }
        char *s = json_dumps(obj, JSON_ENSURE_ASCII);
        puts(s);
        free(s);
        json_decref(obj);
    } else {
        putchar('\n');
        fprintf(stderr, "\nprompt: %zu tokens, %.1f tok/s | generation: %zu tokens, %.1f tok/s | "
                        "finish: %s | seed %llu\n",
                n_prompt, prefill_tok_s, n_gen, decode_tok_s, finish,
                (unsigned long long)o.sp.seed);
    }
    status = 0;
fail:
    if (status)
        fprintf(stderr, "plume generate: %s\n", err.msg[0] ? err.msg : "failed");
    free(text);
    free(logits);
    free(ids);
    plume_sampler_free(smp);
    plume_context_free(ctx);
    plume_model_free(m);
    return status;
}
