/* quant-gptq: the GPTQ algorithm for one Linear (formats.md §1.7, §1.3,
 * §1.4).  All linear algebra is in double.  The O(K³) and O(N·K²) work goes
 * through one register-blocked kernel, gemm_sub (C −= Aᵀ·B with the
 * reduction index as the row index of both operands), compiled twice: a
 * portable version and, on x86-64 GCC/Clang, an AVX2+FMA one picked at run
 * time. */
#include "gptq_algo.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* The kernel                                                              */
/* ---------------------------------------------------------------------- */

enum { MR = 4, NR = 8, JT = 256, PT = 256 };

/* One element of C −= Aᵀ·B (edges of the tiling). */
static inline double dot_col(int64_t P, const double *A, int64_t lda, const double *B, int64_t ldb)
{
    double s = 0;
    for (int64_t p = 0; p < P; p++)
        s += A[p * lda] * B[p * ldb];
    return s;
}

typedef double v2d __attribute__((vector_size(16)));

/* C[r][c] −= Σ_p A[p·lda + r] · B[p·ldb + c] for an MR × NR tile, portable
 * (GCC/Clang vector extensions, SSE2-sized; no fused multiply-add): two
 * passes of MR × 4 so that the accumulators fit in 16 registers. */
static inline void micro_generic(int64_t P, const double *A, int64_t lda, const double *B,
                                 int64_t ldb, double *C, int64_t ldc)
{
    for (int half = 0; half < NR; half += 4) {
        v2d acc[MR][2] = {{{0}}};
        for (int64_t p = 0; p < P; p++) {
            v2d b0, b1;
            memcpy(&b0, B + p * ldb + half, sizeof b0);
            memcpy(&b1, B + p * ldb + half + 2, sizeof b1);
            for (int r = 0; r < MR; r++) {
                double a = A[p * lda + r];
                v2d av = {a, a};
                acc[r][0] += av * b0;
                acc[r][1] += av * b1;
            }
        }
        for (int r = 0; r < MR; r++)
            for (int c = 0; c < 4; c++)
                C[r * ldc + half + c] -= acc[r][c / 2][c % 2];
    }
}

/* C ([M][Nc], row stride ldc) −= Aᵀ·B with A [P][M] (stride lda) and
 * B [P][Nc] (stride ldb), tiled PT × JT so that the B panel stays in L2
 * while every MR-row strip of A passes over it; MICRO does the tiles. */
#define GEMM_SUB_DEFINE(NAME, MICRO, ATTR)                                                         \
    ATTR static void NAME(int64_t M, int64_t Nc, int64_t P, const double *A, int64_t lda,        \
                          const double *B, int64_t ldb, double *C, int64_t ldc)                  \
    {                                                                                            \
        for (int64_t p0 = 0; p0 < P; p0 += PT) {                                                 \
            int64_t pn = p0 + PT < P ? PT : P - p0;                                              \
            const double *Ap = A + p0 * lda, *Bp = B + p0 * ldb;                                 \
            for (int64_t j0 = 0; j0 < Nc; j0 += JT) {                                            \
                int64_t j1 = j0 + JT < Nc ? j0 + JT : Nc;                                        \
                int64_t jv = j0 + (j1 - j0) / NR * NR;                                           \
                int64_t m = 0;                                                                   \
                for (; m + MR <= M; m += MR) {                                                   \
                    for (int64_t j = j0; j < jv; j += NR)                                        \
                        MICRO(pn, Ap + m, lda, Bp + j, ldb, C + m * ldc + j, ldc);               \
                    for (int64_t r = m; r < m + MR; r++)                                         \
                        for (int64_t j = jv; j < j1; j++)                                        \
                            C[r * ldc + j] -= dot_col(pn, Ap + r, lda, Bp + j, ldb);             \
                }                                                                                \
                for (; m < M; m++)                                                               \
                    for (int64_t j = j0; j < j1; j++)                                            \
                        C[m * ldc + j] -= dot_col(pn, Ap + m, lda, Bp + j, ldb);                 \
            }                                                                                    \
        }                                                                                        \
    }

GEMM_SUB_DEFINE(gemm_sub_generic, micro_generic, )

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GPTQ_ALGO_X86 1
#include <immintrin.h>

