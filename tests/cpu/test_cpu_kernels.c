/* Every kernel of every dispatch level this CPU has, the scalar level
 * included, against a double-precision reference computed here, and each
 * SIMD level against the scalar one; on random data, with sizes that are
 * not multiples of the vector width or the block size where the kernel
 * allows them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "cpu_test_util.h"

static const plume_kernels *levels[PLUME_CPU_LEVEL_COUNT];
static int n_levels;

static int setup(void **state)
{
    (void)state;
    n_levels = tu_levels(levels);
    return 0;
}

static void check_close(float got, float want, float tol, const char *what, int level, int i)
{
    if (!(fabsf(got - want) <= tol)) {
        fail_msg("%s at level %s, index %d: got %.9g, scalar %.9g (tolerance %.3g)", what,
                 plume_cpu_level_name((plume_cpu_level)level), i, got, want, tol);
    }
}

/* got against a double-precision reference. */
static void check_ref(float got, double want, double tol, const char *what, int level, int i)
{
    if (!(fabs((double)got - want) <= tol))
        fail_msg("%s at level %s, index %d: got %.9g, double reference %.9g (tolerance %.3g)",
                 what, plume_cpu_level_name((plume_cpu_level)level), i, got, want, tol);
}

/* quantize_q8_sums at every level, with and without block records (3
 * apart, as a matmul's records of 3 tokens): q, d and s equal quantize_q8's
 * (q0, d0, s0), and the sums and records their definitions. */
static void check_quantize_sums(const float *x, int64_t K, const int8_t *q0, const float *d0,
                                const float *s0)
{
    const int64_t nb = K / 32, ldb = 3;
    int8_t *q = malloc(K);
    float *d = malloc(4 * nb), *s = malloc(4 * nb), *s16 = malloc(8 * nb);
    int32_t *is = malloc(4 * nb), *is16 = malloc(8 * nb);
    plume_q8_blk *blk = aligned_alloc(64, sizeof *blk * (size_t)(nb * ldb));
    for (int l = 0; l < n_levels; l++) {
        for (int with_blk = 0; with_blk < 2; with_blk++) {
            memset(blk, 0x5A, sizeof *blk * (size_t)(nb * ldb));
            const plume_q8_out o = {q, d, s, is, is16, s16, with_blk ? blk + 1 : NULL, ldb};
            levels[l]->quantize_q8_sums(x, K, &o);
            assert_memory_equal(q0, q, (size_t)K);
            assert_memory_equal(d0, d, sizeof(float) * nb);
            assert_memory_equal(s0, s, sizeof(float) * nb);
            for (int64_t b = 0; b < nb; b++) {
                int32_t h[2] = {0, 0};
                for (int i = 0; i < 32; i++)
                    h[i / 16] += q0[32 * b + i];
                assert_int_equal(is[b], h[0] + h[1]);
                assert_int_equal(is16[2 * b], h[0]);
                assert_int_equal(is16[2 * b + 1], h[1]);
                assert_true(s16[2 * b] == d0[b] * (float)h[0]);
                assert_true(s16[2 * b + 1] == d0[b] * (float)h[1]);
                const plume_q8_blk *r = blk + b * ldb + 1;
                if (!with_blk) {
                    const uint8_t *u = (const uint8_t *)r;
                    for (size_t i = 0; i < sizeof *r; i++)
                        assert_int_equal(u[i], 0x5A);
                    continue;
                }
                assert_memory_equal(r->q, q0 + 32 * b, 32);
                assert_memory_equal(&r->d, &d0[b], sizeof(float));
                assert_memory_equal(&r->s, &s0[b], sizeof(float));
                assert_int_equal(r->isum, h[0] + h[1]);
                assert_int_equal(r->isum16[0], h[0]);
                assert_int_equal(r->isum16[1], h[1]);
                assert_memory_equal(r->s16, &s16[2 * b], 2 * sizeof(float));
                assert_int_equal(((const uint8_t *)(blk + b * ldb))[0], 0x5A); /* neighbours */
                assert_int_equal(((const uint8_t *)(blk + b * ldb + 2))[0], 0x5A);
            }
        }
    }
    free(q); free(d); free(s); free(s16); free(is); free(is16); free(blk);
}

