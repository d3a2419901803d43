/* quant-gptq: the GPTQ algorithm (gptq_algo.c) against RTN and against
 * errors computed straight from synthetic calibration data X ([n][K],
 * low rank + noise with uneven column scales, so H = 2/n·XᵀX is far from
 * diagonal and act-order matters).
 *   (a) ||X·Wᵀ − X·Wqᵀ||² of GPTQ is clearly below RTN's, over bits 4/3,
 *       group 128/32/−1, sym/asym, desc_act off/on (and static groups);
 *   (b) the returned loss and gptq_output_error equal 2/n·||X(W − Wq)ᵀ||²;
 *   (c) the tensors dequantize exactly to Wq, codes/zeros/scales in range;
 *   (d) act-order g_idx: g_idx[perm[i]] == i/g, each group g members;
 *   (e) H = identity: GPTQ == RTN bit for bit;
 *   (f) an indefinite H with damp 0 fails with the "--damp" message;
 * plus gptq_hinv_chol against the reference's route (cholesky →
 * cholesky_inverse → cholesky upper, done naively here) and dead inputs.
 * `test_gptq_algo --bench` times two SmolLM-sized layers instead. */
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

#include "gptq_algo.h"
#include "gptq_pack.h"
#include "gptq_rtn.h"
#include "plume/clock.h"

/* ---- deterministic random numbers ---- */
typedef struct rng {
    uint64_t s;
} rng;
static uint32_t rnd(rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (uint32_t)(r->s >> 16);
}
static double unif(rng *r) { return ((rnd(r) & 0xffffff) + 0.5) / 16777216.0; }
static double gauss(rng *r) { return sqrt(-2.0 * log(unif(r))) * cos(6.283185307179586 * unif(r)); }

/* ---- calibration data and a weight ---- */
typedef struct calib {
    int64_t n, K;
    double *X; /* [n][K] */
    double *H; /* [K][K] = 2/n·XᵀX */
} calib;

/* X = Z·A + 0.05·noise, Z [n][r], A [r][K], columns scaled by e^(±1.5):
 * strongly correlated inputs with uneven diag(H).  dead: every dead-th
 * column is zero (0: none). */
static calib make_calib(int64_t n, int64_t K, int rank, int dead, uint64_t seed)
{
    rng r = {seed};
    calib c = {n, K, calloc((size_t)(n * K), sizeof(double)), calloc((size_t)(K * K), sizeof(double))};
    assert_non_null(c.X);
    assert_non_null(c.H);
    double *A = malloc((size_t)(rank * K) * sizeof *A), *colsc = malloc((size_t)K * sizeof *colsc);
    assert_non_null(A);
    assert_non_null(colsc);
    for (int64_t i = 0; i < rank * K; i++)
        A[i] = gauss(&r);
    for (int64_t k = 0; k < K; k++)
        colsc[k] = exp(3.0 * unif(&r) - 1.5);
    for (int64_t t = 0; t < n; t++) {
        double z[64];
        for (int j = 0; j < rank; j++)
            z[j] = gauss(&r);
        for (int64_t k = 0; k < K; k++) {
            double v = 0.05 * gauss(&r);
            for (int j = 0; j < rank; j++)
                v += z[j] * A[j * K + k];
            c.X[t * K + k] = dead && k % dead == dead - 1 ? 0.0 : v * colsc[k];
        }
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < K; i++) {
            double xi = c.X[t * K + i] * 2.0 / (double)n;
            for (int64_t j = 0; j < K; j++)
                c.H[i * K + j] += xi * c.X[t * K + j];
        }
    free(A);
    free(colsc);
    return c;
}

static void calib_free(calib *c)
{
    free(c->X);
    free(c->H);
}

static float *make_weight(int64_t N, int64_t K, uint64_t seed)
{
    rng r = {seed};
    float *W = malloc((size_t)(N * K) * sizeof *W);
    assert_non_null(W);
    for (int64_t i = 0; i < N * K; i++)
        W[i] = (float)(0.02 * gauss(&r) + (rnd(&r) % 97 == 0 ? 0.1 * gauss(&r) : 0.0));
    return W;
}

