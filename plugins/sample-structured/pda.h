/* sample-structured: the pushdown automaton that runs a grammar over bytes.
 *
 * A parse position is a stack of grammar positions; stacks are hash-consed
 * into nodes (top position, parent node) shared by every sequence decoding
 * with the grammar, so a stack is one int32 and equal stacks are equal ids.
 * Node 0 is the empty stack: a state holding it may end.  A state is the
 * sorted set of stacks the bytes so far may have reached (the grammar may be
 * ambiguous).  Over these, a lazy DFA interns each distinct state and
 * memoises its byte transitions, so that walking the vocabulary trie
 * (vocab.h) costs a table look-up per trie edge once a state is known.
 *
 * Bounds: at most SS_MAX_STATE_STACKS stacks per state, SS_MAX_NODES nodes
 * per grammar; the DFA cache is flushed when it passes SS_DFA_CACHE_BYTES
 * (states are re-derived from their stacks).  Past a bound an operation
 * fails with a message; it never grows without limit. */
#ifndef SS_PDA_H
#define SS_PDA_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar.h"
#include "plume/error.h"

#define SS_MAX_STATE_STACKS 1024
#define SS_MAX_NODES (1u << 21)
#define SS_DFA_CACHE_BYTES ((size_t)64 << 20)
#define SS_MAX_MASKS 1024          /* token masks cached per grammar (within the DFA budget) */

typedef struct ss_node {
    uint32_t pos;       /* grammar element: a byte set on the top of a live stack */
    uint32_t parent;    /* node to return to (0: the empty stack) */
    int32_t succ_off;   /* closure after consuming pos's byte: succ pool offset (-1 unknown) */
    uint32_t succ_len;
} ss_node;

typedef struct ss_dstate {   /* one interned DFA state */
    uint32_t off, len;       /* its stacks in stk pool */
    uint32_t hash;
    int32_t *next;           /* 256 transitions (-2 unknown, -1 dead), allocated on first use */
    uint8_t *mask;           /* cached token mask (vocab.h), or NULL */
    uint64_t mask_use;       /* last use, for eviction */
    bool accepting;
} ss_dstate;

typedef struct ss_pda {
    const ss_grammar *g;
    ss_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *ntab;          /* open-addressing hash of (pos, parent) -> node + 1 */
    uint32_t ntab_cap;
    uint32_t *succ;          /* successor lists of nodes */
    uint32_t n_succ, cap_succ;
    uint32_t *mark;          /* per node: stamp for dedup */
    uint32_t stamp;
    /* lazy DFA */
    ss_dstate *ds;
    uint32_t n_ds, cap_ds;
    uint32_t *stk;           /* stack ids of the DFA states */
    uint32_t n_stk, cap_stk;
    uint32_t *dtab;          /* hash of states -> index + 1 */
    uint32_t dtab_cap;
    size_t dfa_bytes;        /* memory held by the DFA cache */
    int32_t start;           /* DFA state of the grammar's start (-1 after a flush) */
    uint32_t *scratch;       /* SS_MAX_STATE_STACKS + 1 */
    uint32_t *work;          /* closure work list */
    uint32_t cap_work;
    uint64_t clock;
    uint64_t epoch;          /* flushes so far: a DFA state id is valid within one epoch */
    size_t n_masks, max_masks;
    int32_t mask_ids[SS_MAX_MASKS]; /* the states holding a cached mask */
    plume_error err;         /* the last failure */
} ss_pda;

/* A PDA over grammar g (finished; it must outlive the PDA). */
int ss_pda_init(ss_pda *p, const ss_grammar *g, plume_error *err);
/* Frees the automaton's nodes and DFA cache (not the grammar). */
void ss_pda_free(ss_pda *p);

/* The DFA state of the grammar's start; -1 on failure (p->err). */
int32_t ss_pda_start(ss_pda *p);
/* The state after byte b from state s: -1 when b cannot follow (dead),
 * -2 on failure (a bound; p->err says which). */
int32_t ss_pda_step(ss_pda *p, int32_t s, uint8_t b);
/* The DFA state of a stack set (sorted, as ss_pda_stacks gives it);
 * -2 on failure. */
int32_t ss_pda_intern(ss_pda *p, const uint32_t *stacks, uint32_t n);
/* The stacks of state s (valid until the next call on p). */
const uint32_t *ss_pda_stacks(const ss_pda *p, int32_t s, uint32_t *n);
/* Drops every DFA state (transitions and masks), keeping the nodes; the
 * caller must hold states as stack sets across it.  Called when the cache
 * passes its budget. */
void ss_pda_flush(ss_pda *p);
/* True when the cache is over budget (flush between walks). */
static inline bool ss_pda_over_budget(const ss_pda *p) { return p->dfa_bytes > SS_DFA_CACHE_BYTES; }

#endif