static void test_quantize_identical(void **state)
{
    (void)state;
    const plume_kernels *ref = plume_kernels_scalar();
    const int64_t sizes[] = {32, 64, 96, 576, 1536 + 32};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int64_t K = sizes[si], nb = K / 32;
        float *x = malloc(sizeof(float) * K);
        tu_fill(x, (size_t)K, -3, 3);
        x[0] = 0.0f;                          /* a block with exact ties */
        for (int i = 0; i < 32 && K >= 64; i++)
            x[32 + i] = (float)(i - 16) * 0.5f;
        if (K >= 96)
            memset(x + 64, 0, 32 * sizeof(float)); /* an all-zero block */
        int8_t *q0 = malloc(K), *q1 = malloc(K);
        float *d0 = malloc(4 * nb), *d1 = malloc(4 * nb), *s0 = malloc(4 * nb), *s1 = malloc(4 * nb);
        ref->quantize_q8(x, K, q0, d0, s0);
        for (int l = 0; l < n_levels; l++) {
            levels[l]->quantize_q8(x, K, q1, d1, s1);
            assert_memory_equal(q0, q1, (size_t)K);
            assert_memory_equal(d0, d1, sizeof(float) * nb);
            assert_memory_equal(s0, s1, sizeof(float) * nb);
        }
        /* the quantization itself: |x - d q| <= d/2 */
        for (int64_t i = 0; i < K; i++)
            assert_true(fabsf(x[i] - d0[i / 32] * q0[i]) <= d0[i / 32] * 0.5001f + 1e-30f);
        check_quantize_sums(x, K, q0, d0, s0);
        free(x); free(q0); free(q1); free(d0); free(d1); free(s0); free(s1);
    }
}

