/* attn_paged_tile (a tile of consecutive query rows of one sequence) at
 * every dispatch level this CPU has, over f32 and f16 caches with shuffled
 * blocks and odd sizes: against a double-precision reference, bit-identical
 * to attn_paged row by row, and every row independent of the tile it is
 * computed in (its size and where it starts).  Also plume_paged_attention
 * on a mixed batch (prefill runs of two sequences and decode rows) against
 * attn_paged row by row, at several thread counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cpu_test_util.h"
#include "backend/cpu/paged_attention.h"

static const plume_kernels *levels[PLUME_CPU_LEVEL_COUNT];
static int n_levels;

static int setup(void **state)
{
    (void)state;
    n_levels = tu_levels(levels);
    return 0;
}

enum { NBLK = 40, MAXHD = 256, MAXQ = 5 };

typedef struct cache {
    int bs, hd, stride, nslot;
    float *kc, *vc;    /* the values the kernels see (f16-rounded with f16) */
    uint16_t *kh, *vh; /* the f16 cache */
    int32_t table[NBLK];
} cache;

static void cache_make(cache *c, int bs, int hd, int f16)
{
    c->bs = bs;
    c->hd = hd;
    c->stride = 2 * hd + 3; /* 2 kv heads per slot and padding */
    c->nslot = NBLK * bs;
    const size_t nv = (size_t)c->nslot * c->stride;
    c->kc = malloc(sizeof(float) * nv);
    c->vc = malloc(sizeof(float) * nv);
    c->kh = malloc(2 * nv);
    c->vh = malloc(2 * nv);
    tu_fill(c->kc, nv, -2, 2);
    tu_fill(c->vc, nv, -1, 1);
    for (size_t i = 0; i < nv; i++) {
        c->kh[i] = plume_fp32_to_fp16(c->kc[i]);
        c->vh[i] = plume_fp32_to_fp16(c->vc[i]);
        if (f16) {
            c->kc[i] = plume_fp16_to_fp32(c->kh[i]);
            c->vc[i] = plume_fp16_to_fp32(c->vh[i]);
        }
    }
    for (int b = 0; b < NBLK; b++)
        c->table[b] = (b * 17 + 3) % NBLK; /* a permutation: 17 is prime to 40 */
}

static void cache_free(cache *c)
{
    free(c->kc); free(c->vc); free(c->kh); free(c->vh);
}

/* softmax(q·Kᵀ·scale)·V over the second kv head's positions 0..n_pos-1
 * (window > 0: the last window of them), in double. */
static void reference(const cache *c, const float *q, int n_pos, float scale, int window,
                      double *want)
{
    const int lo = window > 0 && n_pos > window ? n_pos - window : 0;
    tu_attn_ref(q, c->kc + c->hd, c->vc + c->hd, (size_t)c->stride, c->table, c->bs, lo, n_pos,
                c->hd, scale, -INFINITY, want);
}

