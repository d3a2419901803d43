/* libFuzzer target for chat templates through the tokenizer
 * (tok_chat_detect + plume_chat_apply).  The input is a template text, then
 * NUL-separated role/content pairs; the low bit of the size asks for the
 * generation prompt.  Rendering either fails with one error line or gives a
 * string.  fuzz_jinja fuzzes the engine itself. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "tokenizer/tok_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSGS 16

/* A NUL-terminated copy of s[0..n). */
static char *dup_n(const uint8_t *s, size_t n)
{
    char *c = malloc(n + 1);
    FUZZ_CHECK(c != NULL, "out of memory");
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *fields[1 + 2 * MAX_MSGS];
    size_t nf = 0, at = 0;
    while (nf < 1 + 2 * MAX_MSGS && at <= size) {
        const uint8_t *nul = memchr(data + at, '\0', size - at);
        size_t len = nul ? (size_t)(nul - (data + at)) : size - at;
        fields[nf++] = dup_n(data + at, len);
        at += len + 1;
    }
    plume_tokenizer *t = tok_new(TOK_KIND_BPE);
    FUZZ_CHECK(t != NULL, "out of memory");
    t->chat_template = fields[0];
    fields[0] = NULL;
    FUZZ_CHECK(tok_chat_detect(t) == 0, "detect failed");
    plume_chat_msg msgs[MAX_MSGS];
    size_t nm = 0;
    for (size_t i = 1; i + 1 < nf; i += 2)
        msgs[nm++] = (plume_chat_msg){.role = fields[i], .content = fields[i + 1]};
    char *out = NULL;
    plume_error err = {0};
    if (plume_chat_apply(t, msgs, nm, size & 1, &out, &err) == 0) {
        FUZZ_CHECK(out != NULL, "success without output");
        free(out);
    } else {
        fuzz_check_error(&err, NULL);
    }
    for (size_t i = 0; i < nf; i++)
        free(fields[i]);
    plume_tokenizer_free(t);
    return 0;
}
