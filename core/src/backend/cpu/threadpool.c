/* The thread pool (threadpool.h).  One run: the caller publishes fn/ctx,
 * bumps a generation counter and wakes sleepers; each worker claims its
 * index with a compare-and-swap on its own state word (on its own cache
 * line), runs it and marks it done.  The caller runs index 0, then claims
 * and runs every index no worker has claimed yet, then waits for the
 * claimed ones.  Between runs workers spin (pause) for a while, then sleep
 * on a condition variable; the caller signals only when someone sleeps. */
#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ volatile("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* Pause iterations a worker waits for the next run before sleeping (on the
 * order of 100 µs), and that the caller waits for a worker before it
 * starts yielding its CPU to it. */
#define SPIN_ITERS 4000
#define YIELD_AFTER 2000
#define WORKSPACE_ALIGN 64

enum { SLOT_FREE, SLOT_WORKER, SLOT_DONE, SLOT_CALLER };

typedef struct slot {
    _Alignas(64) atomic_int state;
} slot;

struct plume_pool {
    int n;
    pthread_t *threads;
    slot *slots;           /* per index; slots[0] unused */
    plume_pool_fn fn;
    void *ctx;
    void *ws;
    size_t ws_size;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Alignas(64) atomic_uint gen;     /* bumped for every run */
    _Alignas(64) atomic_int sleeping; /* workers blocked on cv */
    atomic_bool quit;
};

typedef struct worker_arg {
    plume_pool *p;
    int ith;
} worker_arg;

/* Waits until gen differs from seen or quit is set; returns the new gen. */
static unsigned wait_for_run(plume_pool *p, unsigned seen)
{
    for (int spins = 0; spins < SPIN_ITERS; spins++) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&p->quit, memory_order_relaxed))
            return g;
        CPU_RELAX();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleeping, 1); /* seq_cst: pairs with the load in run */
    unsigned g;
    while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->quit))
        pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    plume_pool *p = wa->p;
    const int ith = wa->ith;
    free(wa);
    atomic_int *state = &p->slots[ith].state;
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_run(p, seen);
        if (atomic_load(&p->quit))
            return NULL;
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong_explicit(state, &expect, SLOT_WORKER,
                                                    memory_order_acquire, memory_order_relaxed)) {
            p->fn(p->ctx, ith, p->n);
            atomic_store_explicit(state, SLOT_DONE, memory_order_release);
        }
    }
}

int plume_pool_create(int n_threads, plume_pool **out, plume_error *err)
{
    if (n_threads < 1)
        return plume_err(err, PLUME_ERR_INVALID, "thread count must be at least 1, got %d", n_threads);
    plume_pool *p = aligned_alloc(64, (sizeof *p + 63) / 64 * 64);
    slot *slots = aligned_alloc(64, sizeof(slot) * (size_t)n_threads);
    pthread_t *threads = calloc((size_t)n_threads, sizeof *threads);
    if (!p || !slots || !threads) {
        free(p);
        free(slots);
        free(threads);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the thread pool");
    }
    memset(p, 0, sizeof *p);
    p->n = n_threads;
    p->slots = slots;
    p->threads = threads;
    for (int i = 0; i < n_threads; i++)
        atomic_init(&slots[i].state, SLOT_DONE); /* no run yet: nothing to claim */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->sleeping, 0);
    atomic_init(&p->quit, false);
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa || (wa->p = p, wa->ith = i, pthread_create(&p->threads[i], NULL, worker_main, wa) != 0)) {
            free(wa);
            p->n = i;
            plume_pool_free(p);
            return plume_err(err, PLUME_ERR_NOMEM, "could not start worker thread %d of %d", i,
                             n_threads);
        }
    }
    *out = p;
    return 0;
}

void plume_pool_free(plume_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p->slots);
    free(p->ws);
    free(p);
}

int plume_pool_threads(const plume_pool *p) { return p->n; }

void plume_pool_run(plume_pool *p, plume_pool_fn fn, void *ctx)
{
    if (p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    for (int i = 1; i < p->n; i++)
        atomic_store_explicit(&p->slots[i].state, SLOT_FREE, memory_order_release);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes fn/ctx/slots, pairs with sleeping */
    if (atomic_load(&p->sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    for (int i = 1; i < p->n; i++) {
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong_explicit(&p->slots[i].state, &expect, SLOT_CALLER,
                                                    memory_order_acquire, memory_order_relaxed)) {
            fn(ctx, i, p->n); /* worker i has not started: do its share */
            continue;
        }
        for (int spins = 0;
             atomic_load_explicit(&p->slots[i].state, memory_order_acquire) != SLOT_DONE;
             spins++) {
            if (spins < YIELD_AFTER)
                CPU_RELAX();
            else
                sched_yield(); /* the worker may be waiting for this CPU */
        }
    }
}

void *plume_pool_workspace(plume_pool *p, size_t bytes)
{
    if (bytes <= p->ws_size)
        return p->ws;
    size_t size = (bytes + WORKSPACE_ALIGN - 1) / WORKSPACE_ALIGN * WORKSPACE_ALIGN;
    if (size < 2 * p->ws_size)
        size = 2 * p->ws_size;
    void *ws = aligned_alloc(WORKSPACE_ALIGN, size);
    if (!ws)
        return NULL;
    free(p->ws);
    p->ws = ws;
    p->ws_size = size;
    return ws;
}

int plume_cpu_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Reads one integer from a sysfs file; false when unreadable. */
static bool read_long(const char *path, long *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fscanf(f, "%ld", out) == 1;
    fclose(f);
    return ok;
}

int plume_cpu_physical_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    enum { MAX_CORES = 1024 };
    long seen[MAX_CORES][2]; /* (package, core) pairs counted so far */
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        char path[128];
        long pkg, core;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        if (!read_long(path, &pkg))
            return 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        if (!read_long(path, &core))
            return 0;
        bool dup = false;
        for (int i = 0; i < n && !dup; i++)
            dup = seen[i][0] == pkg && seen[i][1] == core;
        if (!dup && n < MAX_CORES) {
            seen[n][0] = pkg;
            seen[n][1] = core;
            n++;
        }
    }
    return n;
}

int plume_cpu_count(void)
{
    const char *env = getenv("PLUME_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1 && v <= 4096)
            return (int)v;
        static atomic_flag warned = ATOMIC_FLAG_INIT; /* one warning per process */
        if (!atomic_flag_test_and_set(&warned))
            fprintf(stderr, "plume: PLUME_THREADS=%s is not a thread count (1-4096); ignoring it\n",
                    env);
    }
    int n = plume_cpu_physical_cores();
    return n > 0 ? n : plume_cpu_online();
}
