/* CHECK for the tests that run without cmocka (the dummy model, the CUDA
 * backend and hook tests): a false condition prints "FAIL file:line: " and
 * the printf-style message, and counts into `failures`, the static int the
 * including file defines; its main returns non-zero when any failed, so
 * one run lists every failed check, not only the first. */
#ifndef PLUME_TEST_CHECK_H
#define PLUME_TEST_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif
