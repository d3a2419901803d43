/* Per-type speed of the repacked (mm_r) matmul kernels, for comparing
 * weight formats with each other: one thread, a K x 8192 weight (K = 1536 unless told),
 * n_tok tokens, best of 15 runs in thread CPU time (so that a loaded
 * machine's preemption does not count; the weight stays in a large last-level
 * cache, so this measures the kernels' own speed, not memory bandwidth).
 * Prints per type the repacked bits per weight, GB/s of repacked bytes and
 * weights/s; for Q4_K and Q6_K also the unrepacked mm_q kernels.
 * Usage: bench_mm_r [scalar|avx2|avx512|amx] [n_tok] [K]   (defaults: best level,
 * 1, 1536; K a multiple of 256).  One call takes all n_tok tokens: the
 * matmuls' own split into token blocks (matmul.c) is not applied.
 * Not a test: it asserts nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/ops.h"
#include "cpu_test_util.h"

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const plume_kernels *k = tu_level_arg(argc, argv);
    const int nt = argc > 2 ? atoi(argv[2]) : 1;
    const int64_t K = argc > 3 ? atoll(argv[3]) : 1536, N = 8192, nb = K / 32;
    if (!k || nt < 1 || K < 256 || K % 256) {
        fprintf(stderr, "usage: %s [scalar|avx2|avx512|amx] [n_tok >= 1] [K, a multiple of 256] (a level this CPU runs)\n", argv[0]);
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)(K * nt));
    int8_t *aq = malloc((size_t)(K * nt));
    float *ad = malloc(sizeof(float) * (size_t)(nb * nt)), *as = malloc(sizeof(float) * (size_t)(nb * nt));
    float *as16 = malloc(sizeof(float) * (size_t)(2 * nb * nt));
    int32_t *ai = calloc((size_t)(nb * nt), sizeof(int32_t)), *ai16 = calloc((size_t)(2 * nb * nt), sizeof(int32_t));
    float *y = malloc(sizeof(float) * (size_t)(N * nt));
    tu_fill(x, (size_t)(K * nt), -1, 1);
    for (int t = 0; t < nt; t++)
        k->quantize_q8(x + t * K, K, aq + t * K, ad + t * nb, as + t * nb);
    for (int64_t i = 0; i < 2 * nb * nt; i++)
        as16[i] = 0.1f;
    plume_q8_act act = {aq, ad, as, K, ai, ai16, as16, NULL, 0};
    plume_q8_blk *blk = aligned_alloc(64, plume_cpu_act_blocks_bytes(nt, K));
    plume_cpu_act_blocks(&act, nt, blk);
    printf("level %s, %d token(s), K=%lld N=%lld, one thread, best of 15 (thread CPU time)\n",
           plume_cpu_level_name(k->level), nt, (long long)K, (long long)N);
    double peak = 0; /* the level's int8 peak in the same clock, for the % column */
    for (int rep = 0; rep < 5; rep++) {
        const double t0 = cpu_seconds();
        const double ops = k->int8_peak(20000000);
        const double p = ops / (cpu_seconds() - t0);
        peak = p > peak ? p : peak;
    }
    printf("  int8 dot peak %.1f GOP/s (thread CPU time)\n", peak * 1e-9);
    for (size_t ti = 0; ti < TU_N_RP_TYPES; ti++) {
        const uint32_t type = TU_RP_TYPES[ti];
        size_t rb;
        uint8_t *w = tu_weights(type, K, (int)N, &rb);
        plume_tensor t = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = w,
                          .nbytes = rb * (size_t)N};
        plume_cpu_weight pw;
        if (plume_cpu_weight_init(&pw, &t, NULL) || pw.kr < 0) {
            fprintf(stderr, "%s: not repacked\n", plume_dtype_name(type));
            return 1;
        }
        const double bytes = (double)pw.group_bytes * (double)((N + 15) / 16);
        double best = 1e30;
        for (int rep = 0; rep < 15; rep++) {
            const double t0 = cpu_seconds();
            k->mm_r[pw.kr](pw.packed, (int)N, &act, nt, y, N);
            const double dt = cpu_seconds() - t0;
            best = dt < best ? dt : best;
        }
        printf("  %-7s %.3f bits/weight  %6.2f GB/s  %6.1f Gweights/s  %4.1f%% of the int8 peak\n",
               plume_dtype_name(type), 8.0 * bytes / (double)(K * N), bytes / best * 1e-9,
               (double)(K * N * nt) / best * 1e-9, 100.0 * 2.0 * (double)(K * N * nt) / best / peak);
        if (type == PLUME_DTYPE_Q4_K || type == PLUME_DTYPE_Q6_K) {
            best = 1e30;
            for (int rep = 0; rep < 15; rep++) {
                const double t0 = cpu_seconds();
                k->mm_q[tu_kq(type)](w, rb, (int)N, &act, nt, y, N);
                const double dt = cpu_seconds() - t0;
                best = dt < best ? dt : best;
            }
            printf("  %-7s unrepacked mm_q kernel      %6.1f Gweights/s\n", plume_dtype_name(type),
                   (double)(K * N * nt) / best * 1e-9);
        }
        plume_cpu_weight_release(&pw);
        free(w);
    }
    free(x); free(aq); free(ad); free(as); free(as16); free(ai); free(ai16); free(blk); free(y);
    return 0;
}