/* mm_q / mm_f of each level against the scalar level. */
static void test_matmul_kernels(void **state)
{
    (void)state;
    const plume_kernels *ref = plume_kernels_scalar();
    const int rows_list[] = {1, 3, 4, 5, 9};
    const int tok_list[] = {1, 2, 3, 4, 5, 17};
    for (size_t ti = 0; ti < TU_N_TYPES; ti++) {
        const uint32_t type = TU_TYPES[ti];
        const int64_t blk = (int64_t)plume_dtype_block_elems(type);
        const int64_t Ks_q[] = {blk, 3 * blk, 5 * blk};
        const int64_t Ks_f[] = {1, 7, 8, 9, 33, 100, 256};
        const int quant = blk > 1;
        const int64_t *Ks = quant ? Ks_q : Ks_f;
        const size_t nK = quant ? 3 : 7;
        for (size_t ki = 0; ki < nK; ki++) {
            const int64_t K = Ks[ki];
            const int max_rows = 9, max_tok = 17;
            size_t rb;
            uint8_t *w = tu_weights(type, K, max_rows, &rb);
            float *x = malloc(sizeof(float) * K * max_tok);
            tu_fill(x, (size_t)(K * max_tok), -2, 2);
            int8_t *aq = malloc((size_t)(K * max_tok));
            float *ad = malloc(sizeof(float) * (K / 32 + 1) * max_tok);
            float *as = malloc(sizeof(float) * (K / 32 + 1) * max_tok);
            if (quant)
                for (int t = 0; t < max_tok; t++)
                    ref->quantize_q8(x + t * K, K, aq + t * K, ad + t * (K / 32), as + t * (K / 32));
            const plume_q8_act act = {aq, ad, as, K, NULL, NULL, NULL, NULL, 0};
            float *y0 = malloc(sizeof(float) * max_rows * max_tok);
            float *y1 = malloc(sizeof(float) * max_rows * max_tok);
            for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++)
                for (size_t tj = 0; tj < sizeof tok_list / sizeof tok_list[0]; tj++) {
                    const int nr = rows_list[ri], nt = tok_list[tj];
                    const int64_t ldy = nr + 2; /* a y stride wider than the rows */
                    float *ya = calloc((size_t)(ldy * nt), sizeof(float));
                    float *yb = calloc((size_t)(ldy * nt), sizeof(float));
                    if (quant)
                        ref->mm_q[tu_kq(type)](w, rb, nr, &act, nt, ya, ldy);
                    else
                        ref->mm_f[tu_kf(type)](w, rb, K, nr, x, K, nt, ya, ldy);
                    /* The double reference: Σ dequant(w)·x, with x the activation
                     * the kernel sees (its int8 blocks dequantized for mm_q), and
                     * Σ|w x| to scale the tolerance for float summation. */
                    float *deq = malloc(sizeof(float) * K);
                    double *want = malloc(sizeof(double) * nr * nt), *mag = malloc(sizeof(double) * nr * nt);
                    for (int r = 0; r < nr; r++) {
                        plume_dequantize((plume_dtype)type, w + r * rb, deq, K);
                        for (int t = 0; t < nt; t++) {
                            double sum = 0, m = 0;
                            for (int64_t i = 0; i < K; i++) {
                                const double xi = quant ? (double)ad[t * (K / 32) + i / 32] * aq[t * K + i]
                                                        : (double)x[t * K + i];
                                sum += (double)deq[i] * xi;
                                m += fabs((double)deq[i] * xi);
                            }
                            want[r * nt + t] = sum;
                            mag[r * nt + t] = m;
                        }
                    }
                    for (int l = -1; l < n_levels; l++) {
                        const plume_kernels *k = l < 0 ? ref : levels[l];
                        float *yl = l < 0 ? ya : yb;
                        if (l >= 0) {
                            memset(yb, 0, sizeof(float) * ldy * nt);
                            if (quant)
                                k->mm_q[tu_kq(type)](w, rb, nr, &act, nt, yb, ldy);
                            else
                                k->mm_f[tu_kf(type)](w, rb, K, nr, x, K, nt, yb, ldy);
                        }
                        for (int r = 0; r < nr; r++)
                            for (int t = 0; t < nt; t++) {
                                char what[112];
                                snprintf(what, sizeof what, "%s K=%lld rows=%d tokens=%d row %d token %d",
                                         plume_dtype_name(type), (long long)K, nr, nt, r, t);
                                const float tol = 2e-5f * (float)mag[r * nt + t] + 1e-6f;
                                if (l >= 0)
                                    check_close(yl[t * ldy + r], ya[t * ldy + r], tol, what, k->level, r);
                                if (!(fabs(yl[t * ldy + r] - want[r * nt + t]) <= tol))
                                    fail_msg("%s at level %s: got %.9g, double reference %.9g "
                                             "(tolerance %.3g)", what,
                                             plume_cpu_level_name((plume_cpu_level)k->level),
                                             yl[t * ldy + r], want[r * nt + t], tol);
                            }
                        /* the padding columns of y are not written */
                        for (int t = 0; t < nt; t++)
                            for (int64_t r = nr; r < ldy; r++)
                                assert_true(yl[t * ldy + r] == 0.0f);
                    }
                    free(want); free(mag);
                    free(deq); free(ya); free(yb);
                }
            free(w); free(x); free(aq); free(ad); free(as); free(y0); free(y1);
        }
    }
}

