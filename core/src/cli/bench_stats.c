#include "cli/bench_stats.h"

#include <math.h>
#include <stdlib.h>

bool bench_vec_push(bench_vec *b, double x)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        double *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return false;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return true;
}

void bench_vec_free(bench_vec *b)
{
    free(b->v);
    *b = (bench_vec){0};
}

double bench_percentile(const double *sorted, size_t n, double p)
{
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank);
    if (lo + 1 >= n)
        return sorted[n - 1];
    double frac = rank - (double)lo;
    return sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_summary bench_summarize(bench_vec *b)
{
    bench_summary s = {.n = b->n};
    if (b->n == 0)
        return s;
    qsort(b->v, b->n, sizeof *b->v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < b->n; i++)
        sum += b->v[i];
    s.mean = sum / (double)b->n;
    s.p50 = bench_percentile(b->v, b->n, 50);
    s.p90 = bench_percentile(b->v, b->n, 90);
    s.p99 = bench_percentile(b->v, b->n, 99);
    return s;
}
