/* The CUDA kernels' own source (plugins/quant-gptq/cuda/gptq_cuda_kernels.cu,
 * included below as C with -DGPTQ_CUDA_EMU) run on the CPU: every CUDA
 * thread of a block is a pthread, __syncthreads is a pthread barrier over
 * the block, __shared__ arrays are statics (one block runs at a time),
 * threadIdx is thread-local.  The kernels use no warp-level primitives, so
 * this executes exactly the index math, bounds checks, barriers and
 * reductions of the device code, with the layer prepared by the plugin's
 * own gptq_cuda_prepare (act-order repack, group ends, zero points), and
 * compares with the CPU reference kernel (gptq_forward_ref).  Runs without
 * a GPU; build it with -fsanitize=address or thread by hand to check for
 * out-of-bounds accesses and missing barriers (data races on the shared
 * arrays).
 *
 * The launch geometry of gptq_cuda_kernels.cu's launchers (grid, block)
 * is repeated here (emu_gemv, emu_dequant); the host's split-K choice is
 * covered by running every ksplit from 1 to the number of tiles.  The
 * prefill GEMM is checked through the dequantized slab: a column-major
 * GEMM with exactly the arguments gptq_cuda.c passes to cublasGemmEx. */
#define GPTQ_CUDA_EMU 1
#include "gptq_cuda_emu.h"

#include "gptq_linear.h"
#include "gptq_pack.h"
#include "gptq_rtn.h"
#include "../gptq_test_rng.h"

/* ---- the test ---- */


static int failures = 0;

/* |a − b| ≤ rel·S (+ abs), S = Σ|x||w| (see test_gptq_cuda.c for the bounds) */
static int cmp(const char *what, const char *desc, int T, int64_t N, const float *y,
               const float *yr, const double *S, double rel, int skip_nan_check)
{
    int bad = 0;
    (void)skip_nan_check;
    for (int64_t i = 0; i < (int64_t)T * N; i++) {
        const double tol = rel * S[i] + 1e-30, d = fabs((double)y[i] - (double)yr[i]);
        if (!(d <= tol)) {
            if (bad < 3)
                printf("FAIL %s (%s): element %" PRId64 " (t=%" PRId64 ", n=%" PRId64
                       "): %.9g vs reference %.9g (tol %.3g)\n",
                       what, desc, i, i / N, i % N, (double)y[i], (double)yr[i], tol);
            bad++;
        }
    }
    if (bad)
        failures++;
    return bad;
}

/* The emulated kernels on the layer d describes (prepared by the plugin's
 * own gptq_cuda_prepare) against ref, the CPU reference layer built from
 * the same arrays, on random tokens; Wd [N][K] is what they dequantize to.
 * Shared with tests/awq (AWQ layers converted for these kernels). */
