/* plume — reading a model's reply: reasoning ("<think>...</think>") split
 * from the answer, and tool calls in the formats model families emit
 * (Hermes/Qwen <tool_call>, Llama 3.1 JSON and <|python_tag|>, Mistral
 * [TOOL_CALLS]).  Both are streaming parsers: text is fed as it is
 * generated, in pieces of any size (a piece may end inside a tag), and each
 * feed returns only what is certain; the last feed passes final = true.
 * Feeding the same text in one piece or in many gives the same result. */
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
    PLUME_TOOLS_MISTRAL  /* [TOOL_CALLS][{"name", "arguments", "id"}...] or [TOOL_CALLS]name[ARGS]{...} */
} plume_tool_format;

/* The format a chat template's text asks the model for, from the markers it
 * writes; PLUME_TOOLS_NONE when it has none (a request with tools should
 * then be refused). */
PLUME_API plume_tool_format plume_tool_format_of_template(const char *template_text);
/* "hermes", "llama3", "mistral" or "none". */
PLUME_API const char *plume_tool_format_name(plume_tool_format f);

typedef struct plume_tool_call {
    char *id;        /* the model's id (Mistral), else "call_" and 9 letters/digits from the seed */
    char *name;
    char *arguments; /* a JSON object as text (compact), as OpenAI's function.arguments */
} plume_tool_call;

typedef struct plume_tool_parser plume_tool_parser;

/* A parser for format f; seed makes the ids of calls without one.  NULL on
 * OOM or for PLUME_TOOLS_NONE. */
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

#ifdef __cplusplus
}
#endif
#endif
