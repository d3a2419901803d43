/* Scanning a model's reply for markup (the <think> splitter and the
 * tool-call parsers of plume/chat_parse.h): what both need to find a tag in
 * a text that may end inside one. */
#ifndef PLUME_TEMPLATE_REPLY_SCAN_H
#define PLUME_TEMPLATE_REPLY_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