/* micro_generic with AVX2 fused multiply-adds. */
__attribute__((target("avx2,fma"))) static inline void micro_avx2(int64_t P, const double *A,
                                                                  int64_t lda, const double *B,
                                                                  int64_t ldb, double *C,
                                                                  int64_t ldc)
{
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00;
    for (int64_t p = 0; p < P; p++) {
        const double *a = A + p * lda;
        __m256d b0 = _mm256_loadu_pd(B + p * ldb), b1 = _mm256_loadu_pd(B + p * ldb + 4);
        __m256d a0 = _mm256_broadcast_sd(a), a1 = _mm256_broadcast_sd(a + 1);
        c00 = _mm256_fmadd_pd(a0, b0, c00);
        c01 = _mm256_fmadd_pd(a0, b1, c01);
        c10 = _mm256_fmadd_pd(a1, b0, c10);
        c11 = _mm256_fmadd_pd(a1, b1, c11);
        __m256d a2 = _mm256_broadcast_sd(a + 2), a3 = _mm256_broadcast_sd(a + 3);
        c20 = _mm256_fmadd_pd(a2, b0, c20);
        c21 = _mm256_fmadd_pd(a2, b1, c21);
        c30 = _mm256_fmadd_pd(a3, b0, c30);
        c31 = _mm256_fmadd_pd(a3, b1, c31);
    }
    const __m256d acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (int r = 0; r < MR; r++) {
        double *cr = C + r * ldc;
        _mm256_storeu_pd(cr, _mm256_sub_pd(_mm256_loadu_pd(cr), acc[r][0]));
        _mm256_storeu_pd(cr + 4, _mm256_sub_pd(_mm256_loadu_pd(cr + 4), acc[r][1]));
    }
}

GEMM_SUB_DEFINE(gemm_sub_avx2, micro_avx2, __attribute__((target("avx2,fma"))))
#endif

/* C ([M][Nc], stride ldc) −= Aᵀ·B, A [P][M] (stride lda), B [P][Nc]
 * (stride ldb); the fastest variant this CPU runs. */
static void gemm_sub(int64_t M, int64_t Nc, int64_t P, const double *A, int64_t lda,
                     const double *B, int64_t ldb, double *C, int64_t ldc)
{
#ifdef GPTQ_ALGO_X86
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        gemm_sub_avx2(M, Nc, P, A, lda, B, ldb, C, ldc);
        return;
    }
#endif
    gemm_sub_generic(M, Nc, P, A, lda, B, ldb, C, ldc);
}

/* ---------------------------------------------------------------------- */
/* Hinv: upper Cholesky factor of A⁻¹                                      */
/* ---------------------------------------------------------------------- */

enum { NB = 64 }; /* panel width of the factorizations */

/* In place: the upper triangle of A ([K][K]) becomes R with A = Rᵀ·R
 * (blocked right-looking Cholesky; the lower triangle is left as garbage).
 * Returns -1 (pivot index in *bad, its value in *pivot) when a pivot is not
 * positive and finite. */
static int chol_upper(double *A, int64_t K, int64_t *bad, double *pivot)
{
    for (int64_t k0 = 0; k0 < K; k0 += NB) {
        int64_t k1 = k0 + NB < K ? k0 + NB : K;
        /* the panel rows k0..k1, full width: unblocked, row axpys */
        for (int64_t k = k0; k < k1; k++) {
            double *rk = A + k * K;
            double d = rk[k];
            if (!(d > 0) || !isfinite(d)) {
                *bad = k;
                *pivot = d;
                return -1;
            }
            double r = sqrt(d);
            rk[k] = r;
            for (int64_t j = k + 1; j < K; j++)
                rk[j] /= r;
            for (int64_t i = k + 1; i < k1; i++) {
                double a = rk[i], *ri = A + i * K;
                for (int64_t j = i; j < K; j++)
                    ri[j] -= a * rk[j];
            }
        }
        /* trailing update A22 −= R12ᵀ·R12, by row strips (upper part plus
         * a little of the strip's own lower triangle, which is garbage) */
        for (int64_t i0 = k1; i0 < K; i0 += NB) {
            int64_t i1 = i0 + NB < K ? i0 + NB : K;
            gemm_sub(i1 - i0, K - i0, k1 - k0, A + k0 * K + i0, K, A + k0 * K + i0, K,
                     A + i0 * K + i0, K);
        }
    }
    return 0;
}

