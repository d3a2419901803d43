/* quant-gptq fast CPU kernels (plugins/quant-gptq/gptq_kernels*.c) against
 * x·dequant(W)ᵀ computed in double, on every dispatch level this CPU runs.
 *
 * Tolerance (derived, per output y[t][n]):
 *  - the kernels quantize each token's (act-order permuted) activations
 *    with plume_cpu_quantize_q8: x_k ≈ x̂_k = d_b·q_k.  The test repeats
 *    that call, so it knows x̂ exactly; the kernels compute Σ_k W_nk·x̂_k
 *    with exact int32 block dots, hence
 *        |y − x·Wᵀ| ≤ Σ_k |W_nk|·|x_k − x̂_k| + ε_f,
 *        |y − x̂·Wᵀ| ≤ ε_f;
 *  - ε_f bounds the float steps: per segment ≤ nb_s + 3 roundings of terms
 *    bounded by M = Σ_k sc·(|v_k| + |z|)·|x̂_k| (+ |bias|) with v, z the
 *    stored code and zero (code − 128, zero − 128 for 8 bits), then one
 *    rounding per segment when summing them: fewer than 2·K/32 + 8 steps of
 *    relative error 2^-24 each (2^-23 allows the scalar level's separate
 *    multiply and add), so ε_f = (2·K/32 + 8)·2^-23·M.
 *  - two levels then differ by at most 2·ε_f.
 * PLUME_CPU_ACTIVATIONS=f32 routes the kernels to the float reference; then
 * only the first bound (with the reference's K·2^-23·Σ|W·x| added) is
 * checked.
 * Also: layers the fast layout cannot take (runs of a group not a multiple
 * of 32, K % 32 ≠ 0) fall back to the reference; the provider's vtable
 * with a fake backend whose parallel_for runs 3 workers; an old backend
 * vtable without the slot.  GPTQ_KERNELS_BENCH=1 prints a benchmark
 * instead of testing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gptq_kernels.h"
#include "gptq_linear.h"
#include "gptq_pack.h"
#include "gptq_rtn.h"
#include "plume/clock.h"
#include "plume/cpu.h"
#include "plume/registry.h"
#include "../gptq_test_rng.h"


static const int k_levels[] = {PLUME_CPU_LEVEL_SCALAR, PLUME_CPU_LEVEL_AVX2,
                               PLUME_CPU_LEVEL_AVX512};
#define N_LEVELS 3

/* True when the kernels of level lv can run here; says why not, once. */
static bool level_ok(int lv)
{
    static bool said[N_LEVELS];
    const char *why = !plume_cpu_can_run(lv) ? "this CPU lacks its features"
                      : !gptq_kernels_for(lv) ? "this build has no kernels for it"
                                              : NULL;
    if (why && !said[lv]) {
        printf("# level %s skipped: %s\n", plume_cpu_level_str(lv), why);
        said[lv] = true;
    }
    return !why;
}

/* ---- a quantized layer and the test's own view of it ---- */

typedef struct tlayer {
    int64_t K, N, G;
    int bits;
    gptq_tensors t;
    uint8_t *codes;  /* [K][N] */
    int32_t *zeros;  /* [G][N] true zeros */
    int32_t *perm;   /* [K] the input order the kernels use (stable argsort of g_idx) */
    double *D;       /* [N][K] dequantized weight, exact in double */
    float *bias;     /* [N] or NULL */
    gptq_layer *l;
} tlayer;

static void tlayer_free(tlayer *L)
{
    gptq_tensors_free(&L->t);
    free(L->codes);
    free(L->zeros);
    free(L->perm);
    free(L->D);
    free(L->bias);
    gptq_layer_free(L->l);
}

/* Quantizes a random N×K weight with RTN (act-order perm when desc_act)
 * and builds the kernels' layer from it. */
