#include "backend/cpu/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* Workers spin briefly on the generation counter (runs come back to back
 * during a forward pass), then sleep on a condition variable. */
#define SPIN_ITERS 20000

struct plume_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;      /* bumped for every run */
    atomic_int pending;   /* workers still running the current job */
    atomic_bool quit;
    plume_pool_fn fn;
    void *ctx;
};

typedef struct worker_arg {
    plume_pool *p;
    int ith;
} worker_arg;

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    plume_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load(&p->quit)) {
            if (++spins > SPIN_ITERS) {
                pthread_mutex_lock(&p->mu);
                while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit))
                    pthread_cond_wait(&p->cv, &p->mu);
                pthread_mutex_unlock(&p->mu);
                spins = 0;
            }
        }
        if (atomic_load(&p->quit))
            return NULL;
        seen = g;
        p->fn(p->ctx, ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

int plume_pool_create(int n_threads, plume_pool **out, plume_error *err)
{
    if (n_threads < 1)
        return plume_err(err, PLUME_ERR_INVALID, "thread count must be at least 1, got %d", n_threads);
    plume_pool *p = calloc(1, sizeof *p);
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the thread pool");
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->quit, false);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the thread pool");
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa || (wa->p = p, wa->ith = i, pthread_create(&p->threads[i], NULL, worker_main, wa) != 0)) {
            free(wa);
            p->n = i;
            plume_pool_free(p);
            return plume_err(err, PLUME_ERR_NOMEM, "could not start worker thread %d of %d", i, n_threads);
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
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0)
        ;
}

int plume_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