/* In place: the upper triangular R ([K][K], lower triangle zero, positive
 * diagonal) becomes R⁻¹ (upper, lower triangle still zero).  Row blocks
 * bottom-up: T = R12·X22 by gemm_sub over column tiles (only p <= j
 * contributes), then the block's rows by back substitution. */
static int tri_inv_upper(double *R, int64_t K)
{
    int64_t w = K < NB ? K : NB;
    double *Rt = malloc((size_t)(K * w) * sizeof *Rt);
    double *T = malloc((size_t)(K * w) * sizeof *T);
    double *s = malloc((size_t)K * sizeof *s);
    if (!Rt || !T || !s) {
        free(Rt);
        free(T);
        free(s);
        return -1;
    }
    int64_t nblk = (K + NB - 1) / NB;
    for (int64_t b = nblk - 1; b >= 0; b--) {
        int64_t i0 = b * NB, i1 = i0 + NB < K ? i0 + NB : K, bm = i1 - i0, rest = K - i1;
        if (rest > 0) {
            for (int64_t p = 0; p < rest; p++)
                for (int64_t m = 0; m < bm; m++)
                    Rt[p * bm + m] = R[(i0 + m) * K + i1 + p];
            memset(T, 0, (size_t)(bm * rest) * sizeof *T);
            for (int64_t j0 = 0; j0 < rest; j0 += JT) {
                int64_t j1 = j0 + JT < rest ? j0 + JT : rest;
                gemm_sub(bm, j1 - j0, j1, Rt, bm, R + i1 * K + i1 + j0, K, T + j0, rest);
            }
        }
        for (int64_t i = i1 - 1; i >= i0; i--) {
            double *ri = R + i * K;
            for (int64_t j = i + 1; j < K; j++)
                s[j] = j >= i1 ? -T[(i - i0) * rest + (j - i1)] : 0.0;
            for (int64_t k = i + 1; k < i1; k++) {
                double a = ri[k];
                const double *xk = R + k * K;
                for (int64_t j = k; j < K; j++)
                    s[j] += a * xk[j];
            }
            double x = 1.0 / ri[i];
            ri[i] = x;
            for (int64_t j = i + 1; j < K; j++)
                ri[j] = -x * s[j];
        }
    }
    free(Rt);
    free(T);
    free(s);
    return 0;
}

/* gptq_hinv_chol without the failed-pivot message, which each caller words
 * for its own matrix: 0; 1 when a pivot fails (its index in A's own order
 * in *bad, its value in *piv); -1 with err set when out of memory. */
static int hinv_chol(double *A, int64_t K, int64_t *bad, double *piv, plume_error *err)
{
    int64_t n = K * K;
    /* A := J·A·J (J the reversal): then A = RᵀR gives the original
     * A = V·Vᵀ with V = J·Rᵀ·J upper, and A⁻¹ = UᵀU with U = V⁻¹ = J·R⁻ᵀ·J. */
    for (int64_t i = 0; i < n / 2; i++) {
        double t = A[i];
        A[i] = A[n - 1 - i];
        A[n - 1 - i] = t;
    }
    if (chol_upper(A, K, bad, piv)) {
        *bad = K - 1 - *bad;
        return 1;
    }
    for (int64_t i = 0; i < K; i++)
        memset(A + i * K, 0, (size_t)i * sizeof *A);
    if (tri_inv_upper(A, K))
        return plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory inverting the Hessian");
    /* U[a][b] = X[K−1−b][K−1−a]: an anti-transpose, swapped in place. */
    for (int64_t a = 0; a < K; a++)
        for (int64_t b = a; b < K; b++) {
            int64_t a2 = K - 1 - b, b2 = K - 1 - a;
            if (a * K + b < a2 * K + b2) {
                double t = A[a * K + b];
                A[a * K + b] = A[a2 * K + b2];
                A[a2 * K + b2] = t;
            }
        }
    return 0;
}

