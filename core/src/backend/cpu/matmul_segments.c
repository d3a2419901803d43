/* Segmented matmuls (ops.h): a mixture-of-experts layer's experts as one
 * job.  The rows of x are quantized once; the work items are the 16-row
 * groups of every (segment, weight) pair in order, handed out in guided
 * chunks (a share of what is left, so each thread streams long runs of one
 * matrix first) and cut at pair boundaries.  A pair's kernel call is the
 * one plume_cpu_matmul_w makes, on the segment's rows of the quantized
 * activations, so every value has the same bits. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/repack.h"

/* Minimum chunk: total groups / (threads * this). */
#define SEG_CHUNKS_PER_THREAD 16

typedef struct seg_job {
    const plume_kernels *k;
    const plume_cpu_weight *const *w;
    int n_w;
    const int32_t *off;
    float *const *y;
    const int64_t *gend; /* [n_seg * n_w] cumulative row groups (empty segments add 0) */
    int64_t n_pair, total, chunk;
    plume_q8_act act;
    atomic_llong next;
} seg_job;

/* The pair whose groups contain group g (g < total): the first i with
 * gend[i] > g. */
static int64_t pair_of(const seg_job *j, int64_t g)
{
    int64_t lo = 0, hi = j->n_pair - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (j->gend[mid] > g)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Runs groups [g0, g1) of pair i. */
static void run_pair(const seg_job *j, int64_t i, int64_t g0, int64_t g1)
{
    const int64_t base = i ? j->gend[i - 1] : 0;
    const int s = (int)(i / j->n_w), jj = (int)(i % j->n_w);
    const plume_cpu_weight *w = j->w[i];
    const int64_t t0 = j->off[s], nt = j->off[s + 1] - t0;
    const int64_t r0 = (g0 - base) * PLUME_RP_ROWS;
    int64_t r1 = (g1 - base) * PLUME_RP_ROWS;
    if (r1 > w->N)
        r1 = w->N;
    const plume_q8_act a = plume_q8_act_from(&j->act, t0);
    j->k->mm_r[w->kr](w->packed + (size_t)(g0 - base) * w->group_bytes, (int)(r1 - r0), &a,
                      (int)nt, j->y[jj] + (size_t)t0 * (size_t)w->N + r0, w->N);
}

static void seg_worker(void *ctx, int ith, int nth)
{
    seg_job *j = ctx;
    (void)ith;
    int64_t g0 = atomic_load_explicit(&j->next, memory_order_relaxed);
    while (g0 < j->total) {
        int64_t c = (j->total - g0) / (4 * (int64_t)nth);
        if (c < j->chunk)
            c = j->chunk;
        if (!atomic_compare_exchange_weak_explicit(&j->next, &g0, g0 + c, memory_order_relaxed,
                                                   memory_order_relaxed))
            continue; /* g0 now holds the current value */
        const int64_t g1 = g0 + c < j->total ? g0 + c : j->total;
        for (int64_t i = pair_of(j, g0); g0 < g1; i++) {
            const int64_t e = g1 < j->gend[i] ? g1 : j->gend[i];
            if (e > g0)
                run_pair(j, i, g0, e);
            g0 = e;
        }
        g0 = atomic_load_explicit(&j->next, memory_order_relaxed);
    }
}

/* One plume_cpu_matmul_multi per non-empty segment: the path for weights
 * the repacked kernels cannot run, f32 activations, or no workspace. */
static void per_segment(plume_pool *pool, const plume_cpu_weight *const *w, int n_w,
                        int32_t n_seg, const int32_t *off, const float *x, float *const *y)
{
    float *ys[PLUME_CPU_MULTI_MAX];
    for (int32_t s = 0; s < n_seg; s++) {
        const int nt = off[s + 1] - off[s];
        if (nt <= 0)
            continue;
        const plume_cpu_weight *const *ws = w + (size_t)s * (size_t)n_w;
        for (int j0 = 0; j0 < n_w; j0 += PLUME_CPU_MULTI_MAX) {
            const int n = n_w - j0 < PLUME_CPU_MULTI_MAX ? n_w - j0 : PLUME_CPU_MULTI_MAX;
            for (int j = 0; j < n; j++)
                ys[j] = y[j0 + j] + (size_t)off[s] * (size_t)ws[j0 + j]->N;
            plume_cpu_matmul_multi(pool, ws + j0, n, x + (size_t)off[s] * (size_t)ws[0]->K,
                                   nt, ys);
        }
    }
}

void plume_cpu_matmul_segments(plume_pool *pool, const plume_cpu_weight *const *w, int n_w,
                               int32_t n_seg, const int32_t *off, const float *x,
                               float *const *y)
{
    const int32_t n_rows = off[n_seg];
    if (n_rows <= 0 || n_w <= 0)
        return;
    const int64_t n_pair = (int64_t)n_seg * n_w, K = w[0]->K;
    bool fast = !plume_cpu_f32_activations();
    for (int64_t i = 0; i < n_pair && fast; i++)
        fast = w[i]->kr >= 0 && w[i]->K == K;
    const size_t act = (plume_cpu_act_bytes(n_rows, K) + 63) / 64 * 64;
    uint8_t *ws = fast ? plume_pool_workspace(pool, act + sizeof(int64_t) * (size_t)n_pair) : NULL;
    if (!ws) {
        per_segment(pool, w, n_w, n_seg, off, x, y);
        return;
    }
    int64_t *gend = (int64_t *)(ws + act), total = 0;
    for (int64_t i = 0; i < n_pair; i++) {
        const int32_t s = (int32_t)(i / n_w);
        if (off[s + 1] > off[s])
            total += (w[i]->N + PLUME_RP_ROWS - 1) / PLUME_RP_ROWS;
        gend[i] = total;
    }
    const plume_kernels *k = plume_kernels_active();
    seg_job j = {.k = k, .w = w, .n_w = n_w, .off = off, .y = y, .gend = gend,
                 .n_pair = n_pair, .total = total};
    const int nth = plume_pool_threads(pool);
    j.chunk = (total + (int64_t)nth * SEG_CHUNKS_PER_THREAD - 1) /
              ((int64_t)nth * SEG_CHUNKS_PER_THREAD);
    if (j.chunk < 1)
        j.chunk = 1;
    plume_cpu_quantize_rows(k, pool, x, n_rows, K, ws, &j.act);
    atomic_init(&j.next, 0);
    plume_pool_run(pool, seg_worker, &j);
}
