/* libFuzzer target for chat-template recognition and rendering.  The input
 * is a template text, then NUL-separated role/content pairs; the low bit of
 * the size asks for the generation prompt.  Rendering either fails with one
 * error line (unrecognised family) or gives a string that holds every user
 * message's content (whitespace-trimmed, as some families trim). */
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

/* Whether `hay` holds `needle` with surrounding whitespace trimmed. */
static bool holds_trimmed(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    while (n && strchr(" \t\n\r\f\v", needle[0])) {
        needle++;
        n--;
    }
    while (n && strchr(" \t\n\r\f\v", needle[n - 1]))
        n--;
    if (n == 0)
        return true;
    for (const char *p = hay; (p = strchr(p, needle[0])) != NULL; p++)
        if (strncmp(p, needle, n) == 0)
            return true;
    return false;
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
        for (size_t i = 0; i < nm; i++)
            if (strcmp(msgs[i].role, "user") == 0)
                FUZZ_CHECK(holds_trimmed(out, msgs[i].content),
                           "family %s dropped user message %zu", plume_chat_template_name(t), i);
        free(out);
    } else {
        fuzz_check_error(&err, NULL);
    }
    for (size_t i = 0; i < nf; i++)
        free(fields[i]);
    plume_tokenizer_free(t);
    return 0;
}
