/* Attention at depth (up to 8k keys), every dispatch level this CPU has,
 * f32 / f16 / int8 caches, GQA groups 1, 3, 4 and 8:
 *   - attn_paged (decode rows) and attn_paged_tile (prefill tiles) against
 *     a float64 reference over the values the cache holds, within the
 *     worst-case bound derived below;
 *   - plume_paged_attention at 1-4 threads, split-K (one decode row or a
 *     short tile over many chunks) and unsplit (many tiles), bit-identical
 *     to the active level's attn_paged for each row alone;
 *   - at every level, one row's bits alone, inside prefill tiles and split
 *     into chunk partials merged in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cpu_test_util.h"
#include "backend/cpu/paged_attention.h"

enum { NKV = 2, HD = 64, BS = 16, NPOS = 8192, NBLK = NPOS / BS, MAXG = 8 };

static const plume_kernels *levels[PLUME_CPU_LEVEL_COUNT];
static int n_levels;

/* The cache in the three storage types (kv head h of slot s at s*stride +
 * h*head_stride elements) and the values each holds, as float. */
typedef struct cache {
    float *kf, *vf;          /* f32 cache */
    uint16_t *kh, *vh;       /* f16 */
    int8_t *kq, *vq;         /* int8: per (slot, head) HD values then an f32 scale */
    float *kval[3], *vval[3]; /* [slot][NKV*HD] values held by each type */
    int32_t table[NBLK];
} cache;

#define I8_HEAD ((int)PLUME_KV_I8_SCALE_AT(HD) + 4)

static void quant_i8(const float *x, int8_t *dst, float *deq)
{
    float amax = 0;
    for (int d = 0; d < HD; d++)
        amax = fmaxf(amax, fabsf(x[d]));
    const float s = amax / 127, id = amax > 0 ? 127 / amax : 0;
    for (int d = 0; d < HD; d++) {
        dst[d] = (int8_t)fmaxf(-127, fminf(127, nearbyintf(x[d] * id)));
        deq[d] = (float)dst[d] * s;
    }
    memcpy(dst + PLUME_KV_I8_SCALE_AT(HD), &s, 4);
}

static void cache_make(cache *c)
{
    const size_t nv = (size_t)NPOS * NKV * HD;
    c->kf = malloc(4 * nv);
    c->vf = malloc(4 * nv);
    c->kh = malloc(2 * nv);
    c->vh = malloc(2 * nv);
    c->kq = malloc((size_t)NPOS * NKV * I8_HEAD);
    c->vq = malloc((size_t)NPOS * NKV * I8_HEAD);
    for (int t = 0; t < 3; t++) {
        c->kval[t] = malloc(4 * nv);
        c->vval[t] = malloc(4 * nv);
    }
    tu_fill(c->kf, nv, -1, 1);
    tu_fill(c->vf, nv, -1, 1);
    for (size_t i = 0; i < nv; i++) {
        c->kh[i] = plume_fp32_to_fp16(c->kf[i]);
        c->vh[i] = plume_fp32_to_fp16(c->vf[i]);
        c->kval[0][i] = c->kf[i];
        c->vval[0][i] = c->vf[i];
        c->kval[1][i] = plume_fp16_to_fp32(c->kh[i]);
        c->vval[1][i] = plume_fp16_to_fp32(c->vh[i]);
    }
    for (size_t sh = 0; sh < (size_t)NPOS * NKV; sh++) {
        quant_i8(c->kf + sh * HD, c->kq + sh * I8_HEAD, c->kval[2] + sh * HD);
        quant_i8(c->vf + sh * HD, c->vq + sh * I8_HEAD, c->vval[2] + sh * HD);
    }
    for (int b = 0; b < NBLK; b++)
        c->table[b] = (int32_t)(((int64_t)b * 389 + 7) % NBLK); /* 389 is prime to 512 */
}

static void cache_free(cache *c)
{
    free(c->kf); free(c->vf); free(c->kh); free(c->vh); free(c->kq); free(c->vq);
    for (int t = 0; t < 3; t++) {
        free(c->kval[t]);
        free(c->vval[t]);
    }
}

/* Kernel arguments for type t and kv head h: base pointers, elements per
 * slot and per head. */
