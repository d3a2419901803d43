/* The Jinja lexer: template source into tokens, with jinja2's whitespace
 * rules as transformers configures them (trim_blocks, lstrip_blocks, no
 * keep_trailing_newline; newlines normalised to \n). */
#ifndef PLUME_TEMPLATE_LEXER_H
#define PLUME_TEMPLATE_LEXER_H

#include <stddef.h>

#include "plume/error.h"

typedef enum jtok_kind {
    JT_EOF,
    JT_TEXT,        /* literal template text (already whitespace-trimmed) */
    JT_VAR_BEGIN,   /* {{ */
    JT_VAR_END,     /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,   /* %} */
    JT_NAME,
    JT_STRING,      /* text holds the decoded value */
    JT_INT,
    JT_FLOAT,
    JT_OP           /* text holds the operator: "+", "//", "==", "(", ... */
} jtok_kind;

typedef struct jtok {
    jtok_kind kind;
    int line, col;
    const char *text; /* NUL-terminated, owned by the token list */
    size_t len;
} jtok;

typedef struct jtoklist {
    jtok *toks;
    size_t n;
    char *store; /* one allocation for every token's text */
} jtoklist;

/* Tokenises src[0..len).  On failure returns -1 with err naming the line and
 * column (an unterminated tag, string or comment, a character that starts no
 * token).  Free the list with jlex_free. */
int jlex(const char *src, size_t len, jtoklist *out, plume_error *err);
void jlex_free(jtoklist *l);

#endif
