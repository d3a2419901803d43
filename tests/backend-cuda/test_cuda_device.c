/* The cuda backend on a GPU against the cpu backend, through the backend
 * interface (the plugin as plume loads it): every op on random inputs,
 * with tolerances derived from what differs (the cpu's int8 activations in
 * its quantized matmul, f16 rounding of x in the cuBLAS path, f32
 * accumulation order, the device's expf/cosf/sinf), the row matmul's bits
 * the same whatever the batch, and the whole SmolLM2 forward: logits near
 * the cpu's, greedy tokens equal, a prompt's logits the same bits in one
 * prefill and in chunks.  Exits 77 (skipped) with the reason when no
 * usable CUDA device exists.
 *
 * PLUME_CUDA_TEST_STANDIN=cpu runs the same checks with a second cpu
 * backend standing in for the GPU (the cuda_device_harness test): that
 * proves the harness (calls, buffers, tolerances) on machines without a
 * GPU, and nothing about the cuda backend. */
#include <math.h>
#include <string.h>

#include "../cpu/cpu_test_util.h"
#include "../support/check.h"
#include "../smollm2_path.h"
#include "cuda_test_util.h"
#include "plume/model.h"
#include "plume/settings.h"
#include "plume/tokenizer.h"
#include "runtime/builtin.h"

static int failures;
#define MUST(call) CT_MUST(call, err)

static const plume_backend_vtable *CPU = &plume_builtin_cpu, *GPU;
static plume_backend *cb, *gb;
static plume_error err;

/* A device buffer of n floats holding host memory h (h NULL: contents
 * undefined). */
static plume_buf *dev(const float *h, size_t n)
{
    plume_buf *b = GPU->buf_alloc(gb, sizeof(float) * (n ? n : 1), &err);
    if (!b || (n && h && GPU->upload(gb, b, 0, h, sizeof(float) * n, &err))) {
        printf("FAIL: device buffer: %s\n", err.msg);
        exit(1);
    }
    return b;
}

static void get(float *h, const plume_buf *b, size_t n)
{
    MUST(GPU->download(gb, h, b, 0, sizeof(float) * n, &err));
}

static plume_bweight *prep(const plume_backend_vtable *vt, plume_backend *be, uint32_t type,
                           int n_dims, int64_t ne0, int64_t ne1, const void *data, size_t nbytes)
{
    plume_tensor t = {"t", type, n_dims, {ne0, ne1, 1, 1}, data, nbytes};
    plume_bweight *w = NULL;
    MUST(vt->weight_prepare(be, &t, &w, &err));
    return w;
}

