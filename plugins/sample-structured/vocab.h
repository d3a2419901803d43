/* sample-structured: the vocabulary as a byte trie, and token masks.
 *
 * Built once per tokenizer: every token's bytes (plume_token_bytes), the
 * end-of-generation tokens, and a trie of the token texts laid out in
 * preorder with each node's subtree end, so a mask is one linear pass that
 * skips a whole subtree when its first byte cannot follow.  Special tokens
 * that are not end-of-generation, and tokens with no bytes, are never
 * allowed (they would add nothing the grammar can check). */
#ifndef SS_VOCAB_H
#define SS_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

#include "pda.h"
#include "plume/error.h"
#include "plume/tokenizer.h"

typedef struct ss_trie_node {
    uint32_t end;        /* index just past this node's subtree */
    uint32_t tok_first;  /* tokens ending here: ids[tok_first .. +tok_n) */
    uint32_t tok_n;
    uint16_t depth;      /* bytes from the root (root 0) */
    uint8_t byte;
} ss_trie_node;

typedef struct ss_vocab {
    int32_t n_vocab;
    uint32_t *tok_off;   /* token t's bytes: bytes[tok_off[t] .. tok_off[t+1]) */
    uint8_t *bytes;
    bool *eog;           /* end-of-generation tokens */
    int32_t *eog_ids;
    int32_t n_eog;
    ss_trie_node *nodes;
    uint32_t n_nodes;
    uint32_t *ids;       /* token ids in trie order */
    uint16_t max_depth;
    /* per node: the bytes anywhere in its subtree (its own included), and
     * where its subtree's tokens start in ids (they end where the next
     * subtree's start: trie order is preorder); lets a mask take a whole
     * subtree at once when every byte in it keeps the state where it is */
    ss_set *sub_bytes;
    uint32_t *sub_tok;   /* n_nodes + 1 entries */
} ss_vocab;

/* Builds the trie of tok's n_vocab tokens (n_vocab may exceed the
 * tokenizer's own count: the ids past it are never allowed). */
int ss_vocab_build(ss_vocab *v, const plume_tokenizer *tok, int32_t n_vocab, plume_error *err);
/* The same from explicit token texts (tests, benchmarks): texts[i] of
 * lens[i] bytes, eog[i] marks end-of-generation ids (may be NULL). */
int ss_vocab_build_raw(ss_vocab *v, const char *const *texts, const uint32_t *lens,
                       const bool *eog, int32_t n_vocab, plume_error *err);
/* Frees the index. */
void ss_vocab_free(ss_vocab *v);

/* Bytes per mask: one bit per token id. */
static inline size_t ss_mask_bytes(const ss_vocab *v) { return ((size_t)v->n_vocab + 7) / 8; }
static inline bool ss_mask_get(const uint8_t *m, int32_t t) { return (m[t >> 3] >> (t & 7)) & 1; }

/* The mask of state s (a whole subtree of tokens is taken at once when
 * every byte in it loops on s, as inside a JSON string): bit t set when token t's bytes can follow (or t
 * ends generation and s may end).  Cached in the PDA's DFA state (up to
 * p->max_masks, least recently used dropped); the pointer is valid until
 * the next call on p.  NULL on failure (p->err). */
const uint8_t *ss_mask(const ss_vocab *v, ss_pda *p, int32_t s);
/* The same without the cache, into out (ss_mask_bytes); -1 on failure. */
int ss_mask_compute(const ss_vocab *v, ss_pda *p, int32_t s, uint8_t *out);
/* Brute force for tests: steps every token's bytes from s one by one. */
int ss_mask_brute(const ss_vocab *v, ss_pda *p, int32_t s, uint8_t *out);

#endif
