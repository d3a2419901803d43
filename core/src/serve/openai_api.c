/* plume serve: OpenAI request and response bodies (openai_api.h). */
#include "serve/openai_api.h"

#include "plume/structured_request.h"
#include "serve/chat_request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int serve_api_fail(char *msg, size_t cap, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    /* one line, as plume_err's: a client's bytes quoted in the message
     * (jansson's "near '...'", a model name) cannot break it */
    for (char *c = msg; cap && *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return status;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) { need = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { need = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 4; min = 0x10000; }
    else return 0;
    if (n < need)
        return 0;
    unsigned cp = c & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

json_t *serve_json_text(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len);
    if (j)
        return j;
    char *buf = malloc(3 * len + 1);
    if (!buf)
        return json_string("");
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_len((const unsigned char *)s + i, len - i);
        if (k == 0 || (k == 1 && s[i] == '\0')) {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(buf + o, s + i, k);
            o += k;
            i += k;
        }
    }
    j = json_stringn(buf, o);
    free(buf);
    return j ? j : json_string("");
}

const char *serve_api_finish_name(plume_finish_reason r)
{
    switch (r) {
    case PLUME_FINISH_STOP: return "stop";
    case PLUME_FINISH_LENGTH: return "length";
    case PLUME_FINISH_ABORT: return "abort";
    default: return NULL;
    }
}

/* ---- request parsing ---- */

/* A JSON null counts as absent. */
static json_t *field(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *out,
                   char *msg, size_t cap)
{
    json_t *v = field(o, k);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return serve_api_fail(msg, cap, 400, "'%s' must be an integer", k);
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return serve_api_fail(msg, cap, 400, "'%s' must be in [%lld, %lld], got %lld", k, lo, hi, x);
    *out = x;
    return 0;
}

/* One sampling parameter of the table, if present: its type and range
 * checked, stored into sp.  top_k = -1 means off (0), as in vLLM. */
static int get_sampling(json_t *o, const plume_sampling_param *f, plume_sampling_params *sp,
                        char *msg, size_t cap)
{
    json_t *v = field(o, f->name);
    if (!v)
        return 0;
    if (f->integer ? !json_is_integer(v) : !json_is_number(v))
        return serve_api_fail(msg, cap, 400, "'%s' must be %s, got %s", f->name,
                    f->integer ? "an integer" : "a number",
                    json_is_string(v) ? "a string" : json_is_boolean(v) ? "a boolean"
                                                   : json_is_number(v) ? "a fraction"
                                                                       : "a non-number");
    double d = json_number_value(v);
    if (f->integer && strcmp(f->name, "top_k") == 0 && d == -1)
        d = 0;
    if (!plume_sampling_param_ok(f, d)) {
        char range[64];
        plume_sampling_param_range(f, range, sizeof range);
        return serve_api_fail(msg, cap, 400, "'%s' must be in %s (%s), got %g", f->name, range,
                    f->neutral, d);
    }
    plume_sampling_param_store(sp, f, d);
    return 0;
}

static int get_bool(json_t *o, const char *k, bool *out, char *msg, size_t cap)
{
    json_t *v = field(o, k);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return serve_api_fail(msg, cap, 400, "'%s' must be true or false", k);
    *out = json_is_true(v);
    return 0;
}

static int parse_stop(json_t *o, serve_gen_request *g, char *msg, size_t cap)
{
    json_t *v = field(o, "stop");
    if (!v)
        return 0;
    size_t n = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v))
        return serve_api_fail(msg, cap, 400, "'stop' must be a string or a list of strings");
    if (n > SERVE_MAX_STOP)
        return serve_api_fail(msg, cap, 400, "'stop' has %zu strings; at most %d are accepted", n,
                    SERVE_MAX_STOP);
    if (n == 0)
        return 0;
    g->stop = calloc(n, sizeof *g->stop);
    if (!g->stop)
        return serve_api_fail(msg, cap, 500, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s))
            return serve_api_fail(msg, cap, 400, "'stop' item %zu must be a string", i);
        size_t len = json_string_length(s);
        if (len == 0 || len > SERVE_MAX_STOP_LEN)
            return serve_api_fail(msg, cap, 400, "'stop' item %zu has %zu bytes; each stop string needs "
                        "1 to %d", i, len, SERVE_MAX_STOP_LEN);
        if (memchr(json_string_value(s), '\0', len))
            return serve_api_fail(msg, cap, 400, "'stop' item %zu contains a NUL character", i);
        g->stop[i] = strdup(json_string_value(s));
        if (!g->stop[i])
            return serve_api_fail(msg, cap, 500, "out of memory");
        g->n_stop = i + 1;
    }
    return 0;
}

