/* Paged-KV block manager: block pool, free list, reference counts and the
 * prefix cache (chained block hashes in an open-addressing map).
 *
 * Structures:
 *  - blocks[]: per block its reference count, free-list links, and, when it
 *    is registered in the prefix cache ("hashed"), its chain hash, its
 *    parent (the canonical block before it, with that block's generation)
 *    and, for a duplicate, the canonical block it duplicates.
 *  - the free list: every block with reference count 0, doubly linked,
 *    ordered by when it was freed; allocation pops the head, a freed block
 *    that holds a cached prefix is appended to the tail, a freed block that
 *    holds nothing findable is pushed on the head (reused first).
 *  - the map: chain hash -> block id, linear probing with backward-shift
 *    deletion, at most n_blocks entries in >= 2 * n_blocks slots.
 *
 * Exactness of hits.  A hit on block i is confirmed by comparing its
 * stored token ids AND its parent with the block this lookup matched at
 * i - 1 (same id, same generation).  By induction every matched block holds
 * exactly the query's prefix, so even a collision of the chained hash (two
 * different prefixes ending in the same ids) is a miss, not wrong KV.  A
 * block's generation is bumped whenever its hash is dropped, so a parent
 * that was evicted and reused no longer vouches for its old children.
 *
 * Duplicates.  When two sequences computed the same prefix concurrently,
 * the second to commit finds the first one's block already mapped: the map
 * keeps the existing block, the second block is marked hashed (its table's
 * n_hashed advances) and remembers the mapped block as its canonical
 * stand-in, so blocks committed after it chain from the mapped block and
 * stay findable.  When such a duplicate is freed it holds nothing findable
 * and goes to the head of the free list -- unless the mapped block has been
 * evicted meanwhile, in which case the duplicate takes over the map entry.
 *
 * Invariant: a free block that is hashed is in the map (so n_cached_free
 * counts exactly the free blocks a lookup can still find). */
#include "engine/block_manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/block_manager_internal.h"

typedef struct bm_block {
    int32_t ref;
    int32_t prev, next;   /* free-list links (-1 at the ends), valid while ref == 0 */
    int32_t parent;       /* hashed: canonical previous block, -1 for the first */
    int32_t canon;        /* hashed: the mapped block this one duplicates, or itself */
    uint64_t gen;         /* bumped whenever the block's hash is dropped */
    uint64_t parent_gen;  /* parent's gen when this block was registered */
    uint64_t canon_gen;   /* canon's gen when this block was registered */
    uint64_t hash;        /* hashed: chain hash */
    bool hashed;          /* registered by some table (its content is final) */
    bool in_map;          /* the map's entry for hash points at this block */
} bm_block;

struct plume_block_manager {
    int32_t n_blocks;
    int32_t block_size;
    bool prefix_caching;

    bm_block *blocks;
    int32_t *tokens;      /* n_blocks * block_size; only with prefix caching */

    int32_t free_head, free_tail;
    int32_t n_free;
    int32_t n_cached_free;

    uint64_t *map_keys;
    int32_t *map_vals;    /* -1: empty slot */
    size_t map_mask;      /* capacity - 1, capacity a power of two */

    plume_bm_hash_fn hash_fn;
    void *hash_ctx;

    int64_t prefix_queries;
    int64_t prefix_hits;
    int64_t evictions;
};

/* ---- hashing ---------------------------------------------------------- */

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

/* Murmur3's 64-bit finaliser: a bijective avalanche mix. */
static inline uint64_t fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* xxhash-style chained hash: absorbs prev, the count and each id with
 * multiply-rotate rounds, then avalanches.  Not cryptographic; hits are
 * confirmed by content anyway. */
uint64_t plume_bm_default_hash(uint64_t prev, const int32_t *ids, int32_t n, void *ctx)
{
    (void)ctx;
    const uint64_t p1 = 0x9e3779b185ebca87ull, p2 = 0xc2b2ae3d27d4eb4full;
    uint64_t h = fmix64(prev ^ p2) + (uint64_t)(uint32_t)n * p1;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)ids[i] * p2;
        h = rotl64(h, 31) * p1;
    }
    return fmix64(h);
}