static void test_vector_kernels(void **state)
{
    (void)state;
    const plume_kernels *ref = plume_kernels_scalar();
    for (int n = 1; n <= 67; n++) {
        float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
        float *y0 = malloc(sizeof(float) * n), *y1 = malloc(sizeof(float) * n);
        float *w = malloc(sizeof(float) * n);
        double *want = malloc(sizeof(double) * n);
        tu_fill(a, n, -4, 4);
        tu_fill(b, n, -4, 4);
        tu_fill(w, n, 0.5f, 1.5f);
        for (int l = -1; l < n_levels; l++) { /* -1: the scalar level against double */
            const plume_kernels *k = l < 0 ? ref : levels[l];
            double mag = 0, dot = 0, ss = 0;
            for (int i = 0; i < n; i++) {
                mag += fabs((double)a[i] * b[i]);
                dot += (double)a[i] * b[i];
                ss += (double)a[i] * a[i];
            }
            check_close(k->dot(a, b, n), ref->dot(a, b, n), 1e-6f * (float)mag, "dot", k->level, n);
            check_ref(k->dot(a, b, n), dot, 4e-6 * mag, "dot", k->level, n);

            memcpy(y0, b, sizeof(float) * n);
            memcpy(y1, b, sizeof(float) * n);
            ref->axpy(y0, 0.37f, a, n);
            k->axpy(y1, 0.37f, a, n);
            for (int i = 0; i < n; i++) {
                check_close(y1[i], y0[i], 1e-6f * (fabsf(b[i]) + fabsf(a[i])), "axpy", k->level, i);
                check_ref(y1[i], (double)b[i] + (double)0.37f * a[i],
                          1e-6 * (fabs(b[i]) + fabs(a[i])), "axpy", k->level, i);
            }

            ref->rmsnorm(y0, a, w, n, 1e-5f);
            k->rmsnorm(y1, a, w, n, 1e-5f);
            const double inv = 1.0 / sqrt(ss / n + (double)1e-5f);
            for (int i = 0; i < n; i++) {
                want[i] = (double)a[i] * inv * w[i];
                check_close(y1[i], y0[i], 2e-6f * fabsf(y0[i]) + 1e-7f, "rmsnorm", k->level, i);
                check_ref(y1[i], want[i], 2e-6 * fabs(want[i]) + 1e-7, "rmsnorm", k->level, i);
            }
            memcpy(y1, a, sizeof(float) * n); /* in place */
            k->rmsnorm(y1, y1, w, n, 1e-5f);
            for (int i = 0; i < n; i++)
                check_ref(y1[i], want[i], 2e-6 * fabs(want[i]) + 1e-7, "rmsnorm in place",
                          k->level, i);

            memcpy(y0, a, sizeof(float) * n);
            memcpy(y1, a, sizeof(float) * n);
            y0[0] = y1[0] = -95.0f; /* saturating exp */
            if (n > 1)
                y0[1] = y1[1] = 95.0f;
            for (int i = 0; i < n; i++)
                want[i] = (double)y1[i] / (1.0 + exp(-(double)y1[i])) * b[i];
            ref->swiglu(y0, b, n);
            k->swiglu(y1, b, n);
            for (int i = 0; i < n; i++) {
                check_close(y1[i], y0[i], 4e-6f * fabsf(y0[i]) + 1e-30f, "swiglu", k->level, i);
                check_ref(y1[i], want[i], 4e-6 * fabs(want[i]) + 1e-30, "swiglu", k->level, i);
            }

            /* gelu_tanh: against double, and each value's bits whatever
             * the call's length and where the value stands in it */
            memcpy(y0, a, sizeof(float) * n);
            for (int i = 0; i < n; i++)
                y0[i] *= 4.0f;
            y0[0] = -95.0f; /* saturating exp */
            if (n > 1)
                y0[1] = 95.0f;
            memcpy(y1, y0, sizeof(float) * n);
            for (int i = 0; i < n; i++) {
                const double v = y0[i];
                /* 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)), without tanh's cancellation */
                const double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
                want[i] = v / (1.0 + exp(-2.0 * u)) * b[i];
            }
            k->geglu(y1, b, n);
            for (int i = 0; i < n; i++)
                check_ref(y1[i], want[i], 8e-6 * fabs(want[i]) + 1e-30, "geglu", k->level, i);
            const int at = n > 5 ? 5 : 0;
            k->geglu(y0 + at, b + at, n - at);
            assert_memory_equal(y0 + at, y1 + at, sizeof(float) * (size_t)(n - at));

            double mx = -INFINITY, sum = 0;
            for (int i = 0; i < n; i++) {
                y0[i] = y1[i] = a[i] * 10.0f;
                mx = fmax(mx, (double)y1[i]);
            }
            for (int i = 0; i < n; i++)
                sum += want[i] = exp((double)y1[i] - mx);
            float s0 = ref->softmax_exp(y0, n), s1 = k->softmax_exp(y1, n);
            check_close(s1, s0, 4e-6f * s0, "softmax sum", k->level, n);
            check_ref(s1, sum, 4e-6 * sum, "softmax sum", k->level, n);
            for (int i = 0; i < n; i++) {
                check_close(y1[i], y0[i], 4e-6f * fabsf(y0[i]) + 1e-37f, "softmax exp", k->level, i);
                check_ref(y1[i], want[i], 4e-6 * want[i] + 1e-37, "softmax exp", k->level, i);
            }
        }
        free(a); free(b); free(y0); free(y1); free(w); free(want);
    }
}