static int tokenize_text(const serve_api_env *env, const char *text, size_t len, bool special,
                         int32_t **ids, size_t *n, char *msg, size_t cap)
{
    plume_error err = {0};
    if (plume_tokenize(env->tok, text, len, special && plume_tokenizer_add_bos(env->tok), true,
                       ids, n, &err))
        return serve_api_fail(msg, cap, 400, "could not tokenize the prompt: %s", err.msg);
    return 0;
}

static int parse_prompt(const serve_api_env *env, json_t *o, serve_gen_request *g, char *msg,
                        size_t cap)
{
    json_t *p = field(o, "prompt");
    if (!p)
        return serve_api_fail(msg, cap, 400, "'prompt' is required: a string or a list of token ids");
    /* a list holding one prompt is that prompt */
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p))
        return tokenize_text(env, json_string_value(p), json_string_length(p), true, &g->prompt,
                             &g->n_prompt, msg, cap);
    if (!json_is_array(p))
        return serve_api_fail(msg, cap, 400, "'prompt' must be a string or a list of token ids");
    size_t n = json_array_size(p);
    if (n == 0)
        return serve_api_fail(msg, cap, 400, "'prompt' is empty; give at least one token");
    if (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0)))
        return serve_api_fail(msg, cap, 400, "'prompt' holds %zu prompts; plume serve takes one prompt "
                    "per request (send one request each)", n);
    g->prompt = malloc(n * sizeof *g->prompt);
    if (!g->prompt)
        return serve_api_fail(msg, cap, 500, "out of memory");
    int32_t nv = plume_tokenizer_n_vocab(env->tok);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(p, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= nv)
            return serve_api_fail(msg, cap, 400, "'prompt' item %zu is not a token id in [0, %d)", i, nv);
        g->prompt[i] = (int32_t)json_integer_value(t);
    }
    g->n_prompt = n;
    return 0;
}

/* A seed from the clock, for a request that names none. */
static uint64_t random_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ull;
}

/* A constrained reply (response_format, guided_*, a required tool call)
 * on a prompt that opens a think block (QwQ, Qwen3 thinking, DeepSeek-R1
 * templates): the grammar cannot write "</think>", so the whole reply
 * would land in reasoning_content and content would stay empty.  The block
 * is closed empty, as those templates' enable_thinking=false form does
 * ("<think>\n\n</think>\n\n"), and the grammar shapes the answer. */
static int close_think(serve_chat *c, char *msg, size_t cap)
{
    const size_t n = strlen(c->prompt);
    const char *tail = n && c->prompt[n - 1] == '\n' ? "\n</think>\n\n" : "\n\n</think>\n\n";
    const size_t tn = strlen(tail);
    char *p = realloc(c->prompt, n + tn + 1);
    if (!p)
        return serve_api_fail(msg, cap, 500, "out of memory");
    memcpy(p + n, tail, tn + 1);
    c->prompt = p;
    c->reply.starts_inside = false;
    return 0;
}

/* The conversation (chat_request.c) rendered and tokenized; a required
 * tool call becomes the structured sampler's constraint. */
static int parse_chat(const serve_api_env *env, json_t *o, serve_gen_request *g,
                      plume_settings **constraint, char *msg, size_t cap)
{
    serve_chat c;
    /* call ids from a fresh value, not the sampling seed: a client that
     * fixes seed must still get ids that differ from turn to turn */
    int rc = serve_chat_parse(env, o, random_seed() ^ g->rp.sampling.seed, true, &c, msg, cap);
    if (rc)
        return rc;
    if (c.reply.starts_inside && (*constraint || c.tool_constraint) &&
        (rc = close_think(&c, msg, cap))) {
        serve_chat_free(&c);
        return rc;
    }
    rc = tokenize_text(env, c.prompt, strlen(c.prompt), true, &g->prompt, &g->n_prompt, msg, cap);
    g->reply = c.reply;
    g->rp.render_special = c.render_special; /* markup the reply reader needs (chat_request.h) */
    if (rc == 0 && c.tool_constraint) {
        plume_error err = {0};
        if (*constraint)
            rc = serve_api_fail(msg, cap, 400, "'tool_choice' \"%s\" constrains the output "
                                "to a tool call; leave out response_format and guided_* with it",
                                c.choice == SERVE_TOOLS_NAMED ? "function" : "required");
        else if (plume_settings_new_in("tool_choice", "sampling", constraint, &err) ||
                 plume_settings_set(*constraint, "tool_calls", c.tool_constraint, &err))
            rc = serve_api_fail(msg, cap, 500, "could not build the tool-call constraint: %s",
                                err.msg);
    }
    serve_chat_free(&c);
    return rc;
}