static inline uint64_t bm_hash(const plume_block_manager *bm, uint64_t prev, const int32_t *ids)
{
    return bm->hash_fn(prev, ids, bm->block_size, bm->hash_ctx);
}

/* ---- the map ---------------------------------------------------------- */

static inline size_t map_home(const plume_block_manager *bm, uint64_t key)
{
    return (size_t)fmix64(key ^ 0x5bd1e9955bd1e995ull) & bm->map_mask;
}

/* Block mapped at key, or -1. */
static int32_t map_find(const plume_block_manager *bm, uint64_t key)
{
    for (size_t i = map_home(bm, key);; i = (i + 1) & bm->map_mask) {
        if (bm->map_vals[i] < 0)
            return -1;
        if (bm->map_keys[i] == key)
            return bm->map_vals[i];
    }
}

/* Maps key -> id; key must be absent (the map never fills: it has twice as
 * many slots as there are blocks). */
static void map_insert(plume_block_manager *bm, uint64_t key, int32_t id)
{
    size_t i = map_home(bm, key);
    while (bm->map_vals[i] >= 0)
        i = (i + 1) & bm->map_mask;
    bm->map_keys[i] = key;
    bm->map_vals[i] = id;
}

/* Removes key (present) by backward-shift deletion: later entries of the
 * probe run move up so no tombstones are needed. */
static void map_remove(plume_block_manager *bm, uint64_t key)
{
    size_t i = map_home(bm, key);
    while (!(bm->map_vals[i] >= 0 && bm->map_keys[i] == key))
        i = (i + 1) & bm->map_mask;
    size_t j = i;
    for (;;) {
        j = (j + 1) & bm->map_mask;
        if (bm->map_vals[j] < 0)
            break;
        size_t k = map_home(bm, bm->map_keys[j]);
        /* Entry j may stay only if its home lies cyclically in (i, j]. */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        bm->map_keys[i] = bm->map_keys[j];
        bm->map_vals[i] = bm->map_vals[j];
        i = j;
    }
    bm->map_vals[i] = -1;
}

/* ---- the free list ---------------------------------------------------- */

static void free_unlink(plume_block_manager *bm, int32_t id)
{
    bm_block *b = &bm->blocks[id];
    if (b->prev >= 0)
        bm->blocks[b->prev].next = b->next;
    else
        bm->free_head = b->next;
    if (b->next >= 0)
        bm->blocks[b->next].prev = b->prev;
    else
        bm->free_tail = b->prev;
    b->prev = b->next = -1;
    bm->n_free--;
}

/* Links block id into the free list between prev and next (-1: that end
 * of the list). */
static void free_link(plume_block_manager *bm, int32_t id, int32_t prev, int32_t next)
{
    bm_block *b = &bm->blocks[id];
    b->prev = prev;
    b->next = next;
    if (prev >= 0)
        bm->blocks[prev].next = id;
    else
        bm->free_head = id;
    if (next >= 0)
        bm->blocks[next].prev = id;
    else
        bm->free_tail = id;
    bm->n_free++;
}

static void free_push_tail(plume_block_manager *bm, int32_t id)
{
    free_link(bm, id, bm->free_tail, -1);
}

static void free_push_head(plume_block_manager *bm, int32_t id)
{
    free_link(bm, id, -1, bm->free_head);
}

/* ---- block state helpers ---------------------------------------------- */

/* Forgets block id's hash (removing its map entry if it has one) and bumps
 * its generation so that nothing registered against it matches any more. */
static void drop_hash(plume_block_manager *bm, int32_t id)
{
    bm_block *b = &bm->blocks[id];
    if (!b->hashed)
        return;
    if (b->in_map)
        map_remove(bm, b->hash);
    b->hashed = false;
    b->in_map = false;
    b->gen++;
}

/* Whether (id, gen) still names the hashed content it named when recorded. */
static inline bool still_valid(const plume_block_manager *bm, int32_t id, uint64_t gen)
{
    return bm->blocks[id].hashed && bm->blocks[id].gen == gen;
}

/* The block that stands for hashed block id when chaining its successors:
 * the mapped block it duplicates while that one is intact, else itself. */