static void tlayer_make(tlayer *L, int64_t K, int64_t N, const gptq_qconfig *qc, bool desc_act,
                        bool with_bias)
{
    plume_error err = {0};
    memset(L, 0, sizeof *L);
    L->K = K;
    L->N = N;
    L->bits = qc->bits;
    float *W = malloc(sizeof(float) * (size_t)(N * K));
    rnd_fill(W, N * K, 0.1f);
    int32_t *p = malloc(sizeof(int32_t) * (size_t)K);
    shuffle(p, K);
    if (gptq_rtn_quantize(W, N, K, qc, desc_act ? p : NULL, &L->t, &err))
        fail_msg("rtn: %s", err.msg);
    free(W);
    free(p);
    L->G = L->t.G;
    L->codes = malloc((size_t)(K * N));
    L->zeros = malloc(sizeof(int32_t) * (size_t)(L->G * N));
    assert_int_equal(gptq_unpack_qweight(L->t.qweight, K, N, qc->bits, L->codes, &err), 0);
    assert_int_equal(gptq_unpack_qzeros(L->t.qzeros, L->G, N, qc->bits, qc->fmt, L->zeros, &err), 0);
    L->D = malloc(sizeof(double) * (size_t)(N * K));
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            const int64_t g = L->t.g_idx[k];
            L->D[n * K + k] = (double)L->t.scales[g * N + n] *
                              ((double)L->codes[k * N + n] - (double)L->zeros[g * N + n]);
        }
    /* stable counting sort of g_idx: the identity when g_idx is monotone */
    L->perm = malloc(sizeof(int32_t) * (size_t)K);
    int64_t pos = 0;
    for (int64_t g = 0; g < L->G; g++)
        for (int64_t k = 0; k < K; k++)
            if (L->t.g_idx[k] == g)
                L->perm[pos++] = (int32_t)k;
    if (with_bias) {
        L->bias = malloc(sizeof(float) * (size_t)N);
        rnd_fill(L->bias, N, 1.0f);
    }
    gptq_load_config lc = {qc->bits, qc->group_size, qc->sym, desc_act, qc->fmt};
    if (gptq_layer_build(L->t.qweight, L->t.qzeros, L->t.scales, L->t.g_idx, L->bias, K, N, L->G,
                         &lc, &L->l, &err))
        fail_msg("build: %s", err.msg);
}

/* Random activations with block magnitudes from 1e-3 to 30 and, now and
 * then, an all-zero block of 32. */
static float *make_x(int64_t K, int n_tok)
{
    float *x = malloc(sizeof(float) * (size_t)(n_tok * K));
    for (int64_t i = 0; i < n_tok * K; i += 32) {
        const uint32_t r = rnd() % 8;
        const float m = r == 0 ? 0.0f : r == 1 ? 1e-3f : r == 2 ? 30.0f : 1.0f;
        for (int64_t j = i; j < i + 32 && j < n_tok * K; j++)
            x[j] = rndf() * m;
    }
    return x;
}

/* The expectations of one (layer, x): ref = x·Wᵀ + b, P = x̂·Wᵀ + b, the
 * activation rounding bound and ε_f (see the top of the file), [n_tok][N]. */
typedef struct expect {
    double *ref, *P, *act, *ef;
} expect;

static void expect_free(expect *e)
{
    free(e->ref);
    free(e->P);
    free(e->act);
    free(e->ef);
}

static void expect_make(const tlayer *L, const float *x, int n_tok, expect *e)
{
    const int64_t K = L->K, N = L->N, nb = K / 32;
    const size_t sz = sizeof(double) * (size_t)(n_tok * N);
    e->ref = malloc(sz);
    e->P = malloc(sz);
    e->act = malloc(sz);
    e->ef = malloc(sz);
    const bool q8 = K % 32 == 0;
    double *xh = malloc(sizeof(double) * (size_t)K); /* x̂ in the original order */
    float *xp = malloc(sizeof(float) * (size_t)K), *d = malloc(sizeof(float) * (size_t)(nb + 1));
    float *s = malloc(sizeof(float) * (size_t)(nb + 1));
    int8_t *q = malloc((size_t)K);
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * (size_t)K;
        for (int64_t i = 0; i < K; i++)
            xp[i] = xt[L->perm[i]];
        if (q8)
            plume_cpu_quantize_q8(xp, K, q, d, s);
        for (int64_t i = 0; i < K; i++)
            xh[L->perm[i]] = q8 ? (double)d[i / 32] * q[i] : xp[i];
        for (int64_t n = 0; n < N; n++) {
            const double b = L->bias ? L->bias[n] : 0.0;
            double ref = b, P = b, act = 0.0, M = fabs(b);
            for (int64_t k = 0; k < K; k++) {
                const double w = L->D[n * K + k];
                const int64_t g = L->t.g_idx[k];
                const double off = L->bits == 8 ? 128.0 : 0.0;
                const double v = (double)L->codes[k * N + n] - off, z = (double)L->zeros[g * N + n] - off;
                ref += w * xt[k];
                P += w * xh[k];
                act += fabs(w) * fabs(xt[k] - xh[k]);
                M += (double)L->t.scales[g * N + n] * (fabs(v) + fabs(z)) * fabs(xh[k]);
            }
            const size_t o = (size_t)t * (size_t)N + (size_t)n;
            e->ref[o] = ref;
            e->P[o] = P;
            e->act[o] = act;
            e->ef[o] = (2.0 * (double)K / 32.0 + 8.0) * ldexp(1.0, -23) * M;
        }
    }
    free(xh);
    free(xp);
    free(d);
    free(s);
    free(q);
}

