/* plume — the one clock: monotonic seconds, for durations.
 *
 * Every duration the core, the server and the benches measure comes from
 * here (never from the wall clock, which can jump). */
#ifndef PLUME_CLOCK_H
#define PLUME_CLOCK_H

#include "plume/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC): differences of
 * two calls are elapsed time with nanosecond resolution; never decreases. */
PLUME_API double plume_clock_seconds(void);

#ifdef __cplusplus
}
#endif
#endif
