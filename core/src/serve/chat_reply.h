/* plume serve: reading a chat reply as it is generated, for the OpenAI
 * response: reasoning ("<think>...</think>") goes to reasoning_content, tool
 * calls in the template's format to tool_calls, the rest to content.  A
 * thin composition of plume/chat_parse.h's streaming parsers: the reasoning
 * splitter first, then the tool-call parser over what is answer text; or,
 * for gpt-oss's harmony format, its one reader of all three. */
#ifndef PLUME_SERVE_CHAT_REPLY_H
#define PLUME_SERVE_CHAT_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/chat_parse.h"

/* How to read one request's reply (plain data, fixed at request parsing). */
typedef struct chat_reply_opts {
    bool harmony;              /* the template writes harmony messages (gpt-oss): read with
                                  plume_harmony_*; the request renders special tokens */
    bool reasoning;            /* the template writes <think> blocks */
    bool starts_inside;        /* the prompt ends inside an open <think> block */
    plume_tool_format tools;   /* PLUME_TOOLS_NONE: no tool parsing */
    bool parallel;             /* several calls allowed (parallel_tool_calls); else the first */
    uint64_t seed;             /* for the ids of calls the model gives none */
} chat_reply_opts;

/* True when a reply read with o differs from plain text. */
static inline bool chat_reply_active(const chat_reply_opts *o)
{
    return o->harmony || o->reasoning || o->tools != PLUME_TOOLS_NONE;
}

/* What one feed made certain.  Strings are malloc'd (NULL: none). */
typedef struct chat_delta {
    char *reasoning;
    char *content;
    plume_tool_call *calls;
    size_t n_calls;
    size_t first_index;        /* the index (in the whole reply) of calls[0] */
} chat_delta;

typedef struct chat_reply chat_reply;

/* A reader for one reply; NULL on OOM. */
chat_reply *chat_reply_new(const chat_reply_opts *o);
void chat_reply_free(chat_reply *c);

/* Feeds len bytes of the reply (final: the reply ended; held-back text is
 * released).  *d is filled (cleared first); calls past the first are
 * dropped when the options do not allow parallel calls.  -1 only on OOM. */
int chat_reply_feed(chat_reply *c, const char *text, size_t len, bool final, chat_delta *d);

/* The calls emitted so far. */
size_t chat_reply_n_calls(const chat_reply *c);

/* True when d carries nothing. */
bool chat_delta_empty(const chat_delta *d);
/* Frees d's contents and clears it. */
void chat_delta_clear(chat_delta *d);

#endif