static void test_tile_kernel(void **state)
{
    (void)state;
    const int bss[] = {1, 5, 16, 70};
    const int hds[] = {17, 64, 128, 256};
    const int nqs[] = {1, 3, 5};
    const int windows[] = {0, 1, 6, 64, 70, 130};
    /* (first row's key count, rows) */
    const int tiles[][2] = {{1, 1}, {1, 7}, {9, 16}, {60, 9}, {64, 3}, {63, 20}, {120, 13}, {190, 11}};
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t bi = 0; bi < sizeof bss / sizeof bss[0]; bi++)
            for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
                cache c;
                cache_make(&c, bss[bi], hds[hi], f16);
                const int hd = c.hd;
                const void *kx = f16 ? (const void *)(c.kh + hd) : (const void *)(c.kc + hd);
                const void *vx = f16 ? (const void *)(c.vh + hd) : (const void *)(c.vc + hd);
                for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
                    const int n0 = tiles[ti][0], nr = tiles[ti][1];
                    if (n0 + nr - 1 > c.nslot)
                        continue;
                    for (size_t qi = 0; qi < sizeof nqs / sizeof nqs[0]; qi++) {
                        const int nq = nqs[qi];
                        /* sliding windows whose start crosses slice and block
                         * boundaries within the tile, and other scales */
                        const int window = windows[(ti + qi) % (sizeof windows / sizeof windows[0])];
                        const float scale = (qi == 1 ? 0.6f : 1.0f) / sqrtf((float)hd);
                        const int qs = nq * hd + 2; /* row strides that are not nq*hd */
                        const int os = nq * hd + 5;
                        float *q = malloc(sizeof(float) * (size_t)nr * qs);
                        float *o = malloc(sizeof(float) * (size_t)nr * os);
                        float *o1 = malloc(sizeof(float) * (size_t)nq * hd);
                        float *o2 = malloc(sizeof(float) * (size_t)nr * os);
                        tu_fill(q, (size_t)nr * qs, -2, 2);
                        /* blocks past the last row's keys are poisoned: never read */
                        int32_t saved_table[NBLK];
                        memcpy(saved_table, c.table, sizeof c.table);
                        for (int b = (n0 + nr - 2) / c.bs + 1; b < NBLK; b++)
                            c.table[b] = -(1 << 28);
                        /* and so are those wholly before the window of the first row */
                        for (int b = 0; window > 0 && (b + 1) * c.bs <= n0 - window; b++)
                            c.table[b] = -(1 << 28);
                        for (int l = -1; l < n_levels; l++) {
                            const plume_kernels *kt = l < 0 ? plume_kernels_scalar() : levels[l];
                            memset(o, 0x7F, sizeof(float) * (size_t)nr * os);
                            kt->attn_paged_tile(q, qs, nr, nq, kx, vx, c.stride, f16, c.table, c.bs,
                                                n0, hd, scale, window, o, os);
                            for (int r = 0; r < nr; r++) {
                                /* the padding between rows is not written */
                                for (int e = nq * hd; e < os; e++) {
                                    uint32_t bits;
                                    memcpy(&bits, &o[(size_t)r * os + e], 4);
                                    assert_int_equal(bits, 0x7F7F7F7Fu);
                                }
                                /* bit-identical to attn_paged for the row alone */
                                kt->attn_paged(q + (size_t)r * qs, nq, kx, vx, c.stride, f16,
                                               c.table, c.bs, n0 + r, hd, scale, window, o1);
                                assert_memory_equal(o1, o + (size_t)r * os, sizeof(float) * nq * hd);
                                for (int h = 0; h < nq; h++) {
                                    double want[MAXHD];
                                    reference(&c, q + (size_t)r * qs + h * hd, n0 + r, scale, window, want);
                                    for (int d = 0; d < hd; d++) {
                                        const float got = o[(size_t)r * os + h * hd + d];
                                        if (!(fabsf(got - (float)want[d]) <= 2e-5f))
                                            fail_msg("attn_paged_tile %s level %s hd %d bs %d "
                                                     "window %d row %d/%d head %d: got %.9g "
                                                     "want %.9g",
                                                     f16 ? "f16" : "f32",
                                                     plume_cpu_level_name(kt->level), hd, c.bs,
                                                     window, r, nr, h, got, want[d]);
                                    }
                                }
                            }
                            /* the same rows in sub-tiles of other sizes and offsets */
                            const int splits[] = {1, 2, 3, 7};
                            for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
                                memset(o2, 0, sizeof(float) * (size_t)nr * os);
                                for (int r0 = 0, w = splits[si]; r0 < nr; r0 += w, w = w % 5 + 1) {
                                    const int n = nr - r0 < w ? nr - r0 : w;
                                    kt->attn_paged_tile(q + (size_t)r0 * qs, qs, n, nq, kx, vx,
                                                        c.stride, f16, c.table, c.bs, n0 + r0, hd,
                                                        scale, window, o2 + (size_t)r0 * os, os);
                                }
                                for (int r = 0; r < nr; r++)
                                    assert_memory_equal(o2 + (size_t)r * os, o + (size_t)r * os,
                                                        sizeof(float) * nq * hd);
                            }
                        }
                        memcpy(c.table, saved_table, sizeof c.table);
                        free(q); free(o); free(o1); free(o2);
                    }
                }
                cache_free(&c);
            }
}

/* plume_paged_attention over a batch mixing two prefill runs (one longer
 * than a tile), decode rows and a run of another sequence interleaved:
 * every row equals attn_paged of the active level for that row alone, at
 * 1, 2 and 3 threads. */
