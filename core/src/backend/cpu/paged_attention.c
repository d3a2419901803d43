#include "backend/cpu/paged_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "plume/fp16.h"

/* Most query rows of one sequence per tile of attn_paged_tile. */
#define TILE_ROWS 16

/* A run of consecutive query rows of one sequence (same block table,
 * positions pos, pos+1, ...), at most TILE_ROWS of them. */
typedef struct tile {
    int32_t r0, nr;
} tile;

typedef struct job {
    const float *q;
    const void *k, *v;
    int kv_f16;
    const plume_attn_row *rows;
    const tile *tiles;
    int32_t n_tiles, block_size;
    int n_head, n_head_kv, head_dim;
    float scale;
    int window;
    int per_head; /* items are (tile, head) rather than (tile, kv head) */
    float *out;
} job;

/* Items are (tile, kv head) pairs strided over threads: the kernel streams
 * the sequence's K/V rows once for all query heads of the GQA group and
 * all rows of the tile (online softmax per head and row).  With few tiles
 * (decode) items are (tile, head), for balance.  A row's result is the same
 * bits whichever way it is computed: alone (attn_paged) or in any tile
 * (attn_paged_tile), for one head or its group. */
static void worker(void *ctx, int ith, int nth)
{
    const job *j = ctx;
    const plume_kernels *kern = plume_kernels_active();
    const int hd = j->head_dim, kv_dim = j->n_head_kv * hd, group = j->n_head / j->n_head_kv;
    const float scale = j->scale;
    const int q_stride = j->n_head * hd;
    const int per_tile = j->per_head ? j->n_head : j->n_head_kv;
    const size_t esz = j->kv_f16 ? 2 : 4;
    for (int item = ith; item < j->n_tiles * per_tile; item += nth) {
        const int t = item / per_tile, i = item % per_tile;
        const int h0 = j->per_head ? i : i * group, nq = j->per_head ? 1 : group;
        const int kvh = h0 / group;
        const tile *tl = &j->tiles[t];
        const plume_attn_row *row = &j->rows[tl->r0];
        const float *q = j->q + (size_t)tl->r0 * q_stride + (size_t)h0 * hd;
        float *o = j->out + (size_t)tl->r0 * q_stride + (size_t)h0 * hd;
        const void *k = (const char *)j->k + esz * (size_t)kvh * hd;
        const void *v = (const char *)j->v + esz * (size_t)kvh * hd;
        if (tl->nr == 1)
            kern->attn_paged(q, nq, k, v, kv_dim, j->kv_f16, row->block_table, j->block_size,
                             row->pos + 1, hd, scale, j->window, o);
        else
            kern->attn_paged_tile(q, q_stride, tl->nr, nq, k, v, kv_dim, j->kv_f16,
                                  row->block_table, j->block_size, row->pos + 1, hd, scale,
                                  j->window, o, q_stride);
    }
}

static void run(plume_pool *pool, job *j, tile *tiles, int32_t n_rows)
{
    int32_t n = 0;
    for (int32_t r = 0; r < n_rows;) {
        int32_t e = r + 1;
        while (e < n_rows && e - r < TILE_ROWS && j->rows[e].block_table == j->rows[r].block_table &&
               j->rows[e].pos == j->rows[e - 1].pos + 1)
            e++;
        tiles[n++] = (tile){r, e - r};
        r = e;
    }
    j->tiles = tiles;
    j->n_tiles = n;
    j->per_head = n * j->n_head_kv < 4 * plume_pool_threads(pool);
    plume_pool_run(pool, worker, j);
}

void plume_paged_attention(plume_pool *pool, const float *q, const void *k_layer,
                           const void *v_layer, int kv_f16, const plume_attn_row *rows, int32_t n_rows,
                           int32_t block_size, int n_head, int n_head_kv, int head_dim, float scale,
                           int window, float *out)
{
    job j = {q, k_layer, v_layer, kv_f16, rows, NULL, 0, block_size, n_head, n_head_kv, head_dim,
             scale, window, 0, out};
    tile small[64];
    tile *tiles = n_rows <= 64 ? small : malloc(sizeof(tile) * (size_t)n_rows);
    if (!tiles) { /* no memory for the tile list: one row per item, in chunks */
        for (int32_t r0 = 0; r0 < n_rows; r0 += 64) {
            const int32_t nr = n_rows - r0 < 64 ? n_rows - r0 : 64;
            for (int32_t r = 0; r < nr; r++)
                small[r] = (tile){r, 1};
            job c = j;
            c.q = q + (size_t)r0 * n_head * head_dim;
            c.rows = rows + r0;
            c.out = out + (size_t)r0 * n_head * head_dim;
            c.tiles = small;
            c.n_tiles = nr;
            c.per_head = nr * n_head_kv < 4 * plume_pool_threads(pool);
            plume_pool_run(pool, worker, &c);
        }
        return;
    }
    run(pool, &j, tiles, n_rows);
    if (tiles != small)
        free(tiles);
}