static inline int32_t canonical(const plume_block_manager *bm, int32_t id)
{
    const bm_block *b = &bm->blocks[id];
    if (b->canon != id && still_valid(bm, b->canon, b->canon_gen))
        return b->canon;
    return id;
}

/* Whether block id's parent is still intact (so it can be found again). */
static inline bool parent_intact(const plume_block_manager *bm, int32_t id)
{
    const bm_block *b = &bm->blocks[id];
    return b->parent < 0 || still_valid(bm, b->parent, b->parent_gen);
}

/* Drops one reference on block id; at 0 the block joins the free list: at
 * the tail if a lookup can still find it, at the head otherwise. */
static void unref(plume_block_manager *bm, int32_t id)
{
    bm_block *b = &bm->blocks[id];
    if (--b->ref > 0)
        return;
    if (b->hashed && !b->in_map) {
        /* A duplicate or collision loser: take over the map entry if it is
         * vacant and the chain above is intact, else it is unreachable. */
        if (map_find(bm, b->hash) < 0 && parent_intact(bm, id)) {
            map_insert(bm, b->hash, id);
            b->in_map = true;
            b->canon = id;
            b->canon_gen = b->gen;
        } else {
            drop_hash(bm, id);
        }
    }
    if (b->in_map) {
        free_push_tail(bm, id);
        bm->n_cached_free++;
    } else {
        free_push_head(bm, id);
    }
}

/* Makes room for at least need ids in bt. Returns 0 or -1 (bt unchanged). */
static int table_reserve(plume_block_table *bt, int64_t need)
{
    if (need <= bt->cap)
        return 0;
    int64_t cap = bt->cap > 0 ? bt->cap : 8;
    while (cap < need)
        cap *= 2;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    if (cap < need)
        return -1;
    int32_t *ids = realloc(bt->ids, (size_t)cap * sizeof *ids);
    if (!ids)
        return -1;
    bt->ids = ids;
    bt->cap = (int32_t)cap;
    return 0;
}

/* ---- public API ------------------------------------------------------- */

int plume_bm_create(int32_t n_blocks, int32_t block_size, bool prefix_caching,
                    plume_block_manager **out, plume_error *err)
{
    if (!out)
        return plume_err(err, PLUME_ERR_INVALID, "block manager: out must not be NULL");
    *out = NULL;
    if (n_blocks <= 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "block manager: n_blocks must be > 0, got %d", (int)n_blocks);
    if (block_size <= 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "block manager: block_size must be > 0, got %d", (int)block_size);
    if ((size_t)n_blocks > SIZE_MAX / sizeof(bm_block) ||
        (prefix_caching &&
         (size_t)n_blocks > SIZE_MAX / sizeof(int32_t) / (size_t)block_size))
        return plume_err(err, PLUME_ERR_RANGE,
                         "block manager: %d blocks of %d tokens overflow the address space",
                         (int)n_blocks, (int)block_size);

    plume_block_manager *bm = calloc(1, sizeof *bm);
    if (!bm)
        return plume_err(err, PLUME_ERR_NOMEM, "block manager: out of memory");
    bm->n_blocks = n_blocks;
    bm->block_size = block_size;
    bm->prefix_caching = prefix_caching;
    bm->hash_fn = plume_bm_default_hash;
    bm->free_head = bm->free_tail = -1;

    bm->blocks = calloc((size_t)n_blocks, sizeof *bm->blocks);
    if (!bm->blocks)
        goto nomem;
    if (prefix_caching) {
        bm->tokens = malloc((size_t)n_blocks * (size_t)block_size * sizeof *bm->tokens);
        size_t cap = 16;
        while (cap < 2 * (size_t)n_blocks)
            cap *= 2;
        bm->map_keys = malloc(cap * sizeof *bm->map_keys);
        bm->map_vals = malloc(cap * sizeof *bm->map_vals);
        if (!bm->tokens || !bm->map_keys || !bm->map_vals)
            goto nomem;
        for (size_t i = 0; i < cap; i++)
            bm->map_vals[i] = -1;
        bm->map_mask = cap - 1;
    }
    for (int32_t i = 0; i < n_blocks; i++) {
        bm->blocks[i].parent = -1;
        bm->blocks[i].canon = i;
        free_push_tail(bm, i); /* ascending ids: allocation starts at block 0 */
    }
    *out = bm;
    return 0;

nomem:
    plume_bm_free(bm);
    return plume_err(err, PLUME_ERR_NOMEM,
                     "block manager: out of memory for %d blocks of %d tokens",
                     (int)n_blocks, (int)block_size);
}

