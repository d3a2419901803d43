/* A persistent pthread pool: n workers (the caller's thread is worker 0)
 * run one parallel-for at a time.  Workers spin briefly between runs (the
 * runs of a forward pass come back to back) and then sleep, so an idle pool
 * costs no CPU.  A worker that has not picked up a run by the time the
 * caller finished its own share (descheduled on a busy machine) has its
 * share run by the caller instead, so one slow thread does not stall the
 * run. */
#ifndef PLUME_THREADPOOL_H
#define PLUME_THREADPOOL_H

#include <stddef.h>

#include "plume/cpu.h"
#include "plume/error.h"

typedef struct plume_pool plume_pool;

/* fn(ctx, i, n) runs exactly once for each i = 0..n-1, where n is the
 * pool's thread count, on any thread of the pool (usually thread i; the
 * caller's thread may run an absent worker's i after its own), never two
 * at once on one thread.  So fn must not wait for another index (no
 * barriers inside a run); split work by i or by an atomic counter. */
typedef void (*plume_pool_fn)(void *ctx, int ith, int nth);

/* Starts n_threads-1 workers (n_threads >= 1). */
int plume_pool_create(int n_threads, plume_pool **out, plume_error *err);

/* Joins the workers and frees; NULL is a no-op. */
void plume_pool_free(plume_pool *p);

int plume_pool_threads(const plume_pool *p);

/* Runs fn on every thread (the caller included) and returns when all are
 * done; everything the workers wrote is visible to the caller afterwards.
 * Not reentrant: one run at a time, from one thread. */
void plume_pool_run(plume_pool *p, plume_pool_fn fn, void *ctx);

/* A 64-byte aligned buffer of at least `bytes` owned by the pool, for the
 * kernels' per-call scratch (quantized activations).  Call from the thread
 * that calls plume_pool_run, outside a run; the buffer stays valid until the
 * next call or plume_pool_free.  NULL when out of memory. */
void *plume_pool_workspace(plume_pool *p, size_t bytes);

/* plume_cpu_count, the default worker count, is SDK: plume/cpu.h. */

/* Online logical CPUs, at least 1. */
int plume_cpu_online(void);

/* Physical cores in this process's affinity mask, or 0 when the topology
 * cannot be read. */
int plume_cpu_physical_cores(void);

#endif