static void test_rope(void **state)
{
    (void)state;
    const plume_kernels *ref = plume_kernels_scalar();
    for (int hd = 2; hd <= 132; hd += 2)
        for (int adjacent = 0; adjacent < 2; adjacent++) {
            const int half = hd / 2;
            float *v = malloc(sizeof(float) * hd), *v0 = malloc(sizeof(float) * hd),
                  *v1 = malloc(sizeof(float) * hd);
            float *c = malloc(sizeof(float) * half), *s = malloc(sizeof(float) * half);
            double *want = malloc(sizeof(double) * hd);
            tu_fill(v, hd, -3, 3);
            for (int i = 0; i < half; i++) {
                float ang = tu_uniform(-10, 10);
                c[i] = cosf(ang);
                s[i] = sinf(ang);
            }
            /* the rotation in double: pairs (i, i + half), or (2i, 2i + 1) when adjacent */
            for (int i = 0; i < half; i++) {
                const int ia = adjacent ? 2 * i : i, ib = adjacent ? 2 * i + 1 : i + half;
                want[ia] = (double)v[ia] * c[i] - (double)v[ib] * s[i];
                want[ib] = (double)v[ia] * s[i] + (double)v[ib] * c[i];
            }
            memcpy(v0, v, sizeof(float) * hd);
            ref->rope(v0, hd, c, s, adjacent);
            for (int l = -1; l < n_levels; l++) {
                const plume_kernels *k = l < 0 ? ref : levels[l];
                memcpy(v1, v, sizeof(float) * hd);
                k->rope(v1, hd, c, s, adjacent);
                for (int i = 0; i < hd; i++) {
                    check_close(v1[i], v0[i], 1e-6f * 6.0f, adjacent ? "rope adjacent" : "rope neox",
                                k->level, i);
                    check_ref(v1[i], want[i], 1e-6 * 6.0, adjacent ? "rope adjacent" : "rope neox",
                              k->level, i);
                }
            }
            free(v); free(v0); free(v1); free(c); free(s); free(want);
        }
}

/* attn_step of every level (scalar included), fed in steps of `step` keys,
 * against softmax(q·Kᵀ·scale)·V in double, for 1 and 3 queries sharing the
 * keys; a query's result is the same bits alone or in the group. */
