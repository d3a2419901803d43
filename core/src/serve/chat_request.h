/* plume serve: a /v1/chat/completions request's conversation: messages
 * (system, user, assistant with tool_calls and reasoning_content, tool
 * results), tools, tool_choice, parallel_tool_calls and
 * chat_template_kwargs, rendered through the chat template into the
 * prompt, and how the reply is to be read (reasoning, tool-call format). */
#ifndef PLUME_SERVE_CHAT_REQUEST_H
#define PLUME_SERVE_CHAT_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/chat_reply.h"
#include "serve/openai_api.h"

typedef enum serve_tool_choice {
    SERVE_TOOLS_OFF,       /* no tools, or tool_choice "none" */
    SERVE_TOOLS_AUTO,      /* the model may call a tool */
    SERVE_TOOLS_REQUIRED,  /* the model must call one (decoding is constrained) */
    SERVE_TOOLS_NAMED      /* the model must call the named one */
} serve_tool_choice;

typedef struct serve_chat {
    char *prompt;               /* the rendered conversation (malloc'd) */
    chat_reply_opts reply;      /* how to read the reply */
    serve_tool_choice choice;
    /* With REQUIRED or NAMED: the structured sampler's "tool_calls"
     * constraint (a JSON object: format, parallel, tools with name and
     * parameters), which makes the reply a call of the template's format
     * whose arguments match the tool's parameters schema.  Else NULL. */
    char *tool_constraint;
    /* Whether the reply must be generated with special tokens rendered as
     * text (plume_request_params.render_special): gpt-oss's harmony markup,
     * and with tools the markers that Mistral ([TOOL_CALLS], [ARGS]) and
     * Llama 3.1 (<|python_tag|>) vocabularies hold as control tokens, which
     * the reply reader must see (as vLLM turns skip_special_tokens off for
     * its Mistral tool parser). */
    bool render_special;
} serve_chat;

/* Reads the conversation fields of request object o and renders the
 * prompt, ending with the assistant's turn opened when add_gen.  seed
 * makes the ids of tool calls the model gives none.  0, or
 * the HTTP status with msg (400: a malformed message, tool or choice; a
 * request with tools on a template that has no tool-call format). */
int serve_chat_parse(const serve_api_env *env, json_t *o, uint64_t seed, bool add_gen,
                     serve_chat *out, char *msg, size_t cap);
void serve_chat_free(serve_chat *c);

#endif
