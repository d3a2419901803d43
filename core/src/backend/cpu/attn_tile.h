/* What every dispatch level's attention kernels share (dispatch.h): the
 * first key a row attends to, the start of attn_partial and the
 * bookkeeping of attn_merge, and the driver that runs a tile as passes of
 * rows x queries, each the in-order merge of the level's attn_partial over
 * the chunks, then normalized.  Static inline: each kernel file compiles it
 * with its own partial and merge. */
#ifndef PLUME_CPU_ATTN_TILE_H
#define PLUME_CPU_ATTN_TILE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/dispatch.h"

/* The first position a query that sees n_pos keys attends to: with a
 * sliding window (window > 0) only the last window keys, else all. */
static inline int plume_attn_lo(int n_pos, int window)
{
    return window > 0 && n_pos > window ? n_pos - window : 0;
}

/* The cache slot of position p of a paged cache (dispatch.h: attn_paged):
 * offset p % block_size in block block_table[p / block_size]. */
static inline size_t plume_attn_slot(const int32_t *block_table, int block_size, int p)
{
    return (size_t)block_table[p / block_size] * (size_t)block_size + (size_t)(p % block_size);
}

/* Points kp[i] / vp[i] (i < n) at the K/V rows of positions p0 .. p0+n-1
 * of a paged cache whose slots are slot_bytes apart (from k and v): each
 * block's slot is looked up once, so no division per row. */
static inline void plume_attn_rows(const char *k, const char *v, size_t slot_bytes,
                                   const int32_t *block_table, int block_size, int p0, int n,
                                   const char **kp, const char **vp)
{
    for (int i = 0; i < n;) {
        const int p = p0 + i;
        int cnt = block_size - p % block_size;
        if (cnt > n - i)
            cnt = n - i;
        size_t off = plume_attn_slot(block_table, block_size, p) * slot_bytes;
        for (const int stop = i + cnt; i < stop; i++, off += slot_bytes) {
            kp[i] = k + off;
            vp[i] = v + off;
        }
    }
}

/* The keys a row that sees n_pos keys folds from the slice of attn_partial
 * that starts at p0 and whose keys end at e: *a .. *er - 1; 0 when it folds
 * none of them. */
static inline int plume_attn_row_keys(int n_pos, int window, int p0, int e, int *a, int *er)
{
    const int lo = plume_attn_lo(n_pos, window);
    *a = p0 > lo ? p0 : lo;
    *er = n_pos < e ? n_pos : e;
    return *er > *a;
}

/* The keys one chunk of attn_partial gives rows n_pos0 .. n_pos0 + nr - 1. */
typedef struct plume_attn_range {
    int n_max; /* the keys of the last row: 0 .. n_max - 1 */
    int end;   /* one past the last key of the chunk any row sees */
    int lo0;   /* the first row's first key */
    int p0;    /* the first slice's start: lo0 down to a multiple of the
                  slice length, and not before the chunk (c0) */
} plume_attn_range;

/* The start of every level's attn_partial: m = -inf, l = 0 and o = 0 for
 * the nr x nq queries, and the range of keys of the chunk at c0 read in
 * slices of slice keys. */