/* 2/n·||X·Wᵀ − X·Wqᵀ||²_F, straight from X. */
static double direct_error(const calib *c, const float *W, const float *Wq, int64_t N)
{
    int64_t K = c->K;
    double *D = malloc((size_t)K * sizeof *D), e = 0;
    assert_non_null(D);
    for (int64_t o = 0; o < N; o++) {
        for (int64_t k = 0; k < K; k++)
            D[k] = (double)W[o * K + k] - (double)Wq[o * K + k];
        for (int64_t t = 0; t < c->n; t++) {
            double y = 0;
            for (int64_t k = 0; k < K; k++)
                y += c->X[t * K + k] * D[k];
            e += y * y;
        }
    }
    free(D);
    return e * 2.0 / (double)c->n;
}

/* diag(H)[k] with a dead input counted as 1 (the reference's H[dead, dead] = 1). */
static double dkey(const double *H, int64_t K, int64_t k)
{
    return H[k * K + k] == 0 ? 1.0 : H[k * K + k];
}

/* The act-order the reference uses: argsort(diag H, descending), stable. */
static void ref_perm(const double *H, int64_t K, int32_t *perm)
{
    for (int64_t i = 0; i < K; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = 1; i < K; i++) { /* insertion sort: stable */
        int32_t v = perm[i];
        int64_t j = i - 1;
        while (j >= 0 && dkey(H, K, perm[j]) < dkey(H, K, v)) {
            perm[j + 1] = perm[j];
            j--;
        }
        perm[j + 1] = v;
    }
}

/* (c): dequantizes out, compares with Wq bit for bit, checks ranges. */
static void check_tensors(const gptq_tensors *t, const float *Wq, int64_t group_size, bool sym,
                          gptq_zero_format fmt)
{
    int64_t K = t->K, N = t->N, G = t->G;
    int maxq = (1 << t->bits) - 1;
    plume_error err;
    float *D = malloc((size_t)(N * K) * sizeof *D);
    int32_t *z = malloc((size_t)(G * N) * sizeof *z);
    uint8_t *codes = malloc((size_t)(K * N));
    assert_non_null(D);
    assert_non_null(z);
    assert_non_null(codes);
    assert_int_equal(gptq_check_g_idx(t->g_idx, K, G, &err), 0);
    assert_int_equal(gptq_dequantize(t->qweight, t->qzeros, t->scales, t->g_idx, K, N, G,
                                     group_size, t->bits, fmt, D, &err),
                     0);
    for (int64_t i = 0; i < N * K; i++)
        if (memcmp(&D[i], &Wq[i], sizeof(float)) != 0)
            fail_msg("dequant[%lld] = %.9g but Wq = %.9g", (long long)i, D[i], Wq[i]);
    assert_int_equal(gptq_unpack_qzeros(t->qzeros, G, N, t->bits, fmt, z, &err), 0);
    for (int64_t i = 0; i < G * N; i++) {
        if (sym)
            assert_int_equal(z[i], (maxq + 1) / 2);
        assert_true(z[i] >= (fmt == GPTQ_ZERO_V1 ? 1 : 0) && z[i] <= maxq);
        assert_true(isfinite(t->scales[i]) && t->scales[i] > 0);
    }
    assert_int_equal(gptq_unpack_qweight(t->qweight, K, N, t->bits, codes, &err), 0);
    for (int64_t i = 0; i < K * N; i++)
        assert_true(codes[i] <= maxq);
    free(D);
    free(z);
    free(codes);
}

