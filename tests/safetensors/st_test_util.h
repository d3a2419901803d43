/* Helpers shared by the safetensors / config.json tests: a scratch
 * directory per test group and small file writers.  Header-only (static
 * functions) so each test executable stays a single translation unit. */
#ifndef PLUME_ST_TEST_UTIL_H
#define PLUME_ST_TEST_UTIL_H

#include <ftw.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plume/error.h"

typedef struct tu_dir {
    char root[256];  /* the scratch directory */
    char path[1024]; /* last path built by tu_path */
} tu_dir;

/* Creates a fresh scratch directory under $TMPDIR (or /tmp); NULL on error. */
static inline tu_dir *tu_dir_new(void)
{
    tu_dir *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    const char *tmp = getenv("TMPDIR");
    snprintf(d->root, sizeof d->root, "%s/plume-st-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->root)) {
        free(d);
        return NULL;
    }
    return d;
}

static inline int tu_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

/* Removes the scratch directory and everything in it. */
static inline void tu_dir_free(tu_dir *d)
{
    if (!d)
        return;
    nftw(d->root, tu_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(d);
}

/* Builds "<root>/<printf(fmt, ...)>" in d->path and returns it (overwritten by
 * the next call: copy it if two are needed at once). */
static inline const char *tu_path(tu_dir *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline const char *tu_path(tu_dir *d, const char *fmt, ...)
{
    int n = snprintf(d->path, sizeof d->path, "%s/", d->root);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->path + n, sizeof d->path - (size_t)n, fmt, ap);
    va_end(ap);
    return d->path;
}

/* Writes len bytes to path; returns 0 or -1. */
static inline int tu_write_file(const char *path, const void *buf, size_t len)
{
    /* A new file each time: truncating and rewriting an existing one makes
     * ext4 (auto_da_alloc) flush it on close, ~3 ms a write, which turned
     * the every-truncation loops into 25 s of waiting. */
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = len ? fwrite(buf, 1, len, f) : 0;
    return fclose(f) == 0 && w == len ? 0 : -1;
}

/* Writes a NUL-terminated string to path. */
static inline int tu_write_text(const char *path, const char *text)
{
    return tu_write_file(path, text, strlen(text));
}

/* True when err holds code and a message containing want; prints the
 * message otherwise so that a failing test says what it got. */
static inline int tu_err_is(const plume_error *err, plume_status code, const char *want)
{
    if (err->code == code && strstr(err->msg, want))
        return 1;
    fprintf(stderr, "expected code %d containing \"%s\"\n     got code %d: \"%s\"\n", (int)code,
            want, (int)err->code, err->msg);
    return 0;
}

#endif
