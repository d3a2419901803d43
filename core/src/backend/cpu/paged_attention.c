#include "backend/cpu/paged_attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attn_tile.h"
#include "backend/cpu/dispatch.h"

/* Most query rows of one sequence per tile of attn_paged_tile. */
#define TILE_ROWS 16

/* Floats of partial output the worker keeps for a tile with sinks (at
 * least the largest head_dim the cpu backend accepts, 512). */
#define SINK_PART_BUF 8192

/* A run of consecutive query rows of one sequence (same block table,
 * positions pos, pos+1, ...), at most TILE_ROWS of them; with split-K its
 * chunks c_first .. c_first+n_chunks-1 and where its partials start in the
 * scratch (item index of its first chunk of kv head 0). */
typedef struct tile {
    int32_t r0, nr;
    int32_t c_first, n_chunks, item0;
} tile;

typedef struct job {
    const float *q;
    const void *k, *v;
    int kv_type;
    int64_t stride, head_stride; /* elements per slot, per kv head */
    const plume_attn_row *rows;
    const tile *tiles;
    int32_t n_tiles, block_size;
    int n_head, n_head_kv, head_dim;
    float scale;
    int window;
    const float *sinks; /* n_head logits, or NULL */
    int per_head; /* items are (tile, head) rather than (tile, kv head) */
    /* split-K: items (tile, kv head, chunk), each writing its partial to
     * part (TILE_ROWS * group * (head_dim + 2) floats per item) */
    int32_t n_items;
    float *part;
    float *out;
    atomic_int next; /* unsplit: the next unit to take */
} job;

/* Unsplit: items are (tile, kv head) pairs: the kernel streams the
 * sequence's K/V rows once for all query heads of the GQA group and all
 * rows of the tile.  Threads take whole tiles (every kv head of one, in
 * turn) from a shared counter, the last tile first: a tile's kv heads are
 * interleaved in the cache, so one thread folding all of them reads its
 * rows as one stream, and later tiles of a causal prompt are the longest
 * (taken first, they balance).  With few tiles of one chunk (short decode)
 * items are (tile, head), taken one at a time, for balance.  A row's
 * result is the same bits whichever way it is computed: alone
 * (attn_paged) or in any tile (attn_paged_tile), for one head or its
 * group, split or not. */
static void worker(void *ctx, int ith, int nth)
{
    (void)ith;
    (void)nth;
    job *j = ctx;
    const plume_kernels *kern = plume_kernels_active();
    const int hd = j->head_dim, group = j->n_head / j->n_head_kv;
    const int q_stride = j->n_head * hd;
    const int per_tile = j->per_head ? j->n_head : j->n_head_kv;
    const int per_unit = j->per_head ? 1 : per_tile; /* items per unit taken */
    const int n_items = j->n_tiles * per_tile;
    const size_t esz = j->kv_type == PLUME_KV_TYPE_F32 ? 4 : j->kv_type == PLUME_KV_TYPE_F16 ? 2 : 1;
    _Alignas(64) float po[SINK_PART_BUF]; /* the sinks' tile driver's partial outputs */
    int u;
    while ((u = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) * per_unit < n_items)
        for (int item = n_items - (u + 1) * per_unit; item < n_items - u * per_unit; item++) {
            const int t = item / per_tile, i = item % per_tile;
            const int h0 = j->per_head ? i : i * group, nq = j->per_head ? 1 : group;
            const int kvh = h0 / group;
            const tile *tl = &j->tiles[t];
            const plume_attn_row *row = &j->rows[tl->r0];
            const float *q = j->q + (size_t)tl->r0 * q_stride + (size_t)h0 * hd;
            float *o = j->out + (size_t)tl->r0 * q_stride + (size_t)h0 * hd;
            const void *k = (const char *)j->k + esz * (size_t)kvh * j->head_stride;
            const void *v = (const char *)j->v + esz * (size_t)kvh * j->head_stride;
            if (j->sinks) /* attn_paged_tile's driver, with the sinks of heads h0.. */
                plume_attn_tile_run(kern->attn_partial, kern->attn_merge, po, SINK_PART_BUF, q,
                                    q_stride, tl->nr, nq, k, v, j->stride, j->kv_type,
                                    row->block_table, j->block_size, row->pos + 1, hd, j->scale,
                                    j->window, j->sinks + h0, o, q_stride);
            else
                kern->attn_paged_tile(q, q_stride, tl->nr, nq, k, v, j->stride, j->kv_type,
                                      row->block_table, j->block_size, row->pos + 1, hd, j->scale,
                                      j->window, o, q_stride);
        }
}