/* ---- (a) (b) (c) (d): the grid ---- */
static void run_grid(bool static_groups)
{
    const int64_t N = 64, K = 256;
    calib c = make_calib(512, K, 12, 0, 12345);
    float *W = make_weight(N, K, 777);
    float *Wq = malloc((size_t)(N * K) * sizeof *Wq), *Wr = malloc((size_t)(N * K) * sizeof *Wr);
    int32_t *perm = malloc((size_t)K * sizeof *perm);
    assert_non_null(Wq);
    assert_non_null(Wr);
    assert_non_null(perm);
    ref_perm(c.H, K, perm);
    const int bitsv[] = {4, 3};
    const int64_t groups[] = {128, 32, -1};
    double worst = 0;
    for (int bi = 0; bi < 2; bi++)
        for (int gi = 0; gi < 3; gi++)
            for (int mode = 0; mode < 3; mode++) /* sym v1, asym v1, asym v2 */
                for (int da = 0; da < 2; da++) {
                    if (static_groups && groups[gi] < 0)
                        continue;
                    bool sym = mode == 0;
                    gptq_zero_format fmt = mode == 2 ? GPTQ_ZERO_V2 : GPTQ_ZERO_V1;
                    gptq_algo_params p = gptq_algo_defaults(bitsv[bi], groups[gi], sym);
                    p.fmt = fmt;
                    p.desc_act = da;
                    p.static_groups = static_groups;
                    gptq_tensors t, rt;
                    plume_error err;
                    double loss = -1;
                    if (gptq_quantize(W, N, K, c.H, &p, &t, Wq, &loss, &err))
                        fail_msg("gptq_quantize: %s", err.msg);
                    gptq_qconfig q = {bitsv[bi], groups[gi], sym, fmt};
                    if (gptq_rtn_quantize(W, N, K, &q, NULL, &rt, &err))
                        fail_msg("rtn: %s", err.msg);
                    assert_int_equal(gptq_dequantize(rt.qweight, rt.qzeros, rt.scales, rt.g_idx,
                                                     K, N, rt.G, groups[gi], q.bits, fmt, Wr,
                                                     &err),
                                     0);
                    double eg = direct_error(&c, W, Wq, N), er = direct_error(&c, W, Wr, N);
                    double oe = gptq_output_error(W, Wq, N, K, c.H);
                    double oer = gptq_output_error(W, Wr, N, K, c.H);
                    /* (b) */
                    assert_true(fabs(loss - eg) <= 1e-9 * eg);
                    assert_true(fabs(oe - eg) <= 1e-9 * eg);
                    assert_true(fabs(oer - er) <= 1e-9 * er);
                    /* (a) */
                    double ratio = eg / er;
                    if (ratio > worst)
                        worst = ratio;
                    if (!(ratio < 0.75))
                        fail_msg("bits %d group %lld %s %s desc_act %d static %d: GPTQ error %g is "
                                 "not clearly below RTN's %g",
                                 bitsv[bi], (long long)groups[gi], sym ? "sym" : "asym",
                                 fmt == GPTQ_ZERO_V1 ? "v1" : "v2", da, static_groups, eg, er);
                    /* (c) */
                    check_tensors(&t, Wq, groups[gi], sym, fmt);
                    /* (d) */
                    int64_t gs = groups[gi] > 0 ? groups[gi] : K, G = K / gs;
                    assert_int_equal(t.G, G);
                    int64_t *count = calloc((size_t)G, sizeof *count);
                    assert_non_null(count);
                    for (int64_t i = 0; i < K; i++) {
                        if (!static_groups && da) /* g_idx[perm[i]] = i / g (§1.4) */
                            assert_int_equal(t.g_idx[perm[i]], i / gs);
                        else /* k / g, also for static groups with act-order */
                            assert_int_equal(t.g_idx[i], i / gs);
                        count[t.g_idx[i]]++;
                    }
                    for (int64_t g = 0; g < G; g++)
                        assert_int_equal(count[g], gs);
                    free(count);
                    gptq_tensors_free(&t);
                    gptq_tensors_free(&rt);
                }
    print_message("worst GPTQ/RTN error ratio%s: %.3f\n", static_groups ? " (static groups)" : "",
                  worst);
    free(W);
    free(Wq);
    free(Wr);
    free(perm);
    calib_free(&c);
}