/* response_format, guided_* (and tool_choice required) through the
 * structured sampler: constraint set means the request has one. */
static int use_constraint(const serve_api_env *env, serve_gen_request *g,
                          plume_settings *constraint, char *msg, size_t cap)
{
    if (!constraint)
        return 0;
    g->sampler_settings = constraint;
    if (!env->structured)
        return serve_api_fail(msg, cap, 400, "structured output (response_format, guided_*, "
                              "tool_choice required) needs the sample-structured plugin, which "
                              "this server could not load: %s",
                              env->structured_error ? env->structured_error : "not installed");
    if (env->structured->validate) {
        plume_error err = {0};
        if (env->structured->validate(constraint, &err))
            return serve_api_fail(msg, cap, 400, "%s", err.msg);
    }
    g->rp.sampler = env->structured;
    g->rp.sampler_settings = constraint;
    return 0;
}

/* Fields that change the meaning of a request and that plume serve does not
 * do: refusing them beats silently ignoring them. */
static int refuse_unsupported(json_t *o, serve_api_kind kind, char *msg, size_t cap)
{
    static const char *const never[] = {"functions", "function_call", "suffix", "logit_bias",
                                        "audio", "prediction"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        json_t *v = field(o, never[i]);
        if (v && !(json_is_object(v) && json_object_size(v) == 0) &&
            !(json_is_array(v) && json_array_size(v) == 0))
            return serve_api_fail(msg, cap, 400, "'%s' is not supported by plume serve; leave it out",
                        never[i]);
    }
    json_t *v = field(o, "echo");
    if (v && !json_is_false(v))
        return serve_api_fail(msg, cap, 400, "'echo' is not supported by plume serve; leave it out or "
                    "set it to false");
    v = field(o, "best_of");
    if (v && !(json_is_integer(v) && json_integer_value(v) == 1))
        return serve_api_fail(msg, cap, 400, "'best_of' must be 1: plume serve returns one completion "
                    "per request");
    v = field(o, "n");
    if (v && !(json_is_integer(v) && json_integer_value(v) == 1))
        return serve_api_fail(msg, cap, 400, "'n' must be 1: plume serve returns one choice per request "
                    "(send n requests for n completions)");
    if (kind != SERVE_API_CHAT)
        for (size_t i = 0; i < 3; i++) {
            static const char *const chat_only[] = {"tools", "tool_choice",
                                                    "chat_template_kwargs"};
            if (field(o, chat_only[i]))
                return serve_api_fail(msg, cap, 400, "'%s' belongs to /v1/chat/completions; "
                                      "/v1/completions takes a prompt", chat_only[i]);
        }
    return 0;
}

static int parse_logprobs(const serve_api_env *env, json_t *o, serve_gen_request *g, char *msg,
                          size_t cap)
{
    json_t *v = field(o, "logprobs");
    long long top = -1;
    if (g->kind == SERVE_API_CHAT) {
        bool want = false;
        int rc = get_bool(o, "logprobs", &want, msg, cap);
        if (rc)
            return rc;
        long long t = 0;
        rc = get_int(o, "top_logprobs", 0, PLUME_MAX_TOP_LOGPROBS, &t, msg, cap);
        if (rc)
            return rc;
        if (field(o, "top_logprobs") && !want)
            return serve_api_fail(msg, cap, 400, "'top_logprobs' needs 'logprobs': true");
        top = want ? t : -1;
    } else if (v) {
        int rc = get_int(o, "logprobs", 0, PLUME_MAX_TOP_LOGPROBS, &top, msg, cap);
        if (rc)
            return rc;
    }
    g->logprobs = (int32_t)top;
    return 0;
}

