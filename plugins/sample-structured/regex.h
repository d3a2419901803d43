/* sample-structured: a regular expression compiled to grammar rules.
 *
 * The subset: literals (UTF-8), '.', classes [a-z0-9_] and [^...] of ASCII
 * characters and ranges, escapes \d \D \w \W \s \S \n \t \r \f \v \xHH
 * \uHHHH and escaped punctuation, groups (...) (?:...) (?<name>...),
 * alternation, quantifiers * + ? {n} {n,} {n,m} (lazy forms accepted: they
 * match the same strings), and ^ / $ at the ends of the pattern.  The
 * automaton runs it without backtracking, so no pattern is catastrophic.
 * Refused, with a message naming the construct: backreferences,
 * lookaround, word boundaries, possessive quantifiers, anchors in the
 * middle, non-ASCII characters inside classes, repetition bounds above
 * SS_REGEX_MAX_REPEAT, nesting deeper than SS_REGEX_MAX_DEPTH.
 *
 * json_string mode compiles the pattern for the inside of a JSON string:
 * classes and '.' leave out '"', '\\' and control characters, and a literal
 * '"' or '\\' becomes its JSON escape, so the JSON string's value matches
 * the pattern. */
#ifndef SS_REGEX_H
#define SS_REGEX_H

#include <stdbool.h>
#include <stddef.h>

#include "grammar.h"

#define SS_REGEX_MAX_REPEAT 1000
#define SS_REGEX_MAX_DEPTH 64
#define SS_REGEX_MAX_LEN 65536

/* The rule matching exactly the strings of pattern[0..len); -1 with
 * g->err set (the message gives the offset). */
int32_t ss_regex_compile(ss_grammar *g, const char *pattern, size_t len, bool json_string);

#endif
