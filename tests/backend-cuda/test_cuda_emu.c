/* backend-cuda's kernel bodies (plugins/backend-cuda/cuda_bodies.h,
 * included as C with -DCK_EMU) run on the CPU for every index the device
 * launch would give them — warps as 32 lanes with the same butterfly
 * reduction — over steps packed by the plugin's own ck_step_pack, and
 * checked against the cpu backend (plume_builtin_cpu) on random inputs:
 * the quantized block walk (exactly plume_dequantize), the row matmul
 * (within the cpu's int8-activation error, and bit-identical whatever the
 * row grouping), rmsnorm, rope (both pair styles), kv_store (the same
 * cache bytes, f32 and f16), paged attention over shuffled block tables
 * (f32/f16 cache, GQA, scale, sliding window), embedding, swiglu, add,
 * add_bias, gather_out_rows, the f16 slab cuBLAS is given, the dummy
 * weights' fill (the host path's bytes for every type), attention sinks,
 * and the mixture-of-experts ops (gather_rows, scatter_add_rows with the
 * plugin's own scatter plan, the segmented row matmul against the row
 * kernel alone, the clamped SwiGLU).  Needs no
 * GPU and no CUDA toolkit. */
#define CK_EMU 1

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu/cpu_test_util.h"
#include "../support/check.h"
#include "cuda_bodies.h"
#include "cuda_step.h"
#include "plume/backend.h"
#include "runtime/builtin.h"

static int failures;

static const plume_backend_vtable *CPU = &plume_builtin_cpu;
static plume_backend *cpu_b;
static plume_error err;

/* The largest |a - b| over n values. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) /* NaN counts as a difference */
            m = isnan(d) ? INFINITY : d;
    }
    return m;
}

static plume_bweight *cpu_weight(uint32_t type, int n_dims, int64_t ne0, int64_t ne1,
                                 const void *data, size_t nbytes)
{
    plume_tensor t = {"t", type, n_dims, {ne0, ne1, 1, 1}, data, nbytes};
    plume_bweight *w = NULL;
    if (CPU->weight_prepare(cpu_b, &t, &w, &err)) {
        printf("FAIL: cpu weight_prepare: %s\n", err.msg);
        exit(1);
    }
    return w;
}

/* ---- the block walk and the row matmul ---- */

/* The row kernels' warp_store: each of nt rows' butterfly over the 32
 * lanes' shares, to y[(t0 + j) * n + o]. */
static void emu_store(float acc[CK_WARP][CK_GEMV_ROWS], int nt, float *y, int64_t t0, int64_t n,
                      int64_t o)
{
    for (int j = 0; j < nt; j++) {
        float v[CK_WARP];
        for (int l = 0; l < CK_WARP; l++)
            v[l] = acc[l][j];
        ck_emu_warp_sum(v);
        y[(t0 + j) * n + o] = v[0];
    }
}

/* The warp kernel k_gemv for every (output, row group), as launched. */
static void emu_gemv(const ck_weight *W, const float *x, int32_t n_rows, float *y)
{
    for (int64_t o = 0; o < W->N; o++)
        for (int64_t t0 = 0; t0 < n_rows; t0 += CK_GEMV_ROWS) {
            const int nt = n_rows - t0 < CK_GEMV_ROWS ? (int)(n_rows - t0) : CK_GEMV_ROWS;
            float acc[CK_WARP][CK_GEMV_ROWS];
            for (int l = 0; l < CK_WARP; l++)
                ck_gemv_lane(W, x, o, t0, nt, l, acc[l]);
            emu_store(acc, nt, y, t0, W->N, o);
        }
}

/* k_quant_q8 over every block of x, then k_gemv_q8 for every (output,
 * row group), as launched. */
static void emu_gemv_q8(const ck_weight *W, const float *x, int32_t n_rows, float *y)
{
    const int64_t nb = W->K / 32;
    int8_t *q = malloc((size_t)n_rows * W->K);
    float *d = malloc(sizeof(float) * n_rows * nb), *s = malloc(sizeof(float) * n_rows * nb);
    for (int64_t idx = 0; idx < n_rows * nb; idx++)
        ck_quant_q8(x, W->K, q, d, s, idx);
    for (int64_t o = 0; o < W->N; o++)
        for (int64_t t0 = 0; t0 < n_rows; t0 += CK_GEMV_ROWS) {
            const int nt = n_rows - t0 < CK_GEMV_ROWS ? (int)(n_rows - t0) : CK_GEMV_ROWS;
            float acc[CK_WARP][CK_GEMV_ROWS];
            for (int l = 0; l < CK_WARP; l++)
                ck_gemv_q8_lane(W, q, d, s, o, t0, nt, l, acc[l]);
            emu_store(acc, nt, y, t0, W->N, o);
        }
    free(q), free(d), free(s);
}