/* Floats of one split item's partial: m and l for every (row, query) of
 * the tile, then their outputs. */
static size_t part_floats(int group, int hd)
{
    return (size_t)TILE_ROWS * (size_t)group * (size_t)(hd + 2);
}

/* Split-K, pass 1: item (tile, kv head, chunk) -> its partial.  Items are
 * ordered chunk by chunk (the kv heads of a chunk one after another) and
 * each thread takes one contiguous range of them: the kv heads of a slot
 * are interleaved in the cache, so a thread that folds every head of a
 * chunk reads that chunk's memory as one stream (what the hardware
 * prefetcher brings for one head is the next head's), where threads
 * taking alternate items each read a third of every line group and
 * prefetch lines the other thread uses (measured at depth 6144, 2 threads:
 * 59-61 -> 66-68 decode tok/s).  Partials are stored by (kv head, chunk)
 * whatever the order. */
static void split_worker(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    const plume_kernels *kern = plume_kernels_active();
    const int hd = j->head_dim, group = j->n_head / j->n_head_kv;
    const int q_stride = j->n_head * hd;
    const size_t esz = j->kv_type == PLUME_KV_TYPE_F32 ? 4 : j->kv_type == PLUME_KV_TYPE_F16 ? 2 : 1;
    const size_t pf = part_floats(group, hd);
    int t = 0;
    const int32_t first = (int32_t)((int64_t)j->n_items * ith / nth), end = (int32_t)((int64_t)j->n_items * (ith + 1) / nth);
    for (int item = first; item < end; item++) {
        while (j->tiles[t].item0 + j->tiles[t].n_chunks * j->n_head_kv <= item)
            t++; /* items are in tile order */
        const tile *tl = &j->tiles[t];
        const int i = item - tl->item0, kvh = i % j->n_head_kv, c = i / j->n_head_kv;
        const plume_attn_row *row = &j->rows[tl->r0];
        float *m = j->part + (size_t)(tl->item0 + kvh * tl->n_chunks + c) * pf, *l = m + TILE_ROWS * group, *o = l + TILE_ROWS * group;
        kern->attn_partial(j->q + (size_t)tl->r0 * q_stride + (size_t)kvh * group * hd, q_stride,
                           tl->nr, group, (const char *)j->k + esz * (size_t)kvh * j->head_stride,
                           (const char *)j->v + esz * (size_t)kvh * j->head_stride, j->stride,
                           j->kv_type,
                           row->block_table, j->block_size, row->pos + 1, hd, j->scale, j->window,
                           (tl->c_first + c) * PLUME_ATTN_CHUNK, m, l, o);
    }
}

/* Split-K, pass 2: item (tile, kv head) merges its chunks' partials in
 * chunk order into out and normalizes, as attn_paged_tile does. */
static void merge_worker(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    const plume_kernels *kern = plume_kernels_active();
    const int hd = j->head_dim, group = j->n_head / j->n_head_kv, q_stride = j->n_head * hd;
    const size_t pf = part_floats(group, hd);
    for (int item = ith; item < j->n_tiles * j->n_head_kv; item += nth) {
        const tile *tl = &j->tiles[item / j->n_head_kv];
        const int kvh = item % j->n_head_kv;
        float M[TILE_ROWS * 8], L[TILE_ROWS * 8];
        for (int q0 = 0; q0 < group; q0 += 8) { /* 8 queries of each row at a time */
            const int nq = group - q0 < 8 ? group - q0 : 8;
            for (int i = 0; i < tl->nr * nq; i++)
                M[i] = -INFINITY, L[i] = 0.0f;
            for (int c = 0; c < tl->n_chunks; c++) {
                const float *m = j->part + (size_t)(tl->item0 + kvh * tl->n_chunks + c) * pf;
                const float *l = m + TILE_ROWS * group, *o = l + TILE_ROWS * group;
                for (int r = 0; r < tl->nr; r++)
                    kern->attn_merge(M + r * nq, L + r * nq,
                                     j->out + (size_t)(tl->r0 + r) * q_stride +
                                         (size_t)(kvh * group + q0) * hd,
                                     m + r * group + q0, l + r * group + q0,
                                     o + (size_t)(r * group + q0) * hd, nq, hd, hd);
            }
            for (int r = 0; r < tl->nr; r++)
                for (int qi = 0; qi < nq; qi++) {
                    const int i = r * nq + qi, h = kvh * group + q0 + qi;
                    /* as plume_attn_tile_run: the sink joins the denominator */
                    const float inv = 1.0f / (j->sinks ? L[i] + expf(j->sinks[h] - M[i]) : L[i]);
                    float *oq = j->out + (size_t)(tl->r0 + r) * q_stride +
                                (size_t)(kvh * group + q0 + qi) * hd;
                    for (int d = 0; d < hd; d++)
                        oq[d] *= inv;
                }
        }
    }
}