static void check_layer(const gptq_cuda_layer_desc *dp, const gptq_layer *ref, const float *Wd,
                        const char *desc)
{
    const gptq_cuda_layer_desc d = *dp;
    const int64_t K = d.K, N = d.N;
    const int bits = d.bits;
    const float *bp = d.bias;
    const int TMAX = 11; /* two gemv chunks: 8 + 3 */
    plume_error err = {0};
    float *x = malloc((size_t)(TMAX * K) * sizeof *x);
    float *yr = malloc((size_t)(TMAX * N) * sizeof *yr), *y = malloc((size_t)(TMAX * N) * sizeof *y);
    double *S = malloc((size_t)(TMAX * N) * sizeof *S);
    rnd_fill(x, TMAX * K, 1.0f);
    if (gptq_forward_ref(ref, x, TMAX, yr, &err)) {
        printf("FAIL reference (%s): %s\n", desc, err.msg);
        failures++;
        return;
    }
    for (int tt = 0; tt < TMAX; tt++)
        for (int64_t n = 0; n < N; n++) {
            double s = bp ? fabs(bp[n]) : 0.0;
            for (int64_t k = 0; k < K; k++)
                s += fabs((double)x[tt * K + k] * Wd[n * K + k]);
            S[tt * N + n] = s;
        }
    gptq_cuda_host_layout h;
    if (gptq_cuda_prepare(&d, &h, &err)) {
        printf("FAIL prepare (%s): %s\n", desc, err.msg);
        failures++;
        return;
    }
    if ((h.perm != NULL) != gptq_layer_permuted(ref)) {
        printf("FAIL (%s): permuted %d, reference %d\n", desc, h.perm != NULL,
               gptq_layer_permuted(ref));
        failures++;
    }
    gptq_cuda_dev L = {.qweight = h.qweight ? h.qweight : d.qweight, .scales = d.scales,
                       .zeros = h.zeros, .gs = h.gs, .gend = h.gend, .perm = h.perm,
                       .bias = bp, .K = K, .N = N, .G = d.G, .bits = bits};
    const double u = ldexp(1.0, -24), f32rel = 2.0 * (K + 2) * u / (1.0 - (K + 2) * u);

    /* gemv: T = 1, 3, 11 (chunks 8 + 3 as forward_gemv does), every ksplit */
    const int64_t ntiles = (K + KT - 1) / KT;
    float *partial = malloc((size_t)(ntiles * MAXTOK * N) * sizeof *partial);
    const int Ts[] = {1, 3, TMAX};
    for (int64_t ks = 1; ks <= ntiles; ks++) {
        const int64_t tps = (ntiles + ks - 1) / ks, ksplit = (ntiles + tps - 1) / tps;
        for (size_t ti = 0; ti < 3; ti++) {
            const int T = Ts[ti];
            for (int64_t i = 0; i < (int64_t)T * N; i++)
                y[i] = NAN;
            for (int t0 = 0; t0 < T; t0 += MAXTOK) {
                const int Tc = T - t0 < MAXTOK ? T - t0 : MAXTOK;
                emu_gemv(&L, x + (int64_t)t0 * K, Tc, y + (int64_t)t0 * N, partial, (int)ksplit,
                         (int)tps);
            }
            char what[64];
            snprintf(what, sizeof what, "gemv T=%d ksplit=%" PRId64, T, ksplit);
            cmp(what, desc, T, N, y, yr, S, f32rel, 0);
        }
    }
    free(partial);

    /* prefill: slabs of 128 columns (and all of N), f32 and f16 */
    for (int f16 = 0; f16 < 2; f16++)
        for (int slabs = 0; slabs < 2; slabs++) {
            const int64_t nb = slabs ? 128 : N;
            void *w = malloc((size_t)(K * nb) * (f16 ? 2 : 4));
            const int T = TMAX;
            for (int64_t i = 0; i < (int64_t)T * N; i++)
                y[i] = NAN;
            for (int64_t n0 = 0; n0 < N; n0 += nb) {
                const int64_t cur = N - n0 < nb ? N - n0 : nb;
                /* poison the slab: every element must be written */
                if (f16)
                    for (int64_t i = 0; i < K * cur; i++)
                        ((__half *)w)[i] = (__half)NAN;
                else
                    for (int64_t i = 0; i < K * cur; i++)
                        ((float *)w)[i] = NAN;
                emu_dequant(&L, n0, cur, w, f16);
                /* the slab is W[n0 + c][k] at w[k·cur + c] */
                int badw = 0;
                for (int64_t k = 0; k < K; k++)
                    for (int64_t c = 0; c < cur; c++) {
                        const float got = f16 ? (float)((__half *)w)[k * cur + c]
                                              : ((float *)w)[k * cur + c];
                        const float want = f16 ? (float)(__half)Wd[(n0 + c) * K + k]
                                               : Wd[(n0 + c) * K + k];
                        if (!(got == want) && badw++ < 3)
                            printf("FAIL dequant f16=%d (%s): W[%" PRId64 "][%" PRId64
                                   "] = %.9g, want %.9g\n",
                                   f16, desc, n0 + c, k, (double)got, (double)want);
                    }
                if (badw)
                    failures++;
                /* y[:, n0:n0+cur] = slab · x, exactly gptq_cuda.c's GemmEx call
                 * (f16: x rounded to f16 as gptq_to_f16 does) */
                float *xb = x, *xh = NULL;
                if (f16) {
                    xh = malloc((size_t)(T * K) * sizeof *xh);
                    for (int64_t i = 0; i < T * K; i++)
                        xh[i] = (float)(__half)x[i];
                    xb = xh;
                }
                colmajor_gemm((int)cur, T, (int)K, w, f16, (int)cur, xb, (int)K, y + n0, (int)N);
                free(xh);
            }
            if (bp) /* gptq_add_bias, threads one after another */
                for (int64_t i = 0; i < (int64_t)T * N; i++)
                    y[i] += bp[i % N];
            char what[64];
            snprintf(what, sizeof what, "prefill %s%s", f16 ? "f16" : "f32",
                     slabs ? " slabs" : "");
            cmp(what, desc, T, N, y, yr, S, f16 ? ldexp(1.0, -9) + f32rel : f32rel, 0);
            free(w);
        }
    gptq_cuda_host_layout_free(&h);
    free(x);
    free(yr);
    free(y);
    free(S);
}


