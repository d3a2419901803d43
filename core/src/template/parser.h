/* The Jinja parser: tokens into the tree of ast.h, with the statements and
 * expressions jinja2 knows (no include, import, extends or blocks, which
 * need a loader; no {% do %}, which transformers does not enable). */
#ifndef PLUME_TEMPLATE_PARSER_H
#define PLUME_TEMPLATE_PARSER_H

#include "template/ast.h"
#include "template/lexer.h"

/* Parses toks into a JN_BODY node allocated in rt's arena.  A syntax error,
 * an unknown tag, an unknown filter or test name, or nesting deeper than
 * 200 raises through rt (jrt_fail) with the token's line and column. */
jnode *jparse(jrt *rt, const jtoklist *toks);

#endif
