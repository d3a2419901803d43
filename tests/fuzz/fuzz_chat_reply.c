/* libFuzzer target for the streaming reply readers of plume/chat_parse.h:
 * the <think> splitter, the tool-call parsers (Hermes, Llama 3, Mistral)
 * and the gpt-oss harmony reader.  The first byte picks the reader, the
 * second the piece size; the rest, up to a NUL byte, is the model's reply
 * (the readers take text: their outputs are C strings).  Any text must
 * give the same reasoning, content and calls fed whole as fed in pieces
 * (the promise the server's streaming rests on), calls with a name and
 * JSON-object arguments, and no crash or leak. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "plume/chat_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct result {
    char *reasoning, *content;
    plume_tool_call *calls;
    size_t n_calls;
} result;

static void cat(char **acc, char *piece)
{
    if (!piece)
        return;
    size_t a = *acc ? strlen(*acc) : 0, b = strlen(piece);
    char *n = realloc(*acc, a + b + 1);
    FUZZ_CHECK(n != NULL, "out of memory");
    memcpy(n + a, piece, b + 1);
    *acc = n;
    free(piece);
}

static void add_calls(result *r, plume_tool_call *calls, size_t n)
{
    FUZZ_CHECK((calls == NULL) == (n == 0), "%zu calls at %p", n, (void *)calls);
    if (!n)
        return;
    r->calls = realloc(r->calls, (r->n_calls + n) * sizeof *r->calls);
    FUZZ_CHECK(r->calls != NULL, "out of memory");
    memcpy(r->calls + r->n_calls, calls, n * sizeof *calls);
    r->n_calls += n;
    free(calls);
}

/* Reads text with reader kind (0-1 reasoning, 2-4 tool formats, 5-6
 * harmony) in pieces of step bytes. */
static result read_reply(int kind, const char *text, size_t n, size_t step)
{
    result r = {0};
    plume_reasoning *rs = kind < 2 ? plume_reasoning_new(kind == 1) : NULL;
    plume_tool_parser *tp = kind >= 2 && kind <= 4
                                ? plume_tool_parser_new((plume_tool_format)(kind - 1), 7)
                                : NULL;
    plume_harmony *h = kind >= 5 ? plume_harmony_new(kind == 6, 7) : NULL;
    FUZZ_CHECK(rs || tp || h, "out of memory");
    for (size_t i = 0;; i += step) {
        size_t len = i >= n ? 0 : (n - i < step ? n - i : step);
        bool final = i + len >= n;
        char *a = NULL, *b = NULL;
        plume_tool_call *calls = NULL;
        size_t nc = 0;
        int rc = rs   ? plume_reasoning_feed(rs, text + i, len, final, &a, &b, NULL)
                 : tp ? plume_tool_parser_feed(tp, text + i, len, final, &b, &calls, &nc, NULL)
                      : plume_harmony_feed(h, text + i, len, final, &a, &b, &calls, &nc, NULL);
        FUZZ_CHECK(rc == 0, "feed failed");
        cat(&r.reasoning, a);
        cat(&r.content, b);
        add_calls(&r, calls, nc);
        if (final)
            break;
    }
    plume_reasoning_free(rs);
    plume_tool_parser_free(tp);
    plume_harmony_free(h);
    return r;
}

static bool same(const char *a, const char *b)
{
    return !strcmp(a ? a : "", b ? b : "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int kind = data[0] % 7;
    size_t step = 1 + data[1] % 16;
    const char *text = (const char *)data + 2;
    const char *nul = memchr(text, 0, size - 2);
    size_t n = nul ? (size_t)(nul - text) : size - 2;
    result whole = read_reply(kind, text, n, n ? n : 1);
    result parts = read_reply(kind, text, n, step);
    FUZZ_CHECK(same(whole.reasoning, parts.reasoning), "reader %d, pieces of %zu: reasoning "
               "differs", kind, step);
    FUZZ_CHECK(same(whole.content, parts.content), "reader %d, pieces of %zu: content differs",
               kind, step);
    FUZZ_CHECK(whole.n_calls == parts.n_calls, "reader %d, pieces of %zu: %zu calls vs %zu", kind,
               step, whole.n_calls, parts.n_calls);
    for (size_t i = 0; i < whole.n_calls; i++) {
        plume_tool_call *a = &whole.calls[i], *b = &parts.calls[i];
        FUZZ_CHECK(same(a->name, b->name) && same(a->arguments, b->arguments) &&
                   same(a->id, b->id), "reader %d: call %zu differs", kind, i);
        FUZZ_CHECK(a->name && a->arguments && a->id, "call %zu is incomplete", i);
    }
    /* nothing is lost: what comes out is no longer than what went in, less
     * markup (a call's arguments are re-serialized JSON, so they are not
     * counted) */
    size_t out = (whole.reasoning ? strlen(whole.reasoning) : 0) +
                 (whole.content ? strlen(whole.content) : 0);
    FUZZ_CHECK(out <= n, "reader %d: %zu bytes out of %zu in", kind, out, n);
    for (int k = 0; k < 2; k++) {
        result *r = k ? &parts : &whole;
        free(r->reasoning);
        free(r->content);
        plume_tool_calls_free(r->calls, r->n_calls);
    }
    return 0;
}