static inline plume_attn_range plume_attn_partial_begin(int nr, int nq, int hd, int n_pos0,
                                                        int window, int c0, int slice, float *m,
                                                        float *l, float *o)
{
    for (int i = 0; i < nr * nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    memset(o, 0, sizeof(float) * (size_t)nr * (size_t)nq * (size_t)hd);
    plume_attn_range r;
    r.n_max = n_pos0 + nr - 1;
    r.end = r.n_max < c0 + PLUME_ATTN_CHUNK ? r.n_max : c0 + PLUME_ATTN_CHUNK;
    r.lo0 = plume_attn_lo(n_pos0, window);
    r.p0 = r.lo0 / slice * slice;
    if (r.p0 < c0)
        r.p0 = c0;
    return r;
}

/* One query of every level's attn_merge, all but the blend of the outputs:
 * 0 when nothing is left to do (the chunk had no key (m = -inf), or it is
 * the query's first, whose m, l and o become M, L and Oi); else 1, with M
 * the new maximum, L merged and *a, *b the weights of Oi and oi, which the
 * caller blends as Oi·a + oi·b (two products, then the sum: never fused,
 * as L here). */
static inline int plume_attn_merge_begin(float *M, float *L, float *Oi, float m, float l,
                                         const float *oi, int hd, float *a, float *b)
{
    if (m == -INFINITY)
        return 0;
    if (*M == -INFINITY) {
        *M = m;
        *L = l;
        memcpy(Oi, oi, sizeof(float) * (size_t)hd);
        return 0;
    }
    const float mx = *M > m ? *M : m;
    *a = expf(*M - mx);
    *b = expf(m - mx);
    const float x = *L * *a, y = l * *b;
    *L = x + y;
    *M = mx;
    return 1;
}

/* The blend after plume_attn_merge_begin for columns d0 .. hd-1:
 * Oi[d] = Oi[d]·a + oi[d]·b, two products, then the sum (never fused), so
 * that every level's attn_merge gives the scalar level's bits; the SIMD
 * levels call it for the columns after their last whole vector. */
static inline void plume_attn_merge_blend(float *Oi, const float *oi, float a, float b, int d0,
                                          int hd)
{
    for (int d = d0; d < hd; d++) {
        const float x = Oi[d] * a, y = oi[d] * b;
        Oi[d] = x + y;
    }
}

typedef void (*plume_attn_partial_fn)(const float *q, int64_t q_stride, int nr, int nq,
                                      const void *k, const void *v, int64_t stride, int kv_type,
                                      const int32_t *block_table, int block_size, int n_pos0,
                                      int hd, float scale, int window, int c0, float *m, float *l,
                                      float *o);
typedef void (*plume_attn_merge_fn)(float *M, float *L, float *O, const float *m, const float *l,
                                    const float *o, int n, int hd, int64_t O_stride);

/* Most queries (rows x heads) of one pass: 16 rows of a GQA group of 8, so
 * that a tile of paged_attention.c is one pass (its K/V read once). */
#define PLUME_ATTN_TILE_Q 128

/* attn_paged_tile with this level's partial and merge; po is scratch for
 * po_floats partial outputs (at least hd).  sink: NULL, or one logit per
 * query of the nq (gpt-oss's attention sinks) that joins the softmax
 * denominator: O / (L + exp(sink - M)), the same expression as
 * paged_attention.c's split-K merge so that both give the same bits. */
static inline void plume_attn_tile_run(plume_attn_partial_fn partial, plume_attn_merge_fn merge,
                                       float *po, int po_floats, const float *q, int64_t q_stride,
                                       int nr, int nq, const void *k, const void *v, int64_t stride,
                                       int kv_type, const int32_t *block_table, int block_size,
                                       int n_pos0, int hd, float scale, int window,
                                       const float *sink, float *o, int64_t o_stride)
{
    float M[PLUME_ATTN_TILE_Q], L[PLUME_ATTN_TILE_Q], pm[PLUME_ATTN_TILE_Q], pl[PLUME_ATTN_TILE_Q];
    int qmax = po_floats / hd < PLUME_ATTN_TILE_Q ? po_floats / hd : PLUME_ATTN_TILE_Q;
    if (qmax < 1)
        qmax = 1;
    const int qc = nq < qmax ? nq : qmax; /* queries per row per pass */
    const int rc = qmax / qc;             /* rows per pass */
    for (int q0 = 0; q0 < nq; q0 += qc) {
        const int nqs = nq - q0 < qc ? nq - q0 : qc;
        for (int r0 = 0; r0 < nr; r0 += rc) {
            const int nrs = nr - r0 < rc ? nr - r0 : rc;
            for (int i = 0; i < nrs * nqs; i++)
                M[i] = -INFINITY, L[i] = 0.0f;
            const int n_max = n_pos0 + r0 + nrs - 1;
            const int lo0 = plume_attn_lo(n_pos0 + r0, window);
            for (int c0 = lo0 / PLUME_ATTN_CHUNK * PLUME_ATTN_CHUNK; c0 < n_max;
                 c0 += PLUME_ATTN_CHUNK) {
                partial(q + (size_t)r0 * q_stride + (size_t)q0 * hd, q_stride, nrs, nqs, k, v,
                        stride, kv_type, block_table, block_size, n_pos0 + r0, hd, scale, window,
                        c0, pm, pl, po);
                for (int r = 0; r < nrs; r++)
                    merge(M + r * nqs, L + r * nqs,
                          o + (size_t)(r0 + r) * o_stride + (size_t)q0 * hd, pm + r * nqs,
                          pl + r * nqs, po + (size_t)r * nqs * hd, nqs, hd, hd);
            }
            for (int r = 0; r < nrs; r++)
                for (int qi = 0; qi < nqs; qi++) {
                    const int i = r * nqs + qi;
                    const float inv =
                        1.0f / (sink ? L[i] + expf(sink[q0 + qi] - M[i]) : L[i]);
                    float *oq = o + (size_t)(r0 + r) * o_stride + (size_t)(q0 + qi) * hd;
                    for (int d = 0; d < hd; d++)
                        oq[d] *= inv;
                }
        }
    }
}

#endif
