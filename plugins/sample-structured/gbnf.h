/* sample-structured: GBNF (llama.cpp's grammar format) -> grammar.
 *
 * Rules `name ::= alternatives`, the start rule named root; literals
 * "..." (escapes \n \t \r \\ \" \xHH \uHHHH), classes [a-z] [^...] of
 * ASCII characters, '.', rule names, groups ( ), quantifiers * + ? {m}
 * {m,} {m,n}, comments from '#'.  Refused with the line: undefined rules,
 * left recursion, non-ASCII in classes, more than SS_GBNF_MAX_RULES names,
 * text over SS_GBNF_MAX_BYTES. */
#ifndef SS_GBNF_H
#define SS_GBNF_H

#include <stddef.h>

#include "grammar.h"

#define SS_GBNF_MAX_RULES 4096
#define SS_GBNF_MAX_BYTES (1u << 20)

/* The root rule of the GBNF text[0..len); -1 with g->err set. */
int32_t ss_gbnf_compile(ss_grammar *g, const char *text, size_t len);

#endif