/* Checks y of one level against the expectations. */
static void check_y(const tlayer *L, const float *x, int n_tok, const expect *e, const float *y,
                    const char *what)
{
    const bool f32 = plume_cpu_float_activations();
    for (int t = 0; t < n_tok; t++)
        for (int64_t n = 0; n < L->N; n++) {
            const size_t o = (size_t)t * (size_t)L->N + (size_t)n;
            double tol = e->act[o] + e->ef[o];
            if (f32) { /* the reference: float sums of K terms */
                double mag = L->bias ? fabs(L->bias[n]) : 0.0;
                for (int64_t k = 0; k < L->K; k++)
                    mag += fabs(L->D[n * L->K + k] * x[(size_t)t * (size_t)L->K + (size_t)k]);
                tol = e->act[o] + (double)L->K * ldexp(1.0, -23) * mag;
            }
            const double err1 = fabs((double)y[o] - e->ref[o]);
            if (!(err1 <= tol))
                fail_msg("%s: t=%d n=%lld: got %.9g, x·Wᵀ = %.9g (err %.3g > bound %.3g)", what, t,
                         (long long)n, y[o], e->ref[o], err1, tol);
            const double err2 = fabs((double)y[o] - e->P[o]);
            if (!f32 && gptq_layer_fast(L->l) && !(err2 <= e->ef[o]))
                fail_msg("%s: t=%d n=%lld: got %.9g, x̂·Wᵀ = %.9g (err %.3g > float bound %.3g)",
                         what, t, (long long)n, y[o], e->P[o], err2, e->ef[o]);
        }
}

/* Runs the layer on every level for n_tok tokens and checks each, and the
 * levels against each other. */
static void check_layer(const tlayer *L, int n_tok, const char *name)
{
    float *x = make_x(L->K, n_tok);
    expect e;
    expect_make(L, x, n_tok, &e);
    const size_t ny = (size_t)n_tok * (size_t)L->N;
    float *ys[N_LEVELS] = {0};
    for (int li = 0; li < N_LEVELS; li++) {
        const int lv = k_levels[li];
        if (!level_ok(lv))
            continue;
        plume_error err = {0};
        ys[li] = malloc(sizeof(float) * ny);
        for (size_t i = 0; i < ny; i++)
            ys[li][i] = NAN;
        if (gptq_forward_level(L->l, lv, NULL, NULL, x, n_tok, ys[li], &err))
            fail_msg("%s: %s", name, err.msg);
        char what[160];
        snprintf(what, sizeof what, "%s n_tok=%d level %s", name, n_tok, plume_cpu_level_str(lv));
        check_y(L, x, n_tok, &e, ys[li], what);
        for (int lj = 0; lj < li; lj++)
            for (size_t o = 0; ys[lj] && o < ny; o++)
                if (!(fabs((double)ys[li][o] - ys[lj][o]) <= 2.0 * e.ef[o]))
                    fail_msg("%s: %s and %s differ at %zu: %.9g vs %.9g (> %.3g)", what,
                             plume_cpu_level_str(k_levels[lj]), plume_cpu_level_str(lv), o,
                             ys[lj][o], ys[li][o], 2.0 * e.ef[o]);
    }
    for (int li = 0; li < N_LEVELS; li++)
        free(ys[li]);
    expect_free(&e);
    free(x);
}

/* bits 2/3/4/8 × sym/asym × gptq/gptq_v2 × desc_act × group 32/64/128/−1,
 * n_tok 1, 2, 5, 17, every level. */