static void test_matmul(plume_backend *g, int cublas)
{
    enum { K = 512, N = 300, T = 37 };
    const uint32_t types[] = {PLUME_DTYPE_Q4_0, PLUME_DTYPE_Q4_1, PLUME_DTYPE_Q8_0,
                              PLUME_DTYPE_F16, PLUME_DTYPE_BF16, PLUME_DTYPE_F32,
                              PLUME_DTYPE_MXFP4};
    float *x = malloc(sizeof(float) * T * K), *yc = malloc(sizeof(float) * T * N);
    float *yg = malloc(sizeof(float) * T * N), *y1 = malloc(sizeof(float) * N), row[K];
    tu_fill(x, (size_t)T * K, -1, 1);
    plume_buf *dx = dev(x, (size_t)T * K), *dy = GPU->buf_alloc(gb, sizeof(float) * T * N, &err);
    if (!dy) {
        printf("FAIL: device buffer: %s\n", err.msg);
        exit(1);
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti];
        size_t rb;
        uint8_t *wd = tu_weights(type, K, N, &rb);
        plume_bweight *wc = prep(CPU, cb, type, 2, K, N, wd, rb * N);
        plume_bweight *wg = prep(GPU, g, type, 2, K, N, wd, rb * N);
        const plume_bweight *ws[1] = {wc};
        plume_buf *ys[1] = {(plume_buf *)yc};
        MUST(CPU->matmul(cb, ws, 1, (const plume_buf *)x, T, ys, &err));
        ws[0] = wg;
        ys[0] = dy;
        MUST(GPU->matmul(g, ws, 1, dx, T, ys, &err));
        if (GPU->synchronize) /* g may be another instance (stream) than gb's copies */
            MUST(GPU->synchronize(g, &err));
        get(yg, dy, (size_t)T * N);
        for (int t = 0; t < T; t++)
            for (int o = 0; o < N; o++) {
                plume_dequantize((plume_dtype)type, wd + (size_t)o * rb, row, K);
                double q8 = 0, absum = 0;
                for (int b = 0; b < K / 32; b++) {
                    double amax = 0, wabs = 0;
                    for (int i = 32 * b; i < 32 * b + 32; i++) {
                        amax = fmax(amax, fabs(x[(size_t)t * K + i]));
                        wabs += fabs(row[i]);
                        absum += fabs(row[i] * x[(size_t)t * K + i]);
                    }
                    q8 += amax / 254.0 * wabs;
                }
                /* cpu int8 activations + f32 accumulation, + f16 rounding of
                 * x (cuBLAS path) and of weights (below) */
                /* weights rounded to f16: all but f16 ones in the cuBLAS slab */
                const int wround = cublas && type != PLUME_DTYPE_F16;
                const double tol = q8 * 1.01 + 4.0 * K * 0x1p-24 * absum +
                                   0x1p-11 * absum * (cublas + wround);
                const double d = fabs((double)yg[(size_t)t * N + o] - yc[(size_t)t * N + o]);
                CHECK(d <= tol, "matmul%s %s: y[%d][%d] gpu %.9g cpu %.9g (tol %.3g)",
                      cublas ? " (cublas)" : "", plume_dtype_name(type), t, o,
                      yg[(size_t)t * N + o], yc[(size_t)t * N + o], tol);
            }
        if (!cublas) /* the row matmul: a row alone gives the bits it gave in the batch */
            for (int t = 0; t < T; t += 5) {
                plume_buf *d1 = dev(x + (size_t)t * K, K), *o1 = GPU->buf_alloc(gb, sizeof(float) * N, &err);
                ys[0] = o1;
                MUST(GPU->matmul(g, ws, 1, d1, 1, ys, &err));
                if (GPU->synchronize)
                    MUST(GPU->synchronize(g, &err));
                get(y1, o1, N);
                CHECK(memcmp(y1, yg + (size_t)t * N, sizeof(float) * N) == 0,
                      "matmul %s: row %d alone differs from the same row in a batch of %d",
                      plume_dtype_name(type), t, T);
                GPU->buf_free(gb, d1);
                GPU->buf_free(gb, o1);
            }
        CPU->weight_free(cb, wc);
        GPU->weight_free(g, wg);
        free(wd);
    }
    GPU->buf_free(gb, dx);
    GPU->buf_free(gb, dy);
    free(x), free(yc), free(yg), free(y1);
}

/* rmsnorm, rope, kv_store, attention, embed, swiglu, add, add_bias, gather
 * over one step of two sequences (shuffled block tables, the second a
 * later prefill chunk). */
enum { BS = 16, NB = 24, NA = 45, NBR = 30, NROW = NA + NBR, NKV = 3, NH = 9, HD = 64, DIM = 576 };