/* activations: int8: the same integer block sums as the cpu backend's
 * int8 matmul (equal quantized x), so the two differ only by the f32
 * rounding of the block terms and their order; a row alone gives the bits
 * it has in a batch. */
static void test_matmul_q8(void)
{
    const uint32_t types[] = {PLUME_DTYPE_Q4_0, PLUME_DTYPE_Q4_1, PLUME_DTYPE_Q8_0};
    enum { K = 512, N = 29, T = 7 };
    for (size_t ti = 0; ti < 3; ti++) {
        const uint32_t type = types[ti];
        size_t rb;
        uint8_t *wd = tu_weights(type, K, N, &rb);
        const ck_weight W = {wd, K, N, (int64_t)rb, (int)type};
        float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N);
        float *yc = malloc(sizeof(float) * T * N), *y1 = malloc(sizeof(float) * N), row[K];
        tu_fill(x, (size_t)T * K, -1, 1);
        x[5] = 0; /* a block with a zero, and one all zeros (d = 0) */
        memset(x + 64, 0, sizeof(float) * 32);
        emu_gemv_q8(&W, x, T, y);
        plume_bweight *cw = cpu_weight(type, 2, K, N, wd, rb * N);
        const plume_bweight *cws[1] = {cw};
        plume_buf *ys[1] = {(plume_buf *)yc};
        CHECK(CPU->matmul(cpu_b, cws, 1, (const plume_buf *)x, T, ys, &err) == 0, "cpu matmul: %s",
              err.msg);
        int bad = 0;
        for (int t = 0; t < T; t++) {
            emu_gemv_q8(&W, x + (size_t)t * K, 1, y1);
            bad += memcmp(y1, y + (size_t)t * N, sizeof(float) * N) != 0;
            for (int o = 0; o < N; o++) {
                plume_dequantize((plume_dtype)type, wd + (size_t)o * rb, row, K);
                double absum = 0;
                for (int i = 0; i < K; i++)
                    absum += fabs((double)row[i] * x[(size_t)t * K + i]);
                /* |each block term| <= ~1.02 Σ|w x| over the block; a few
                 * roundings per block and one add per block on each side */
                const double tol = 8.0 * (K / 32) * 0x1p-24 * absum * 1.1 + 1e-30;
                const double dd = fabs((double)y[(size_t)t * N + o] - yc[(size_t)t * N + o]);
                if (!(dd <= tol)) {
                    if (bad < 3)
                        printf("# %s y[%d][%d]: emu %.9g cpu %.9g (tol %.3g)\n",
                               plume_dtype_name(type), t, o, y[(size_t)t * N + o],
                               yc[(size_t)t * N + o], tol);
                    bad++;
                }
            }
        }
        CHECK(bad == 0, "int8 matmul %s: %d rows or values differ", plume_dtype_name(type), bad);
        CPU->weight_free(cpu_b, cw);
        free(x), free(y), free(yc), free(y1), free(wd);
    }
}