static void test_attn_step(void **state)
{
    (void)state;
    enum { NQ = 3 };
    const int ns[] = {1, 7, 8, 9, 64, 65, 200};
    const int hds[] = {8, 17, 64, 128};
    const int steps[] = {1, 16, 1000};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
            const int n = ns[ni], hd = hds[hi], stride = hd + 5;
            float *q = malloc(sizeof(float) * NQ * hd), *k = malloc(sizeof(float) * n * stride);
            float *v = malloc(sizeof(float) * n * stride), *o = malloc(sizeof(float) * NQ * hd);
            float *o1 = malloc(sizeof(float) * hd);
            double *want = malloc(sizeof(double) * NQ * hd);
            tu_fill(q, (size_t)(NQ * hd), -2, 2);
            tu_fill(k, (size_t)(n * stride), -2, 2);
            tu_fill(v, (size_t)(n * stride), -1, 1);
            const float scale = 1.0f / sqrtf((float)hd);
            for (int qi = 0; qi < NQ; qi++)
                tu_attn_ref(q + qi * hd, k, v, stride, NULL, 1, 0, n, hd, scale, -INFINITY,
                            want + qi * hd);
            for (int l = -1; l < n_levels; l++) {
                const plume_kernels *kt = l < 0 ? plume_kernels_scalar() : levels[l];
                for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++) {
                    float m[NQ], lsum[NQ], m1, l1;
                    for (int qi = 0; qi < NQ; qi++) {
                        m[qi] = -INFINITY;
                        lsum[qi] = 0;
                    }
                    memset(o, 0, sizeof(float) * NQ * hd);
                    for (int i0 = 0; i0 < n; i0 += steps[si]) {
                        const int cnt = n - i0 < steps[si] ? n - i0 : steps[si];
                        kt->attn_step(q, NQ, k + i0 * stride, v + i0 * stride, stride, cnt, hd,
                                      scale, m, lsum, o);
                    }
                    for (int qi = 0; qi < NQ; qi++)
                        for (int c = 0; c < hd; c++)
                            check_close(o[qi * hd + c] / lsum[qi], (float)want[qi * hd + c], 2e-5f,
                                        "attn_step", kt->level, c);
                    /* the last query alone: the same bits */
                    m1 = -INFINITY;
                    l1 = 0;
                    memset(o1, 0, sizeof(float) * hd);
                    for (int i0 = 0; i0 < n; i0 += steps[si]) {
                        const int cnt = n - i0 < steps[si] ? n - i0 : steps[si];
                        kt->attn_step(q + (NQ - 1) * hd, 1, k + i0 * stride, v + i0 * stride,
                                      stride, cnt, hd, scale, &m1, &l1, o1);
                    }
                    assert_memory_equal(o1, o + (NQ - 1) * hd, sizeof(float) * hd);
                    assert_true(l1 == lsum[NQ - 1]);
                }
            }
            free(q); free(k); free(v); free(o); free(o1); free(want);
        }
}

/* attn_paged of every level over an f32 and an f16 cache whose blocks are
 * shuffled, against a double reference (from the cache's own values); the
 * last query alone gives the same bits. */
static void test_attn_paged(void **state)
{
    (void)state;
    enum { NQ = 3, NBLK = 40 };
    const int bss[] = {1, 5, 16, 70};
    const int nposs[] = {1, 9, 63, 64, 65, 130, 200};
    const int hds[] = {17, 64, 128};
    for (int f16 = 0; f16 < 2; f16++)
    for (size_t bi = 0; bi < sizeof bss / sizeof bss[0]; bi++)
        for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
            const int bs = bss[bi], hd = hds[hi], stride = 2 * hd + 3; /* 2 kv heads per slot */
            const int nslot = NBLK * bs;
            const size_t nv = (size_t)nslot * stride;
            float *kc = malloc(sizeof(float) * nv), *vc = malloc(sizeof(float) * nv);
            uint16_t *kh = malloc(2 * nv), *vh = malloc(2 * nv);
            tu_fill(kc, nv, -2, 2);
            tu_fill(vc, nv, -1, 1);
            for (size_t i = 0; i < nv; i++) { /* the f16 cache; kc/vc hold its exact values */
                kh[i] = plume_fp32_to_fp16(kc[i]);
                vh[i] = plume_fp32_to_fp16(vc[i]);
                if (f16) {
                    kc[i] = plume_fp16_to_fp32(kh[i]);
                    vc[i] = plume_fp16_to_fp32(vh[i]);
                }
            }
            int32_t table[NBLK];
            for (int b = 0; b < NBLK; b++)
                table[b] = (b * 17 + 3) % NBLK; /* a permutation: 17 is prime to 40 */
            float q[NQ * 128], o[NQ * 128], o1[128];
            tu_fill(q, NQ * 128, -2, 2);
            const float scale = 1.0f / sqrtf((float)hd);
            const float *kb = kc + hd, *vb = vc + hd; /* the second kv head */
            const void *kx = f16 ? (const void *)(kh + hd) : (const void *)kb;
            const void *vx = f16 ? (const void *)(vh + hd) : (const void *)vb;
            for (size_t pi = 0; pi < sizeof nposs / sizeof nposs[0]; pi++) {
                const int n_pos = nposs[pi];
                if (n_pos > NBLK * bs)
                    continue;
                for (int l = -1; l < n_levels; l++) {
                    const plume_kernels *kt = l < 0 ? plume_kernels_scalar() : levels[l];
                    kt->attn_paged(q, NQ, kx, vx, stride, f16, table, bs, n_pos, hd, scale, 0, o);
                    for (int qi = 0; qi < NQ; qi++) {
                        double want[128];
                        tu_attn_ref(q + qi * hd, kb, vb, stride, table, bs, 0, n_pos, hd, scale,
                                    -INFINITY, want);
                        for (int c = 0; c < hd; c++)
                            check_close(o[qi * hd + c], (float)want[c], 2e-5f,
                                        f16 ? "attn_paged f16" : "attn_paged f32", kt->level, c);
                    }
                    kt->attn_paged(q + (NQ - 1) * hd, 1, kx, vx, stride, f16, table, bs, n_pos,
                                   hd, scale, 0, o1);
                    assert_memory_equal(o1, o + (NQ - 1) * hd, sizeof(float) * hd);
                }
            }
            free(kc); free(vc); free(kh); free(vh);
        }
}