static void test_gptq_beats_rtn(void **state)
{
    (void)state;
    run_grid(false);
}

static void test_gptq_static_groups(void **state)
{
    (void)state;
    run_grid(true);
}

/* act-order must actually reorder: the data has uneven diag(H), so the
 * permutation is far from the identity and g_idx is not monotone. */
static void test_act_order_g_idx_not_monotone(void **state)
{
    (void)state;
    const int64_t N = 32, K = 128;
    calib c = make_calib(256, K, 8, 0, 99);
    float *W = make_weight(N, K, 5), *Wq = malloc((size_t)(N * K) * sizeof(float));
    assert_non_null(Wq);
    gptq_algo_params p = gptq_algo_defaults(4, 32, true);
    p.desc_act = true;
    gptq_tensors t;
    plume_error err;
    assert_int_equal(gptq_quantize(W, N, K, c.H, &p, &t, Wq, NULL, &err), 0);
    int descents = 0;
    for (int64_t k = 1; k < K; k++)
        descents += t.g_idx[k] < t.g_idx[k - 1];
    assert_true(descents > 10);
    gptq_tensors_free(&t);
    free(W);
    free(Wq);
    calib_free(&c);
}

/* ---- (e) H = identity ----
 * Why GPTQ == RTN exactly: H = I gives the damped H = (1+λ)·I, whose
 * inverse (1+λ)⁻¹·I has the diagonal upper Cholesky factor U = (1+λ)^−½·I.
 * Every error-propagation step multiplies the scaled error by an
 * off-diagonal entry of U, i.e. by (±)0: the in-block update w −= e·0 and
 * the lazy update W −= Err·0 leave every weight exactly as it was (x − 0
 * is x in IEEE arithmetic).  So each column is quantized from its original
 * value, and each group's params are computed from original values — the
 * same find_params and rounding as RTN, hence the same codes, scales,
 * zeros and g_idx.  With desc_act all diag entries tie, and the stable
 * act-order is the identity. */
static void test_identity_hessian_equals_rtn(void **state)
{
    (void)state;
    const int64_t N = 64, K = 128;
    float *W = make_weight(N, K, 4242);
    float *Wq = malloc((size_t)(N * K) * sizeof *Wq), *Wr = malloc((size_t)(N * K) * sizeof *Wr);
    double *H = calloc((size_t)(K * K), sizeof *H);
    assert_non_null(Wq);
    assert_non_null(Wr);
    assert_non_null(H);
    for (int64_t k = 0; k < K; k++)
        H[k * K + k] = 1.0;
    const int bitsv[] = {2, 3, 4, 8};
    const int64_t groups[] = {32, -1, 64, 48}; /* 48: a short last group */
    for (int bi = 0; bi < 4; bi++)
        for (int gi = 0; gi < 4; gi++)
            for (int mode = 0; mode < 3; mode++)
                for (int da = 0; da < 2; da++) {
                    bool sym = mode == 0;
                    gptq_zero_format fmt = mode == 2 ? GPTQ_ZERO_V2 : GPTQ_ZERO_V1;
                    gptq_algo_params p = gptq_algo_defaults(bitsv[bi], groups[gi], sym);
                    p.fmt = fmt;
                    p.desc_act = da;
                    p.block_size = 48; /* blocks that straddle groups */
                    gptq_qconfig q = {bitsv[bi], groups[gi], sym, fmt};
                    gptq_tensors t, rt;
                    plume_error err;
                    double loss;
                    if (gptq_quantize(W, N, K, H, &p, &t, Wq, &loss, &err))
                        fail_msg("gptq_quantize: %s", err.msg);
                    assert_int_equal(gptq_rtn_quantize(W, N, K, &q, NULL, &rt, &err), 0);
                    assert_int_equal(t.G, rt.G);
                    int64_t kw = gptq_packed_len(K, q.bits), nw = gptq_packed_len(N, q.bits);
                    assert_memory_equal(t.qweight, rt.qweight, (size_t)(kw * N) * 4);
                    assert_memory_equal(t.qzeros, rt.qzeros, (size_t)(t.G * nw) * 4);
                    assert_memory_equal(t.scales, rt.scales, (size_t)(t.G * N) * 4);
                    assert_memory_equal(t.g_idx, rt.g_idx, (size_t)K * 4);
                    assert_int_equal(gptq_dequantize(rt.qweight, rt.qzeros, rt.scales, rt.g_idx,
                                                     K, N, rt.G, groups[gi], q.bits, fmt, Wr,
                                                     &err),
                                     0);
                    assert_memory_equal(Wq, Wr, (size_t)(N * K) * sizeof(float));
                    /* with H = I the loss is ||W − Wq||² */
                    double fro = 0;
                    for (int64_t i = 0; i < N * K; i++)
                        fro += ((double)W[i] - Wq[i]) * ((double)W[i] - Wq[i]);
                    assert_true(fabs(loss - fro) <= 1e-12 * fro);
                    gptq_tensors_free(&t);
                    gptq_tensors_free(&rt);
                }
    free(W);
    free(Wq);
    free(Wr);
    free(H);
}

/* ---- (f) indefinite H ---- */
static void test_indefinite_hessian_fails(void **state)
{
    (void)state;
    const int64_t N = 8, K = 32;
    float *W = make_weight(N, K, 1), *Wq = malloc((size_t)(N * K) * sizeof(float));
    double *H = calloc((size_t)(K * K), sizeof *H);
    assert_non_null(Wq);
    assert_non_null(H);
    for (int64_t k = 0; k < K; k++)
        H[k * K + k] = 1.0;
    H[3 * K + 7] = H[7 * K + 3] = 2.0; /* eigenvalue −1 with a positive diagonal */
    gptq_algo_params p = gptq_algo_defaults(4, -1, true);
    p.damp_percent = 0;
    gptq_tensors t;
    plume_error err = {0};
    assert_int_equal(gptq_quantize(W, N, K, H, &p, &t, Wq, NULL, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_RANGE);
    assert_non_null(strstr(err.msg, "not positive definite"));
    assert_non_null(strstr(err.msg, "--damp"));
    assert_null(t.qweight);
    print_message("message: %s\n", err.msg);
    /* enough damping makes it positive definite: 2.0·mean(diag) = 2 > 1 */
    p.damp_percent = 2.0;
    assert_int_equal(gptq_quantize(W, N, K, H, &p, &t, Wq, NULL, &err), 0);
    gptq_tensors_free(&t);
    /* bad parameters are named */
    p.block_size = 0;
    assert_int_equal(gptq_quantize(W, N, K, H, &p, &t, Wq, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "block_size"));
    p = gptq_algo_defaults(5, -1, true);
    assert_int_equal(gptq_quantize(W, N, K, H, &p, &t, Wq, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "bits"));
    p = gptq_algo_defaults(4, -1, true);
    H[0] = NAN;
    assert_int_equal(gptq_quantize(W, N, K, H, &p, &t, Wq, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "not finite"));
    free(W);
    free(Wq);
    free(H);
}

/* ---- Hinv against the reference's route ---- */

/* Naive lower Cholesky in place (lower triangle), 0 on success. */
static int naive_chol_lower(double *A, int64_t K)
{
    for (int64_t j = 0; j < K; j++) {
        double d = A[j * K + j];
        for (int64_t k = 0; k < j; k++)
            d -= A[j * K + k] * A[j * K + k];
        if (!(d > 0))
            return -1;
        A[j * K + j] = sqrt(d);
        for (int64_t i = j + 1; i < K; i++) {
            double s = A[i * K + j];
            for (int64_t k = 0; k < j; k++)
                s -= A[i * K + k] * A[j * K + k];
            A[i * K + j] = s / A[j * K + j];
        }
    }
    return 0;
}

/* U = cholesky(cholesky_inverse(cholesky(A)), upper=True), naively. */
static void reference_hinv(const double *A, int64_t K, double *U)
{
    double *L = malloc((size_t)(K * K) * sizeof *L), *Li = calloc((size_t)(K * K), sizeof *Li);
    double *Ainv = malloc((size_t)(K * K) * sizeof *Ainv);
    assert_non_null(L);
    assert_non_null(Li);
    assert_non_null(Ainv);
    memcpy(L, A, (size_t)(K * K) * sizeof *L);
    assert_int_equal(naive_chol_lower(L, K), 0);
    for (int64_t j = 0; j < K; j++) /* Li = L⁻¹ by forward substitution */
        for (int64_t i = j; i < K; i++) {
            double s = i == j ? 1.0 : 0.0;
            for (int64_t k = j; k < i; k++)
                s -= L[i * K + k] * Li[k * K + j];
            Li[i * K + j] = s / L[i * K + i];
        }
    for (int64_t i = 0; i < K; i++) /* A⁻¹ = Liᵀ·Li */
        for (int64_t j = 0; j < K; j++) {
            double s = 0;
            for (int64_t k = i > j ? i : j; k < K; k++)
                s += Li[k * K + i] * Li[k * K + j];
            Ainv[i * K + j] = s;
        }
    assert_int_equal(naive_chol_lower(Ainv, K), 0); /* upper factor = lowerᵀ */
    for (int64_t i = 0; i < K; i++)
        for (int64_t j = 0; j < K; j++)
            U[i * K + j] = j >= i ? Ainv[j * K + i] : 0.0;
    free(L);
    free(Li);
    free(Ainv);
}

static void test_hinv_matches_reference_route(void **state)
{
    (void)state;
    const int64_t sizes[] = {1, 5, 64, 150, 200};
    for (int si = 0; si < 5; si++) {
        int64_t K = sizes[si];
        calib c = make_calib(3 * K + 8, K, K < 8 ? 1 : 6, 0, 31 + (uint64_t)K);
        double mean = 0;
        for (int64_t k = 0; k < K; k++)
            mean += c.H[k * K + k] / (double)K;
        for (int64_t k = 0; k < K; k++)
            c.H[k * K + k] += 0.01 * mean;
        double *A = malloc((size_t)(K * K) * sizeof *A), *U = malloc((size_t)(K * K) * sizeof *U);
        assert_non_null(A);
        assert_non_null(U);
        memcpy(A, c.H, (size_t)(K * K) * sizeof *A);
        plume_error err;
        if (gptq_hinv_chol(A, K, &err))
            fail_msg("gptq_hinv_chol: %s", err.msg);
        reference_hinv(c.H, K, U);
        double umax = 0, dmax = 0;
        for (int64_t i = 0; i < K * K; i++) {
            umax = fmax(umax, fabs(U[i]));
            dmax = fmax(dmax, fabs(U[i] - A[i]));
        }
        for (int64_t i = 0; i < K; i++) {
            assert_true(A[i * K + i] > 0);
            for (int64_t j = 0; j < i; j++)
                assert_true(A[i * K + j] == 0.0);
        }
        if (!(dmax <= 1e-8 * umax))
            fail_msg("K %lld: Hinv differs from the reference route by %g (max |U| %g)",
                     (long long)K, dmax, umax);
        free(A);
        free(U);
        calib_free(&c);
    }
}

/* ---- dead inputs ---- */
static void test_dead_inputs(void **state)
{
    (void)state;
    const int64_t N = 32, K = 128;
    calib c = make_calib(300, K, 8, 10, 2024); /* columns 9, 19, ... are zero */
    float *W = make_weight(N, K, 8), *Wq = malloc((size_t)(N * K) * sizeof(float));
    assert_non_null(Wq);
    for (int da = 0; da < 2; da++) {
        gptq_algo_params p = gptq_algo_defaults(4, 32, false);
        p.desc_act = da;
        gptq_tensors t;
        plume_error err;
        double loss;
        if (gptq_quantize(W, N, K, c.H, &p, &t, Wq, &loss, &err))
            fail_msg("gptq_quantize: %s", err.msg);
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 9; k < K; k += 10)
                assert_true(Wq[n * K + k] == 0.0f); /* W[:, dead] = 0 quantizes to 0 */
        double eg = direct_error(&c, W, Wq, N);
        assert_true(fabs(loss - eg) <= 1e-9 * eg);
        check_tensors(&t, Wq, 32, false, GPTQ_ZERO_V1);
        gptq_tensors_free(&t);
    }
    free(W);
    free(Wq);
    calib_free(&c);
}