static void test_matmul(void)
{
    const uint32_t types[] = {PLUME_DTYPE_Q4_0, PLUME_DTYPE_Q4_1, PLUME_DTYPE_Q8_0, PLUME_DTYPE_F16,
                              PLUME_DTYPE_MXFP4, PLUME_DTYPE_F32, PLUME_DTYPE_BF16};
    enum { K = 256, N = 37, T = 9 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti];
        size_t rb;
        uint8_t *wd = tu_weights(type, K, N, &rb);
        const ck_weight W = {wd, K, N, (int64_t)rb, (int)type};
        /* the block walk is plume_dequantize, element for element */
        float row[K];
        int walk_bad = 0;
        for (int64_t o = 0; o < N; o++) {
            plume_dequantize((plume_dtype)type, wd + o * rb, row, K);
            for (int64_t i = 0; i < K; i++)
                walk_bad += ck_w_at(&W, o, i) != row[i];
            for (int64_t c = 0; c < K / 32; c++) { /* the row matmul's chunks: the same values */
                float w[32];
                ck_w_chunk(&W, o, c, 32, w);
                walk_bad += memcmp(w, row + 32 * c, sizeof w) != 0;
            }
        }
        CHECK(walk_bad == 0, "%s: %d elements of the block walk differ from plume_dequantize",
              plume_dtype_name(type), walk_bad);
        /* the slab handed to cuBLAS: f16 of the walk, rows [o0, o0 + 5) */
        uint16_t slab[5 * K];
        for (int64_t idx = 0; idx < 5 * K; idx++)
            ck_dequant_slab(&W, 3, slab, idx);
        int slab_bad = 0;
        for (int64_t idx = 0; idx < 5 * K; idx++)
            slab_bad += slab[idx] != plume_fp32_to_fp16(ck_w_at(&W, 3 + idx / K, idx % K));
        CHECK(slab_bad == 0, "%s: dequantized slab wrong at %d elements", plume_dtype_name(type),
              slab_bad);

        float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N);
        float *yc = malloc(sizeof(float) * T * N), *y1 = malloc(sizeof(float) * N);
        tu_fill(x, (size_t)T * K, -1, 1);
        emu_gemv(&W, x, T, y);
        plume_bweight *cw = cpu_weight(type, 2, K, N, wd, rb * N);
        const plume_bweight *cws[1] = {cw};
        plume_buf *ys[1] = {(plume_buf *)yc};
        CHECK(CPU->matmul(cpu_b, cws, 1, (const plume_buf *)x, T, ys, &err) == 0, "cpu matmul: %s",
              err.msg);
        for (int t = 0; t < T; t++) {
            /* alone: the same bits as in the batch of T */
            emu_gemv(&W, x + (size_t)t * K, 1, y1);
            CHECK(memcmp(y1, y + (size_t)t * N, sizeof(float) * N) == 0,
                  "%s: row %d alone differs from the same row in a batch of %d",
                  plume_dtype_name(type), t, T);
            for (int64_t o = 0; o < N; o++) {
                plume_dequantize((plume_dtype)type, wd + o * rb, row, K);
                /* exact sum, and the bound: the cpu's int8 activations (half a
                 * step of amax/127 per 32-block) plus f32 accumulation */
                double exact = 0, absum = 0, q8 = 0;
                for (int b = 0; b < K / 32; b++) {
                    double amax = 0, wabs = 0;
                    for (int i = 32 * b; i < 32 * b + 32; i++) {
                        const double xi = x[(size_t)t * K + i];
                        exact += (double)row[i] * xi;
                        absum += fabs((double)row[i] * xi);
                        amax = fmax(amax, fabs(xi));
                        wabs += fabs(row[i]);
                    }
                    q8 += amax / 127.0 / 2.0 * wabs;
                }
                const double acc_tol = 2.0 * K * 0x1p-24 * absum + 1e-30;
                const float ye = y[(size_t)t * N + o], yv = yc[(size_t)t * N + o];
                CHECK(fabs(ye - exact) <= acc_tol, "%s: y[%d][%lld] = %.9g, exact %.9g (tol %.3g)",
                      plume_dtype_name(type), t, (long long)o, ye, exact, acc_tol);
                CHECK(fabs(ye - yv) <= q8 * 1.01 + 2 * acc_tol,
                      "%s: y[%d][%lld] = %.9g, cpu backend %.9g (tol %.3g)",
                      plume_dtype_name(type), t, (long long)o, ye, yv, q8 * 1.01 + 2 * acc_tol);
            }
        }
        CPU->weight_free(cpu_b, cw);
        free(x), free(y), free(yc), free(y1), free(wd);
    }
}

/* Float rows whose K is not a multiple of 32 (the row matmul's last chunk
 * is partial): within the f32 accumulation bound of the exact sum, and a
 * row alone the bits it has in a batch. */
static void test_matmul_tail(void)
{
    enum { K = 72, N = 5, T = 6 };
    const uint32_t types[] = {PLUME_DTYPE_F32, PLUME_DTYPE_F16, PLUME_DTYPE_BF16};
    for (size_t ti = 0; ti < 3; ti++) {
        size_t rb;
        uint8_t *wd = tu_weights(types[ti], K, N, &rb);
        const ck_weight W = {wd, K, N, (int64_t)rb, (int)types[ti]};
        float x[T * K], y[T * N], y1[N], row[K];
        tu_fill(x, (size_t)T * K, -1, 1);
        emu_gemv(&W, x, T, y);
        int bad = 0;
        for (int t = 0; t < T; t++) {
            emu_gemv(&W, x + (size_t)t * K, 1, y1);
            bad += memcmp(y1, y + (size_t)t * N, sizeof y1) != 0;
            for (int o = 0; o < N; o++) {
                plume_dequantize((plume_dtype)types[ti], wd + (size_t)o * rb, row, K);
                double exact = 0, absum = 0;
                for (int i = 0; i < K; i++) {
                    exact += (double)row[i] * x[(size_t)t * K + i];
                    absum += fabs((double)row[i] * x[(size_t)t * K + i]);
                }
                bad += !(fabs(y[(size_t)t * N + o] - exact) <= 2.0 * K * 0x1p-24 * absum + 1e-30);
            }
        }
        CHECK(bad == 0, "%s, K %d: %d rows or values wrong", plume_dtype_name(types[ti]), K, bad);
        free(wd);
    }
}

/* ---- a step over two sequences with shuffled block tables ---- */

enum { BS = 16, NB = 24, NA = 37, NBR = 21, NROW = NA + NBR, MAXH = 6, NKV = 2, HDMAX = 72 };