static void test_matrix(void **st)
{
    (void)st;
    const int bits_list[] = {2, 3, 4, 8};
    const int64_t gs_list[] = {32, 64, 128, -1};
    const int toks[] = {1, 2, 5, 17};
    const int64_t K = 384;
    int layers = 0;
    for (int bi = 0; bi < 4; bi++)
        for (int sym = 0; sym < 2; sym++)
            for (int fmt = 0; fmt < 2; fmt++)
                for (int da = 0; da < 2; da++)
                    for (int gi = 0; gi < 4; gi++) {
                        const int bits = bits_list[bi];
                        /* a partial last tile of 16 rows where packing allows it */
                        const int64_t N = bits == 3 ? 96 : bits == 2 ? 48 : bits == 4 ? 40 : 36;
                        gptq_qconfig qc = {bits, gs_list[gi], sym != 0,
                                           fmt ? GPTQ_ZERO_V2 : GPTQ_ZERO_V1};
                        tlayer L;
                        tlayer_make(&L, K, N, &qc, da != 0, (gi + da) % 2 == 0);
                        char name[128];
                        snprintf(name, sizeof name, "bits=%d %s %s desc_act=%d gs=%lld", bits,
                                 sym ? "sym" : "asym", fmt ? "gptq_v2" : "gptq", da,
                                 (long long)gs_list[gi]);
                        if (!gptq_layer_fast(L.l))
                            fail_msg("%s: expected the fast layout", name);
                        assert_int_equal(gptq_layer_permuted(L.l), da && L.G > 1);
                        for (int ti = 0; ti < 4; ti++)
                            check_layer(&L, toks[ti], name);
                        tlayer_free(&L);
                        layers++;
                    }
    printf("# %d layers checked\n", layers);
}

/* Layers the fast layout cannot take keep the reference kernel (and say so
 * on stderr): runs of 48 inputs per group, and K = 72 (not a multiple of
 * 32). */