static const void *kptr(const cache *c, int t, int h)
{
    return t == 0 ? (const void *)(c->kf + h * HD) : t == 1 ? (const void *)(c->kh + h * HD)
                                                             : (const void *)(c->kq + h * I8_HEAD);
}
static const void *vptr(const cache *c, int t, int h)
{
    return t == 0 ? (const void *)(c->vf + h * HD) : t == 1 ? (const void *)(c->vh + h * HD)
                                                             : (const void *)(c->vq + h * I8_HEAD);
}
static int64_t stride_of(int t) { return t == 2 ? (int64_t)NKV * I8_HEAD : NKV * HD; }
static int64_t head_stride_of(int t) { return t == 2 ? I8_HEAD : HD; }

/* softmax(q·k·scale)·v over positions 0..n_pos-1 of kv head h, in double,
 * and the bound on a float result: with u = 2^-24, each score's worst-case
 * rounding is δs = hd·u·scale·Σ_d|q_d k_d| (≤ 2δs on a score difference),
 * which moves the output by at most 2δs·max|v|; the accumulation of n
 * weighted values through slices, chunk merges and rescaling adds at most
 * (n + 2·hd)·u·max|v| (γ_n of a sum of n terms of weights ≤ 1 divided by
 * a sum ≥ 1).  Returns that bound. */
static double reference(const cache *c, int t, int h, const float *q, int n_pos, float scale,
                        double *want)
{
    const float *kv = c->kval[t] + h * HD, *vv = c->vval[t] + h * HD;
    tu_attn_ref(q, kv, vv, NKV * HD, c->table, BS, 0, n_pos, HD, scale, -INFINITY, want);
    double ds = 0, vmax = 0;
    for (int p = 0; p < n_pos; p++) {
        const size_t slot = (size_t)c->table[p / BS] * BS + p % BS;
        const float *kr = kv + slot * NKV * HD, *vr = vv + slot * NKV * HD;
        double sa = 0;
        for (int d = 0; d < HD; d++) {
            sa += fabs((double)q[d] * kr[d]);
            vmax = fmax(vmax, fabs(vr[d]));
        }
        ds = fmax(ds, HD * 0x1p-24 * scale * sa);
    }
    return vmax * (4 * ds + (n_pos + 2.0 * HD) * 0x1p-24);
}

static int setup(void **state)
{
    static cache c;
    n_levels = tu_levels(levels);
    cache_make(&c);
    *state = &c;
    return 0;
}

static int teardown(void **state)
{
    cache_free(*state);
    return 0;
}

/* Decode rows and a tile at depth, every level, type and group. */
static void test_depth_reference(void **state)
{
    const cache *c = *state;
    const int groups[] = {1, 3, 4, 8};
    const int depths[] = {257, 1000, 4096, NPOS};
    const float scale = 0.5f; /* peaked: a missed or doubled chunk shows */
    float q[4 * MAXG * HD], o[4 * MAXG * HD], o1[MAXG * HD];
    tu_fill(q, sizeof q / sizeof q[0], -1, 1);
    for (int l = -1; l < n_levels; l++) {
        const plume_kernels *kt = l < 0 ? plume_kernels_scalar() : levels[l];
        for (int t = 0; t < 3; t++)
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
                const int g = groups[gi], h = 1;
                const int n_pos = depths[(gi + (size_t)t + (size_t)(l + 1)) % 4];
                const int nr = n_pos == NPOS ? 1 : 4; /* a tile of nr rows ending at n_pos */
                const int n0 = n_pos - nr + 1;
                kt->attn_paged_tile(q, g * HD, nr, g, kptr(c, t, h), vptr(c, t, h), stride_of(t), t,
                                    c->table, BS, n0, HD, scale, 0, o, g * HD);
                for (int r = 0; r < nr; r++) {
                    kt->attn_paged(q + (size_t)r * g * HD, g, kptr(c, t, h), vptr(c, t, h),
                                   stride_of(t), t, c->table, BS, n0 + r, HD, scale, 0, o1);
                    assert_memory_equal(o1, o + (size_t)r * g * HD, sizeof(float) * g * HD);
                    for (int qi = 0; qi < g; qi++) {
                        double want[HD];
                        const double bound = reference(c, t, h, q + (size_t)(r * g + qi) * HD,
                                                       n0 + r, scale, want);
                        for (int d = 0; d < HD; d++)
                            if (!(fabs(o1[qi * HD + d] - want[d]) <= bound))
                                fail_msg("level %s type %d group %d depth %d query %d dim %d: "
                                         "got %.9g want %.9g (bound %.3g)",
                                         plume_cpu_level_name(kt->level), t, g, n0 + r, qi, d,
                                         o1[qi * HD + d], want[d], bound);
                    }
                }
            }
    }
}

