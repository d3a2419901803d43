/* Where the C tests find SmolLM2-135M-Instruct Q4_1 (scripts/fetch-model
 * puts it under $PLUME_SOURCE_ROOT/models), and the one honest way to skip
 * when it is absent: a missing model is a missing optional dependency
 * (meson's exit 77 = SKIP, with the reason on stdout), while a file that is
 * present but does not load is a failure, never a skip. */
#ifndef PLUME_TESTS_SMOLLM2_PATH_H
#define PLUME_TESTS_SMOLLM2_PATH_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SMOLLM2_REL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* Fills buf with the model's path; returns 1 when the file is readable, else
 * prints "SKIP: ..." and returns 0 (main then returns 77). */
static inline int smollm2_path(char *buf, size_t cap)
{
    const char *root = getenv("PLUME_SOURCE_ROOT");
    snprintf(buf, cap, "%s/%s", root && *root ? root : ".", SMOLLM2_REL);
    if (access(buf, R_OK) == 0)
        return 1;
    printf("SKIP: %s is missing (scripts/fetch-model fetches it)\n", buf);
    return 0;
}

#endif