typedef struct step_data {
    int32_t tokens[NROW], pos[NROW], slots[NROW], out_rows[NROW];
    int32_t ta[NB / 2], tb[NB / 2];
    plume_step_seq seqs[2];
    plume_step st;
    int32_t packed[4 * NROW + NROW + NB];
    ck_step S;
} step_data;

/* Sequence A: positions 0 .. NA-1; sequence B: positions 4 .. 4+NBR-1
 * (a later prefill chunk); rows of B first in the tables' interleave. */
static void make_step(step_data *d, int32_t n_vocab)
{
    for (int i = 0; i < NB / 2; i++) {
        d->ta[i] = (i * 7 + 3) % (NB / 2) * 2;
        d->tb[i] = (i * 5 + 1) % (NB / 2) * 2 + 1;
    }
    for (int r = 0; r < NROW; r++) {
        const int a = r < NA;
        d->pos[r] = a ? r : 4 + r - NA;
        const int32_t *t = a ? d->ta : d->tb;
        d->slots[r] = t[d->pos[r] / BS] * BS + d->pos[r] % BS;
        d->tokens[r] = (int32_t)(tu_u32() % (uint32_t)n_vocab);
    }
    int n_out = 0;
    for (int r = 0; r < NROW; r += 3)
        d->out_rows[n_out++] = r;
    d->seqs[0] = (plume_step_seq){0, NA, 0, d->ta, (NA + BS - 1) / BS};
    d->seqs[1] = (plume_step_seq){NA, NBR, 4, d->tb, (4 + NBR + BS - 1) / BS};
    d->st = (plume_step){NROW, d->tokens, d->pos, d->slots, d->seqs, 2, d->out_rows, n_out, NULL};
    CHECK(ck_step_size(&d->st) <= sizeof d->packed / sizeof d->packed[0], "packed step too big");
    ck_step_pack(&d->st, d->packed);
    d->S = ck_step_view(d->packed, &d->st);
    for (int r = 0; r < NROW; r++) { /* the view gives back what was packed */
        const int32_t *t = r < NA ? d->ta : d->tb;
        CHECK(d->S.tokens[r] == d->tokens[r] && d->S.pos[r] == d->pos[r] &&
                  d->S.slots[r] == d->slots[r] &&
                  ck_slot_of(&d->S, r, d->pos[r], BS) == t[d->pos[r] / BS] * BS + d->pos[r] % BS,
              "packed step row %d", r);
    }
}

static void emu_attention(const ck_step *S, const ck_attn *A, int32_t n_rows)
{
    for (int64_t r = 0; r < n_rows; r++)
        for (int32_t h = 0; h < A->n_head; h++) {
            int32_t p0, p1;
            ck_attn_range(A, S, r, &p0, &p1);
            ck_attn_lane L[CK_WARP];
            for (int l = 0; l < CK_WARP; l++)
                ck_attn_init(&L[l]);
            for (int32_t p = p0; p <= p1; p++) {
                const int64_t slot = ck_slot_of(S, r, p, A->block_size);
                float dot[CK_WARP];
                for (int l = 0; l < CK_WARP; l++)
                    dot[l] = ck_attn_dot_lane(A, r, h, slot, l);
                ck_emu_warp_sum(dot);
                for (int l = 0; l < CK_WARP; l++)
                    ck_attn_update(A, &L[l], h, slot, l, dot[l]);
            }
            for (int l = 0; l < CK_WARP; l++)
                ck_attn_write(A, &L[l], r, h, l);
        }
}