/* Every level, type and group (1, 3, 5: a block of 4 queries and a
 * remainder, 8), with and without a sliding window: one row's bits are the
 * same alone (attn_paged), inside prefill tiles of 16 and 5 rows starting
 * before it (attn_paged_tile), and split (attn_partial of its chunks,
 * computed last chunk first, then attn_merge in chunk order and O / L). */
static void test_row_tile_split_bits(void **state)
{
    const cache *c = *state;
    const int groups[] = {1, 3, 5, 8};
    const int windows[] = {0, 700};
    enum { NR = 16, ROW = 11, POS0 = 2000 }; /* the row: position POS0 + ROW */
    const int n_pos = POS0 + ROW + 1; /* keys it sees */
    const int h = 1;
    float *q = malloc(sizeof(float) * NR * MAXG * HD), *ot = malloc(sizeof(float) * NR * MAXG * HD);
    float o1[MAXG * HD], os[MAXG * HD];
    const int n_ch = (n_pos + PLUME_ATTN_CHUNK - 1) / PLUME_ATTN_CHUNK;
    float *pm = malloc(sizeof(float) * (size_t)n_ch * MAXG), *pl = malloc(sizeof(float) * (size_t)n_ch * MAXG);
    float *po = malloc(sizeof(float) * (size_t)n_ch * MAXG * HD);
    for (int l = -1; l < n_levels; l++) {
        const plume_kernels *kt = l < 0 ? plume_kernels_scalar() : levels[l];
        for (int t = 0; t < 3; t++)
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
                for (size_t wi = 0; wi < sizeof windows / sizeof windows[0]; wi++) {
                    const int g = groups[gi], w = windows[wi], qs = g * HD;
                    tu_fill(q, (size_t)NR * qs, -2, 2);
                    const float *qr = q + (size_t)ROW * qs;
                    kt->attn_paged(qr, g, kptr(c, t, h), vptr(c, t, h), stride_of(t), t, c->table,
                                   BS, n_pos, HD, 0.125f, w, o1);
                    /* tiles: rows 0..15 and rows 9..13 */
                    kt->attn_paged_tile(q, qs, NR, g, kptr(c, t, h), vptr(c, t, h), stride_of(t), t,
                                        c->table, BS, POS0 + 1, HD, 0.125f, w, ot, qs);
                    if (memcmp(o1, ot + (size_t)ROW * qs, sizeof(float) * (size_t)qs))
                        fail_msg("level %s type %d group %d window %d: the row in a 16-row tile "
                                 "differs from the row alone",
                                 plume_cpu_level_name(kt->level), t, g, w);
                    kt->attn_paged_tile(q + (size_t)9 * qs, qs, 5, g, kptr(c, t, h), vptr(c, t, h),
                                        stride_of(t), t, c->table, BS, POS0 + 10, HD, 0.125f, w, ot,
                                        qs);
                    if (memcmp(o1, ot + (size_t)(ROW - 9) * qs, sizeof(float) * (size_t)qs))
                        fail_msg("level %s type %d group %d window %d: the row in a 5-row tile "
                                 "differs from the row alone",
                                 plume_cpu_level_name(kt->level), t, g, w);
                    /* split: its chunks' partials, last first, merged in order */
                    const int c_first = (w > 0 && n_pos > w ? n_pos - w : 0) / PLUME_ATTN_CHUNK;
                    for (int ch = n_ch - 1; ch >= c_first; ch--)
                        kt->attn_partial(qr, qs, 1, g, kptr(c, t, h), vptr(c, t, h), stride_of(t), t,
                                         c->table, BS, n_pos, HD, 0.125f, w, ch * PLUME_ATTN_CHUNK,
                                         pm + ch * g, pl + ch * g, po + (size_t)ch * g * HD);
                    float M[MAXG], L[MAXG];
                    for (int i = 0; i < g; i++)
                        M[i] = -INFINITY, L[i] = 0;
                    for (int ch = c_first; ch < n_ch; ch++)
                        kt->attn_merge(M, L, os, pm + ch * g, pl + ch * g, po + (size_t)ch * g * HD,
                                       g, HD, HD);
                    for (int i = 0; i < g; i++) {
                        const float inv = 1.0f / L[i];
                        for (int d = 0; d < HD; d++)
                            os[i * HD + d] *= inv;
                    }
                    if (memcmp(o1, os, sizeof(float) * (size_t)qs))
                        fail_msg("level %s type %d group %d window %d: the row split by chunks "
                                 "differs from the row alone",
                                 plume_cpu_level_name(kt->level), t, g, w);
                }
    }
    free(q);
    free(ot);
    free(pm);
    free(pl);
    free(po);
}