static void test_ops(int f16)
{
    int32_t tok[NROW], pos[NROW], slots[NROW], outr[NROW], ta[NB / 2], tb[NB / 2];
    for (int i = 0; i < NB / 2; i++) {
        ta[i] = (i * 7 + 3) % (NB / 2) * 2;
        tb[i] = (i * 5 + 1) % (NB / 2) * 2 + 1;
    }
    int n_out = 0;
    for (int r = 0; r < NROW; r++) {
        pos[r] = r < NA ? r : 6 + r - NA;
        const int32_t *t = r < NA ? ta : tb;
        slots[r] = t[pos[r] / BS] * BS + pos[r] % BS;
        tok[r] = (int32_t)(tu_u32() % 100);
        if (r % 4 == 0)
            outr[n_out++] = r;
    }
    plume_step_seq seqs[2] = {{0, NA, 0, ta, (NA + BS - 1) / BS},
                              {NA, NBR, 6, tb, (6 + NBR + BS - 1) / BS}};
    plume_step sc = {NROW, tok, pos, slots, seqs, 2, outr, n_out, NULL}, sg = sc;
    if (GPU->step_begin)
        MUST(GPU->step_begin(gb, &sg, &err));
    const size_t XN = (size_t)NROW * DIM;
    float *x = malloc(sizeof(float) * XN), *a = malloc(sizeof(float) * XN), *c = malloc(sizeof(float) * XN);
    float *w = malloc(sizeof(float) * DIM);
    tu_fill(x, XN, -3, 3);
    tu_fill(w, DIM, 0.5f, 1.5f);
    plume_bweight *wc = prep(CPU, cb, PLUME_DTYPE_F32, 1, DIM, 1, w, sizeof(float) * DIM);
    plume_bweight *wg = prep(GPU, gb, PLUME_DTYPE_F32, 1, DIM, 1, w, sizeof(float) * DIM);
    plume_buf *dx = dev(x, XN), *dy = dev(x, XN), *dz = dev(x, XN);
    double md;
#define REL(n)                                                                                     \
    md = 0;                                                                                        \
    for (size_t i = 0; i < (n); i++)                                                               \
        md = fmax(md, fabs((double)a[i] - c[i]) / (fabs(c[i]) + 1e-3));
    /* rmsnorm (in place on the device) */
    MUST(CPU->rmsnorm(cb, (plume_buf *)c, (const plume_buf *)x, wc, NROW, DIM, 1e-5f, &err));
    MUST(GPU->rmsnorm(gb, dy, dy, wg, NROW, DIM, 1e-5f, &err));
    get(a, dy, XN);
    REL(XN);
    CHECK(md <= 1e-5, "rmsnorm: max relative difference %.3g", md);
    /* rope: angles up to ~75 rad */
    float inv[HD / 2];
    for (int i = 0; i < HD / 2; i++)
        inv[i] = powf(100000.0f, -2.0f * i / HD);
    plume_bweight *fc = prep(CPU, cb, PLUME_DTYPE_F32, 1, HD / 2, 1, inv, sizeof inv);
    plume_bweight *fg = prep(GPU, gb, PLUME_DTYPE_F32, 1, HD / 2, 1, inv, sizeof inv);
    for (int adj = 0; adj <= 1; adj++) {
        memcpy(c, x, sizeof(float) * NROW * NH * HD);
        MUST(GPU->upload(gb, dy, 0, x, sizeof(float) * NROW * NH * HD, &err));
        MUST(CPU->rope(cb, &sc, (plume_buf *)c, NH, HD, fc, adj, &err));
        MUST(GPU->rope(gb, &sg, dy, NH, HD, fg, adj, &err));
        get(a, dy, (size_t)NROW * NH * HD);
        md = 0;
        for (size_t i = 0; i < (size_t)NROW * NH * HD; i++)
            md = fmax(md, fabs((double)a[i] - c[i]));
        /* the same angle bits; cosf/sinf within 2 ulp on each side, |x0|+|x1| <= 6,
         * times 10 for margin */
        CHECK(md <= 10 * 4 * 0x1p-24 * 6, "rope (adjacent %d): max |gpu - cpu| = %.3g", adj, md);
    }
    /* kv_store and attention */
    plume_kv_pool pc = {.n_layer = 2, .n_blocks = NB, .block_size = BS, .n_head_kv = NKV,
                        .head_dim = HD, .dtype = f16 ? PLUME_KV_F16 : PLUME_KV_F32},
                  pg = pc;
    MUST(CPU->kv_alloc(cb, &pc, &err));
    MUST(GPU->kv_alloc(gb, &pg, &err));
    { /* the same bytes in the slots this step does not write (positions 0..5 of
       * the second sequence, an earlier chunk's): zeros on both sides */
        const size_t bytes = pc.layer_stride * (size_t)pc.n_layer;
        uint8_t *zero = calloc(1, bytes);
        memset(pc.k, 0, bytes);
        memset(pc.v, 0, bytes);
        MUST(GPU->upload(gb, pg.k, 0, zero, bytes, &err));
        MUST(GPU->upload(gb, pg.v, 0, zero, bytes, &err));
        free(zero);
    }
    const size_t kvn = (size_t)NROW * NKV * HD;
    float *kv = malloc(sizeof(float) * kvn * 2);
    tu_fill(kv, kvn * 2, -1, 1);
    plume_buf *dk = dev(kv, kvn), *dv = dev(kv + kvn, kvn);
    MUST(CPU->kv_store(cb, &sc, &pc, 1, (plume_buf *)kv, (plume_buf *)(kv + kvn), &err));
    MUST(GPU->kv_store(gb, &sg, &pg, 1, dk, dv, &err));
    {
        uint8_t *hk = malloc(pc.layer_stride);
        MUST(GPU->download(gb, hk, pg.k, pg.layer_stride, pg.layer_stride, &err));
        int bad = 0;
        for (int r = 0; r < NROW; r++)
            bad += memcmp(hk + (size_t)slots[r] * pc.slot_stride,
                          (uint8_t *)pc.k + pc.layer_stride + (size_t)slots[r] * pc.slot_stride,
                          pc.slot_stride) != 0;
        CHECK(bad == 0, "kv_store (%s): %d slots differ from the cpu's", f16 ? "f16" : "f32", bad);
        free(hk);
    }
    /* gpt-oss's sinks: a logit per query head, below, among and above the scores */
    float sink_v[NH];
    for (int h = 0; h < NH; h++)
        sink_v[h] = -20.0f + 5.0f * (float)h;
    plume_bweight *skc = prep(CPU, cb, PLUME_DTYPE_F32, 1, NH, 1, sink_v, sizeof sink_v);
    plume_bweight *skg = prep(GPU, gb, PLUME_DTYPE_F32, 1, NH, 1, sink_v, sizeof sink_v);
    const plume_attn_params ps[] = {{NH, 0, 0, NULL}, {NH, 0.2f, 0, NULL}, {NH, 0, 9, NULL},
                                    {NKV, 0, 1, NULL}, {NH, 0, 0, NULL}, {NH, 0, 9, NULL}};
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
        plume_attn_params pcpu = ps[pi], pgpu = ps[pi];
        if (pi >= 4) {
            pcpu.sinks = skc;
            pgpu.sinks = skg;
        }
        MUST(CPU->attention(cb, &sc, &pc, 1, (const plume_buf *)x, &pcpu, (plume_buf *)c, &err));
        MUST(GPU->attention(gb, &sg, &pg, 1, dx, &pgpu, dz, &err));
        get(a, dz, (size_t)NROW * ps[pi].n_head * HD);
        md = 0;
        for (size_t i = 0; i < (size_t)NROW * ps[pi].n_head * HD; i++)
            md = fmax(md, fabs((double)a[i] - c[i]));
        /* a convex combination of v in [-1, 1]: exp and summation order */
        CHECK(md <= 1e-4, "attention (%s, %d heads, scale %g, window %d%s): max |gpu - cpu| %.3g",
              f16 ? "f16" : "f32", ps[pi].n_head, (double)ps[pi].scale, ps[pi].window,
              pi >= 4 ? ", sinks" : "", md);
    }
    CPU->weight_free(cb, skc), GPU->weight_free(gb, skg);
    /* embed from a Q8_0 and a Q4_1 table */
    for (int q = 0; q < 2; q++) {
        const uint32_t ty = q ? PLUME_DTYPE_Q4_1 : PLUME_DTYPE_Q8_0;
        size_t rb;
        uint8_t *tab = tu_weights(ty, DIM, 100, &rb);
        plume_bweight *tc = prep(CPU, cb, ty, 2, DIM, 100, tab, rb * 100);
        plume_bweight *tg = prep(GPU, gb, ty, 2, DIM, 100, tab, rb * 100);
        MUST(CPU->embed(cb, &sc, tc, (plume_buf *)c, DIM, &err));
        MUST(GPU->embed(gb, &sg, tg, dy, DIM, &err));
        get(a, dy, XN);
        REL(XN);
        /* nvcc may fuse Q4_1's d*q + m into one fma: half an ulp of d*q
         * (|d*q| < 0.3: < 2e-8), measured against |c| + 1e-3 */
        CHECK(md <= 1e-4, "embed %s: max relative difference %.3g", plume_dtype_name(ty), md);
        CPU->weight_free(cb, tc);
        GPU->weight_free(gb, tg);
        free(tab);
    }
    /* swiglu, add, add_bias, gather */
    memcpy(c, x, sizeof(float) * XN);
    MUST(GPU->upload(gb, dy, 0, x, sizeof(float) * XN, &err));
    MUST(GPU->upload(gb, dz, 0, kv, sizeof(float) * kvn, &err));
    MUST(CPU->swiglu(cb, (plume_buf *)c, (const plume_buf *)kv, kvn, &err));
    MUST(GPU->swiglu(gb, dy, dz, kvn, &err));
    get(a, dy, kvn);
    REL(kvn);
    CHECK(md <= 1e-5, "swiglu: max relative difference %.3g", md);
    /* then add and add_bias: the sum may cancel, so the swiglu's error is
     * measured against the terms' magnitudes, not the result's */
    float *sw = malloc(sizeof(float) * XN);
    memcpy(sw, c, sizeof(float) * XN);
    MUST(CPU->add(cb, (plume_buf *)c, (const plume_buf *)kv, kvn, &err));
    MUST(GPU->add(gb, dy, dz, kvn, &err));
    MUST(CPU->add_bias(cb, (plume_buf *)c, wc, NROW, DIM, &err));
    MUST(GPU->add_bias(gb, dy, wg, NROW, DIM, &err));
    get(a, dy, XN);
    md = 0;
    for (size_t i = 0; i < XN; i++) {
        const double terms = fabs(sw[i]) + (i < kvn ? fabs(kv[i]) : 0) + fabs(w[i % DIM]);
        md = fmax(md, fabs((double)a[i] - c[i]) / (terms + 1e-3));
    }
    free(sw);
    CHECK(md <= 1e-5, "swiglu + add + add_bias: max difference %.3g of the terms' magnitude", md);
    MUST(CPU->gather_out_rows(cb, &sc, (plume_buf *)c, (const plume_buf *)x, DIM, &err));
    MUST(GPU->gather_out_rows(gb, &sg, dz, dx, DIM, &err));
    get(a, dz, (size_t)n_out * DIM);
    CHECK(memcmp(a, c, sizeof(float) * (size_t)n_out * DIM) == 0, "gather_out_rows differs");
    if (GPU->step_end)
        GPU->step_end(gb, &sg);
    CPU->kv_free(cb, &pc);
    GPU->kv_free(gb, &pg);
    CPU->weight_free(cb, wc), GPU->weight_free(gb, wg), CPU->weight_free(cb, fc), GPU->weight_free(gb, fg);
    GPU->buf_free(gb, dx), GPU->buf_free(gb, dy), GPU->buf_free(gb, dz), GPU->buf_free(gb, dk), GPU->buf_free(gb, dv);
    free(x), free(a), free(c), free(w), free(kv);
}

