/* Per-type speed of the repacked (mm_r) matmul kernels on weights streamed
 * from DRAM, as a decode step reads them: per type, 12 weights of 2048 x
 * 8192 (far larger than the last-level cache), n_tok tokens (1 unless
 * told: a decode step; 32 is a batched step of 32 sequences), the rows split
 * between n_threads threads; the types take turns, 9 rounds, and each
 * type's median GB/s of repacked bytes (and, for several tokens, Gweights/s
 * times tokens) is printed with its 9 samples (the
 * machine's bandwidth may drift between rounds: compare types within a
 * round).  Compare with bench_mm_r, which measures the same kernels on
 * weights that stay in cache.
 * Usage: bench_mm_dram [scalar|avx2|avx512|amx] [n_threads] [n_tok]   (defaults:
 * best level, 2, 1).  Needs about 1.3 GB of memory.  Not a test: it asserts
 * nothing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/ops.h"
#include "cpu_test_util.h"

enum { N_MAT = 12, ROUNDS = 9, MAX_THREADS = 16 };
static const int64_t K = 2048, N = 8192;

typedef struct dram_job {
    const plume_kernels *k;
    const plume_q8_act *act;
    const plume_cpu_weight *w; /* N_MAT weights of one type */
    int ith, nth, n_tok;
    float *y;
} dram_job;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Thread ith's share of every weight: whole 16-row groups. */
static void *dram_worker(void *arg)
{
    const dram_job *j = arg;
    const int64_t groups = N / 16, g0 = groups * j->ith / j->nth, g1 = groups * (j->ith + 1) / j->nth;
    for (int m = 0; m < N_MAT; m++)
        j->k->mm_r[j->w[m].kr](j->w[m].packed + (size_t)g0 * j->w[m].group_bytes, (int)((g1 - g0) * 16),
                               j->act, j->n_tok, j->y + g0 * 16, N);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const plume_kernels *k = tu_level_arg(argc, argv);
    const int nth = argc > 2 ? atoi(argv[2]) : 2, nt = argc > 3 ? atoi(argv[3]) : 1;
    if (!k || nth < 1 || nth > MAX_THREADS || nt < 1 || nt > 96) {
        fprintf(stderr, "usage: %s [scalar|avx2|avx512|amx] [n_threads 1..%d] [n_tok 1..96] (a level "
                        "this CPU runs)\n", argv[0], MAX_THREADS);
        return 2;
    }
    const int64_t nb = K / 32;
    float *x = malloc(sizeof(float) * (size_t)(K * nt));
    int8_t *aq = malloc((size_t)(K * nt));
    float *ad = malloc(sizeof(float) * (size_t)(nb * nt)), *as = malloc(sizeof(float) * (size_t)(nb * nt));
    float *as16 = malloc(sizeof(float) * (size_t)(2 * nb * nt));
    int32_t *ai = calloc((size_t)(nb * nt), sizeof(int32_t)), *ai16 = calloc((size_t)(2 * nb * nt), sizeof(int32_t));
    float *y = malloc(sizeof(float) * (size_t)N * (size_t)nt);
    static plume_cpu_weight w[TU_N_RP_TYPES][N_MAT];
    static plume_tensor t[TU_N_RP_TYPES][N_MAT];
    if (!x || !aq || !ad || !as || !as16 || !ai || !ai16 || !y) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    tu_fill(x, (size_t)(K * nt), -1, 1);
    for (int i = 0; i < nt; i++)
        k->quantize_q8(x + i * K, K, aq + i * K, ad + i * nb, as + i * nb);
    for (int64_t i = 0; i < 2 * nb * nt; i++)
        as16[i] = 0.1f;
    plume_q8_act act = {aq, ad, as, K, ai, ai16, as16, NULL, 0};
    plume_q8_blk *blk = aligned_alloc(64, plume_cpu_act_blocks_bytes(nt, K));
    plume_cpu_act_blocks(&act, nt, blk);
    for (size_t ti = 0; ti < TU_N_RP_TYPES; ti++)
        for (int m = 0; m < N_MAT; m++) {
            size_t rb;
            uint8_t *raw = tu_weights(TU_RP_TYPES[ti], K, (int)N, &rb);
            t[ti][m] = (plume_tensor){.name = "w", .type = TU_RP_TYPES[ti], .n_dims = 2, .ne = {K, N, 1, 1},
                                      .data = raw, .nbytes = rb * (size_t)N};
            if (plume_cpu_weight_init(&w[ti][m], &t[ti][m], NULL) || w[ti][m].kr < 0) {
                fprintf(stderr, "%s: not repacked\n", plume_dtype_name(TU_RP_TYPES[ti]));
                return 1;
            }
            free(raw); /* the repacked copy is all the kernels read */
        }
    double gbs[TU_N_RP_TYPES][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (size_t ti = 0; ti < TU_N_RP_TYPES; ti++) {
            pthread_t th[MAX_THREADS];
            dram_job jobs[MAX_THREADS];
            const double t0 = now();
            for (int i = 0; i < nth; i++) {
                jobs[i] = (dram_job){k, &act, w[ti], i, nth, nt, y};
                pthread_create(&th[i], NULL, dram_worker, &jobs[i]);
            }
            for (int i = 0; i < nth; i++)
                pthread_join(th[i], NULL);
            const double bytes = (double)w[ti][0].group_bytes * (double)(N / 16) * N_MAT;
            gbs[ti][r] = bytes / (now() - t0) * 1e-9;
        }
    printf("level %s, %d thread(s), %d weights of %lld x %lld per type, %d token(s), %d rounds\n",
           plume_cpu_level_name(k->level), nth, N_MAT, (long long)K, (long long)N, nt, ROUNDS);
    for (size_t ti = 0; ti < TU_N_RP_TYPES; ti++) {
        double s[ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            s[r] = gbs[ti][r];
        qsort(s, ROUNDS, sizeof s[0], cmp_double);
        printf("  %-7s median %6.2f GB/s", plume_dtype_name(TU_RP_TYPES[ti]), s[ROUNDS / 2]);
        if (nt > 1) /* weights per second, times tokens */
            printf(" = %6.1f Gweight-tokens/s",
                   s[ROUNDS / 2] / ((double)w[ti][0].group_bytes / (16.0 * (double)K)) * nt);
        printf("  rounds:");
        for (int r = 0; r < ROUNDS; r++)
            printf(" %.1f", gbs[ti][r]);
        printf("\n");
    }
    for (size_t ti = 0; ti < TU_N_RP_TYPES; ti++)
        for (int m = 0; m < N_MAT; m++)
            plume_cpu_weight_release(&w[ti][m]);
    free(x); free(aq); free(ad); free(as); free(as16); free(ai); free(ai16); free(blk); free(y);
    return 0;
}
