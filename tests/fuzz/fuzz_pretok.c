/* libFuzzer target for the pre-tokenizer split.  The first byte chooses a
 * built-in regex sequence (below 0x80, by pre-tokenizer name) or asks for a
 * regex taken from the input (up to the first NUL); the rest is the text, in
 * an exactly sized buffer so that reading past it is reported.  A regex that
 * does not compile gives one error line; a split gives pieces that are
 * non-empty, in order, and cover the text exactly. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tokenizer/tok_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_NAMES 64
static char names_buf[1024];
static const char *names[MAX_NAMES];
static size_t n_names;

/* Splits the comma-separated supported names once. */
static void load_names(void)
{
    if (n_names)
        return;
    snprintf(names_buf, sizeof names_buf, "%s", tok_pretok_supported());
    for (char *p = strtok(names_buf, ", "); p && n_names < MAX_NAMES; p = strtok(NULL, ", "))
        names[n_names++] = p;
    FUZZ_CHECK(n_names > 0, "no pre-tokenizer names");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load_names();
    if (size == 0)
        return 0;
    tok_pretok p = {0};
    plume_error err = {0};
    const uint8_t *rest = data + 1;
    size_t left = size - 1;
    if (data[0] < 0x80) {
        size_t np = 0;
        bool ignore = false;
        const char *const *pats = tok_pretok_patterns(names[data[0] % n_names], &np, &ignore);
        FUZZ_CHECK(pats != NULL, "supported name %s has no patterns", names[data[0] % n_names]);
        for (size_t i = 0; i < np; i++)
            FUZZ_CHECK(tok_pretok_add(&p, pats[i], &err) == 0, "%s", err.msg);
    } else {
        const uint8_t *nul = memchr(rest, '\0', left);
        size_t rl = nul ? (size_t)(nul - rest) : left;
        if (rl > 512)
            return 0;
        char re[513];
        memcpy(re, rest, rl);
        re[rl] = '\0';
        FUZZ_CHECK(tok_pretok_add(&p, re, &err) == 0, "%s", err.msg);
        rest += nul ? rl + 1 : rl;
        left -= nul ? rl + 1 : rl;
    }
    if (tok_pretok_compile(&p, &err)) {
        fuzz_check_error(&err, NULL);
        tok_pretok_free(&p);
        return 0;
    }
    /* exactly the text's bytes, no NUL after them: a split that reads past a
     * piece is an ASan report (issue #20 finding 5, fixed; its input is in
     * tests/fuzz/corpus/pretok/) */
    char *text = calloc(left + !left, 1);
    FUZZ_CHECK(text != NULL, "out of memory");
    memcpy(text, rest, left);
    tok_spans spans = {0};
    if (tok_pretok_split(&p, text, left, &spans, &err) == 0) {
        size_t at = 0;
        for (size_t i = 0; i < spans.n; i++) {
            FUZZ_CHECK(spans.v[i].off == at, "piece %zu starts at %zu, expected %zu", i,
                       spans.v[i].off, at);
            FUZZ_CHECK(spans.v[i].len > 0, "piece %zu is empty", i);
            at += spans.v[i].len;
        }
        FUZZ_CHECK(at == left, "pieces cover %zu of %zu bytes", at, left);
    } else {
        fuzz_check_error(&err, NULL);
    }
    free(spans.v);
    free(text);
    tok_pretok_free(&p);
    return 0;
}
