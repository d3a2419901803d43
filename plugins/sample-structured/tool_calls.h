/* sample-structured: the grammar of a required tool call (OpenAI
 * tool_choice "required" or a named function) in the format a chat
 * template asks for, with each function's arguments constrained by its
 * parameters schema:
 *   hermes   <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>,
 *            several separated by "\n" when parallel (at most
 *            SS_TOOL_CALLS_MAX);
 *   llama3   {"name": NAME, "parameters": ARGS} (one call: the whole reply);
 *   mistral  [TOOL_CALLS][{"name": NAME, "arguments": ARGS}, ...].
 * The constraint text is a JSON object {"format": "hermes" | "llama3" |
 * "mistral", "parallel": bool, "tools": [{"name": ..., "parameters":
 * {schema}}]}, as plume serve writes it. */
#ifndef SS_TOOL_CALLS_H
#define SS_TOOL_CALLS_H

#include <stddef.h>

#include "grammar.h"

#define SS_TOOL_CALLS_MAX 8

/* The rule of text's calls; -1 with g->err naming what was wrong. */
int32_t ss_tool_calls_compile(ss_grammar *g, const char *text, size_t len);

#endif