int serve_api_parse_gen(const serve_api_env *env, serve_api_kind kind, const char *body,
                        size_t len, serve_gen_request *g, char *msg, size_t cap)
{
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->logprobs = -1;
    g->rp = plume_request_defaults();
    g->rp.sampling = env->sampling;
    g->rp.sampling.seed = random_seed();
    g->rp.logprobs = -1;
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return serve_api_fail(msg, cap, 400, "the body is not valid JSON (%s at line %d, column %d)",
                    je.text, je.line, je.column);
    int rc = 0;
    if (!json_is_object(o)) {
        rc = serve_api_fail(msg, cap, 400, "the body must be a JSON object");
        goto out;
    }
    json_t *model = field(o, "model");
    if (model && !json_is_string(model)) {
        rc = serve_api_fail(msg, cap, 400, "'model' must be a string");
        goto out;
    }
    if (model && strcmp(json_string_value(model), env->model_name) != 0) {
        rc = serve_api_fail(msg, cap, 404, "the model '%.200s' does not exist; this server serves '%s' "
                  "(GET /v1/models)", json_string_value(model), env->model_name);
        goto out;
    }
    if ((rc = refuse_unsupported(o, kind, msg, cap)))
        goto out;
    long long x;
    plume_sampling_params *sp = &g->rp.sampling;
    bool b;
    /* the sampling parameters of the one table (plume/sampler.h); top_k also
     * takes -1 for off, as vLLM does */
    size_t n_params;
    const plume_sampling_param *table = plume_sampling_param_list(&n_params);
    for (size_t i = 0; i < n_params; i++) {
        const plume_sampling_param *f = &table[i];
        if (strcmp(f->name, "repeat_last_n") == 0)
            continue; /* a deployment's choice (the pipeline), not a request's */
        if ((rc = get_sampling(o, f, sp, msg, cap)))
            goto out;
    }
    /* any 64-bit integer, as OpenAI and vLLM take it (a negative one is its
     * two's-complement bits) */
    x = 0;
    if (field(o, "seed") && (rc = get_int(o, "seed", INT64_MIN, INT64_MAX, &x, msg, cap)) == 0)
        sp->seed = (uint64_t)x;
    if (rc)
        goto out;
    b = false;
    if ((rc = get_bool(o, "ignore_eos", &b, msg, cap)))
        goto out;
    g->rp.ignore_eos = b;
    b = true;
    if ((rc = get_bool(o, "speculative", &b, msg, cap)))
        goto out;
    g->rp.no_speculation = !b;
    x = -2;
    if ((rc = get_int(o, "num_speculative_tokens", -1, 64, &x, msg, cap)))
        goto out;
    if (x != -2) /* the engine refuses more than its own k */
        g->rp.num_speculative_tokens = (int32_t)x;
    if ((rc = get_bool(o, "stream", &g->stream, msg, cap)))
        goto out;
    json_t *kx = field(o, "kv_transfer_params");
    if (kx) {
        if ((rc = serve_api_parse_kv_transfer(kx, &g->kv_xfer, msg, cap)))
            goto out;
        g->rp.kv_transfer = &g->kv_xfer;
    }
    if ((rc = get_bool(o, "return_token_ids", &g->return_token_ids, msg, cap)))
        goto out;
    json_t *so = field(o, "stream_options");
    if (so) {
        if (!json_is_object(so)) {
            rc = serve_api_fail(msg, cap, 400, "'stream_options' must be an object");
            goto out;
        }
        if (!g->stream) {
            rc = serve_api_fail(msg, cap, 400, "'stream_options' is only allowed with \"stream\": true");
            goto out;
        }
        if ((rc = get_bool(so, "include_usage", &g->include_usage, msg, cap)))
            goto out;
    }
    long long max_tokens = -1;
    const char *mt_name = field(o, "max_completion_tokens") ? "max_completion_tokens"
                                                            : "max_tokens";
    if ((rc = get_int(o, mt_name, 1, 1 << 30, &max_tokens, msg, cap)))
        goto out;
    if ((rc = parse_logprobs(env, o, g, msg, cap)))
        goto out;
    g->rp.logprobs = g->logprobs;
    if ((rc = parse_stop(o, g, msg, cap)))
        goto out;
    plume_settings *constraint = NULL;
    plume_error serr = {0};
    if (plume_structured_from_json(o, &constraint, &serr)) {
        rc = serve_api_fail(msg, cap, 400, "%s", serr.msg);
        goto out;
    }
    rc = kind == SERVE_API_CHAT ? parse_chat(env, o, g, &constraint, msg, cap)
                                : parse_prompt(env, o, g, msg, cap);
    if (rc == 0)
        rc = use_constraint(env, g, constraint, msg, cap);
    else
        plume_settings_free(constraint);
    if (rc)
        goto out;
    if (g->n_prompt == 0) {
        rc = serve_api_fail(msg, cap, 400, "the prompt is empty; give at least one token");
        goto out;
    }
    if (g->n_prompt >= (size_t)env->n_ctx) {
        rc = serve_api_fail(msg, cap, 400, "the prompt has %zu tokens but the context is %d tokens "
                  "(room for at most %d prompt tokens and one generated token); shorten it",
                  g->n_prompt, env->n_ctx, env->n_ctx - 1);
        goto out;
    }
    /* absent: up to the end of the context, like vLLM */
    g->rp.max_tokens = max_tokens > 0 ? (int32_t)max_tokens
                                      : env->n_ctx - (int32_t)g->n_prompt;
out:
    json_decref(o);
    if (rc)
        serve_gen_request_free(g);
    return rc;
}