/* plume_paged_attention split and unsplit at 1-4 threads: each row the
 * bits of the active level's attn_paged for it alone. */
static void test_split_threads(void **state)
{
    const cache *c = *state;
    const plume_kernels *kern = plume_kernels_active();
    int32_t table2[NBLK];
    for (int b = 0; b < NBLK; b++)
        table2[b] = c->table[NBLK - 1 - b];
    /* batches: one decode row at depth (split); two decode rows of two
     * sequences and a 5-row tile (split); 40 tiles (unsplit) */
    plume_attn_row rows[700];
    int n_rows[3], n = 0;
    rows[n++] = (plume_attn_row){NPOS - 1, c->table};
    n_rows[0] = n;
    rows[n++] = (plume_attn_row){5000, c->table};
    rows[n++] = (plume_attn_row){3333, table2};
    for (int p = 700; p < 705; p++)
        rows[n++] = (plume_attn_row){p, table2};
    n_rows[1] = n - n_rows[0];
    for (int p = 2000; p < 2640; p++)
        rows[n++] = (plume_attn_row){p, c->table};
    n_rows[2] = n - n_rows[0] - n_rows[1];
    const int g = 3, nh = NKV * g, qs = nh * HD;
    float *q = malloc(sizeof(float) * (size_t)n * qs), *o = malloc(sizeof(float) * (size_t)n * qs);
    float o1[MAXG * HD];
    tu_fill(q, (size_t)n * qs, -1, 1);
    plume_attn_scratch scratch = {0};
    for (int t = 0; t < 3; t++)
        for (int nt = 1; nt <= 4; nt++) {
            plume_pool *pool;
            plume_error err;
            assert_int_equal(plume_pool_create(nt, &pool, &err), 0);
            for (int b = 0, r0 = 0; b < 3; r0 += n_rows[b], b++) {
                assert_int_equal(plume_paged_attention(pool, &scratch, q + (size_t)r0 * qs,
                                                       kptr(c, t, 0), vptr(c, t, 0), t,
                                                       stride_of(t), head_stride_of(t), rows + r0,
                                                       n_rows[b], BS, nh, NKV, HD, 0.125f, 0, NULL,
                                                       o + (size_t)r0 * qs),
                                 0);
                /* every row of the small batches, a sample of the big one */
                for (int r = r0; r < r0 + n_rows[b]; r += b == 2 ? 37 : 1)
                    for (int h = 0; h < NKV; h++) {
                        kern->attn_paged(q + (size_t)r * qs + h * g * HD, g, kptr(c, t, h),
                                         vptr(c, t, h), stride_of(t), t, rows[r].block_table, BS,
                                         rows[r].pos + 1, HD, 0.125f, 0, o1);
                        if (memcmp(o1, o + (size_t)r * qs + h * g * HD, sizeof(float) * g * HD))
                            fail_msg("type %d threads %d batch %d row %d (pos %d) kv head %d: "
                                     "differs from the row alone",
                                     t, nt, b, r, rows[r].pos, h);
                    }
            }
            plume_pool_free(pool);
        }
    plume_attn_scratch_free(&scratch);
    free(q);
    free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_depth_reference),
        cmocka_unit_test(test_split_threads),
        cmocka_unit_test(test_row_tile_split_bits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