int gptq_hinv_chol(double *A, int64_t K, plume_error *err)
{
    if (K <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "gptq: Hessian size %" PRId64 " is not positive", K);
    int64_t bad = 0;
    double piv = 0;
    int rc = hinv_chol(A, K, &bad, &piv, err);
    if (rc < 0)
        return -1;
    if (rc)
        return plume_err(err, PLUME_ERR_RANGE,
                         "gptq: the Hessian is not positive definite (Cholesky pivot %g at row %" PRId64
                         " of %" PRId64 "); raise --damp (damp_percent)",
                         piv, bad, K);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The loss                                                                */
/* ---------------------------------------------------------------------- */

double gptq_output_error(const float *W, const float *Wq, int64_t N, int64_t K, const double *H)
{
    enum { RB = 128 };
    double *Dt = malloc((size_t)(K * RB) * sizeof *Dt); /* [K][rows] = (W − Wq)ᵀ */
    double *C = malloc((size_t)(K * RB) * sizeof *C);   /* [rows][K] = −(W − Wq)·H */
    double loss = 0;
    if (!Dt || !C) {
        free(Dt);
        free(C);
        return NAN;
    }
    for (int64_t n0 = 0; n0 < N; n0 += RB) {
        int64_t rb = n0 + RB < N ? RB : N - n0;
        for (int64_t r = 0; r < rb; r++)
            for (int64_t k = 0; k < K; k++)
                Dt[k * rb + r] = (double)W[(n0 + r) * K + k] - (double)Wq[(n0 + r) * K + k];
        memset(C, 0, (size_t)(rb * K) * sizeof *C);
        gemm_sub(rb, K, K, Dt, rb, H, K, C, K);
        for (int64_t r = 0; r < rb; r++)
            for (int64_t k = 0; k < K; k++)
                loss -= C[r * K + k] * Dt[k * rb + r];
    }
    free(Dt);
    free(C);
    return loss;
}

/* ---------------------------------------------------------------------- */
/* The quantizer (formats.md §1.3)                                         */
/* ---------------------------------------------------------------------- */

/* The code of x: clamp(round(x/s) + z, 0, maxq), as gptq_rtn.c. */
static inline int32_t quant_code(float x, float s, int32_t z, int maxq)
{
    float q = rintf(x / s) + (float)z;
    q = q < 0 ? 0 : q > (float)maxq ? (float)maxq : q;
    return (int32_t)q;
}

/* ---------------------------------------------------------------------- */
/* gptq_quantize                                                           */
/* ---------------------------------------------------------------------- */

gptq_algo_params gptq_algo_defaults(int bits, int64_t group_size, bool sym)
{
    gptq_algo_params p = {.bits = bits,
                          .group_size = group_size,
                          .sym = sym,
                          .desc_act = false,
                          .static_groups = false,
                          .damp_percent = 0.01,
                          .block_size = 128,
                          .fmt = GPTQ_ZERO_V1};
    return p;
}

/* 0 when the parameters and shapes are usable; else -1 naming the field. */
static int check_params(const float *W, int64_t N, int64_t K, const double *H,
                        const gptq_algo_params *p, plume_error *err)
{
    if (gptq_check_bits(p->bits, err))
        return -1;
    int pf = gptq_pack_align(p->bits);
    if (K <= 0 || N <= 0 || K % pf || N % pf)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq: in_features %" PRId64 " and out_features %" PRId64
                         " must be positive multiples of %d for %d bits",
                         K, N, pf, p->bits);
    if (p->fmt != GPTQ_ZERO_V1 && p->fmt != GPTQ_ZERO_V2)
        return plume_err(err, PLUME_ERR_INVALID, "gptq: unknown zero-point format %d", (int)p->fmt);
    if (p->block_size <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "gptq: block_size %d must be positive",
                         p->block_size);
    if (!(p->damp_percent >= 0) || !isfinite(p->damp_percent))
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq: damp_percent %g must be a finite number >= 0 (reference 0.01)",
                         p->damp_percent);
    for (int64_t i = 0; i < N * K; i++)
        if (!isfinite(W[i]))
            return plume_err(err, PLUME_ERR_INVALID,
                             "gptq: weight element [%" PRId64 "][%" PRId64 "] is not finite",
                             i / K, i % K);
    for (int64_t i = 0; i < K * K; i++)
        if (!isfinite(H[i]))
            return plume_err(err, PLUME_ERR_INVALID,
                             "gptq: Hessian element [%" PRId64 "][%" PRId64
                             "] is not finite (calibration activations overflowed?)",
                             i / K, i % K);
    return 0;
}

