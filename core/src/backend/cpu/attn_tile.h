/* What every dispatch level's attn_paged_tile shares (dispatch.h): the
 * first key a row attends to, and the driver that runs a tile as passes of
 * rows x queries, each the in-order merge of the level's attn_partial over
 * the chunks, then normalized.  Static inline: each kernel file compiles it
 * with its own partial and merge. */
#ifndef PLUME_CPU_ATTN_TILE_H
#define PLUME_CPU_ATTN_TILE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/dispatch.h"

/* The first position a query that sees n_pos keys attends to: with a
 * sliding window (window > 0) only the last window keys, else all. */
static inline int plume_attn_lo(int n_pos, int window)
{
    return window > 0 && n_pos > window ? n_pos - window : 0;
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
