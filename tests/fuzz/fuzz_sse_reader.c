/* libFuzzer target for the server-sent-events reader of plume's HTTP client
 * (serve/sse_reader.h: what plume bench serve reads from the server it
 * measures).  The input's first byte sets the reader's limit on a line or
 * an event (small, to reach it) and how the rest is cut; the rest is the
 * stream.  It is read whole and in pieces of 1 to 16 bytes: both must give
 * the same events, then the same end or the same one-line failure.  Every
 * event's data is NUL-terminated, holds no \r and is within the limit; an
 * event "STOP" is refused by the callback, which must fail the stream with
 * its message, and no event may follow it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "serve/sse_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a reading produced: the events' data, each followed by its length;
 * whether the callback refused one ("STOP"). */
typedef struct transcript {
    char *bytes;
    size_t len, cap, max;
    bool refused;
} transcript;

static void append(transcript *t, const void *p, size_t n)
{
    if (n == 0)
        return;
    if (t->len + n > t->cap) {
        size_t c = t->cap ? t->cap : 256;
        while (c < t->len + n)
            c *= 2;
        t->bytes = realloc(t->bytes, c);
        FUZZ_CHECK(t->bytes != NULL, "out of memory");
        t->cap = c;
    }
    memcpy(t->bytes + t->len, p, n);
    t->len += n;
}

static int on_event(void *user, const char *data, size_t len, char *err, size_t errsize)
{
    FUZZ_CHECK(data[len] == '\0', "event data not NUL-terminated");
    FUZZ_CHECK(memchr(data, '\r', len) == NULL, "a \\r inside event data");
    transcript *t = user;
    FUZZ_CHECK(len <= t->max, "an event of %zu bytes under a limit of %zu", len, t->max);
    FUZZ_CHECK(!t->refused, "an event after the callback refused one");
    append(t, data, len);
    append(t, &len, sizeof len);
    if (len == 4 && memcmp(data, "STOP", 4) == 0) {
        t->refused = true;
        snprintf(err, errsize, "refused by the callback");
        return 1;
    }
    return 0;
}

/* Reads stream[0..n) in pieces of `piece(i)` bytes (0: whole); returns
 * whether it ended well, the events in *t and the failure in err. */
static bool read_stream(const uint8_t *stream, size_t n, size_t max, unsigned cut, transcript *t,
                        char *err, size_t errsize)
{
    sse_reader r;
    t->max = max;
    sse_reader_init(&r, max, on_event, t);
    bool ok = true;
    size_t at = 0, k = 0;
    while (ok && at < n) {
        size_t step = cut ? 1 + (k++ * cut + cut / 2) % 16 : n;
        if (step > n - at)
            step = n - at;
        ok = sse_reader_feed(&r, (const char *)stream + at, step);
        at += step;
    }
    if (ok)
        ok = sse_reader_end(&r);
    FUZZ_CHECK(ok == !r.failed, "the result and the failed flag disagree");
    if (t->refused)
        FUZZ_CHECK(!ok && strcmp(r.err, "refused by the callback") == 0,
                   "the callback's refusal did not fail the stream with its message: '%s'",
                   r.err);
    if (!ok) {
        FUZZ_CHECK(r.err[0] != '\0', "a failure without a message");
        FUZZ_CHECK(strpbrk(r.err, "\r\n") == NULL, "a multi-line message: %s", r.err);
        FUZZ_CHECK(!sse_reader_feed(&r, "data: x\n\n", 9), "a failed reader read on");
    }
    snprintf(err, errsize, "%s", ok ? "" : r.err);
    sse_reader_free(&r);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const size_t max = (size_t)16 << (data[0] & 7); /* 16 B .. 2 KiB */
    const unsigned cut = 1 + (data[0] >> 3);
    transcript whole = {0}, pieces = {0};
    char err_whole[512], err_pieces[512];
    const bool ok_whole = read_stream(data + 1, size - 1, max, 0, &whole, err_whole,
                                      sizeof err_whole);
    const bool ok_pieces = read_stream(data + 1, size - 1, max, cut, &pieces, err_pieces,
                                       sizeof err_pieces);
    FUZZ_CHECK(ok_whole == ok_pieces, "whole %d, in pieces %d (%s | %s)", ok_whole, ok_pieces,
               err_whole, err_pieces);
    FUZZ_CHECK(strcmp(err_whole, err_pieces) == 0, "failures differ: '%s' and '%s'", err_whole,
               err_pieces);
    FUZZ_CHECK(whole.len == pieces.len &&
                   (whole.len == 0 || memcmp(whole.bytes, pieces.bytes, whole.len) == 0),
               "the events differ whole and in pieces");
    FUZZ_CHECK(whole.refused == pieces.refused, "a refusal whole or in pieces only");
    free(whole.bytes);
    free(pieces.bytes);
    return 0;
}