/* ---- --bench: SmolLM-135M sized layers ---- */
static int bench(void)
{
    const int64_t shapes[2][2] = {{576, 1536}, {1536, 576}}; /* {N, K} */
    for (int s = 0; s < 2; s++) {
        int64_t N = shapes[s][0], K = shapes[s][1];
        rng r = {7};
        double *H = calloc((size_t)(K * K), sizeof *H);
        float *W = make_weight(N, K, 3), *Wq = malloc((size_t)(N * K) * sizeof(float));
        /* H = 2/n·XᵀX from n = 2K random rows of rank 64 + noise */
        int64_t n = 2 * K, rk = 64;
        double *A = malloc((size_t)(rk * K) * sizeof *A), *x = malloc((size_t)K * sizeof *x);
        if (!H || !Wq || !A || !x)
            return 1;
        for (int64_t i = 0; i < rk * K; i++)
            A[i] = gauss(&r);
        for (int64_t t = 0; t < n; t++) {
            for (int64_t k = 0; k < K; k++)
                x[k] = 0.1 * gauss(&r);
            for (int64_t j = 0; j < rk; j++) {
                double z = gauss(&r);
                for (int64_t k = 0; k < K; k++)
                    x[k] += z * A[j * K + k];
            }
            for (int64_t i = 0; i < K; i++)
                for (int64_t j = 0; j < K; j++)
                    H[i * K + j] += 2.0 / (double)n * x[i] * x[j];
        }
        const struct {
            const char *name;
            int64_t g;
            bool da;
        } cfg[] = {{"4-bit g128", 128, false}, {"4-bit g128 desc_act", 128, true}};
        for (int ci = 0; ci < 2; ci++) {
            gptq_algo_params p = gptq_algo_defaults(4, cfg[ci].g, true);
            p.desc_act = cfg[ci].da;
            gptq_tensors t;
            plume_error err;
            double loss, t0 = plume_clock_seconds();
            if (gptq_quantize(W, N, K, H, &p, &t, Wq, &loss, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            double t1 = plume_clock_seconds();
            double l2 = gptq_output_error(W, Wq, N, K, H);
            double t2 = plume_clock_seconds();
            printf("N %lld x K %lld, %s: gptq_quantize %.3f s (incl. loss; gptq_output_error alone "
                   "%.3f s), loss %.6g\n",
                   (long long)N, (long long)K, cfg[ci].name, t1 - t0, t2 - t1, loss);
            (void)l2;
            gptq_tensors_free(&t);
        }
        double *U = malloc((size_t)(K * K) * sizeof *U);
        memcpy(U, H, (size_t)(K * K) * sizeof *U);
        for (int64_t k = 0; k < K; k++)
            U[k * K + k] += 0.01;
        double t0 = plume_clock_seconds();
        plume_error err;
        gptq_hinv_chol(U, K, &err);
        printf("  gptq_hinv_chol K %lld: %.3f s\n", (long long)K, plume_clock_seconds() - t0);
        free(U);
        free(A);
        free(x);
        free(H);
        free(W);
        free(Wq);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gptq_beats_rtn),
        cmocka_unit_test(test_gptq_static_groups),
        cmocka_unit_test(test_act_order_g_idx_not_monotone),
        cmocka_unit_test(test_identity_hessian_equals_rtn),
        cmocka_unit_test(test_indefinite_hessian_fails),
        cmocka_unit_test(test_hinv_matches_reference_route),
        cmocka_unit_test(test_dead_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