static void test_fallback(void **st)
{
    (void)st;
    struct {
        int64_t K, N, gs;
        bool da;
    } cases[] = {{384, 40, 48, false}, {384, 40, 48, true}, {72, 24, -1, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        gptq_qconfig qc = {4, cases[c].gs, false, GPTQ_ZERO_V2};
        tlayer L;
        tlayer_make(&L, cases[c].K, cases[c].N, &qc, cases[c].da, true);
        assert_false(gptq_layer_fast(L.l));
        for (int nt = 1; nt <= 5; nt += 4)
            check_layer(&L, nt, "fallback");
        tlayer_free(&L);
    }
}

/* ---- the provider's vtable with fake weights and fake backends ---- */

#define PFX "blk.0.ffn_down"
#define RAW_I32 0xffffffffu /* a raw 32-bit tensor, as the safetensors reader gives it */

typedef struct fake_ck {
    plume_tensor t[5];
    char names[5][64];
    size_t n;
} fake_ck;

static size_t fk_n(const plume_checkpoint *c) { return ((const fake_ck *)(const void *)c)->n; }
static const plume_tensor *fk_tensor(const plume_checkpoint *c, size_t i)
{
    return &((const fake_ck *)(const void *)c)->t[i];
}

static const plume_weight_format_vtable k_fake_fmt = {
    .struct_size = sizeof(plume_weight_format_vtable),
    .interface_version = PLUME_WEIGHT_FORMAT_INTERFACE_VERSION,
    .name = "fake",
    .n_tensors = fk_n,
    .tensor = fk_tensor,
};

static void fk_add(fake_ck *ck, const char *suffix, uint32_t type, int64_t ne0, int64_t ne1,
                   const void *data, size_t esize)
{
    plume_tensor *t = &ck->t[ck->n];
    snprintf(ck->names[ck->n], sizeof ck->names[0], "%s.%s", PFX, suffix);
    t->name = ck->names[ck->n];
    t->type = type;
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    for (int d = 2; d < PLUME_MAX_DIMS; d++)
        t->ne[d] = 1;
    t->data = data;
    t->nbytes = (size_t)(ne0 * (ne1 ? ne1 : 1)) * esize;
    ck->n++;
}

typedef struct fake_be {
    int calls, mask, nth;
} fake_be;

/* Runs the workers out of order, each once, with nth = fb->nth. */
/* The fake backend's buffers are host memory: a handle is the address. */
static void *fake_host_ptr(plume_backend *b, const plume_buf *buf)
{
    (void)b;
    return (void *)buf;
}

static void fake_parallel_for(plume_backend *b, void (*fn)(void *ctx, int ith, int nth), void *ctx)
{
    fake_be *fb = (fake_be *)(void *)b;
    fb->calls++;
    for (int i = fb->nth - 1; i >= 0; i--) {
        fn(ctx, i, fb->nth);
        fb->mask |= 1 << i;
    }
}

static void no_parallel_for(plume_backend *b, void (*fn)(void *ctx, int ith, int nth), void *ctx)
{
    (void)b;
    (void)fn;
    (void)ctx;
    fail_msg("parallel_for called through a vtable too old to have it");
}

static void test_vtable_threads(void **st)
{
    (void)st;
    plume_error err = {0};
    const int64_t K = 256, N = 72; /* 5 tiles, the last one partial */
    gptq_qconfig qc = {4, 64, false, GPTQ_ZERO_V1};
    tlayer L;
    tlayer_make(&L, K, N, &qc, true, true);
    fake_ck ck = {0};
    fk_add(&ck, "qweight", RAW_I32, N, K / 8, L.t.qweight, 4);
    fk_add(&ck, "qzeros", RAW_I32, N / 8, L.G, L.t.qzeros, 4);
    fk_add(&ck, "scales", PLUME_DTYPE_F32, N, L.G, L.t.scales, 4);
    fk_add(&ck, "g_idx", RAW_I32, K, 0, L.t.g_idx, 4);
    fk_add(&ck, "bias", PLUME_DTYPE_F32, N, 0, L.bias, 4);
    plume_weights w = {&k_fake_fmt, (plume_checkpoint *)(void *)&ck};
    const plume_linear_vtable *lin = gptq_linear_vtable();
    plume_settings *s;
    assert_int_equal(plume_settings_new("quantization", &s, &err), 0);
    assert_int_equal(plume_settings_set(s, "group_size", "64", &err), 0);
    assert_int_equal(plume_settings_set(s, "sym", "false", &err), 0);
    assert_int_equal(plume_settings_set(s, "desc_act", "true", &err), 0);
    plume_backend_vtable bvt = {.struct_size = sizeof(plume_backend_vtable),
                                .interface_version = PLUME_BACKEND_INTERFACE_VERSION,
                                .name = "cpu",
                                .host_ptr = fake_host_ptr,
                                .parallel_for = fake_parallel_for};
    fake_be fb = {.nth = 3};
    plume_backend *b = (plume_backend *)(void *)&fb;
    plume_linear *l;
    if (lin->load(&w, PFX, s, &bvt, b, &l, &err))
        fail_msg("load: %s", err.msg);
    for (int nt = 1; nt <= 17; nt += 16) {
        float *x = make_x(K, nt);
        float *y = malloc(sizeof(float) * (size_t)(nt * N)), *y1 = malloc(sizeof(float) * (size_t)(nt * N));
        fb.calls = fb.mask = 0;
        assert_int_equal(lin->forward(l, &bvt, b, (const plume_buf *)x, nt, (plume_buf *)y, &err),
                         0);
        if (!plume_cpu_float_activations()) {
            assert_int_equal(fb.calls, 1);
            assert_int_equal(fb.mask, 7);
        }
        expect e;
        expect_make(&L, x, nt, &e);
        check_y(&L, x, nt, &e, y, "vtable, 3 threads");
        /* the same layer without threads: bit-identical (a row's result does
         * not depend on the split) */
        plume_backend_vtable serial = bvt;
        serial.parallel_for = NULL;
        assert_int_equal(
            lin->forward(l, &serial, b, (const plume_buf *)x, nt, (plume_buf *)y1, &err), 0);
        assert_memory_equal(y, y1, sizeof(float) * (size_t)(nt * N));
        /* a backend vtable from before the parallel_for slot: not called */
        plume_backend_vtable old = bvt;
        old.struct_size = (uint32_t)offsetof(plume_backend_vtable, parallel_for);
        old.parallel_for = no_parallel_for;
        assert_int_equal(lin->forward(l, &old, b, (const plume_buf *)x, nt, (plume_buf *)y1, &err),
                         0);
        assert_memory_equal(y, y1, sizeof(float) * (size_t)(nt * N));
        /* more workers than tiles: the idle ones return at once */
        fb.nth = 7;
        assert_int_equal(lin->forward(l, &bvt, b, (const plume_buf *)x, nt, (plume_buf *)y1, &err),
                         0);
        assert_memory_equal(y, y1, sizeof(float) * (size_t)(nt * N));
        fb.nth = 3;
        expect_free(&e);
        free(x);
        free(y);
        free(y1);
    }
    /* the provider follows the core's level (PLUME_CPU_FEATURES included) */
    if (gptq_kernels_for(plume_cpu_active_level()))
        assert_int_equal(gptq_kernels_active()->level, plume_cpu_active_level());
    /* a level this CPU cannot run is an error, not a silent fallback */
    for (int li = 0; li < N_LEVELS; li++)
        if (!plume_cpu_can_run(k_levels[li])) {
            float x[256] = {0}, y[72];
            assert_int_equal(gptq_forward_level(L.l, k_levels[li], NULL, NULL, x, 1, y, &err), -1);
            assert_non_null(strstr(err.msg, "cannot run"));
        }
    lin->destroy(l);
    plume_settings_free(s);
    tlayer_free(&L);
}

/* ---- GPTQ_KERNELS_BENCH=1: weight GB/s (n_tok = 1) and GFLOP/s (64) ---- */

/* Seconds per forward, the best of 5 runs of enough calls for ~0.1 s. */
static double time_forward(const gptq_layer *l, int lv, const plume_backend_vtable *bvt,
                           plume_backend *b, const float *x, int nt, float *y)
{
    plume_error err = {0};
    int reps = 1;
    for (;;) {
        const double t0 = plume_clock_seconds();
        for (int i = 0; i < reps; i++)
            gptq_forward_level(l, lv, bvt, b, x, nt, y, &err);
        if (plume_clock_seconds() - t0 > 0.02)
            break;
        reps *= 2;
    }
    reps *= 5;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        const double t0 = plume_clock_seconds();
        for (int i = 0; i < reps; i++)
            gptq_forward_level(l, lv, bvt, b, x, nt, y, &err);
        const double dt = (plume_clock_seconds() - t0) / reps;
        best = dt < best ? dt : best;
    }
    return best;
}