void serve_gen_request_free(serve_gen_request *g)
{
    free(g->prompt);
    g->prompt = NULL;
    for (size_t i = 0; i < g->n_stop; i++)
        free(g->stop[i]);
    free(g->stop);
    g->stop = NULL;
    g->n_stop = 0;
    plume_settings_free(g->sampler_settings);
    g->sampler_settings = NULL;
}

/* ---- responses ---- */

static json_t *token_text_json(const serve_api_env *env, int32_t id)
{
    char buf[256];
    int n = plume_token_bytes(env->tok, id, true, buf, sizeof buf);
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof buf)
        n = (int)sizeof buf;
    return serve_json_text(buf, (size_t)n);
}

static json_t *token_bytes_json(const serve_api_env *env, int32_t id)
{
    char buf[256];
    int n = plume_token_bytes(env->tok, id, true, buf, sizeof buf);
    json_t *a = json_array();
    for (int i = 0; i < n && i < (int)sizeof buf; i++)
        json_array_append_new(a, json_integer((unsigned char)buf[i]));
    return a;
}

/* Chat logprobs entry ({"token","logprob","bytes","top_logprobs"}). */
static json_t *chat_lp_entry(const serve_api_env *env, const serve_token *t)
{
    json_t *top = json_array();
    for (int k = 0; k < t->lp.n_top && k < PLUME_MAX_TOP_LOGPROBS; k++)
        json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token",
                                             token_text_json(env, t->lp.top_ids[k]), "logprob",
                                             (double)t->lp.top_logprobs[k], "bytes",
                                             token_bytes_json(env, t->lp.top_ids[k])));
    return json_pack("{s:o,s:f,s:o,s:o}", "token", token_text_json(env, t->id), "logprob",
                     (double)t->lp.logprob, "bytes", token_bytes_json(env, t->id),
                     "top_logprobs", top);
}

/* Completions logprobs over toks (text offsets from base). */
static json_t *completion_lp(const serve_api_env *env, const serve_token *toks, size_t n)
{
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(),
           *offs = json_array();
    for (size_t i = 0; i < n; i++) {
        const serve_token *t = &toks[i];
        json_array_append_new(tokens, token_text_json(env, t->id));
        json_array_append_new(lps, json_real(t->has_logprobs ? t->lp.logprob : 0.0));
        json_t *top = json_object();
        for (int k = 0; t->has_logprobs && k < t->lp.n_top && k < PLUME_MAX_TOP_LOGPROBS; k++) {
            json_t *s = token_text_json(env, t->lp.top_ids[k]);
            json_object_set_new(top, json_string_value(s), json_real(t->lp.top_logprobs[k]));
            json_decref(s);
        }
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer((json_int_t)t->text_off));
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offs);
}