/* The mixture-of-experts ops against the cpu's: gather_rows and
 * scatter_add_rows the same bits (each product rounded, then added, in
 * order), swiglu_oai within the device expf's error, and matmul_segments
 * (Q4_0 gate and MXFP4 up of 6 experts, two of them without rows) the
 * bits of the GPU's own row matmul on each row alone. */
static void test_moe_ops(void)
{
    enum { R = 23, D = 576, M = 61, X = 6, K = 512 };
    int32_t idx[M];
    float w[M];
    for (int i = 0; i < M; i++) {
        idx[i] = (int32_t)((i * 7 + 3) % R);
        w[i] = tu_uniform(0.05f, 1.0f);
    }
    float *src = malloc(sizeof(float) * R * D), *c = malloc(sizeof(float) * M * D);
    float *a = malloc(sizeof(float) * M * D), *dst = malloc(sizeof(float) * R * D);
    tu_fill(src, (size_t)R * D, -3, 3);
    tu_fill(dst, (size_t)R * D, -1, 1);
    plume_buf *ds = dev(src, (size_t)R * D), *dg = dev(c, (size_t)M * D);
    plume_buf *dd = dev(dst, (size_t)R * D);
    MUST(CPU->gather_rows(cb, (plume_buf *)c, (const plume_buf *)src, idx, M, D, &err));
    MUST(GPU->gather_rows(gb, dg, ds, idx, M, D, &err));
    get(a, dg, (size_t)M * D);
    CHECK(memcmp(a, c, sizeof(float) * M * D) == 0, "gather_rows differs from the cpu's");
    MUST(CPU->scatter_add_rows(cb, (plume_buf *)dst, (const plume_buf *)c, idx, w, M, D, &err));
    MUST(GPU->scatter_add_rows(gb, dd, dg, idx, w, M, D, &err));
    get(a, dd, (size_t)R * D);
    CHECK(memcmp(a, dst, sizeof(float) * R * D) == 0, "scatter_add_rows differs from the cpu's");
    /* swiglu_oai over values on both sides of the clamps */
    float *up = malloc(sizeof(float) * M * D);
    tu_fill(c, (size_t)M * D, -12, 12);
    tu_fill(up, (size_t)M * D, -12, 12);
    plume_buf *du = dev(up, (size_t)M * D);
    MUST(GPU->upload(gb, dg, 0, c, sizeof(float) * M * D, &err));
    MUST(CPU->swiglu_oai(cb, (plume_buf *)c, (const plume_buf *)up, (size_t)M * D, 1.702f, 7.0f,
                         &err));
    MUST(GPU->swiglu_oai(gb, dg, du, (size_t)M * D, 1.702f, 7.0f, &err));
    get(a, dg, (size_t)M * D);
    double md;
    REL((size_t)M * D);
    CHECK(md <= 1e-5, "swiglu_oai: max relative difference %.3g", md);
    /* matmul_segments */
    const int32_t off[X + 1] = {0, 9, 9, 30, 31, 31, M};
    const int64_t Ns[2] = {300, 140};
    const uint32_t types[2] = {PLUME_DTYPE_Q4_0, PLUME_DTYPE_MXFP4};
    plume_bweight *wg[X * 2];
    uint8_t *wd[X * 2];
    for (int e = 0; e < X; e++)
        for (int j = 0; j < 2; j++) {
            size_t rb;
            wd[e * 2 + j] = tu_weights(types[j], K, (int)Ns[j], &rb);
            wg[e * 2 + j] = prep(GPU, gb, types[j], 2, K, Ns[j], wd[e * 2 + j], rb * Ns[j]);
        }
    float *x = malloc(sizeof(float) * M * K), *ys = malloc(sizeof(float) * M * 300);
    float *y1 = malloc(sizeof(float) * 300);
    tu_fill(x, (size_t)M * K, -1, 1);
    plume_buf *dx = dev(x, (size_t)M * K), *dy0 = dev(NULL, (size_t)M * 300),
              *dy1 = dev(NULL, (size_t)M * 140), *o1 = dev(NULL, 300);
    plume_buf *const yy[2] = {dy0, dy1};
    MUST(GPU->matmul_segments(gb, (const plume_bweight *const *)wg, 2, X, off, dx, yy, &err));
    for (int j = 0; j < 2; j++) {
        get(ys, yy[j], (size_t)M * Ns[j]);
        int bad = 0;
        for (int e = 0; e < X; e++)
            for (int32_t r = off[e]; r < off[e + 1]; r++) {
                plume_buf *d1 = dev(x + (size_t)r * K, K);
                const plume_bweight *w1[1] = {wg[e * 2 + j]};
                MUST(GPU->matmul(gb, w1, 1, d1, 1, &o1, &err));
                get(y1, o1, (size_t)Ns[j]);
                bad += memcmp(y1, ys + (size_t)r * Ns[j], sizeof(float) * Ns[j]) != 0;
                GPU->buf_free(gb, d1);
            }
        CHECK(bad == 0, "matmul_segments (%s): %d of %d rows differ from the row matmul alone",
              plume_dtype_name(types[j]), bad, M);
    }
    for (int i = 0; i < X * 2; i++) {
        GPU->weight_free(gb, wg[i]);
        free(wd[i]);
    }
    GPU->buf_free(gb, ds), GPU->buf_free(gb, dg), GPU->buf_free(gb, dd), GPU->buf_free(gb, du);
    GPU->buf_free(gb, dx), GPU->buf_free(gb, dy0), GPU->buf_free(gb, dy1), GPU->buf_free(gb, o1);
    free(src), free(c), free(a), free(dst), free(up), free(x), free(ys), free(y1);
}

