/* sample-structured: a constraint (JSON schema, JSON object, regex, choice
 * list or GBNF grammar) compiled to a grammar with its automaton, and the
 * per-engine cache of compiled constraints keyed by kind and text. */
#ifndef SS_CONSTRAINT_H
#define SS_CONSTRAINT_H

#include <stddef.h>
#include <stdint.h>

#include "grammar.h"
#include "pda.h"
#include "plume/error.h"

typedef enum ss_kind {
    SS_JSON_SCHEMA = 0,
    SS_JSON_OBJECT,   /* any JSON object (text ignored) */
    SS_REGEX,
    SS_CHOICE,        /* text: a JSON list of strings */
    SS_GRAMMAR,       /* GBNF */
    SS_TOOL_CALLS,    /* a required tool call (tool_calls.h) */
    SS_KIND_COUNT
} ss_kind;

/* "json_schema", "json_object", "regex", "choice", "grammar", "tool_calls". */
const char *ss_kind_name(ss_kind k);

typedef struct ss_compiled {
    ss_kind kind;
    char *text;
    size_t len;
    ss_grammar g;
    ss_pda pda;
    plume_error gerr;   /* the grammar builders' error slot */
    int32_t refs;       /* live sequences using it */
    uint64_t last_use;
} ss_compiled;

/* Compiles text[0..len) as kind.  On failure err says what was refused. */
int ss_compile(ss_kind kind, const char *text, size_t len, ss_compiled **out, plume_error *err);
/* Frees a compiled constraint (NULL is fine); no sequence may still use it. */
void ss_compiled_free(ss_compiled *c);

#define SS_CACHE_MAX 32

typedef struct ss_cache {
    ss_compiled *e[SS_CACHE_MAX];
    int n;
    uint64_t clock;
    int64_t hits, misses;
} ss_cache;

/* The compiled constraint for (kind, text), compiled on a miss; its refs
 * is raised (release with ss_cache_release).  When full, the least
 * recently used entry no sequence holds is dropped; when every entry is
 * held, the new one is compiled uncached (freed on release). */
int ss_cache_get(ss_cache *c, ss_kind kind, const char *text, size_t len, ss_compiled **out,
                 plume_error *err);
/* One holder less; an uncached entry is freed with its last holder. */
void ss_cache_release(ss_cache *c, ss_compiled *e);
/* Frees every cached entry (no sequence may hold one). */
void ss_cache_free(ss_cache *c);

#endif