/* perm: the processing order.  Identity, or (desc_act) the inputs by
 * descending diag(H) with dead inputs counted as 1, ties by index (a
 * stable sort). */
static void act_order(const double *H, int64_t K, bool desc_act, int32_t *perm)
{
    for (int64_t i = 0; i < K; i++)
        perm[i] = (int32_t)i;
    if (!desc_act)
        return;
    /* merge sort on keys, stable; tmp holds K ints after perm */
    int32_t *a = perm, *b = perm + K;
#define DKEY(k) (H[(int64_t)(k) * K + (k)] == 0 ? 1.0 : H[(int64_t)(k) * K + (k)])
    for (int64_t w = 1; w < K; w *= 2) {
        for (int64_t lo = 0; lo < K; lo += 2 * w) {
            int64_t mid = lo + w < K ? lo + w : K, hi = lo + 2 * w < K ? lo + 2 * w : K;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                b[o++] = DKEY(a[j]) > DKEY(a[i]) ? a[j++] : a[i++];
            while (i < mid)
                b[o++] = a[i++];
            while (j < hi)
                b[o++] = a[j++];
        }
        int32_t *t = a;
        a = b;
        b = t;
    }
#undef DKEY
    if (a != perm)
        memcpy(perm, a, (size_t)K * sizeof *perm);
}

/* Scratch of one gptq_quantize call. */
typedef struct gptq_work {
    int32_t *perm;    /* [2K]: processing order (+ sort scratch) */
    double *Wd;       /* [N][K]: W in processing order, updated */
    double *U;        /* [K][K]: Hinv of the permuted, damped H */
    double *W1;       /* [B][N]: the current block, transposed */
    double *E;        /* [B][N]: its scaled errors (Err1ᵀ) */
    float *row;       /* [max(K, group)]: one row segment in f32 */
    float *s_cur;     /* [N]: current scale per row */
    int32_t *z_cur;   /* [N]: current zero per row */
    float *s_stat;    /* [G][N]: static-group scales (original order) */
    int32_t *z_stat;  /* [G][N] */
    int32_t *zeros;   /* [G][N]: true zeros for packing */
    uint8_t *codes;   /* [K][N] */
} gptq_work;

static void work_free(gptq_work *w)
{
    free(w->perm);
    free(w->Wd);
    free(w->U);
    free(w->W1);
    free(w->E);
    free(w->row);
    free(w->s_cur);
    free(w->z_cur);
    free(w->s_stat);
    free(w->z_stat);
    free(w->zeros);
    free(w->codes);
}

/* Row-wise params (s[n], z[n]) over columns [c0, c1) of the double matrix
 * Wd, or of the f32 matrix Wf when Wd is NULL (both [N][K]). */
static void params_rows(const double *Wd, const float *Wf, int64_t N, int64_t K, int64_t c0,
                        int64_t c1, int maxq, bool sym, bool v1, float *row, float *s,
                        int32_t *z)
{
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = c0; c < c1; c++)
            row[c - c0] = Wd ? (float)Wd[n * K + c] : Wf[n * K + c];
        gptq_find_params(row, c1 - c0, maxq, sym, v1, &s[n], &z[n]);
    }
}

