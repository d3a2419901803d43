/* The paged KV cache's bookkeeping: a pool of fixed-size blocks, per-sequence
 * block tables, reference counts and prefix caching (nano-vllm's and vLLM's
 * scheme).
 *
 * Prefix caching: a block whose block_size token ids are all known and
 * committed gets a hash chained from the previous block's hash and its own
 * ids (the first block chains from a fixed seed).  A later sequence whose
 * prompt has the same leading blocks shares them (reference count + 1)
 * instead of recomputing them; a hit is confirmed by comparing the stored
 * token ids and the block's parent (the block matched just before it, same
 * generation), so a hash collision -- even one of the chain, where the same
 * ids follow a different prefix -- never shares the wrong KV.  A block whose
 * reference count drops to 0 keeps its hash and contents and stays
 * reusable until its space is needed; free blocks are handed out least
 * recently freed first, so the most recently used cached prefixes survive
 * longest.  Blocks holding nothing findable (never registered, or a
 * duplicate of a block already in the cache) are handed out before any
 * cached one.  A table is released newest block first, so a prefix's
 * leading blocks outlive its tail.  The last, partial block of a sequence
 * is never shared.
 *
 * When two sequences computed the same block concurrently, the first
 * commit's block stays in the cache; the second is marked registered (its
 * n_hashed advances) and later blocks chain through the cached one.
 *
 * Not thread-safe: one caller (the scheduler) at a time. */
#ifndef PLUME_BLOCK_MANAGER_H
#define PLUME_BLOCK_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"

typedef struct plume_block_manager plume_block_manager;

/* A sequence's block table: block ids in position order (position p lives
 * in block ids[p / block_size] at offset p % block_size), plus how many
 * leading blocks have been registered in the prefix cache. */
typedef struct plume_block_table {
    int32_t *ids;
    int32_t n;          /* blocks held */
    int32_t cap;
    int32_t n_hashed;   /* leading full blocks registered in the prefix cache */
    uint64_t last_hash; /* chain hash of block n_hashed - 1 (ignored when
                           n_hashed is 0, so a zero-initialised table is
                           a valid empty one) */
} plume_block_table;

typedef struct plume_block_stats {
    int32_t n_blocks;        /* total */
    int32_t n_free;          /* reference count 0 (cached or empty) */
    int32_t n_cached_free;   /* free but still holding a hashed prefix */
    int64_t prefix_queries;  /* full prompt blocks looked up (a lookup stops
                                at the first miss) */
    int64_t prefix_hits;     /* of those, found and confirmed */
    int64_t evictions;       /* cached blocks whose hash was dropped for reuse */
} plume_block_stats;

/* n_blocks blocks of block_size tokens each; prefix_caching off means no
 * hashing and no sharing. */
int plume_bm_create(int32_t n_blocks, int32_t block_size, bool prefix_caching,
                    plume_block_manager **out, plume_error *err);
void plume_bm_free(plume_block_manager *bm);

int32_t plume_bm_block_size(const plume_block_manager *bm);
int32_t plume_bm_n_free(const plume_block_manager *bm);
plume_block_stats plume_bm_stats(const plume_block_manager *bm);

/* Blocks needed to hold n_tokens positions (0 for n_tokens <= 0; clamped
 * to INT32_MAX, more than any pool holds). */
int32_t plume_bm_blocks_for(const plume_block_manager *bm, int64_t n_tokens);

/* For a sequence with no blocks yet: looks up the longest cached prefix of
 * tokens[0..n_tokens) made of full blocks, taking references on those
 * blocks and appending them to bt (at most max_blocks blocks, so a caller
 * can keep the last prompt token uncached).  Returns the number of tokens
 * covered (a multiple of block_size); bt->n_hashed and bt->last_hash cover
 * the matched blocks. Never fails: a miss returns 0, and so do a table that
 * already holds blocks (left unchanged), prefix caching off, and running
 * out of memory for bt's array. */
int64_t plume_bm_match_prefix(plume_block_manager *bm, plume_block_table *bt,
                              const int32_t *tokens, int64_t n_tokens, int32_t max_blocks);

/* What plume_bm_match_prefix would return for a sequence with no blocks,
 * without taking references or counting the lookup in the stats (the
 * scheduler's view of a waiting sequence). */
int64_t plume_bm_peek_prefix(const plume_block_manager *bm, const int32_t *tokens,
                             int64_t n_tokens, int32_t max_blocks);

/* Grows bt with fresh blocks until it can hold n_tokens positions (taking
 * them from the least recently freed end, evicting the cached prefix a
 * block held).  Returns 0, or -1 (with bt unchanged and nothing taken)
 * when there are not enough free blocks or bt's array cannot grow. */
int plume_bm_ensure(plume_block_manager *bm, plume_block_table *bt, int64_t n_tokens);

/* Registers in the prefix cache every full block of bt whose token ids are
 * all committed, i.e. lie within tokens[0..n_committed), in order from
 * bt->n_hashed (only blocks bt holds).  Call after the KV of those
 * positions has been written.  Calling again with the same or a smaller
 * n_committed does nothing; with prefix caching off it does nothing. */
void plume_bm_commit(plume_block_manager *bm, plume_block_table *bt, const int32_t *tokens,
                     int64_t n_committed);

/* Shrinks bt to the blocks needed for n_tokens positions, dropping the
 * references on the rest (speculative rollback).  Blocks already
 * registered in the prefix cache are never truncated below: n_tokens must
 * be >= n_hashed * block_size (a smaller value is raised to it).  Dropped
 * blocks were never registered, so they are reused before cached ones. */
void plume_bm_truncate(plume_block_manager *bm, plume_block_table *bt, int64_t n_tokens);

/* Drops every reference bt holds and empties it (sequence finished,
 * aborted or preempted). */
void plume_bm_release(plume_block_manager *bm, plume_block_table *bt);

/* Frees bt's own array (after plume_bm_release) and zeroes bt. */
void plume_block_table_free(plume_block_table *bt);

#endif