static void test_paged_attention_batch(void **state)
{
    (void)state;
    enum { NH = 6, NKV = 2, HD = 64, BS = 16, NB = 40 };
    const plume_kernels *kern = plume_kernels_active();
    for (int f16 = 0; f16 < 2; f16++) {
        const int kv_dim = NKV * HD, nslot = NB * BS;
        const size_t nv = (size_t)nslot * kv_dim;
        float *kc = malloc(sizeof(float) * nv), *vc = malloc(sizeof(float) * nv);
        uint16_t *kh = malloc(2 * nv), *vh = malloc(2 * nv);
        tu_fill(kc, nv, -2, 2);
        tu_fill(vc, nv, -1, 1);
        for (size_t i = 0; i < nv; i++) {
            kh[i] = plume_fp32_to_fp16(kc[i]);
            vh[i] = plume_fp32_to_fp16(vc[i]);
        }
        const void *kx = f16 ? (const void *)kh : (const void *)kc;
        const void *vx = f16 ? (const void *)vh : (const void *)vc;
        int32_t ta[NB], tb[NB], tc[NB];
        for (int b = 0; b < NB; b++) { /* three sequences, shuffled blocks */
            ta[b] = (b * 17 + 3) % NB;
            tb[b] = (b * 7 + 11) % NB;
            tc[b] = (b * 13 + 1) % NB;
        }
        plume_attn_row rows[80];
        int n = 0;
        for (int p = 5; p < 42; p++) /* sequence a: 37 rows, more than two tiles */
            rows[n++] = (plume_attn_row){p, ta};
        rows[n++] = (plume_attn_row){100, tb}; /* a decode row */
        for (int p = 0; p < 3; p++)            /* sequence c: a short run */
            rows[n++] = (plume_attn_row){p, tc};
        rows[n++] = (plume_attn_row){200, tb}; /* not consecutive: separate tiles */
        rows[n++] = (plume_attn_row){300, tb};
        for (int p = 301; p < 320; p++)
            rows[n++] = (plume_attn_row){p, tb};
        const int qs = NH * HD;
        float *q = malloc(sizeof(float) * (size_t)n * qs);
        float *o = malloc(sizeof(float) * (size_t)n * qs);
        float *o1 = malloc(sizeof(float) * NKV * qs);
        tu_fill(q, (size_t)n * qs, -2, 2);
        const float scale = 1.0f / sqrtf((float)HD);
        plume_attn_scratch scratch = {0};
        for (int nt = 1; nt <= 3; nt++) {
            plume_pool *pool;
            plume_error err;
            assert_int_equal(plume_pool_create(nt, &pool, &err), 0);
            for (int sub = 0; sub < 3; sub++) { /* the whole batch, and its prefix/suffix */
                const int r0 = sub == 2 ? 20 : 0, nr = sub == 1 ? 20 : n - r0;
                memset(o, 0, sizeof(float) * (size_t)n * qs);
                assert_int_equal(plume_paged_attention(pool, &scratch, q + (size_t)r0 * qs, kx, vx,
                                                       f16, kv_dim, HD, rows + r0, nr, BS, NH, NKV,
                                                       HD, scale,
                                                       0, NULL, o + (size_t)r0 * qs),
                                 0);
                for (int r = r0; r < r0 + nr; r++)
                    for (int g = 0; g < NKV; g++) {
                        const int grp = NH / NKV;
                        kern->attn_paged(q + (size_t)r * qs + g * grp * HD, grp,
                                         (const char *)kx + (f16 ? 2 : 4) * g * HD,
                                         (const char *)vx + (f16 ? 2 : 4) * g * HD, kv_dim, f16,
                                         rows[r].block_table, BS, rows[r].pos + 1, HD, scale, 0,
                                         o1);
                        assert_memory_equal(o1, o + (size_t)r * qs + g * grp * HD,
                                            sizeof(float) * grp * HD);
                    }
            }
            plume_pool_free(pool);
        }
        plume_attn_scratch_free(&scratch);
        free(q); free(o); free(o1);
        free(kc); free(vc); free(kh); free(vh);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_kernel),
        cmocka_unit_test(test_paged_attention_batch),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
