/* A persistent pthread pool: n workers (the caller's thread is worker 0)
 * run one parallel-for at a time, synchronised by a generation counter. */
#ifndef PLUME_THREADPOOL_H
#define PLUME_THREADPOOL_H

#include "plume/error.h"

typedef struct plume_pool plume_pool;

/* fn(ctx, i, n) runs for i = 0..n-1 where n is the pool's thread count. */
typedef void (*plume_pool_fn)(void *ctx, int ith, int nth);

/* Starts n_threads-1 workers (n_threads >= 1). */
int plume_pool_create(int n_threads, plume_pool **out, plume_error *err);

/* Joins the workers and frees; NULL is a no-op. */
void plume_pool_free(plume_pool *p);

int plume_pool_threads(const plume_pool *p);

/* Runs fn on every thread (the caller included) and returns when all are
 * done. Not reentrant: one run at a time. */
void plume_pool_run(plume_pool *p, plume_pool_fn fn, void *ctx);

/* The number of online CPUs, at least 1. */
int plume_cpu_count(void);

#endif