static void run(int bits, bool sym, gptq_zero_format fmt, bool act, int64_t gs, int64_t K,
                int64_t N, bool with_bias, bool pass_gidx)
{
    char desc[200];
    snprintf(desc, sizeof desc,
             "bits=%d %s v%d desc_act=%d group=%" PRId64 " K=%" PRId64 " N=%" PRId64
             " bias=%d g_idx=%d",
             bits, sym ? "sym" : "asym", (int)fmt, act, gs, K, N, with_bias, pass_gidx);
    plume_error err = {0};
    float *W = malloc((size_t)(N * K) * sizeof *W), *Wd = malloc((size_t)(N * K) * sizeof *Wd);
    float *bias = malloc((size_t)N * sizeof *bias);
    int32_t *perm = malloc((size_t)K * sizeof *perm);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            W[n * K + k] = 0.05f * rndf() + (sym ? 0.0f : 0.02f);
        bias[n] = rndf();
    }
    shuffle(perm, K);
    gptq_qconfig qc = {.bits = bits, .group_size = gs, .sym = sym, .fmt = fmt};
    gptq_tensors t = {0};
    if (gptq_rtn_quantize(W, N, K, &qc, act ? perm : NULL, &t, &err)) {
        printf("FAIL rtn (%s): %s\n", desc, err.msg);
        failures++;
        return;
    }
    const int32_t *gidx = pass_gidx ? t.g_idx : NULL;
    const float *bp = with_bias ? bias : NULL;
    gptq_load_config lc = {.bits = bits, .group_size = gs, .sym = sym, .desc_act = act, .fmt = fmt};
    gptq_layer *ref = NULL;
    if (gptq_layer_build(t.qweight, t.qzeros, t.scales, gidx, bp, K, N, t.G, &lc, &ref, &err) ||
        gptq_dequantize(t.qweight, t.qzeros, t.scales, gidx, K, N, t.G, gs, bits, fmt, Wd, &err)) {
        printf("FAIL reference (%s): %s\n", desc, err.msg);
        failures++;
        return;
    }
    gptq_cuda_layer_desc d = {.qweight = t.qweight, .qzeros = t.qzeros, .scales = t.scales,
                              .g_idx = gidx, .bias = bp, .K = K, .N = N, .G = t.G, .bits = bits,
                              .group_size = gs, .fmt = fmt};
    check_layer(&d, ref, Wd, desc);
    gptq_layer_free(ref);
    gptq_tensors_free(&t);
    free(W);
    free(Wd);
    free(bias);
    free(perm);
}

int main(void)
{
    rng_seed(0x2545F4914F6CDD1Dull);
    int n = 0;
    static const int bitss[] = {2, 3, 4, 8};
    for (size_t bi = 0; bi < 4; bi++)
        for (int sym = 0; sym < 2; sym++)
            for (int v = 1; v <= 2; v++)
                for (int act = 0; act < 2; act++) {
                    const int bits = bitss[bi];
                    /* groups and shapes rotate so that every width meets each */
                    static const int64_t groups[] = {32, 128, -1};
                    const int64_t gs = groups[n % 3];
                    const int64_t K = (n % 2) ? 1568 : 416; /* 1568: 4 tiles, last 32 rows */
                    const int64_t N = bits == 3 ? 160 : bits == 2 ? 144 : 136; /* > 128: two column blocks */
                    run(bits, sym, v == 1 ? GPTQ_ZERO_V1 : GPTQ_ZERO_V2, act, gs, K, N, n % 2 == 0,
                        act || n % 3 == 1);
                    n++;
                }
    printf("%d layers emulated, %d failures\n", n, failures);
    return failures ? 1 : 0;
}
