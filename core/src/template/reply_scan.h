/* Scanning a model's reply for markup (the <think> splitter and the
 * tool-call parsers of plume/chat_parse.h): what both need to find a tag in
 * a text that may end inside one. */
#ifndef PLUME_TEMPLATE_REPLY_SCAN_H
#define PLUME_TEMPLATE_REPLY_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/chat_parse.h"

/* The first occurrence of needle (NUL-terminated) in s[0..n), or NULL. */
const char *reply_find(const char *s, size_t n, const char *needle);

/* True for a blank: space, newline, tab, carriage return. */
bool reply_is_ws(char c);

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag:
 * how many bytes must be held back because the next ones may complete it. */
size_t reply_partial_tag(const char *s, size_t n, const char *tag);

/* Appends p[0..n) to the malloc'd NUL-terminated string *s (NULL: empty).
 * 0, or -1 on OOM with *s unchanged. */
int reply_append(char **s, const char *p, size_t n);

/* A malloc'd NUL-terminated copy of s[0..n); NULL on OOM. */
char *reply_dup(const char *s, size_t n);

/* An id for a tool call the model gave none: "call_" and 9 letters/digits
 * from seed and the call's number (*n_ids, incremented), the same for the
 * same seed and number.  Malloc'd; NULL on OOM. */
char *reply_call_id(uint64_t seed, uint64_t *n_ids);

/* Appends call c (its strings malloc'd; a NULL one means they ran out of
 * memory) to the array *calls of *n; takes c's strings.  0, or -1 on OOM
 * with c freed and the array as it was. */
int reply_push_call(plume_tool_call **calls, size_t *n, plume_tool_call c);

/* The text a streaming reader was fed and has not consumed yet, kept
 * NUL-terminated. */
typedef struct reply_buf {
    char *p;
    size_t n, cap;
} reply_buf;

/* Appends text[0..len).  0, or -1 on OOM with b unchanged. */
int reply_buf_add(reply_buf *b, const char *text, size_t len);
/* Drops the first used bytes (used <= b->n). */
void reply_buf_drop(reply_buf *b, size_t used);

#endif