/* Grows a scratch array to hold n elements of size sz; 0, or -1 when out
 * of memory (the old contents are kept). */
static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap)
        return 0;
    void *q = realloc(*p, n * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

int plume_paged_attention(plume_pool *pool, plume_attn_scratch *s, const float *q,
                          const void *k_layer, const void *v_layer, int kv_type, int64_t stride,
                          int64_t head_stride, const plume_attn_row *rows, int32_t n_rows, int32_t block_size,
                          int n_head, int n_head_kv, int head_dim, float scale, int window,
                          const float *sinks, float *out)
{
    if (grow((void **)&s->tiles, &s->tiles_cap, (size_t)n_rows, sizeof(tile)))
        return -1;
    tile *tiles = s->tiles;
    int32_t n = 0, max_chunks = 0;
    for (int32_t r = 0; r < n_rows;) {
        int32_t e = r + 1;
        while (e < n_rows && e - r < TILE_ROWS && rows[e].block_table == rows[r].block_table &&
               rows[e].pos == rows[e - 1].pos + 1)
            e++;
        const int32_t c_first = plume_attn_lo(rows[r].pos + 1, window) / PLUME_ATTN_CHUNK;
        /* the chunks of keys lo(first row) .. pos(last row) */
        const int32_t n_chunks = rows[e - 1].pos / PLUME_ATTN_CHUNK - c_first + 1;
        tiles[n++] = (tile){r, e - r, c_first, n_chunks, 0};
        max_chunks = n_chunks > max_chunks ? n_chunks : max_chunks;
        r = e;
    }
    const int nth = plume_pool_threads(pool);
    job j = {q, k_layer, v_layer, kv_type, stride, head_stride, rows, tiles, n, block_size, n_head, n_head_kv, head_dim,
             scale, window, sinks, 0, 0, NULL, out, 0};
    if (n < 4 * nth && max_chunks > 1) {
        /* few tiles over long contexts: split every tile's keys at the
         * chunk boundaries so that all threads share one sequence.  The
         * unsplit worker hands out whole tiles, so it is the tiles that
         * must outnumber the threads, not the (tile, kv head) items: with
         * 8 kv heads, one decode row was one unit and ran on one thread
         * (Llama-3.2-1B at depth 6144, 2 threads: 32-35 -> 39-40 tok/s) */
        int32_t items = 0;
        for (int32_t t = 0; t < n; t++) {
            tiles[t].item0 = items;
            items += tiles[t].n_chunks * n_head_kv;
        }
        const size_t pf = part_floats(n_head / n_head_kv, head_dim);
        if (grow((void **)&s->part, &s->part_cap, (size_t)items * pf, sizeof(float)))
            return -1;
        j.n_items = items;
        j.part = s->part;
        plume_pool_run(pool, split_worker, &j);
        plume_pool_run(pool, merge_worker, &j);
        return 0;
    }
    j.per_head = max_chunks <= 1 && n * n_head_kv < 4 * nth;
    plume_pool_run(pool, worker, &j);
    return 0;
}

void plume_attn_scratch_free(plume_attn_scratch *s)
{
    free(s->tiles);
    free(s->part);
    s->tiles = NULL;
    s->part = NULL;
    s->tiles_cap = s->part_cap = 0;
}
