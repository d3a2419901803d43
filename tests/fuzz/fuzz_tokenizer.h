/* The real tokenizer the harnesses that need one share: SmolLM2's, from the
 * GGUF file named by PLUME_FUZZ_MODEL (tests/fuzz/meson.build sets it). */
#ifndef PLUME_FUZZ_TOKENIZER_H
#define PLUME_FUZZ_TOKENIZER_H

#include <stdlib.h>

#include "formats/gguf.h"
#include "fuzz_util.h"
#include "plume/tokenizer.h"
#include "tokenizer/gguf_vocab.h"

/* The tokenizer of PLUME_FUZZ_MODEL's file; aborts when the variable is
 * unset or the file does not load (a broken set-up must not look like a
 * pass).  Call once per process: the caller keeps it. */
static plume_tokenizer *fuzz_load_tokenizer(void)
{
    const char *path = getenv("PLUME_FUZZ_MODEL");
    FUZZ_CHECK(path && *path, "set PLUME_FUZZ_MODEL to a GGUF file with a tokenizer");
    gguf_file *f = NULL;
    plume_tokenizer *t = NULL;
    plume_error err = {0};
    FUZZ_CHECK(gguf_open(path, &f, &err) == 0, "%s", err.msg);
    FUZZ_CHECK(plume_tokenizer_from_gguf(f, &t, &err) == 0, "%s", err.msg);
    gguf_close(f);
    return t;
}

#endif
