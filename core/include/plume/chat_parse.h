/* plume — reading a model's reply: reasoning ("<think>...</think>") split
 * from the answer, and tool calls in the formats model families emit
 * (Hermes/Qwen <tool_call>, Llama 3.1 JSON and <|python_tag|>, Mistral
 * [TOOL_CALLS]).  Both are streaming parsers: text is fed as it is
 * generated, in pieces of any size (a piece may end inside a tag), and each
 * feed returns only what is certain; the last feed passes final = true.
 * Feeding the same text in one piece or in many gives the same result.  The
 * text holds no NUL byte (what they return are C strings). */
#ifndef PLUME_CHAT_PARSE_H
#define PLUME_CHAT_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reasoning ---- */

typedef struct plume_reasoning plume_reasoning;

/* A splitter for "<think>reasoning</think>answer".  starts_inside: the
 * prompt already opened the block (DeepSeek-R1, Qwen3 thinking templates end
 * the generation prompt with "<think>\n"), so text before "</think>" is
 * reasoning.  Otherwise a "<think>" at the start of the reply (after
 * whitespace) opens it; a "<think>" later on is answer text.  NULL on OOM. */
PLUME_API plume_reasoning *plume_reasoning_new(bool starts_inside);
PLUME_API void plume_reasoning_free(plume_reasoning *r);

/* Feeds len bytes; appends to *reasoning and *content (malloc'd,
 * NUL-terminated, NULL when nothing; the caller frees them) the text that
 * is now certain to be reasoning or answer.  A piece that may be the start
 * of a tag is held back until the next feed; final releases it.  The tags
 * themselves are dropped, and so is the whitespace between "</think>" and
 * the answer.  -1 only on OOM. */
PLUME_API int plume_reasoning_feed(plume_reasoning *r, const char *text, size_t len, bool final,
                                   char **reasoning, char **content, plume_error *err);

/* ---- tool calls ---- */

typedef enum plume_tool_format {
    PLUME_TOOLS_NONE,    /* the template has no tool format */
    PLUME_TOOLS_HERMES,  /* <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen2.5, Qwen3, Hermes) */
    PLUME_TOOLS_LLAMA3,  /* {"name": ..., "parameters": {...}} as the whole reply, or after <|python_tag|> */
    PLUME_TOOLS_MISTRAL, /* [TOOL_CALLS][{"name", "arguments", "id"}...] or [TOOL_CALLS]name[ARGS]{...} */
    PLUME_TOOLS_HARMONY  /* gpt-oss: <|channel|>commentary to=functions.NAME ...<|message|>{...};
                            read with plume_harmony_*, which also splits the reasoning */
} plume_tool_format;

/* The format a chat template's text asks the model for, from the markers it
 * writes; PLUME_TOOLS_NONE when it has none (a request with tools should
 * then be refused). */
PLUME_API plume_tool_format plume_tool_format_of_template(const char *template_text);
/* "hermes", "llama3", "mistral", "harmony" or "none". */
PLUME_API const char *plume_tool_format_name(plume_tool_format f);

typedef struct plume_tool_call {
    char *id;        /* the model's id (Mistral), else "call_" and 9 letters/digits from the seed */
    char *name;
    char *arguments; /* a JSON object as text (compact), as OpenAI's function.arguments */
} plume_tool_call;

typedef struct plume_tool_parser plume_tool_parser;

/* A parser for format f; seed makes the ids of calls without one.  NULL on
 * OOM, or for PLUME_TOOLS_NONE and PLUME_TOOLS_HARMONY (whose replies
 * plume_harmony_feed reads whole: reasoning, answer and calls). */
PLUME_API plume_tool_parser *plume_tool_parser_new(plume_tool_format f, uint64_t seed);
PLUME_API void plume_tool_parser_free(plume_tool_parser *p);

/* Feeds len bytes of the reply.  *content gets the text outside tool calls
 * that is now certain (malloc'd or NULL), *calls the calls completed by this
 * feed (*n_calls of them, an array to free with plume_tool_calls_free).  A
 * call's markup that never completes, or whose JSON does not parse, comes
 * back as content when final.  -1 only on OOM. */
PLUME_API int plume_tool_parser_feed(plume_tool_parser *p, const char *text, size_t len,
                                     bool final, char **content, plume_tool_call **calls,
                                     size_t *n_calls, plume_error *err);
PLUME_API void plume_tool_calls_free(plume_tool_call *calls, size_t n);

/* ---- gpt-oss's harmony format ---- */

/* True when a chat template writes harmony messages (<|channel|> and
 * <|message|>, as gpt-oss's does).  Its replies must be generated with
 * special tokens rendered (plume_request_params.render_special) and read
 * with plume_harmony_feed. */
PLUME_API bool plume_template_is_harmony(const char *template_text);

typedef struct plume_harmony plume_harmony;

/* A reader of one harmony reply, the text after the generation prompt's
 * "<|start|>assistant": messages "<|channel|>C[ to=R][ <|constrain|>T]
 * <|message|>BODY" ended by <|end|> (another follows, opened by
 * "<|start|>assistant"), <|call|> or <|return|>.  The analysis channel is
 * reasoning; final and commentary are the answer; with calls, a recipient
 * "functions.NAME" (in the role or the channel part) makes the body a call
 * of NAME whose arguments are the body's JSON object (other recipients keep
 * their whole name); without calls such a body is read by its channel.  seed
 * makes the calls' ids.  Text that does not follow the format is answer
 * text.  NULL on OOM. */
PLUME_API plume_harmony *plume_harmony_new(bool calls, uint64_t seed);
PLUME_API void plume_harmony_free(plume_harmony *h);

/* Feeds len bytes of the reply, as plume_reasoning_feed and
 * plume_tool_parser_feed do together: *reasoning, *content (malloc'd or
 * NULL) and *calls (*n_calls of them, freed with plume_tool_calls_free) get
 * what this feed made certain; final releases what was held back.  A call
 * is emitted when its body ends.  -1 only on OOM. */
PLUME_API int plume_harmony_feed(plume_harmony *h, const char *text, size_t len, bool final,
                                 char **reasoning, char **content, plume_tool_call **calls,
                                 size_t *n_calls, plume_error *err);

#ifdef __cplusplus
}
#endif
#endif