static void test_kv_and_attention(void)
{
    step_data d;
    make_step(&d, 1000);
    const int hds[] = {64, 40, 72};
    for (int hi = 0; hi < 3; hi++)
        for (int f16 = 0; f16 <= 1; f16++) {
            const int HD = hds[hi], kv_dim = NKV * HD;
            plume_kv_pool pool = {.n_layer = 1, .n_blocks = NB, .block_size = BS, .n_head_kv = NKV,
                                  .head_dim = HD, .dtype = f16 ? PLUME_KV_F16 : PLUME_KV_F32};
            CHECK(CPU->kv_alloc(cpu_b, &pool, &err) == 0, "kv_alloc: %s", err.msg);
            const size_t bytes = pool.layer_stride;
            uint8_t *ek = calloc(1, bytes), *ev = calloc(1, bytes);
            memset(pool.k, 0, bytes);
            memset(pool.v, 0, bytes);
            float *k = malloc(sizeof(float) * NROW * kv_dim), *v = malloc(sizeof(float) * NROW * kv_dim);
            tu_fill(k, (size_t)NROW * kv_dim, -2, 2);
            tu_fill(v, (size_t)NROW * kv_dim, -1, 1);
            for (int64_t idx = 0; idx < (int64_t)NROW * kv_dim; idx++)
                ck_kv_store(&d.S, ek, ev, f16, kv_dim, k, v, kv_dim, idx);
            CHECK(CPU->kv_store(cpu_b, &d.st, &pool, 0, (plume_buf *)k, (plume_buf *)v, &err) == 0,
                  "cpu kv_store: %s", err.msg);
            CHECK(memcmp(ek, pool.k, bytes) == 0 && memcmp(ev, pool.v, bytes) == 0,
                  "kv_store (hd %d, %s): cache bytes differ from the cpu backend's", HD,
                  f16 ? "f16" : "f32");
            float *q = malloc(sizeof(float) * NROW * MAXH * HD);
            float *oe = malloc(sizeof(float) * NROW * MAXH * HD), *oc = malloc(sizeof(float) * NROW * MAXH * HD);
            tu_fill(q, (size_t)NROW * MAXH * HD, -2, 2);
            /* gpt-oss's sinks: one logit per query head, from well below to
             * well above the scores (|q·k| scale <= 2·2·sqrt(HD)/sqrt(HD)) */
            const float sink_v[MAXH] = {-30.0f, -1.5f, 0.0f, 0.7f, 3.0f, 25.0f};
            plume_bweight *sinks = cpu_weight(PLUME_DTYPE_F32, 1, MAXH, 1, sink_v, sizeof sink_v);
            const plume_attn_params ps[] = {{6, 0, 0, NULL},     {6, 0.3f, 0, NULL},
                                            {6, 0, 7, NULL},     {2, 0, 1, NULL},
                                            {4, 0.05f, 20, NULL}, {6, 0, 0, sinks},
                                            {6, 0.3f, 5, sinks}};
            for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
                const plume_attn_params *p = &ps[pi];
                const ck_attn A = {q, ek, ev, f16, BS, p->n_head, NKV, HD, p->window, kv_dim,
                                   p->scale > 0 ? p->scale : 1.0f / sqrtf((float)HD), oe,
                                   p->sinks ? sink_v : NULL};
                emu_attention(&d.S, &A, NROW);
                CHECK(CPU->attention(cpu_b, &d.st, &pool, 0, (plume_buf *)q, p, (plume_buf *)oc,
                                     &err) == 0,
                      "cpu attention: %s", err.msg);
                /* outputs are convex combinations of v in [-1, 1] */
                const double md = max_diff(oe, oc, (size_t)NROW * p->n_head * HD);
                CHECK(md <= 2e-5, "attention (hd %d, %s, %d heads, scale %g, window %d%s): max "
                                  "|emu - cpu| = %.3g > 2e-5",
                      HD, f16 ? "f16" : "f32", p->n_head, (double)p->scale, p->window,
                      p->sinks ? ", sinks" : "", md);
            }
            CPU->weight_free(cpu_b, sinks);
            CPU->kv_free(cpu_b, &pool);
            free(ek), free(ev), free(k), free(v), free(q), free(oe), free(oc);
        }
}

/* ---- rows: rmsnorm, rope, embed, element-wise, gather ---- */