static json_t *usage_json(int64_t prompt, int64_t completion, int64_t cached)
{
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)prompt,
                     "completion_tokens", (json_int_t)completion, "total_tokens",
                     (json_int_t)(prompt + completion), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)cached);
}

static json_t *ids_json(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* tool_calls entries of d: {"index", "id", "type", "function": {"name",
 * "arguments"}} (index counts the reply's calls; the openai client
 * assembles streamed calls by it). */
static json_t *tool_calls_json(const chat_delta *d, bool with_index)
{
    json_t *a = json_array();
    for (size_t i = 0; i < d->n_calls; i++) {
        const plume_tool_call *c = &d->calls[i];
        json_t *e = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", c->id, "type", "function",
                              "function", "name", c->name, "arguments", c->arguments);
        if (e && with_index)
            json_object_set_new(e, "index", json_integer((json_int_t)(d->first_index + i)));
        json_array_append_new(a, e);
    }
    return a;
}

/* A chat reply read whole: the message object and whether it called tools. */
static json_t *read_message(const serve_gen_request *g, const char *text, size_t len,
                            bool *called)
{
    chat_reply *c = chat_reply_new(&g->reply);
    chat_delta d = {0};
    *called = false;
    if (!c || chat_reply_feed(c, text, len, true, &d)) {
        chat_reply_free(c);
        return NULL;
    }
    json_t *m = json_pack("{s:s}", "role", "assistant");
    json_object_set_new(m, "content", d.content ? serve_json_text(d.content, strlen(d.content))
                                      : d.n_calls ? json_null() : json_string(""));
    if (d.reasoning)
        json_object_set_new(m, "reasoning_content",
                            serve_json_text(d.reasoning, strlen(d.reasoning)));
    if (d.n_calls) {
        json_object_set_new(m, "tool_calls", tool_calls_json(&d, false));
        *called = true;
    }
    chat_delta_clear(&d);
    chat_reply_free(c);
    return m;
}

json_t *serve_api_response(const serve_api_env *env, const serve_gen_request *g, const char *id,
                           int64_t created, serve_req *r)
{
    pthread_mutex_lock(&r->mu);
    const char *fin = serve_api_finish_name(r->finish);
    json_t *text = serve_json_text(r->text ? r->text : "", r->text_len);
    json_t *choice = json_pack("{s:i,s:o}", "index", 0, "finish_reason",
                               fin ? json_string(fin) : json_null());
    json_t *lp = json_null();
    if (g->logprobs >= 0) {
        json_decref(lp);
        if (g->kind == SERVE_API_CHAT) {
            json_t *content = json_array();
            for (size_t i = 0; i < r->n_toks; i++)
                if (r->toks[i].has_logprobs)
                    json_array_append_new(content, chat_lp_entry(env, &r->toks[i]));
            lp = json_pack("{s:o}", "content", content);
        } else {
            lp = completion_lp(env, r->toks, r->n_toks);
        }
    }
    json_object_set_new(choice, "logprobs", lp);
    if (g->kind == SERVE_API_CHAT && chat_reply_active(&g->reply)) {
        bool called;
        json_t *m = read_message(g, r->text ? r->text : "", r->text_len, &called);
        json_object_set_new(choice, "message", m ? m : json_pack("{s:s,s:O}", "role",
                                                                   "assistant", "content", text));
        if (called && r->finish == PLUME_FINISH_STOP)
            json_object_set_new(choice, "finish_reason", json_string("tool_calls"));
        json_decref(text);
    } else if (g->kind == SERVE_API_CHAT) {
        json_object_set_new(choice, "message",
                            json_pack("{s:s,s:o}", "role", "assistant", "content", text));
    } else {
        json_object_set_new(choice, "text", text);
    }
    if (g->return_token_ids) {
        json_t *ids = json_array();
        for (size_t i = 0; i < r->n_toks; i++)
            json_array_append_new(ids, json_integer(r->toks[i].id));
        json_object_set_new(choice, "token_ids", ids);
    }
    json_t *out = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:o}", "id", id, "object",
                            g->kind == SERVE_API_CHAT ? "chat.completion" : "text_completion",
                            "created", (json_int_t)created, "model", env->model_name, "choices", choice,
                            "usage", usage_json(r->usage_prompt, r->usage_completion,
                                                r->usage_cached));
    if (r->has_kv_out) /* a prefill worker: what the decode worker needs */
        json_object_set_new(out, "kv_transfer_params", serve_api_kv_transfer_json(&r->kv_out));
    pthread_mutex_unlock(&r->mu);
    if (g->return_token_ids)
        json_object_set_new(out, "prompt_token_ids", ids_json(g->prompt, g->n_prompt));
    return out;
}

