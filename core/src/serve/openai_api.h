/* plume serve: the OpenAI API's request bodies (parsed and validated with
 * jansson) and response bodies (completions, chat completions, errors,
 * models, tokenize/detokenize). Nothing here touches the engine. */
#ifndef PLUME_SERVE_OPENAI_API_H
#define PLUME_SERVE_OPENAI_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/engine.h"
#include "plume/sampler_provider.h"
#include "plume/settings.h"
#include "plume/tokenizer.h"
#include "serve/chat_reply.h"
#include "serve/engine_loop.h"

#define SERVE_MAX_STOP 16           /* stop strings per request */
#define SERVE_MAX_STOP_LEN 256      /* bytes per stop string */

/* What request parsing needs to know about the server. */
typedef struct serve_api_env {
    const plume_tokenizer *tok;
    const char *model_name;          /* the served name (/v1/models) */
    int32_t n_ctx;                   /* the engine's context, tokens */
    plume_sampling_params sampling;  /* defaults for fields a request leaves out */
    const plume_chat_template *chat_template; /* --chat-template, or NULL: the model's */
    /* The structured-output sampler (plugin sample-structured), or NULL
     * when it could not be loaded (structured_error says why): requests
     * with response_format, guided_* or a required tool call need it. */
    const plume_sampler_vtable *structured;
    const char *structured_error;
} serve_api_env;

typedef enum { SERVE_API_COMPLETIONS, SERVE_API_CHAT } serve_api_kind;

/* A parsed /v1/completions or /v1/chat/completions request. */
typedef struct serve_gen_request {
    serve_api_kind kind;
    bool stream, include_usage, return_token_ids;
    int32_t logprobs;                /* -1 none, else alternatives per token */
    int32_t *prompt;
    size_t n_prompt;
    plume_request_params rp;         /* stop strings in stop[], not yet linked; kv_transfer
                                        points at kv_xfer below when given */
    plume_kv_transfer_params kv_xfer;
    char **stop;
    size_t n_stop;
    chat_reply_opts reply;           /* chat: how the reply is read (reasoning, tool calls) */
    plume_settings *sampler_settings; /* the structured constraint rp.sampler_settings points
                                        at, or NULL; owned (moves to the serve_req) */
} serve_gen_request;

/* Parses body; on failure returns the HTTP status (400, 404) and writes
 * the message to msg.  0 on success (free with serve_gen_request_free
 * unless ownership of prompt and stop moved to a serve_req). */
int serve_api_parse_gen(const serve_api_env *env, serve_api_kind kind, const char *body,
                        size_t len, serve_gen_request *out, char *msg, size_t cap);
void serve_gen_request_free(serve_gen_request *g);

/* The whole non-streamed response for a finished request (r->mu not held). */
json_t *serve_api_response(const serve_api_env *env, const serve_gen_request *g,
                           const char *id, int64_t created, serve_req *r);

/* One streamed chunk: a token's delta (tok != NULL), the chat role chunk
 * (role_chunk), the final chunk with finish_reason (finish != NULL), or the
 * usage chunk (usage != NULL: prompt, completion, cached).  For a chat
 * whose reply is read (chat_reply_active), d is what the token made
 * certain (reasoning_content, content, tool_calls; tok may be NULL for the
 * text released at the end) and text is unused. */
json_t *serve_api_chunk(const serve_api_env *env, const serve_gen_request *g, const char *id,
                        int64_t created, const serve_token *tok, const char *text,
                        const chat_delta *d, bool role_chunk, const char *finish,
                        const int64_t *usage);

/* A kv_transfer_params object (docs/disaggregation.md) into out; unknown
 * keys are ignored (a proxy may add its own).  0, or the HTTP status with
 * msg. */
int serve_api_parse_kv_transfer(json_t *v, plume_kv_transfer_params *out, char *msg, size_t cap);
/* The JSON object of x. */
json_t *serve_api_kv_transfer_json(const plume_kv_transfer_params *x);

/* {"error": {"message", "type", "param": null, "code"}} for status, as
 * OpenAI sends it: type invalid_request_error (4xx), authentication_error
 * (401), rate_limit_error (429) or server_error (5xx); code a string
 * (invalid_api_key, rate_limit_exceeded, service_unavailable) or null. */
json_t *serve_api_error(int status, const char *msg);

/* GET /v1/models: the list of the one model served. */
json_t *serve_api_models(const serve_api_env *env, int64_t created);

/* The model object of GET /v1/models/{id} (and of the list above). */
json_t *serve_api_model(const serve_api_env *env, int64_t created);

/* POST /tokenize and /detokenize: the response, or NULL with *status and msg. */
json_t *serve_api_tokenize(const serve_api_env *env, const char *body, size_t len, int *status,
                           char *msg, size_t cap);
json_t *serve_api_detokenize(const serve_api_env *env, const char *body, size_t len,
                             int *status, char *msg, size_t cap);

/* Writes the message (printf-style) to msg, one line (control bytes become
 * '?', as in plume_err), and returns status: how request parsing reports a
 * refusal. */
int serve_api_fail(char *msg, size_t cap, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A JSON string of len bytes that need not be valid UTF-8 (each invalid
 * byte becomes U+FFFD). */
json_t *serve_json_text(const char *s, size_t len);

/* "finish_reason" for the API: stop, length; abort and error map to null
 * (NULL). */
const char *serve_api_finish_name(plume_finish_reason r);

#endif