/* The permuted, dead-fixed, damped Hessian into U, then its Hinv factor. */
static int build_hinv(const double *H, int64_t K, const int32_t *perm, double damp_percent,
                      double *U, plume_error *err)
{
    double mean = 0;
    for (int64_t k = 0; k < K; k++)
        mean += H[k * K + k] == 0 ? 1.0 : H[k * K + k];
    mean /= (double)K;
    double damp = damp_percent * mean;
    for (int64_t a = 0; a < K; a++) {
        const double *h = H + (int64_t)perm[a] * K;
        for (int64_t b = 0; b < K; b++)
            U[a * K + b] = h[perm[b]];
        if (U[a * K + a] == 0)
            U[a * K + a] = 1.0;
        U[a * K + a] += damp;
    }
    int64_t bad = 0;
    double piv = 0;
    int rc = hinv_chol(U, K, &bad, &piv, err);
    if (rc < 0)
        return -1;
    if (rc)
        return plume_err(err, PLUME_ERR_RANGE,
                         "gptq: the calibration Hessian plus damp %g (damp_percent %g of its mean "
                         "diagonal %g) is not positive definite (Cholesky pivot %g at input %d); "
                         "raise --damp (e.g. %g) or use more calibration samples",
                         damp, damp_percent, mean, piv, perm[bad],
                         damp_percent > 0 ? 10 * damp_percent : 0.01);
    return 0;
}

/* Quantizes column c of the block (processing column i = i1 + c) with the
 * row params s/z: codes, Wq, scaled errors E[c], and the in-block rank-1
 * update of the block's later columns. */
static void quant_column(gptq_work *w, int64_t N, int64_t K, int64_t i1, int64_t bw, int64_t c,
                         const float *s, const int32_t *z, int maxq, float *Wq)
{
    int64_t i = i1 + c, k = w->perm[i];
    const double *Ui = w->U + i * K;
    double d = Ui[i];
    double *wc = w->W1 + c * N, *e = w->E + c * N;
    uint8_t *code = w->codes + k * N;
    for (int64_t n = 0; n < N; n++) {
        int32_t q = quant_code((float)wc[n], s[n], z[n], maxq);
        float dq = s[n] * (float)(q - z[n]);
        code[n] = (uint8_t)q;
        Wq[n * K + k] = dq;
        e[n] = (wc[n] - (double)dq) / d;
    }
    for (int64_t c2 = c + 1; c2 < bw; c2++) {
        double h = Ui[i1 + c2];
        double *w2 = w->W1 + c2 * N;
        for (int64_t n = 0; n < N; n++)
            w2[n] -= h * e[n];
    }
}