void plume_bm_free(plume_block_manager *bm)
{
    if (!bm)
        return;
    free(bm->blocks);
    free(bm->tokens);
    free(bm->map_keys);
    free(bm->map_vals);
    free(bm);
}

int32_t plume_bm_block_size(const plume_block_manager *bm)
{
    return bm->block_size;
}

int32_t plume_bm_n_free(const plume_block_manager *bm)
{
    return bm->n_free;
}

plume_block_stats plume_bm_stats(const plume_block_manager *bm)
{
    plume_block_stats s = {
        .n_blocks = bm->n_blocks,
        .n_free = bm->n_free,
        .n_cached_free = bm->n_cached_free,
        .prefix_queries = bm->prefix_queries,
        .prefix_hits = bm->prefix_hits,
        .evictions = bm->evictions,
    };
    return s;
}

/* ceil(n_tokens / block_size); 0 for n_tokens <= 0, INT32_MAX when the
 * answer would not fit (more than any pool can hold). */
int32_t plume_bm_blocks_for(const plume_block_manager *bm, int64_t n_tokens)
{
    if (n_tokens <= 0)
        return 0;
    int64_t n = (n_tokens - 1) / bm->block_size + 1;
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/* Walks the prompt block by block while each block is found in the map and
 * confirmed (ids and parent); takes a reference on each hit, pulling it off
 * the free list when it was free. */
int64_t plume_bm_match_prefix(plume_block_manager *bm, plume_block_table *bt,
                              const int32_t *tokens, int64_t n_tokens, int32_t max_blocks)
{
    if (!bm->prefix_caching || bt->n != 0 || max_blocks <= 0 || n_tokens < bm->block_size)
        return 0;
    const int32_t bs = bm->block_size;
    int64_t limit = n_tokens / bs;
    if (limit > max_blocks)
        limit = max_blocks;
    if (limit > bm->n_blocks) /* a table never holds a block twice */
        limit = bm->n_blocks;
    if (table_reserve(bt, limit) != 0)
        return 0; /* out of memory: behave as a miss */

    uint64_t h = PLUME_BM_HASH_SEED;
    int32_t n = 0;
    while (n < limit) {
        const int32_t *ids = tokens + (int64_t)n * bs;
        uint64_t hn = bm_hash(bm, h, ids);
        bm->prefix_queries++;
        int32_t id = map_find(bm, hn);
        if (id < 0)
            break;
        bm_block *b = &bm->blocks[id];
        int32_t want_parent = n > 0 ? bt->ids[n - 1] : -1;
        if (b->parent != want_parent ||
            (want_parent >= 0 && bm->blocks[want_parent].gen != b->parent_gen) ||
            memcmp(bm->tokens + (int64_t)id * bs, ids, (size_t)bs * sizeof *ids) != 0)
            break; /* hash collision: a miss */
        bm->prefix_hits++;
        if (b->ref == 0) {
            free_unlink(bm, id);
            bm->n_cached_free--;
        }
        b->ref++;
        bt->ids[n++] = id;
        h = hn;
    }
    bt->n = n;
    bt->n_hashed = n;
    bt->last_hash = h;
    return (int64_t)n * bs;
}

/* match_prefix's walk without taking anything: no references, no stats. */
int64_t plume_bm_peek_prefix(const plume_block_manager *bm, const int32_t *tokens,
                             int64_t n_tokens, int32_t max_blocks)
{
    if (!bm->prefix_caching || max_blocks <= 0 || n_tokens < bm->block_size)
        return 0;
    const int32_t bs = bm->block_size;
    int64_t limit = n_tokens / bs;
    if (limit > max_blocks)
        limit = max_blocks;
    if (limit > bm->n_blocks)
        limit = bm->n_blocks;
    uint64_t h = PLUME_BM_HASH_SEED;
    int32_t n = 0, parent = -1;
    while (n < limit) {
        const int32_t *ids = tokens + (int64_t)n * bs;
        uint64_t hn = bm_hash(bm, h, ids);
        int32_t id = map_find(bm, hn);
        if (id < 0)
            break;
        const bm_block *b = &bm->blocks[id];
        if (b->parent != parent || (parent >= 0 && bm->blocks[parent].gen != b->parent_gen) ||
            memcmp(bm->tokens + (int64_t)id * bs, ids, (size_t)bs * sizeof *ids) != 0)
            break;
        parent = id;
        h = hn;
        n++;
    }
    return (int64_t)n * bs;
}

/* Appends fresh blocks from the free-list head (evicting the cached prefix
 * a block held, if any) until bt covers n_tokens; all or nothing. */
int plume_bm_ensure(plume_block_manager *bm, plume_block_table *bt, int64_t n_tokens)
{
    int32_t want = plume_bm_blocks_for(bm, n_tokens);
    if (want <= bt->n)
        return 0;
    int32_t need = want - bt->n;
    if (need > bm->n_free)
        return -1;
    if (table_reserve(bt, want) != 0)
        return -1;
    for (int32_t k = 0; k < need; k++) {
        int32_t id = bm->free_head;
        bm_block *b = &bm->blocks[id];
        free_unlink(bm, id);
        if (b->hashed) {
            /* Only mapped blocks are free and hashed (see unref). */
            bm->n_cached_free--;
            bm->evictions++;
            drop_hash(bm, id);
        }
        b->ref = 1;
        b->parent = -1;
        b->canon = id;
        bt->ids[bt->n++] = id;
    }
    return 0;
}

/* Registers blocks n_hashed, n_hashed + 1, ... while they are held and
 * fully inside tokens[0..n_committed).  Each gets its chain hash, its ids
 * and its parent recorded; the map gains it unless the hash is already
 * mapped (then the existing entry is kept: a confirmed duplicate points at
 * it as its canonical block, a collision simply stays out of the map). */
void plume_bm_commit(plume_block_manager *bm, plume_block_table *bt, const int32_t *tokens,
                     int64_t n_committed)
{
    if (!bm->prefix_caching)
        return;
    const int32_t bs = bm->block_size;
    uint64_t h = bt->n_hashed > 0 ? bt->last_hash : PLUME_BM_HASH_SEED;
    while (bt->n_hashed < bt->n && (int64_t)(bt->n_hashed + 1) * bs <= n_committed) {
        int32_t i = bt->n_hashed;
        int32_t id = bt->ids[i];
        const int32_t *ids = tokens + (int64_t)i * bs;
        bm_block *b = &bm->blocks[id];
        h = bm_hash(bm, h, ids);

        int32_t parent = i > 0 ? canonical(bm, bt->ids[i - 1]) : -1;
        b->hash = h;
        b->hashed = true;
        b->parent = parent;
        b->parent_gen = parent >= 0 ? bm->blocks[parent].gen : 0;
        b->canon = id;
        b->canon_gen = b->gen;
        memcpy(bm->tokens + (int64_t)id * bs, ids, (size_t)bs * sizeof *ids);

        int32_t e = map_find(bm, h);
        if (e < 0) {
            map_insert(bm, h, id);
            b->in_map = true;
        } else {
            const bm_block *eb = &bm->blocks[e];
            b->in_map = false;
            if (eb->parent == b->parent && eb->parent_gen == b->parent_gen &&
                memcmp(bm->tokens + (int64_t)e * bs, ids, (size_t)bs * sizeof *ids) == 0) {
                b->canon = e;
                b->canon_gen = eb->gen;
            }
        }
        bt->n_hashed++;
    }
    bt->last_hash = h;
}

/* Drops the blocks past those needed for n_tokens, newest first; never
 * below the registered prefix (n_tokens is raised to n_hashed blocks). */
void plume_bm_truncate(plume_block_manager *bm, plume_block_table *bt, int64_t n_tokens)
{
    int32_t keep = plume_bm_blocks_for(bm, n_tokens);
    if (keep < bt->n_hashed)
        keep = bt->n_hashed;
    while (bt->n > keep)
        unref(bm, bt->ids[--bt->n]);
}

/* Drops every reference, newest block first, so a sequence's tail blocks
 * are freed (and later evicted) before its more shareable leading blocks. */
void plume_bm_release(plume_block_manager *bm, plume_block_table *bt)
{
    while (bt->n > 0)
        unref(bm, bt->ids[--bt->n]);
    bt->n_hashed = 0;
    bt->last_hash = PLUME_BM_HASH_SEED;
}

void plume_block_table_free(plume_block_table *bt)
{
    if (!bt)
        return;
    free(bt->ids);
    memset(bt, 0, sizeof *bt);
}

/* ---- test hooks ------------------------------------------------------- */

void plume_bm_set_hash_fn(plume_block_manager *bm, plume_bm_hash_fn fn, void *ctx)
{
    bm->hash_fn = fn ? fn : plume_bm_default_hash;
    bm->hash_ctx = fn ? ctx : NULL;
}

int32_t plume_bm_ref_count(const plume_block_manager *bm, int32_t id)
{
    if (id < 0 || id >= bm->n_blocks)
        return -1;
    return bm->blocks[id].ref;
}

bool plume_bm_is_cached(const plume_block_manager *bm, int32_t id)
{
    return id >= 0 && id < bm->n_blocks && bm->blocks[id].in_map;
}

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            if (why && why_size)                                  \
                snprintf(why, why_size, __VA_ARGS__);             \
            return -1;                                            \
        }                                                         \
    } while (0)

