/* libFuzzer target for the request bodies plume serve and plume router read
 * from the network: the input's first byte picks the route, the rest is the
 * body.
 *   0 /v1/completions, 1 /v1/chat/completions (serve_api_parse_gen: the
 *     sampling table, stop strings, logprobs, kv_transfer_params, structured
 *     outputs compiled by the sample-structured plugin's validate, chat
 *     messages and tools rendered through SmolLM2's template);
 *   2 /tokenize, 3 /detokenize;
 *   4 plume router: router_parse_request, then both rewrites.
 * With the first byte's high bit the server renders chats with a Hermes-style
 * template (tools, <tool_call>) instead of SmolLM2's own, which has no
 * tool-call format.
 * Invariants: a refusal is a 400 or 404 with a one-line message; an
 * accepted request has 1 .. n_ctx-1 prompt ids inside the vocabulary,
 * sampling parameters inside the table's ranges, at most SERVE_MAX_STOP
 * non-empty stop strings of at most SERVE_MAX_STOP_LEN bytes and a
 * max_tokens of at least 1; the router's prefill request is the client's
 * with max_tokens 1, no stream and kv_transfer_params {"do_remote_decode":
 * true}, which the server accepts whenever it accepts the client's, with the
 * same prompt ids; its decode request is the client's with the prefill
 * worker's kv_transfer_params.  The tokenizer is SmolLM2's, from the GGUF
 * named by PLUME_FUZZ_MODEL. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_tokenizer.h"
#include "fuzz_util.h"
#include "plume/sampler.h"
#include "plume/tokenizer.h"
#include "serve/openai_api.h"
#include "serve/router_rewrite.h"
#include "structured.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { N_CTX = 512 };

static plume_tokenizer *tok;
static plume_chat_template *tools_template;
static serve_api_env env_model, env_tools;
static const serve_api_env *env;

/* A Hermes/Qwen-style chat template with tools (written for this harness). */
static const char TOOLS_TEMPLATE[] =
    "{%- if tools %}<|im_start|>system\nYou may call these tools:\n<tools>"
    "{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools>\n"
    "Answer a call as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>"
    "<|im_end|>\n{% endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n"
    "{%- elif m.tool_calls %}<|im_start|>assistant\n{% for c in m.tool_calls %}<tool_call>\n"
    "{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}"
    "\n</tool_call>{% endfor %}<|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/* Loads the tokenizer and makes the server's request environment once;
 * aborts when the model is missing (a broken set-up must not look like a
 * pass). */
static void load_once(void)
{
    if (tok)
        return;
    tok = fuzz_load_tokenizer();
    plume_error err = {0};
    FUZZ_CHECK(plume_chat_template_compile(TOOLS_TEMPLATE, strlen(TOOLS_TEMPLATE), &tools_template,
                                           &err) == 0,
               "%s", err.msg);
    env_model = (serve_api_env){.tok = tok, .model_name = "smollm2", .n_ctx = N_CTX,
                                .sampling = plume_sampling_defaults(),
                                .structured = ss_structured_sampler()};
    env_tools = env_model;
    env_tools.chat_template = tools_template;
}

/* A message of one non-empty line: no control byte at all. */
static void check_line(const char *msg)
{
    FUZZ_CHECK(msg[0] != '\0', "a refusal without a message");
    for (const char *c = msg; *c; c++)
        FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte %#x in: %s",
                   (unsigned)(unsigned char)*c, msg);
}

/* A refusal: an HTTP client error with one non-empty line. */
static void check_refusal(int status, const char *msg)
{
    FUZZ_CHECK(status == 400 || status == 404, "status %d: %s", status, msg);
    check_line(msg);
}

static void check_request(const serve_gen_request *g)
{
    FUZZ_CHECK(g->n_prompt >= 1 && g->n_prompt < N_CTX && g->prompt, "%zu prompt ids",
               g->n_prompt);
    const int32_t nv = plume_tokenizer_n_vocab(tok);
    for (size_t i = 0; i < g->n_prompt; i++)
        FUZZ_CHECK(g->prompt[i] >= 0 && g->prompt[i] < nv, "prompt id %d of %d", g->prompt[i], nv);
    plume_error err = {0};
    FUZZ_CHECK(plume_sampling_validate(&g->rp.sampling, &err) == 0, "%s", err.msg);
    FUZZ_CHECK(g->rp.max_tokens >= 1, "max_tokens %d", g->rp.max_tokens);
    FUZZ_CHECK(g->n_stop <= SERVE_MAX_STOP, "%zu stop strings", g->n_stop);
    for (size_t i = 0; i < g->n_stop; i++) {
        const size_t n = strlen(g->stop[i]);
        FUZZ_CHECK(n >= 1 && n <= SERVE_MAX_STOP_LEN, "stop string %zu of %zu bytes", i, n);
    }
    FUZZ_CHECK(g->logprobs >= -1 && g->logprobs <= PLUME_MAX_TOP_LOGPROBS, "logprobs %d",
               g->logprobs);
    FUZZ_CHECK((g->rp.sampler != NULL) == (g->sampler_settings != NULL),
               "a constraint without its sampler");
}

/* Parses body as route kind; 0 and the request in *g when accepted. */
static int parse(serve_api_kind kind, const char *body, size_t len, serve_gen_request *g)
{
    char msg[1024];
    msg[0] = '\0';
    const int rc = serve_api_parse_gen(env, kind, body, len, g, msg, sizeof msg);
    if (rc) {
        check_refusal(rc, msg);
        return rc;
    }
    check_request(g);
    return 0;
}

static void fuzz_generation(serve_api_kind kind, const char *body, size_t len)
{
    serve_gen_request g;
    if (parse(kind, body, len, &g) == 0)
        serve_gen_request_free(&g);
}