int gptq_quantize(const float *W, int64_t N, int64_t K, const double *H,
                  const gptq_algo_params *p, gptq_tensors *out, float *Wq, double *loss,
                  plume_error *err)
{
    memset(out, 0, sizeof *out);
    if (check_params(W, N, K, H, p, err))
        return -1;
    int bits = p->bits, maxq = (1 << bits) - 1;
    bool grouped = p->group_size > 0, v1 = p->fmt == GPTQ_ZERO_V1;
    int64_t gs = grouped && p->group_size < K ? p->group_size : K;
    int64_t G = (K + gs - 1) / gs, B = p->block_size < K ? p->block_size : K;
    bool stat = grouped && p->static_groups;

    gptq_work w = {0};
    w.perm = malloc((size_t)(2 * K) * sizeof *w.perm);
    w.Wd = malloc((size_t)(N * K) * sizeof *w.Wd);
    w.U = malloc((size_t)(K * K) * sizeof *w.U);
    w.W1 = malloc((size_t)(B * N) * sizeof *w.W1);
    w.E = malloc((size_t)(B * N) * sizeof *w.E);
    w.row = malloc((size_t)K * sizeof *w.row);
    w.s_cur = malloc((size_t)N * sizeof *w.s_cur);
    w.z_cur = malloc((size_t)N * sizeof *w.z_cur);
    w.s_stat = malloc((size_t)(G * N) * sizeof *w.s_stat);
    w.z_stat = malloc((size_t)(G * N) * sizeof *w.z_stat);
    w.zeros = malloc((size_t)(G * N) * sizeof *w.zeros);
    w.codes = malloc((size_t)(K * N));
    const int alloc_rc = gptq_tensors_alloc(out, K, N, G, bits);
    int rc = -1;
    if (!w.perm || !w.Wd || !w.U || !w.W1 || !w.E || !w.row || !w.s_cur || !w.z_cur ||
        !w.s_stat || !w.z_stat || !w.zeros || !w.codes || alloc_rc) {
        plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory for a %" PRId64 "x%" PRId64 " layer",
                  N, K);
        goto done;
    }

    /* 1. without groups: per-row params from the original W (before the
     *    dead-column fix, as the reference's first find_params) */
    if (!grouped)
        params_rows(NULL, W, N, K, 0, K, maxq, p->sym, v1, w.row, w.s_cur, w.z_cur);
    /* 2.–4. dead columns zeroed, act-order, W in processing order */
    act_order(H, K, p->desc_act, w.perm);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < K; i++) {
            int64_t k = w.perm[i];
            w.Wd[n * K + i] = H[k * K + k] == 0 ? 0.0 : (double)W[n * K + k];
        }
    /* 3. static groups: params per original-order group of the dead-fixed W */
    if (stat)
        for (int64_t g = 0; g < G; g++) {
            int64_t c1 = (g + 1) * gs < K ? (g + 1) * gs : K;
            for (int64_t n = 0; n < N; n++) {
                for (int64_t k = g * gs; k < c1; k++)
                    w.row[k - g * gs] = H[k * K + k] == 0 ? 0.0f : W[n * K + k];
                gptq_find_params(w.row, c1 - g * gs, maxq, p->sym, v1, &w.s_stat[g * N + n],
                            &w.z_stat[g * N + n]);
            }
        }
    /* 5.–6. damp and Hinv */
    if (build_hinv(H, K, w.perm, p->damp_percent, w.U, err))
        goto done;

    /* 7. lazy blocks */
    for (int64_t i1 = 0; i1 < K; i1 += B) {
        int64_t i2 = i1 + B < K ? i1 + B : K, bw = i2 - i1;
        for (int64_t c = 0; c < bw; c++)
            for (int64_t n = 0; n < N; n++)
                w.W1[c * N + n] = w.Wd[n * K + i1 + c];
        for (int64_t c = 0; c < bw; c++) {
            int64_t i = i1 + c;
            const float *s = w.s_cur;
            const int32_t *z = w.z_cur;
            if (stat) {
                int64_t g = w.perm[i] / gs;
                s = w.s_stat + g * N;
                z = w.z_stat + g * N;
            } else if (grouped && i % gs == 0) {
                /* from Wd: earlier blocks' updates, not this block's */
                int64_t c1 = i + gs < K ? i + gs : K;
                params_rows(w.Wd, NULL, N, K, i, c1, maxq, p->sym, v1, w.row, w.s_cur,
                            w.z_cur);
                memcpy(w.s_stat + (i / gs) * N, w.s_cur, (size_t)N * sizeof(float));
                memcpy(w.z_stat + (i / gs) * N, w.z_cur, (size_t)N * sizeof(int32_t));
            }
            quant_column(&w, N, K, i1, bw, c, s, z, maxq, Wq);
        }
        /* W[:, i2:] −= Err1 · Hinv[i1:i2, i2:] */
        gemm_sub(N, K - i2, bw, w.E, N, w.U + i1 * K + i2, K, w.Wd + i2, K);
    }

    /* 8. tensors: per-group params (processing order, or original order
     *    for static groups — both are what g_idx points at) */
    if (!grouped) {
        memcpy(w.s_stat, w.s_cur, (size_t)N * sizeof(float));
        memcpy(w.z_stat, w.z_cur, (size_t)N * sizeof(int32_t));
    }
    memcpy(out->scales, w.s_stat, (size_t)(G * N) * sizeof(float));
    memcpy(w.zeros, w.z_stat, (size_t)(G * N) * sizeof(int32_t));
    for (int64_t i = 0; i < K; i++)
        out->g_idx[w.perm[i]] = (int32_t)((stat ? w.perm[i] : i) / gs);
    if (gptq_pack_qweight(w.codes, K, N, bits, out->qweight, err) ||
        gptq_pack_qzeros(w.zeros, G, N, bits, p->fmt, out->qzeros, err))
        goto done;
    if (loss) {
        *loss = gptq_output_error(W, Wq, N, K, H);
        if (isnan(*loss)) {
            plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory computing the loss");
            goto done;
        }
    }
    rc = 0;
done:
    work_free(&w);
    if (rc)
        gptq_tensors_free(out);
    return rc;
}