int plume_bm_check(const plume_block_manager *bm, char *why, size_t why_size)
{
    /* Free list: well linked, exactly the blocks with ref 0. */
    int32_t n = 0, n_cached = 0, prev = -1;
    for (int32_t id = bm->free_head; id >= 0; id = bm->blocks[id].next) {
        CHECK(id < bm->n_blocks, "free list holds bad id %d", (int)id);
        CHECK(n < bm->n_blocks, "free list has a cycle");
        const bm_block *b = &bm->blocks[id];
        CHECK(b->prev == prev, "block %d: prev link %d, expected %d", (int)id, (int)b->prev,
              (int)prev);
        CHECK(b->ref == 0, "block %d on the free list has ref %d", (int)id, (int)b->ref);
        CHECK(!b->hashed || b->in_map, "free block %d is hashed but unmapped", (int)id);
        n_cached += b->in_map;
        prev = id;
        n++;
    }
    CHECK(bm->free_tail == prev, "free tail %d, last walked %d", (int)bm->free_tail, (int)prev);
    CHECK(n == bm->n_free, "free list has %d blocks, n_free says %d", (int)n, (int)bm->n_free);
    CHECK(n_cached == bm->n_cached_free, "%d cached free blocks, n_cached_free says %d",
          (int)n_cached, (int)bm->n_cached_free);
    int32_t n_zero = 0, n_mapped = 0;
    for (int32_t id = 0; id < bm->n_blocks; id++) {
        const bm_block *b = &bm->blocks[id];
        CHECK(b->ref >= 0, "block %d has ref %d", (int)id, (int)b->ref);
        n_zero += b->ref == 0;
        CHECK(!b->in_map || b->hashed, "block %d mapped but not hashed", (int)id);
        if (b->in_map) {
            n_mapped++;
            CHECK(map_find(bm, b->hash) == id, "block %d not found under its hash", (int)id);
        }
    }
    CHECK(n_zero == bm->n_free, "%d blocks with ref 0, n_free says %d", (int)n_zero,
          (int)bm->n_free);
    if (bm->prefix_caching) {
        size_t n_entries = 0;
        for (size_t i = 0; i <= bm->map_mask; i++) {
            int32_t v = bm->map_vals[i];
            if (v < 0)
                continue;
            n_entries++;
            CHECK(v < bm->n_blocks && bm->blocks[v].in_map && bm->blocks[v].hash == bm->map_keys[i],
                  "map slot %zu points at block %d, which does not own it", i, (int)v);
        }
        CHECK(n_entries == (size_t)n_mapped, "map has %zu entries, %d blocks mapped", n_entries,
              (int)n_mapped);
    }
    return 0;
}
