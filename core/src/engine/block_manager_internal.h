/* Test-only hooks into the block manager: a per-manager hash override (to
 * force collisions), reference-count inspection and a full consistency
 * check.  Not for the engine's hot path. */
#ifndef PLUME_BLOCK_MANAGER_INTERNAL_H
#define PLUME_BLOCK_MANAGER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/block_manager.h"

/* Chained block hash: the hash of a block of n token ids whose previous
 * block hashed to prev (the fixed seed for the first block). */
typedef uint64_t (*plume_bm_hash_fn)(uint64_t prev, const int32_t *ids, int32_t n, void *ctx);

/* The seed the first block of every sequence chains from. */
#define PLUME_BM_HASH_SEED 0x706c756d65b10cull

/* Replaces bm's block hash with fn (ctx passed through); fn NULL restores
 * the built-in one.  Call right after plume_bm_create, before any block is
 * registered: hashes already in the cache are not recomputed. */
void plume_bm_set_hash_fn(plume_block_manager *bm, plume_bm_hash_fn fn, void *ctx);

/* The built-in hash, for tests that wrap it. */
uint64_t plume_bm_default_hash(uint64_t prev, const int32_t *ids, int32_t n, void *ctx);

/* Reference count of block id (-1 if id is out of range). */
int32_t plume_bm_ref_count(const plume_block_manager *bm, int32_t id);

/* Whether block id is currently findable through the prefix cache. */
bool plume_bm_is_cached(const plume_block_manager *bm, int32_t id);

/* Walks every structure (free list links and counts, reference counts
 * against the free list, hash map against block flags, cached-free count).
 * O(n_blocks).  Returns 0, or -1 with a description in why. */
int plume_bm_check(const plume_block_manager *bm, char *why, size_t why_size);

#endif
