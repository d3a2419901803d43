/* sample-structured: the grammar every constraint compiles to.
 *
 * A context-free grammar over bytes in GBNF's shape: rules, each a list of
 * alternatives, each a sequence of byte sets and references to rules.
 * Builders (JSON Schema, regex, choice, GBNF) add rules through the g_*
 * helpers; g_finish lays the grammar out flat for the pushdown automaton
 * (pda.h) and refuses what it cannot run (left recursion, empty rules, a
 * grammar past the size limits). */
#ifndef SS_GRAMMAR_H
#define SS_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"

#define SS_MAX_ELEMS (1u << 21)   /* elements of one grammar */
#define SS_MAX_RULES (1u << 19)

enum { GE_END = 0, GE_SET, GE_REF };

typedef struct ss_elem {
    uint32_t kind : 2;
    uint32_t val : 30;   /* set index (GE_SET) or rule id (GE_REF) */
} ss_elem;

typedef struct ss_item { /* one element of an alternative being added */
    uint8_t kind;        /* GE_SET or GE_REF */
    uint32_t val;
} ss_item;

typedef struct ss_set {
    uint64_t w[4];       /* 256 bits: byte b is in the set when bit b is */
} ss_set;

static inline bool ss_set_has(const ss_set *s, uint8_t b) { return (s->w[b >> 6] >> (b & 63)) & 1; }
static inline void ss_set_add(ss_set *s, uint8_t b) { s->w[b >> 6] |= 1ull << (b & 63); }

typedef struct ss_grammar {
    /* flat layout, valid after g_finish: every alternative is a run of
     * elements ended by GE_END; rule r's alternatives start at
     * el[alt[rule_first[r]] .. alt[rule_first[r] + rule_n[r] - 1]] */
    ss_elem *el;
    uint32_t n_el, cap_el;
    uint32_t *alt;             /* alternative start positions, grouped by rule after g_finish */
    uint32_t *alt_rule;        /* while building: the rule of each alternative */
    uint32_t n_alt, cap_alt;
    uint32_t *rule_first, *rule_n;
    uint32_t n_rule, cap_rule;
    ss_set *sets;
    uint32_t n_sets, cap_sets;
    int32_t byte_set[256];     /* set index of each single byte, -1 until made */
    uint32_t root;
    bool finished;
    plume_error *err;          /* where builders report (set by g_init) */
    bool failed;
} ss_grammar;

/* An empty grammar reporting its errors into err. */
void g_init(ss_grammar *g, plume_error *err);
/* Frees what the grammar holds (g may be re-initialised after). */
void g_free(ss_grammar *g);

/* A new rule with no alternatives yet (for forward references); -1 when
 * the grammar is too large. */
int32_t g_new_rule(ss_grammar *g);
/* Appends an alternative (a sequence of n items; n may be 0: the empty
 * string) to rule.  -1 on failure. */
int g_add_alt(ss_grammar *g, int32_t rule, const ss_item *items, size_t n);
/* Index of a byte set (added, or the single-byte set shared). */
int32_t g_set(ss_grammar *g, const ss_set *s);
int32_t g_byte(ss_grammar *g, uint8_t b);
/* Items. */
static inline ss_item it_set(int32_t set) { return (ss_item){GE_SET, (uint32_t)set}; }
static inline ss_item it_ref(int32_t rule) { return (ss_item){GE_REF, (uint32_t)rule}; }

/* Rules built from rules (each returns the new rule or -1): */
int32_t g_lit(ss_grammar *g, const char *s, size_t n);           /* the bytes s[0..n) */
int32_t g_seq(ss_grammar *g, const int32_t *rules, size_t n);    /* r0 r1 ... */
int32_t g_alts(ss_grammar *g, const int32_t *rules, size_t n);   /* r0 | r1 | ... */
int32_t g_setrule(ss_grammar *g, const ss_set *s);               /* one byte of s */
int32_t g_repeat(ss_grammar *g, int32_t x, uint32_t min, int64_t max); /* x{min,max}; max -1 = inf */
int32_t g_opt(ss_grammar *g, int32_t x);
int32_t g_utf8_char(ss_grammar *g, const ss_set *ascii_ok); /* one UTF-8 character: an ASCII
                                                              byte of ascii_ok or any multi-byte one */

/* A sequence of any length, as a parser meets its items: they are held 64
 * at a time, a full chunk folded into a rule that becomes the first item
 * of the next.  Start with {.n = 0}. */
typedef struct ss_seq_acc {
    int32_t items[64];
    size_t n;
} ss_seq_acc;
/* Appends rule x; -1 when a fold failed (the message in g->err). */
int g_seq_push(ss_grammar *g, ss_seq_acc *s, int32_t x);
/* The whole sequence as one rule (g_seq of what is held), or -1. */
int32_t g_seq_end(ss_grammar *g, const ss_seq_acc *s);

/* Lays the grammar out with root as its start rule; refuses a rule
 * without alternatives and left recursion that would grow the stack
 * (A ::= A x).  -1 with the message in g->err. */
int g_finish(ss_grammar *g, int32_t root);



#define SS_MAX_LITERALS 4096          /* strings of one enum or choice list */
#define SS_MAX_LITERAL_BYTES (1u << 20)

/* Exactly one of the n byte strings strs[i] (lens[i] bytes), as a
 * deterministic trie of rules (one parse per prefix, however many
 * strings share it).  Duplicates are fine.  -1 past SS_MAX_LITERALS or
 * SS_MAX_LITERAL_BYTES (the message names the limit). */
int32_t g_literals(ss_grammar *g, const char *const *strs, const size_t *lens, size_t n);
#endif