static void fuzz_tokenize(bool detokenize, const char *body, size_t len)
{
    int status = 0;
    char msg[1024];
    msg[0] = '\0';
    json_t *r = detokenize ? serve_api_detokenize(env, body, len, &status, msg, sizeof msg)
                           : serve_api_tokenize(env, body, len, &status, msg, sizeof msg);
    if (!r) {
        check_refusal(status, msg);
        return;
    }
    FUZZ_CHECK(json_is_object(r), "the answer is not an object");
    json_decref(r);
}

/* Every member of a other than the names in skip equals b's, and b has no
 * other member outside skip. */
static void check_same_but(const json_t *a, const json_t *b, const char *const *skip, size_t n_skip)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)a, key, v) {
        bool skipped = false;
        for (size_t i = 0; i < n_skip; i++)
            skipped |= strcmp(key, skip[i]) == 0;
        if (!skipped)
            FUZZ_CHECK(json_equal(v, json_object_get(b, key)), "member '%s' changed", key);
    }
    json_object_foreach((json_t *)b, key, v) {
        bool skipped = false;
        for (size_t i = 0; i < n_skip; i++)
            skipped |= strcmp(key, skip[i]) == 0;
        if (!skipped)
            FUZZ_CHECK(json_object_get(a, key) != NULL, "member '%s' added", key);
    }
}

static void fuzz_router(const char *body, size_t len)
{
    char msg[1024];
    msg[0] = '\0';
    bool stream = false;
    json_t *req = router_parse_request(body, len, &stream, msg, sizeof msg);
    if (!req) {
        check_line(msg);
        return;
    }
    FUZZ_CHECK(json_is_object(req), "the request is not an object");
    FUZZ_CHECK(stream == json_is_true(json_object_get(req, "stream")), "stream flag");
    const bool chat = json_object_get(req, "messages") != NULL;
    const serve_api_kind kind = chat ? SERVE_API_CHAT : SERVE_API_COMPLETIONS;

    json_t *pre = router_prefill_request(req);
    FUZZ_CHECK(pre != NULL, "no prefill request");
    static const char *const changed[] = {"max_tokens", "max_completion_tokens", "stream",
                                          "stream_options", "kv_transfer_params"};
    check_same_but(req, pre, changed, sizeof changed / sizeof *changed);
    FUZZ_CHECK(json_integer_value(json_object_get(pre, "max_tokens")) == 1, "prefill max_tokens");
    FUZZ_CHECK(!json_object_get(pre, "max_completion_tokens"), "prefill max_completion_tokens");
    FUZZ_CHECK(json_is_false(json_object_get(pre, "stream")), "prefill stream");
    FUZZ_CHECK(!json_object_get(pre, "stream_options"), "prefill stream_options");
    json_t *want_kv = json_pack("{s:b}", "do_remote_decode", 1);
    FUZZ_CHECK(json_equal(json_object_get(pre, "kv_transfer_params"), want_kv),
               "prefill kv_transfer_params");
    json_decref(want_kv);

    /* what the server makes of the client's body and of the prefill hop */
    serve_gen_request gc, gp;
    const int rc_client = parse(kind, body, len, &gc);
    char *pre_body = json_dumps(pre, JSON_COMPACT);
    FUZZ_CHECK(pre_body != NULL, "out of memory");
    const int rc_pre = parse(kind, pre_body, strlen(pre_body), &gp);
    free(pre_body);
    if (rc_client == 0) {
        FUZZ_CHECK(rc_pre == 0, "the server accepts the client's request but not its prefill hop");
        FUZZ_CHECK(gp.n_prompt == gc.n_prompt &&
                           memcmp(gp.prompt, gc.prompt, gc.n_prompt * sizeof *gc.prompt) == 0,
                       "the prefill hop tokenizes to other ids (%zu against %zu)", gp.n_prompt,
                       gc.n_prompt);
        FUZZ_CHECK(gp.rp.max_tokens == 1, "prefill max_tokens %d", gp.rp.max_tokens);
        serve_gen_request_free(&gc);
    }
    if (rc_pre == 0)
        serve_gen_request_free(&gp);

    json_t *answer = json_pack("{s:{s:b,s:b,s:s,s:s}}", "kv_transfer_params", "do_remote_decode",
                               0, "do_remote_prefill", 1, "transfer_id", "t-1", "remote_addr",
                               "127.0.0.1:1");
    json_t *dec = router_decode_request(req, answer);
    FUZZ_CHECK(dec != NULL, "no decode request");
    static const char *const kv_only[] = {"kv_transfer_params"};
    check_same_but(req, dec, kv_only, 1);
    FUZZ_CHECK(json_equal(json_object_get(dec, "kv_transfer_params"),
                          json_object_get(answer, "kv_transfer_params")),
               "decode kv_transfer_params");
    json_t *none = json_object();
    json_t *dec_none = router_decode_request(req, none);
    FUZZ_CHECK(dec_none == NULL, "a decode request without the worker's kv_transfer_params");
    json_decref(none);
    json_decref(dec);
    json_decref(answer);
    json_decref(pre);
    json_decref(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_once();
    if (size == 0)
        return 0;
    env = data[0] & 0x80 ? &env_tools : &env_model;
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    switch (data[0] % 5) {
    case 0:
        fuzz_generation(SERVE_API_COMPLETIONS, body, len);
        break;
    case 1:
        fuzz_generation(SERVE_API_CHAT, body, len);
        break;
    case 2:
        fuzz_tokenize(false, body, len);
        break;
    case 3:
        fuzz_tokenize(true, body, len);
        break;
    default:
        fuzz_router(body, len);
        break;
    }
    return 0;
}
