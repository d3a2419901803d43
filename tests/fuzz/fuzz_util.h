/* Helpers shared by the libFuzzer harnesses under tests/fuzz/.
 *
 * The parsers read files by path (mmap, json_load_file), so a harness writes
 * each input to a file in a private directory made once per process (under
 * /dev/shm when it exists) and removed at exit.  FUZZ_CHECK turns a broken
 * invariant into an abort, which libFuzzer reports as a crash with the input
 * saved. */
#ifndef PLUME_FUZZ_UTIL_H
#define PLUME_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plume/error.h"

#define FUZZ_CHECK(cond, ...)                                                       \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            abort();                                                                \
        }                                                                           \
    } while (0)

static char fuzz_dir_path[256];

/* Removes the files fuzz_file wrote and the directory (atexit). */
static void fuzz_cleanup(void)
{
    static const char *const names[] = {"in.gguf", "model.safetensors", "config.json",
                                        "tokenizer.json", "prompts.jsonl"};
    char p[320];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, names[i]);
        unlink(p);
    }
    rmdir(fuzz_dir_path);
}

/* Writes data[0..size) to the file `name` (one of the names fuzz_cleanup
 * knows) in this process's private directory and returns its path (a static
 * buffer, valid until the next call).  Aborts when the file cannot be
 * written: that is a broken harness, not a finding. */
static const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[320];
    if (!fuzz_dir_path[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/plume-fuzz-XXXXXX", base);
        FUZZ_CHECK(mkdtemp(fuzz_dir_path) != NULL, "cannot make %s", fuzz_dir_path);
        atexit(fuzz_cleanup);
    }
    snprintf(path, sizeof path, "%s/%s", fuzz_dir_path, name);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL, "cannot write %s", path);
    FUZZ_CHECK(size == 0 || fwrite(data, 1, size, f) == size, "short write to %s", path);
    FUZZ_CHECK(fclose(f) == 0, "cannot close %s", path);
    return path;
}

/* A failure must be exactly one non-empty line; when `file` is given the
 * line must name it. */
static void fuzz_check_error(const plume_error *err, const char *file)
{
    FUZZ_CHECK(err->msg[0] != '\0', "a failure without a message");
    FUZZ_CHECK(strchr(err->msg, '\n') == NULL, "a multi-line message: %s", err->msg);
    if (file)
        FUZZ_CHECK(strstr(err->msg, file) != NULL, "the message does not name %s: %s", file,
                   err->msg);
}

#endif