static void bench(void)
{
    plume_error err = {0};
    plume_registry *reg;
    if (plume_registry_create(&reg, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    const plume_backend_vtable *cpu = plume_registry_find_backend(reg, "cpu");
    const int64_t shapes[][2] = {{576, 1536}, {1536, 576}, {4096, 11008}}; /* K, N */
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t K = shapes[si][0], N = shapes[si][1];
        gptq_qconfig qc = {4, 128, true, GPTQ_ZERO_V1};
        tlayer L;
        tlayer_make(&L, K, N, &qc, false, false);
        const double wb = (double)gptq_layer_weight_bytes(L.l);
        float *x = make_x(K, 64), *y = malloc(sizeof(float) * (size_t)(64 * N));
        for (int th = 1; th <= 2; th++) {
            plume_backend *b;
            if (cpu->create(NULL, th, &b, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                break;
            }
            for (int li = 0; li < N_LEVELS; li++) {
                const int lv = k_levels[li];
                if (!level_ok(lv))
                    continue;
                const double t1 = time_forward(L.l, lv, cpu, b, x, 1, y);
                const double t64 = time_forward(L.l, lv, cpu, b, x, 64, y);
                printf("K=%-5lld N=%-5lld 4-bit g128  %d thread%s  %-6s  n_tok=1: %7.1f us %6.1f GB/s"
                       "   n_tok=64: %8.1f us %6.1f GFLOP/s\n",
                       (long long)K, (long long)N, th, th > 1 ? "s" : " ", plume_cpu_level_str(lv),
                       t1 * 1e6, wb / t1 * 1e-9, t64 * 1e6, 2.0 * (double)K * (double)N * 64 / t64 * 1e-9);
            }
            cpu->destroy(b);
        }
        free(x);
        free(y);
        tlayer_free(&L);
    }
    plume_registry_free(reg);
}

int main(void)
{
    const char *b = getenv("GPTQ_KERNELS_BENCH");
    if (b && *b && strcmp(b, "0") != 0) {
        bench();
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_vtable_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