static int kv_string(json_t *o, const char *k, char *out, size_t n, char *msg, size_t cap)
{
    json_t *v = field(o, k);
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) >= n ||
        memchr(json_string_value(v), '\0', json_string_length(v)))
        return serve_api_fail(msg, cap, 400, "'kv_transfer_params.%s' must be a string of at most %zu bytes",
                    k, n - 1);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

int serve_api_parse_kv_transfer(json_t *v, plume_kv_transfer_params *out, char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(v))
        return serve_api_fail(msg, cap, 400,
                    "'kv_transfer_params' must be an object (do_remote_decode, "
                    "do_remote_prefill, transfer_id, remote_addr)");
    int rc;
    if ((rc = get_bool(v, "do_remote_decode", &out->do_remote_decode, msg, cap)) ||
        (rc = get_bool(v, "do_remote_prefill", &out->do_remote_prefill, msg, cap)) ||
        (rc = kv_string(v, "transfer_id", out->transfer_id, sizeof out->transfer_id, msg, cap)) ||
        (rc = kv_string(v, "remote_addr", out->remote_addr, sizeof out->remote_addr, msg, cap)))
        return rc;
    return 0;
}

json_t *serve_api_kv_transfer_json(const plume_kv_transfer_params *x)
{
    return json_pack("{s:b,s:b,s:s,s:s}", "do_remote_decode", x->do_remote_decode,
                     "do_remote_prefill", x->do_remote_prefill, "transfer_id", x->transfer_id,
                     "remote_addr", x->remote_addr);
}

json_t *serve_api_chunk(const serve_api_env *env, const serve_gen_request *g, const char *id,
                        int64_t created, const serve_token *tok, const char *text,
                        const chat_delta *d, bool role_chunk, const char *finish,
                        const int64_t *usage)
{
    bool chat = g->kind == SERVE_API_CHAT;
    json_t *choices = json_array();
    if (!usage) {
        json_t *c = json_pack("{s:i}", "index", 0);
        json_t *t = tok && !d ? serve_json_text(text, tok->text_len) : json_string("");
        if (chat && d) {
            json_t *delta = json_object();
            if (role_chunk)
                json_object_set_new(delta, "role", json_string("assistant"));
            if (d->reasoning)
                json_object_set_new(delta, "reasoning_content",
                                    serve_json_text(d->reasoning, strlen(d->reasoning)));
            if (d->content || role_chunk)
                json_object_set_new(delta, "content",
                                    d->content ? serve_json_text(d->content, strlen(d->content))
                                               : json_string(""));
            if (d->n_calls)
                json_object_set_new(delta, "tool_calls", tool_calls_json(d, true));
            json_decref(t);
            json_object_set_new(c, "delta", delta);
        } else if (chat) {
            json_t *delta = json_object();
            if (role_chunk)
                json_object_set_new(delta, "role", json_string("assistant"));
            if (tok || role_chunk)
                json_object_set_new(delta, "content", t);
            else
                json_decref(t);
            json_object_set_new(c, "delta", delta);
        } else {
            json_object_set_new(c, "text", t);
        }
        json_t *lp = json_null();
        if (tok && tok->has_logprobs && g->logprobs >= 0) {
            json_decref(lp);
            lp = chat ? json_pack("{s:[o]}", "content", chat_lp_entry(env, tok))
                      : completion_lp(env, tok, 1);
        }
        json_object_set_new(c, "logprobs", lp);
        json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
        if (tok && g->return_token_ids)
            json_object_set_new(c, "token_ids", json_pack("[i]", tok->id));
        json_array_append_new(choices, c);
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", id, "object",
                          chat ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)created,
                          "model", env->model_name, "choices", choices);
    if (usage)
        json_object_set_new(o, "usage", usage_json(usage[0], usage[1], usage[2]));
    else if (g->include_usage)
        json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *serve_api_error(int status, const char *msg)
{
    /* OpenAI's shape: type and code are strings (code and param may be
     * null); typed clients (the .NET and Go SDKs) fail to read a numeric
     * code, so the HTTP status stays in the status line only */
    const char *type = status == 401   ? "authentication_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    const char *code = status == 401   ? "invalid_api_key"
                       : status == 429 ? "rate_limit_exceeded"
                       : status == 503 ? "service_unavailable"
                                       : NULL;
    return json_pack("{s:{s:o,s:s,s:n,s:o}}", "error", "message",
                     serve_json_text(msg, strlen(msg)), "type", type, "param", "code",
                     code ? json_string(code) : json_null());
}

