/* The cpu backend's microbench slot (plume/backend.h): this machine's
 * streaming read bandwidth and f32/int8 arithmetic peaks, measured with the
 * active dispatch level's kernels on a thread pool. */
#ifndef PLUME_BACKEND_CPU_MICROBENCH_H
#define PLUME_BACKEND_CPU_MICROBENCH_H

#include "backend/cpu/threadpool.h"
#include "plume/backend.h"

/* One warm-up and reps timed runs of `what` on every thread of pool; the
 * median rate into *out in the unit plume_microbench names.  PLUME_MB_F16_TFLOPS
 * is refused (PLUME_ERR_UNSUPPORTED: the host has no f16 matrix-multiply
 * peak of its own), an allocation failure is PLUME_ERR_NOMEM. */
int plume_cpu_microbench(plume_pool *pool, plume_microbench what, int reps, double *out,
                         plume_error *err);

#endif
