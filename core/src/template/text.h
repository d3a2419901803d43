/* Python's str operations on UTF-8 strings, shared by filters and methods. */
#ifndef PLUME_TEMPLATE_TEXT_H
#define PLUME_TEMPLATE_TEXT_H

#include "template/value.h"

/* str.strip/lstrip/rstrip: chars NULL strips Python's whitespace.
 * which: 'b' both, 'l' left, 'r' right. */
jv jtext_strip(jrt *rt, const jstr *s, const jstr *chars, char which);
/* str.upper ('u'), str.lower ('l'), str.title ('t'), str.capitalize ('c'),
 * for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other scripts
 * are left as they are. */
jv jtext_case(jrt *rt, const jstr *s, char how);
/* jinja2's |title: pieces between whitespace and -({[< get their first
 * character upper-cased and the rest lower-cased. */
jv jtext_title_words(jrt *rt, const jstr *s);
/* str.replace(old, new, count); count < 0 replaces all. */
jv jtext_replace(jrt *rt, const jstr *s, const jstr *old, const jstr *rep, int64_t count);
/* str.split(sep, maxsplit) / rsplit: sep NULL splits on runs of whitespace. */
jv jtext_split(jrt *rt, const jstr *s, const jstr *sep, int64_t maxsplit, bool from_right);
/* str.splitlines() (keepends false). */
jv jtext_splitlines(jrt *rt, const jstr *s);
/* Decodes one UTF-8 code point at p (n >= 1 bytes left); *len gets its
 * length.  A stray or truncated byte decodes as itself, length 1. */
unsigned jtext_cp_at(const char *p, size_t n, size_t *len);
/* Whether the code point cp is whitespace for Python's str.isspace(). */
bool jtext_is_space(unsigned cp);
/* Length in bytes of the whitespace code point at p (0 when p is not whitespace). */
size_t jtext_space_at(const char *p, size_t n);
/* str.find(sub) as a code-point index, -1 when absent; rfind with from_right. */
int64_t jtext_find(const jstr *s, const jstr *sub, bool from_right);
/* Python str.format(*args, **kwargs) for {}, {0}, {name}, {{ }}, !r/!s and simple specs. */
jv jtext_format(jrt *rt, const jstr *fmt, const jv *args, size_t n, const jstr *const *kwn,
                const jv *kwv, size_t nkw);

#endif