json_t *serve_api_model(const serve_api_env *env, int64_t created)
{
    return json_pack("{s:s,s:s,s:I,s:s,s:i}", "id", env->model_name, "object", "model", "created",
                     (json_int_t)created, "owned_by", "plume", "max_model_len", env->n_ctx);
}

json_t *serve_api_models(const serve_api_env *env, int64_t created)
{
    return json_pack("{s:s,s:[o]}", "object", "list", "data", serve_api_model(env, created));
}

json_t *serve_api_tokenize(const serve_api_env *env, const char *body, size_t len, int *status,
                           char *msg, size_t cap)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je), *out = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    *status = 0;
    if (!o)
        *status = serve_api_fail(msg, cap, 400, "the body is not valid JSON (%s at line %d, column %d)",
                       je.text, je.line, je.column);
    else if (!json_is_object(o))
        *status = serve_api_fail(msg, cap, 400, "the body must be a JSON object");
    bool special = true, add_gen = true;
    if (!*status)
        *status = get_bool(o, "add_special_tokens", &special, msg, cap);
    if (!*status)
        *status = get_bool(o, "add_generation_prompt", &add_gen, msg, cap);
    if (!*status) {
        json_t *p = field(o, "prompt"), *m = field(o, "messages");
        if (!p == !m)
            *status = serve_api_fail(msg, cap, 400, "give either 'prompt' (a string) or 'messages'");
        else if (p && !json_is_string(p))
            *status = serve_api_fail(msg, cap, 400, "'prompt' must be a string");
        else if (p)
            *status = tokenize_text(env, json_string_value(p), json_string_length(p), special,
                                    &ids, &n, msg, cap);
        else {
            serve_chat c;
            if (!(*status = serve_chat_parse(env, o, 0, add_gen, &c, msg, cap)))
                *status = tokenize_text(env, c.prompt, strlen(c.prompt), special, &ids, &n,
                                        msg, cap);
            serve_chat_free(&c);
        }
    }
    if (!*status)
        out = json_pack("{s:I,s:i,s:o}", "count", (json_int_t)n, "max_model_len", env->n_ctx,
                        "tokens", ids_json(ids, n));
    free(ids);
    json_decref(o);
    return out;
}

json_t *serve_api_detokenize(const serve_api_env *env, const char *body, size_t len,
                             int *status, char *msg, size_t cap)
{
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je), *out = NULL;
    *status = 0;
    json_t *t = o ? field(o, "tokens") : NULL;
    if (!o)
        *status = serve_api_fail(msg, cap, 400, "the body is not valid JSON (%s at line %d, column %d)",
                       je.text, je.line, je.column);
    else if (!json_is_array(t))
        *status = serve_api_fail(msg, cap, 400, "'tokens' must be a list of token ids");
    size_t n = t ? json_array_size(t) : 0;
    int32_t *ids = *status ? NULL : malloc((n ? n : 1) * sizeof *ids);
    if (!*status && !ids)
        *status = serve_api_fail(msg, cap, 500, "out of memory");
    int32_t nv = plume_tokenizer_n_vocab(env->tok);
    for (size_t i = 0; !*status && i < n; i++) {
        json_t *v = json_array_get(t, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= nv)
            *status = serve_api_fail(msg, cap, 400, "'tokens' item %zu is not a token id in [0, %d)", i, nv);
        else
            ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    plume_error err = {0};
    if (!*status && plume_detokenize(env->tok, ids, n, true, &text, &err))
        *status = serve_api_fail(msg, cap, 400, "could not detokenize: %s", err.msg);
    if (!*status)
        out = json_pack("{s:o}", "prompt", serve_json_text(text, strlen(text)));
    free(text);
    free(ids);
    json_decref(o);
    return out;
}
