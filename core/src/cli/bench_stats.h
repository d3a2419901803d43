/* Summaries of latency samples for plume bench serve: a growable array of
 * doubles and its mean and percentiles, the percentiles interpolated
 * linearly between closest ranks (numpy.percentile's default, which
 * `vllm bench serve` reports). */
#ifndef PLUME_CLI_BENCH_STATS_H
#define PLUME_CLI_BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct bench_vec {
    double *v;
    size_t n, cap;
} bench_vec;

/* Appends x; false when out of memory (the vector is unchanged). */
bool bench_vec_push(bench_vec *b, double x);
void bench_vec_free(bench_vec *b);

typedef struct bench_summary {
    size_t n; /* 0: no samples, the figures are meaningless */
    double mean, p50, p90, p99;
} bench_summary;

/* The p-th percentile (0..100) of sorted[0..n), n >= 1: the value at rank
 * p/100 * (n-1), interpolated between the two nearest samples. */
double bench_percentile(const double *sorted, size_t n, double p);

/* Sorts b's samples in place and summarises them. */
bench_summary bench_summarize(bench_vec *b);

#endif
