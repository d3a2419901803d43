/* plume_clock_seconds (plume/clock.h). */
#include <time.h>

#include "plume/clock.h"

double plume_clock_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