/* SmolLM2 on both backends: the prompt's last logits within tol of the
 * cpu's, 12 greedy tokens equal (a step whose cpu top-2 margin is inside
 * the tolerance may diverge: said, and the comparison stops there); and on
 * the GPU a prompt's logits are the same bits in one prefill and in chunks
 * of 3. */
static void test_model(const plume_backend_vtable *vt)
{
    char path[4096];
    if (!smollm2_path(path, sizeof path))
        return;
    plume_model *mc, *mg;
    plume_load_params lp = plume_load_defaults();
    MUST(plume_model_load_ex(path, &lp, &mc, &err));
    lp.backend_vt = vt;
    MUST(plume_model_load_ex(path, &lp, &mg, &err));
    const int32_t V = plume_model_n_vocab(mc);
    const char *prompts[] = {"The capital of France is", "def fibonacci(n):",
                             "Once upon a time, in a small village,", "1, 2, 3, 4,"};
    float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V), *lk = malloc(sizeof(float) * V);
    for (int pi = 0; pi < 4; pi++) {
        int32_t *ids;
        size_t n;
        MUST(plume_tokenize(plume_model_tokenizer(mc), prompts[pi], strlen(prompts[pi]), false,
                            false, &ids, &n, &err));
        plume_context *cc, *cg;
        MUST(plume_context_create(mc, 128, &cc, &err));
        MUST(plume_context_create(mg, 128, &cg, &err));
        MUST(plume_decode(cc, ids, n, lc, &err));
        MUST(plume_decode(cg, ids, n, lg, &err));
        double md, range;
        ct_logit_diff(lc, lg, V, &md, &range);
        /* chosen, not derived: the same Q4_1 weights, f32 activations on
         * both (PLUME_CPU_ACTIVATIONS=f32), f16 KV on both; what differs is
         * the summation order and the device's expf/cosf/sinf */
        const double tol = 0.03 * range;
        printf("# '%s': max |logit gpu - cpu| %.4g (%.3g%% of the range %.4g)\n", prompts[pi], md,
               100 * md / range, range);
        CHECK(md <= tol, "'%s': max |logit gpu - cpu| %.4g > %.4g", prompts[pi], md, tol);
        const int g = ct_greedy(prompts[pi], cc, cg, lc, lg, V, 12, tol, &err);
        MUST(g < 0);
        failures += g;
        /* chunked prefill: the same bits */
        plume_context_reset(cg);
        MUST(plume_decode(cg, ids, n, lg, &err));
        plume_context_reset(cg);
        for (size_t i = 0; i < n; i += 3)
            MUST(plume_decode(cg, ids + i, n - i < 3 ? n - i : 3, lk, &err));
        CHECK(memcmp(lg, lk, sizeof(float) * V) == 0,
              "'%s': logits differ between one prefill and chunks of 3 on the GPU", prompts[pi]);
        plume_context_free(cc);
        plume_context_free(cg);
        free(ids);
    }
    free(lc), free(lg), free(lk);
    plume_model_free(mc);
    plume_model_free(mg);
}