static void test_rows(void)
{
    step_data d;
    enum { DIM = 200, V = 50, NH = 3, HD = 64, XW = 256 /* >= DIM, NH * HD */ };
    make_step(&d, V);
    float *x = malloc(sizeof(float) * NROW * XW), *xe = malloc(sizeof(float) * NROW * XW);
    float *xc = malloc(sizeof(float) * NROW * XW), *w = malloc(sizeof(float) * DIM);
    tu_fill(x, (size_t)NROW * XW, -3, 3);
    tu_fill(w, DIM, 0.5f, 1.5f);
    plume_bweight *cw = cpu_weight(PLUME_DTYPE_F32, 1, DIM, 1, w, sizeof(float) * DIM);
    /* rmsnorm, out of place and in place (one warp per row) */
    for (int inplace = 0; inplace <= 1; inplace++) {
        memcpy(xe, x, sizeof(float) * NROW * DIM);
        for (int64_t r = 0; r < NROW; r++) {
            float s[CK_WARP];
            for (int l = 0; l < CK_WARP; l++)
                s[l] = ck_rms_lane(xe, DIM, r, l);
            ck_emu_warp_sum(s);
            for (int l = 0; l < CK_WARP; l++)
                ck_rms_write(inplace ? xe : xc, xe, w, DIM, 1e-5f, r, l, s[l]);
        }
        float *res = inplace ? xe : xc;
        float *ref = malloc(sizeof(float) * NROW * DIM);
        CPU->rmsnorm(cpu_b, (plume_buf *)ref, (const plume_buf *)x, cw, NROW, DIM, 1e-5f, &err);
        double md = 0;
        for (size_t i = 0; i < (size_t)NROW * DIM; i++)
            md = fmax(md, fabs((double)res[i] - ref[i]) / (fabs(ref[i]) + 1e-3));
        CHECK(md <= 1e-5, "rmsnorm%s: max relative difference %.3g", inplace ? " in place" : "", md);
        free(ref);
    }
    CPU->weight_free(cpu_b, cw);
    /* rope, both pair styles */
    float inv[HD / 2];
    for (int i = 0; i < HD / 2; i++)
        inv[i] = powf(10000.0f, -2.0f * i / HD);
    plume_bweight *cf = cpu_weight(PLUME_DTYPE_F32, 1, HD / 2, 1, inv, sizeof inv);
    for (int adj = 0; adj <= 1; adj++) {
        memcpy(xe, x, sizeof(float) * NROW * NH * HD);
        memcpy(xc, x, sizeof(float) * NROW * NH * HD);
        for (int64_t idx = 0; idx < (int64_t)NROW * NH * (HD / 2); idx++)
            ck_rope(&d.S, xe, NH, HD, inv, adj, idx);
        CPU->rope(cpu_b, &d.st, (plume_buf *)xc, NH, HD, cf, adj, &err);
        const double md = max_diff(xe, xc, (size_t)NROW * NH * HD);
        CHECK(md <= 1e-5, "rope (adjacent %d): max |emu - cpu| = %.3g", adj, md);
    }
    CPU->weight_free(cpu_b, cf);
    /* embedding from a Q8_0 table: the same values exactly */
    size_t rb;
    uint8_t *tab = tu_weights(PLUME_DTYPE_Q8_0, DIM - 8, V, &rb);
    const ck_weight T = {tab, DIM - 8, V, (int64_t)rb, CK_Q8_0};
    plume_bweight *ct = cpu_weight(PLUME_DTYPE_Q8_0, 2, DIM - 8, V, tab, rb * V);
    for (int64_t idx = 0; idx < (int64_t)NROW * (DIM - 8); idx++)
        ck_embed(&d.S, &T, xe, DIM - 8, idx);
    CPU->embed(cpu_b, &d.st, ct, (plume_buf *)xc, DIM - 8, &err);
    CHECK(memcmp(xe, xc, sizeof(float) * NROW * (DIM - 8)) == 0, "embed differs from the cpu's");
    CPU->weight_free(cpu_b, ct);
    free(tab);
    /* swiglu, add, add_bias, gather */
    const size_t n = (size_t)NROW * DIM;
    float *up = malloc(sizeof(float) * n);
    tu_fill(up, n, -2, 2);
    memcpy(xe, x, sizeof(float) * n);
    memcpy(xc, x, sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        ck_swiglu(xe, up, (int64_t)i);
    CPU->swiglu(cpu_b, (plume_buf *)xc, (const plume_buf *)up, n, &err);
    double md = 0;
    for (size_t i = 0; i < n; i++)
        md = fmax(md, fabs((double)xe[i] - xc[i]) / (fabs(xc[i]) + 1e-3));
    CHECK(md <= 1e-5, "swiglu: max relative difference %.3g", md);
    memcpy(xe, x, sizeof(float) * n);
    memcpy(xc, x, sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        ck_add(xe, up, (int64_t)i);
    CPU->add(cpu_b, (plume_buf *)xc, (const plume_buf *)up, n, &err);
    CHECK(memcmp(xe, xc, sizeof(float) * n) == 0, "add differs");
    plume_bweight *cb = cpu_weight(PLUME_DTYPE_F32, 1, DIM, 1, up, sizeof(float) * DIM);
    for (size_t i = 0; i < n; i++)
        ck_add_bias(xe, up, DIM, (int64_t)i);
    CPU->add_bias(cpu_b, (plume_buf *)xc, cb, NROW, DIM, &err);
    CHECK(memcmp(xe, xc, sizeof(float) * n) == 0, "add_bias differs");
    CPU->weight_free(cpu_b, cb);
    float *ge = malloc(sizeof(float) * n), *gc = malloc(sizeof(float) * n);
    for (int64_t idx = 0; idx < (int64_t)d.st.n_out * DIM; idx++)
        ck_gather(&d.S, ge, x, DIM, idx);
    CPU->gather_out_rows(cpu_b, &d.st, (plume_buf *)gc, (const plume_buf *)x, DIM, &err);
    CHECK(memcmp(ge, gc, sizeof(float) * (size_t)d.st.n_out * DIM) == 0, "gather_out_rows differs");
    /* to_f16: round to nearest even, as the cache's f16 */
    uint16_t h[64];
    for (int i = 0; i < 64; i++)
        ck_to_f16(x, h, i);
    for (int i = 0; i < 64; i++)
        CHECK(h[i] == plume_fp32_to_fp16(x[i]), "to_f16 %d", i);
    free(x), free(xe), free(xc), free(w), free(up), free(ge), free(gc);
}

/* ---- dummy weights: k_fill against the host path ---- */

/* For each type the backend keeps: every block index through ck_fill gives
 * the bytes cuda_weight_prepare would upload from plume_fill_row's host
 * rows (F32/BF16 rounded to f16 as it rounds them), and ck_w_at reads
 * them back as plume_dequantize reads the host rows. */
static void test_fill(void)
{
    const uint32_t types[] = {PLUME_DTYPE_F32, PLUME_DTYPE_F16, PLUME_DTYPE_BF16,
                              PLUME_DTYPE_Q8_0, PLUME_DTYPE_Q4_0, PLUME_DTYPE_Q4_1};
    const int64_t K = 96, N = 7;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t ty = types[ti];
        plume_fill_spec sp;
        if (plume_fill_spec_init(&sp, ty, K, "model.layers.0.mlp.up_proj.weight", 3, 0.02f)) {
            CHECK(0, "spec for type %u", ty);
            continue;
        }
        const size_t rb = plume_dtype_row_bytes(ty, K);
        uint8_t *want = malloc(rb * N), *dev = calloc(rb, N);
        for (int64_t r = 0; r < N; r++)
            plume_fill_row(&sp, r, want + r * rb);
        for (int64_t idx = 0, n = N * (K / sp.block); idx < n; idx++)
            ck_fill(&sp, dev, (int64_t)rb, idx);
        CHECK(memcmp(dev, want, rb * N) == 0, "fill of type %s differs from the host path",
              plume_dtype_name(ty));
        ck_weight W = {dev, K, N, (int64_t)rb, (int)ty};
        float row[96];
        int bad = 0;
        for (int64_t r = 0; r < N; r++) {
            plume_dequantize((plume_dtype)ty, want + r * rb, row, K);
            for (int64_t i = 0; i < K; i++)
                bad += ck_w_at(&W, r, i) != row[i];
        }
        CHECK(bad == 0, "filled %s read back: %d values differ", plume_dtype_name(ty), bad);
        free(want);
        free(dev);
    }
}

/* ---- mixture-of-experts rows: gather, scatter-add, the segmented row
 * matmul, gpt-oss's clamped SwiGLU ---- */

/* k_gemv_seg for every (task, output) of output j, as launched. */
static void emu_gemv_seg(const ck_weight *ws, int n_w, int j, const ck_seg_task *tasks,
                         int32_t n_tasks, int64_t max_n, const float *x, float *y)
{
    for (int32_t ti = 0; ti < n_tasks; ti++)
        for (int64_t o = 0; o < max_n; o++) {
            const ck_seg_task t = tasks[ti];
            const ck_weight W = ws[(int64_t)t.a * n_w + j];
            if (o >= W.N)
                continue;
            float acc[CK_WARP][CK_GEMV_ROWS];
            for (int l = 0; l < CK_WARP; l++)
                ck_gemv_lane(&W, x, o, t.t0, t.nt, l, acc[l]);
            emu_store(acc, t.nt, y, t.t0, W.N, o);
        }
}

static void test_moe(void)
{
    enum { R = 11, DIM = 96, M = 29, X = 6, NW = 2, K = 128 };
    /* gather_rows: rows of src, repeated and out of order */
    float *src = malloc(sizeof(float) * R * DIM), *ge = malloc(sizeof(float) * M * DIM);
    float *gc = malloc(sizeof(float) * M * DIM);
    int32_t idx[M];
    float w[M];
    for (int i = 0; i < M; i++) {
        idx[i] = (int32_t)((i * 7 + 3) % R);
        w[i] = tu_uniform(0.05f, 1.0f);
    }
    idx[M - 1] = idx[0]; /* a row three times, not adjacent */
    tu_fill(src, (size_t)R * DIM, -3, 3);
    for (int64_t e = 0; e < (int64_t)M * DIM; e++)
        ck_gather_rows(ge, src, idx, DIM, e);
    CHECK(CPU->gather_rows(cpu_b, (plume_buf *)gc, (const plume_buf *)src, idx, M, DIM, &err) == 0,
          "cpu gather_rows: %s", err.msg);
    CHECK(memcmp(ge, gc, sizeof(float) * M * DIM) == 0, "gather_rows differs from the cpu's");
    /* scatter_add_rows: the same bits as the cpu's in-order loop */
    int32_t at[R + 2] = {0}, row[M], start[M + 1], list[M];
    const int32_t n_u = ck_scatter_plan(idx, M, at, row, start, list);
    CHECK(n_u == R && start[n_u] == M, "scatter plan: %d destinations, %d entries", n_u,
          start[n_u]);
    for (int32_t u = 0; u < n_u; u++)
        for (int32_t k = start[u]; k < start[u + 1]; k++)
            CHECK(idx[list[k]] == row[u] && (k == start[u] || list[k] > list[k - 1]),
                  "scatter plan: destination %d entry %d", u, k);
    float *de = malloc(sizeof(float) * R * DIM), *dc = malloc(sizeof(float) * R * DIM);
    tu_fill(de, (size_t)R * DIM, -1, 1);
    memcpy(dc, de, sizeof(float) * R * DIM);
    for (int64_t e = 0; e < (int64_t)n_u * DIM; e++)
        ck_scatter_add(de, ge, row, start, list, w, DIM, e);
    CHECK(CPU->scatter_add_rows(cpu_b, (plume_buf *)dc, (const plume_buf *)ge, idx, w, M, DIM,
                                &err) == 0,
          "cpu scatter_add_rows: %s", err.msg);
    CHECK(memcmp(de, dc, sizeof(float) * R * DIM) == 0, "scatter_add_rows differs from the cpu's");
    /* matmul_segments: X experts x (gate, up), segments of 0..9 rows; each
     * value the bits of the row kernel on its row alone */
    const int32_t off[X + 1] = {0, 5, 5, 14, 15, 15, 23}; /* two empty segments */
    const uint32_t types[NW] = {PLUME_DTYPE_Q4_0, PLUME_DTYPE_MXFP4};
    const int64_t Ns[NW] = {37, 70};
    uint8_t *wd[X * NW];
    ck_weight ws[X * NW];
    for (int s = 0; s < X; s++)
        for (int j = 0; j < NW; j++) {
            size_t rb;
            wd[s * NW + j] = tu_weights(types[j], K, (int)Ns[j], &rb);
            ws[s * NW + j] = (ck_weight){wd[s * NW + j], K, Ns[j], (int64_t)rb, (int)types[j]};
        }
    int32_t n_act;
    const int32_t n_tasks = ck_seg_plan(off, X, NULL, &n_act);
    ck_seg_task tasks[32];
    CHECK(n_tasks <= 32 && n_act == 4, "segment plan: %d tasks, %d active", n_tasks, n_act);
    ck_seg_plan(off, X, tasks, &n_act);
    ck_weight act[4 * NW];
    for (int s = 0, a = 0; s < X; s++)
        if (off[s + 1] > off[s]) {
            for (int j = 0; j < NW; j++)
                act[a * NW + j] = ws[s * NW + j];
            a++;
        }
    const int32_t m = off[X];
    float *x = malloc(sizeof(float) * m * K), *y = malloc(sizeof(float) * m * 70);
    float *y1 = malloc(sizeof(float) * 70);
    tu_fill(x, (size_t)m * K, -1, 1);
    for (int j = 0; j < NW; j++) {
        for (int32_t i = 0; i < m * Ns[j]; i++)
            y[i] = NAN;
        emu_gemv_seg(act, NW, j, tasks, n_tasks, Ns[j], x, y);
        int bad = 0;
        for (int s = 0; s < X; s++)
            for (int32_t r = off[s]; r < off[s + 1]; r++) {
                emu_gemv(&ws[s * NW + j], x + (size_t)r * K, 1, y1);
                bad += memcmp(y1, y + (size_t)r * Ns[j], sizeof(float) * Ns[j]) != 0;
            }
        CHECK(bad == 0, "matmul_segments (%s): %d rows differ from the row kernel alone",
              plume_dtype_name(types[j]), bad);
    }
    for (int i = 0; i < X * NW; i++)
        free(wd[i]);
    /* swiglu_oai: the cpu's expression (clamps on both sides of the limit) */
    const size_t n = (size_t)M * DIM;
    float *g = malloc(sizeof(float) * n), *gu = malloc(sizeof(float) * n);
    tu_fill(g, n, -12, 12);
    tu_fill(gu, n, -12, 12);
    memcpy(ge, g, sizeof(float) * n);
    memcpy(gc, g, sizeof(float) * n);
    for (size_t i = 0; i < n; i++)
        ck_swiglu_oai(ge, gu, 1.702f, 7.0f, (int64_t)i);
    CHECK(CPU->swiglu_oai(cpu_b, (plume_buf *)gc, (const plume_buf *)gu, n, 1.702f, 7.0f, &err) == 0,
          "cpu swiglu_oai: %s", err.msg);
    CHECK(memcmp(ge, gc, sizeof(float) * n) == 0, "swiglu_oai differs from the cpu's");
    free(src), free(ge), free(gc), free(de), free(dc), free(x), free(y), free(y1), free(g), free(gu);
}

int main(void)
{
    if (CPU->create(NULL, 1, &cpu_b, &err)) {
        printf("FAIL: cpu backend: %s\n", err.msg);
        return 1;
    }
    test_matmul();
    test_matmul_tail();
    test_matmul_q8();
    test_kv_and_attention();
    test_rows();
    test_fill();
    test_moe();
    CPU->destroy(cpu_b);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("ok: the cuda kernel bodies match the cpu backend\n");
    return 0;
}
