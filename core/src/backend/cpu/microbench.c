/* plume_cpu_microbench (microbench.h): the kernels' read_sum, fma_peak and
 * int8_peak (the active level's, or its vector units') run on every pool
 * thread at once, timed with the one clock. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/microbench.h"
#include "plume/clock.h"

#define READ_BYTES ((size_t)1 << 30) /* far larger than the last-level cache */
#define MAX_SLOTS 256

typedef struct micro_job {
    const plume_kernels *k;
    const uint8_t *buf;
    size_t bytes;
    long iters;
    plume_microbench what;
    double ops[MAX_SLOTS];
    float sink[MAX_SLOTS];
} micro_job;

static void micro_worker(void *ctx, int ith, int nth)
{
    micro_job *j = ctx;
    if (j->what == PLUME_MB_READ_GBS) {
        /* slices of whole 256-byte lines, 64-byte aligned */
        size_t lines = j->bytes / 256;
        size_t l0 = lines * (size_t)ith / (size_t)nth, l1 = lines * (size_t)(ith + 1) / (size_t)nth;
        j->sink[ith % MAX_SLOTS] = j->k->read_sum(j->buf + l0 * 256, (l1 - l0) * 256);
    } else {
        j->ops[ith % MAX_SLOTS] += j->what == PLUME_MB_F32_GFLOPS ? j->k->fma_peak(j->iters)
                                                                 : j->k->int8_peak(j->iters);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed run: units (bytes or operations) per second. */
static double run_once(plume_pool *pool, micro_job *j)
{
    memset(j->ops, 0, sizeof j->ops);
    double t0 = plume_clock_seconds();
    plume_pool_run(pool, micro_worker, j);
    double dt = plume_clock_seconds() - t0;
    double total = 0;
    if (j->what == PLUME_MB_READ_GBS) {
        total = (double)j->bytes;
    } else {
        for (int i = 0; i < MAX_SLOTS; i++)
            total += j->ops[i];
    }
    return total / dt;
}

int plume_cpu_microbench(plume_pool *pool, plume_microbench what, int reps, double *out,
                         plume_error *err)
{
    if (what != PLUME_MB_READ_GBS && what != PLUME_MB_F32_GFLOPS && what != PLUME_MB_INT8_GOPS &&
        what != PLUME_MB_INT8_VEC_GOPS)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "cpu backend: no microbenchmark %d (it measures read bandwidth, the "
                         "f32 FMA peak and the int8 peaks of the active level and of its vector "
                         "units; f16 matrix multiply is a device backend's)",
                         (int)what);
    if (reps < 1)
        reps = 1;
    const plume_kernels *k = plume_kernels_active();
    if (what == PLUME_MB_INT8_VEC_GOPS) { /* the amx level's vectors are avx512's */
        if (k->level == PLUME_CPU_AMX)
            k = plume_kernels_for(PLUME_CPU_AVX512);
        what = PLUME_MB_INT8_GOPS;
    }
    micro_job *j = calloc(1, sizeof *j);
    double *rates = malloc(sizeof(double) * (size_t)reps);
    uint8_t *buf = what == PLUME_MB_READ_GBS ? aligned_alloc(64, READ_BYTES) : NULL;
    if (!j || !rates || (what == PLUME_MB_READ_GBS && !buf)) {
        free(j);
        free(rates);
        free(buf);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "cpu backend: out of memory for the microbenchmark (the bandwidth "
                         "test reads a %zu MiB buffer); free memory or skip it",
                         READ_BYTES >> 20);
    }
    j->k = k;
    j->what = what;
    if (buf) {
        memset(buf, 1, READ_BYTES); /* fault every page in before timing */
        j->buf = buf;
        j->bytes = READ_BYTES;
    }
    j->iters = k->level == PLUME_CPU_SCALAR ? 20L * 1000 * 1000 : 50L * 1000 * 1000;
    (void)run_once(pool, j); /* warm-up */
    for (int r = 0; r < reps; r++)
        rates[r] = run_once(pool, j);
    qsort(rates, (size_t)reps, sizeof *rates, cmp_double);
    double median = reps % 2 ? rates[reps / 2] : 0.5 * (rates[reps / 2 - 1] + rates[reps / 2]);
    *out = median / 1e9; /* GB/s, GFLOP/s, GOP/s */
    free(buf);
    free(rates);
    free(j);
    return 0;
}