/* load_format: dummy on both backends (bench/configs/tiny-llama, pure
 * presets and floats): the GPU makes its matrices with weight_fill's
 * k_fill, the cpu on the host; the same seed must give logits within the
 * tolerance above (the same weights; the cpu's int8 activations). */
static void test_dummy(const plume_backend_vtable *vt)
{
    char tok[4096], dir[4096];
    if (!smollm2_path(tok, sizeof tok))
        return;
    const char *root = getenv("PLUME_SOURCE_ROOT");
    snprintf(dir, sizeof dir, "%s/bench/configs/tiny-llama", root && *root ? root : ".");
    const char *dtypes[] = {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1"};
    for (int d = 0; d < 5; d++) {
        plume_settings *s;
        MUST(plume_settings_new("load_format", &s, &err));
        MUST(plume_settings_set(s, "dtype", dtypes[d], &err));
        MUST(plume_settings_set(s, "pure", "true", &err));
        MUST(plume_settings_set(s, "tokenizer", tok, &err));
        plume_load_params lp = plume_load_defaults();
        lp.format = &plume_builtin_dummy;
        lp.format_settings = s;
        plume_model *mc, *mg;
        MUST(plume_model_load_ex(dir, &lp, &mc, &err));
        lp.backend_vt = vt;
        MUST(plume_model_load_ex(dir, &lp, &mg, &err));
        const int32_t V = plume_model_n_vocab(mc), ids[6] = {1, 17, 230, 4000, 9, 2};
        float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
        plume_context *cc, *cg;
        MUST(plume_context_create(mc, 64, &cc, &err));
        MUST(plume_context_create(mg, 64, &cg, &err));
        MUST(plume_decode(cc, ids, 6, lc, &err));
        MUST(plume_decode(cg, ids, 6, lg, &err));
        double md = 0, range = 0;
        for (int32_t i = 0; i < V; i++) {
            md = fmax(md, fabs((double)lg[i] - lc[i]));
            range = fmax(range, fabs(lc[i]));
        }
        CHECK(range > 0 && md <= 0.03 * range, "dummy %s: max |logit gpu - cpu| %.4g > %.4g",
              dtypes[d], md, 0.03 * range);
        plume_context_free(cc);
        plume_context_free(cg);
        free(lc), free(lg);
        plume_model_free(mc);
        plume_model_free(mg);
        plume_settings_free(s);
    }
}

int main(void)
{
    /* before any cpu kernel runs (the dispatcher reads it once): the cpu's
     * quantized matmuls with f32 activations, so the model comparison
     * below measures the GPU, not the cpu's int8 rounding */
    setenv("PLUME_CPU_ACTIVATIONS", "f32", 1);
    plume_registry *reg;
    int harness;
    GPU = ct_device_backend(&reg, CPU, &harness);
    MUST(CPU->create(NULL, 1, &cb, &err));
    MUST(GPU->create(NULL, 0, &gb, &err));
    test_matmul(gb, 0);
    /* the cuBLAS path, and int8 activations (Q4_0/Q4_1/Q8_0 rows dotted in
     * integers, dp4a); the stand-in cpu takes neither setting */
    const char *variants[2][2] = {{"matmul", "cublas"}, {"activations", "int8"}};
    for (int v = 0; v < 2; v++) {
        plume_settings *s;
        plume_backend *g2;
        MUST(plume_settings_new("backend", &s, &err));
        if (!harness)
            MUST(plume_settings_set(s, variants[v][0], variants[v][1], &err));
        MUST(GPU->create(s, 0, &g2, &err));
        test_matmul(g2, v == 0);
        GPU->destroy(g2);
        plume_settings_free(s);
    }
    test_ops(0);
    test_ops(1);
    test_moe_ops();
    test_model(GPU);
    test_dummy(GPU);
    GPU->destroy(gb);
    CPU->destroy(cb);
    plume_registry_free(reg);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf(harness ? "ok: the harness runs (no GPU was tested)\n"
                   : "ok: the cuda backend matches the cpu backend\n");
    return 0;
}