/* f32_to_f16 (the f16 KV cache's store) at every level equals
 * plume_fp32_to_fp16 bit for bit: on every 4099th bit pattern of the 2^32
 * (both signs, every exponent), and on the edges: zeros, the subnormal and
 * normal halves' bounds, ties at each, the overflow bound, infinities, and
 * NaNs with payloads, alone and among finite values in one group of 8. */
static void test_f32_to_f16(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    float *x = malloc(sizeof(float) * N);
    uint16_t *h = malloc(sizeof(uint16_t) * N);
    assert_non_null(x);
    assert_non_null(h);
    int n = 0;
    const uint32_t edges[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x007fffffu, 0x00800000u, /* f32 subnormals */
        0x33000000u, 0x33000001u, 0x32ffffffu, 0x33800000u, 0x33c00000u, /* 2^-25 .. ties */
        0x387fc000u, 0x387fe000u, 0x387fffffu, 0x38800000u, 0x38801000u, /* half subnormal edge */
        0x38802000u, 0x3f800000u, 0x3f801000u, 0x3f803000u, 0x3f802000u, /* ties to even */
        0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477fffffu, 0x47800000u, /* 65504 .. overflow */
        0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u, /* max, inf, NaNs */
        0xffc00001u, 0x7fbfffffu, 0x7fe12345u, 0xfff00000u,
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        x[n++] = plume_bits_to_f32(edges[i]);
    for (uint64_t u = 0; u < (1ull << 32) && n < N; u += 4099)
        x[n++] = plume_bits_to_f32((uint32_t)u);
    for (int l = 0; l < n_levels; l++) {
        memset(h, 0xa5, sizeof(uint16_t) * N);
        /* from every start offset mod 8, and a tail shorter than a group */
        for (int off = 0; off < 8; off++) {
            levels[l]->f32_to_f16(x + off, h + off, 8 * 97 + off);
            for (int i = off; i < 8 * 97 + 2 * off; i++)
                if (h[i] != plume_fp32_to_fp16(x[i]))
                    fail_msg("f32_to_f16 at level %s: x = 0x%08x gives 0x%04x, not 0x%04x",
                             plume_cpu_level_name(levels[l]->level), plume_f32_to_bits(x[i]),
                             h[i], plume_fp32_to_fp16(x[i]));
        }
        levels[l]->f32_to_f16(x, h, n);
        for (int i = 0; i < n; i++)
            if (h[i] != plume_fp32_to_fp16(x[i]))
                fail_msg("f32_to_f16 at level %s: x = 0x%08x gives 0x%04x, not 0x%04x",
                         plume_cpu_level_name(levels[l]->level), plume_f32_to_bits(x[i]), h[i],
                         plume_fp32_to_fp16(x[i]));
    }
    free(x);
    free(h);
}

/* kv_i8 (one head of the int8 KV cache) at every level against the
 * definition in dispatch.h, evaluated here in double where it is exact:
 * head sizes 1..300 (tails past the vector width), random values, values
 * that land on .5 ties after scaling, all zeros, and NaN / infinity. */
static void kv_i8_check(const plume_kernels *k, const float *x, int n, const char *what)
{
    int8_t q[512];
    float d;
    k->kv_i8(x, n, q, &d);
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    if (memcmp(&d, &(float){amax / 127.0f}, sizeof d) != 0)
        fail_msg("kv_i8 %s at level %s, n %d: d %.9g, not %.9g", what,
                 plume_cpu_level_name(k->level), n, d, amax / 127.0f);
    for (int i = 0; i < n; i++) {
        const float p = x[i] * id; /* the product the kernels round */
        int want = 0;
        if (p == p) {
            const double r = rint((double)p); /* nearest, ties to even */
            want = r > 127.0 ? 127 : r < -127.0 ? -127 : (int)r;
        }
        if (q[i] != want)
            fail_msg("kv_i8 %s at level %s, n %d, index %d: x %.9g gives %d, not %d", what,
                     plume_cpu_level_name(k->level), n, i, x[i], q[i], want);
    }
}

static void test_kv_i8(void **state)
{
    (void)state;
    float x[512];
    for (int l = 0; l < n_levels; l++) {
        const plume_kernels *k = levels[l];
        for (int n = 1; n <= 300; n++) {
            for (int i = 0; i < n; i++)
                x[i] = tu_uniform(-1.5f, 1.5f);
            kv_i8_check(k, x, n, "random");
            /* max 127 exactly: x[i] = m + 0.5 lands on a tie */
            for (int i = 0; i < n; i++)
                x[i] = (float)((i * 37) % 255 - 127) + (i % 3 ? 0.5f : 0.0f);
            x[0] = 127.0f;
            kv_i8_check(k, x, n, "ties");
            memset(x, 0, sizeof(float) * (size_t)n);
            kv_i8_check(k, x, n, "zeros");
            for (int i = 0; i < n; i++)
                x[i] = tu_uniform(-0.5f, 0.5f);
            x[n / 2] = NAN;
            kv_i8_check(k, x, n, "a NaN");
            x[n - 1] = INFINITY;
            kv_i8_check(k, x, n, "NaN and infinity");
        }
    }
}

static void test_level_parse(void **state)
{
    (void)state;
    plume_error err;
    plume_cpu_level l;
    assert_int_equal(plume_cpu_level_parse("scalar", &l, &err), 0);
    assert_int_equal(l, PLUME_CPU_SCALAR);
    assert_int_equal(plume_cpu_level_parse("sse9", &l, &err), -1);
    assert_non_null(strstr(err.msg, "scalar, avx2, avx512 or amx"));
    plume_cpu_level max = plume_cpu_level_max();
    for (int i = max + 1; i < PLUME_CPU_LEVEL_COUNT; i++) {
        assert_int_equal(plume_cpu_level_parse(plume_cpu_level_name((plume_cpu_level)i), &l, &err), -1);
        assert_non_null(strstr(err.msg, "asks for more than this CPU has"));
    }
    char feats[256];
    plume_cpu_features_string(feats, sizeof feats);
    printf("# features: %s; best level %s\n", feats, plume_cpu_level_name(max));
    /* the active level obeys PLUME_CPU_FEATURES when the test runs with it */
    const char *env = getenv("PLUME_CPU_FEATURES");
    if (env && plume_cpu_level_parse(env, &l, NULL) == 0)
        assert_int_equal(plume_kernels_active()->level, l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_identical),
        cmocka_unit_test(test_matmul_kernels),
        cmocka_unit_test(test_vector_kernels),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attn_step),
        cmocka_unit_test(test_attn_paged),
        cmocka_unit_test(test_f32_to_f16),
        cmocka_unit_test(test_kv_i8),
        cmocka_unit_test(test_level_parse),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
