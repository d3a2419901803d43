/* The thread pool: every index runs exactly once per run, also when a
 * worker is slow to start, the workspace is aligned, and the default thread count honours
 * PLUME_THREADS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend/cpu/threadpool.h"

typedef struct job {
    plume_pool *pool;
    atomic_int hits[8];
    atomic_int busy[8]; /* an index must never run twice at once */
    int bad;
} job;

static void count_fn(void *ctx, int ith, int nth)
{
    job *j = ctx;
    (void)nth;
    atomic_fetch_add(&j->hits[ith], 1);
}

/* Slow on worker threads' first indices, so the caller often takes them. */
static void uneven_fn(void *ctx, int ith, int nth)
{
    job *j = ctx;
    (void)nth;
    if (atomic_fetch_add(&j->busy[ith], 1) != 0)
        j->bad = 1;
    if (ith == 0) {
        struct timespec ts = {0, 20 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_add(&j->hits[ith], 1);
    atomic_fetch_sub(&j->busy[ith], 1);
}

static void test_run_each_index_once(void **state)
{
    (void)state;
    for (int n = 1; n <= 4; n++) {
        job j;
        memset(&j, 0, sizeof j);
        assert_int_equal(plume_pool_create(n, &j.pool, NULL), 0);
        assert_int_equal(plume_pool_threads(j.pool), n);
        for (int r = 0; r < 2000; r++)
            plume_pool_run(j.pool, count_fn, &j);
        for (int i = 0; i < n; i++)
            assert_int_equal(atomic_load(&j.hits[i]), 2000);
        for (int r = 0; r < 500; r++)
            plume_pool_run(j.pool, uneven_fn, &j);
        assert_int_equal(j.bad, 0);
        for (int i = 0; i < n; i++)
            assert_int_equal(atomic_load(&j.hits[i]), 2500);
        /* runs after the workers have gone to sleep */
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
        plume_pool_run(j.pool, count_fn, &j);
        for (int i = 0; i < n; i++)
            assert_int_equal(atomic_load(&j.hits[i]), 2501);
        plume_pool_free(j.pool);
    }
    assert_int_equal(plume_pool_create(0, &(plume_pool *){NULL}, NULL), -1);
}

static void test_workspace(void **state)
{
    (void)state;
    plume_pool *p;
    assert_int_equal(plume_pool_create(2, &p, NULL), 0);
    uint8_t *a = plume_pool_workspace(p, 100);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    memset(a, 1, 100);
    uint8_t *b = plume_pool_workspace(p, 1 << 20);
    assert_non_null(b);
    assert_int_equal((uintptr_t)b % 64, 0);
    memset(b, 2, 1 << 20);
    plume_pool_free(p);
}

static void test_thread_count(void **state)
{
    (void)state;
    const int phys = plume_cpu_physical_cores();
    printf("# online CPUs %d, physical cores %d\n", plume_cpu_online(), phys);
    assert_true(phys >= 0 && phys <= plume_cpu_online());
    setenv("PLUME_THREADS", "3", 1);
    assert_int_equal(plume_cpu_count(), 3);
    setenv("PLUME_THREADS", "zero", 1); /* reported and ignored */
    assert_int_equal(plume_cpu_count(), phys > 0 ? phys : plume_cpu_online());
    unsetenv("PLUME_THREADS");
    assert_true(plume_cpu_count() >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_each_index_once),
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
