/* The client's server-sent-events reader (serve/sse_reader.h) on streams
 * written by hand: data lines joined, the three line ends, comments and
 * other fields ignored, the last event without its blank line, the limits,
 * an error line and a callback's refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "serve/sse_reader.h"

#define MAX_EVENTS 8

typedef struct events {
    char data[MAX_EVENTS][64];
    size_t len[MAX_EVENTS];
    int n;
} events;

static int on_event(void *user, const char *data, size_t len, char *err, size_t errsize)
{
    events *ev = user;
    assert_true(ev->n < MAX_EVENTS && len < sizeof ev->data[0]);
    memcpy(ev->data[ev->n], data, len + 1);
    ev->len[ev->n++] = len;
    if (strcmp(data, "STOP") == 0) {
        snprintf(err, errsize, "the callback refused STOP");
        return 1;
    }
    return 0;
}

/* Reads s byte by byte when bytewise, else at once; returns the result of
 * the whole reading and leaves the reader in r (free it). */
static bool read_all(sse_reader *r, events *ev, size_t max, const char *s, bool bytewise)
{
    memset(ev, 0, sizeof *ev);
    sse_reader_init(r, max, on_event, ev);
    const size_t n = strlen(s);
    bool ok = true;
    for (size_t i = 0; ok && i < n; i += bytewise ? 1 : n)
        ok = sse_reader_feed(r, s + i, bytewise ? 1 : n);
    return ok && sse_reader_end(r);
}

static void test_events_and_line_ends(void **state)
{
    (void)state;
    const char *s = ": ping\r\n"
                    "event: message\nid: 7\nretry: 10\ndata:first\ndata:  second\n\n"
                    "data: crlf\r\n\r\n"
                    "data: cr\r\r"
                    "data\n\n"
                    "data: last, without its blank line";
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        sse_reader r;
        events ev;
        assert_true(read_all(&r, &ev, 1024, s, bytewise));
        assert_int_equal(ev.n, 5);
        assert_string_equal(ev.data[0], "first\n second"); /* one space dropped, not two */
        assert_string_equal(ev.data[1], "crlf");
        assert_string_equal(ev.data[2], "cr");
        assert_int_equal(ev.len[3], 0); /* "data" alone: an empty data line */
        assert_string_equal(ev.data[4], "last, without its blank line");
        sse_reader_free(&r);
    }
}

static void test_limits(void **state)
{
    (void)state;
    sse_reader r;
    events ev;
    /* a line of 21 bytes (its data 15) */
    assert_true(read_all(&r, &ev, 21, "data: 123456789012345\n\n", true));
    assert_int_equal(ev.n, 1);
    sse_reader_free(&r);
    assert_false(read_all(&r, &ev, 20, "data: 123456789012345\n\n", true));
    assert_non_null(strstr(r.err, "an SSE line over 20 bytes"));
    sse_reader_free(&r);
    /* two data lines of 8 bytes each join into 17 with the \n: over 16 */
    assert_true(read_all(&r, &ev, 17, "data: 12345678\ndata: 12345678\n\n", false));
    assert_int_equal(ev.len[0], 17);
    sse_reader_free(&r);
    assert_false(read_all(&r, &ev, 16, "data: 12345678\ndata: 12345678\n\n", false));
    assert_non_null(strstr(r.err, "an SSE event over 16 bytes"));
    assert_int_equal(ev.n, 0);
    sse_reader_free(&r);
}

static void test_failures(void **state)
{
    (void)state;
    sse_reader r;
    events ev;
    assert_false(read_all(&r, &ev, 1024, "data: a\n\nerror: upstream\tfailed\n\ndata: b\n\n", true));
    assert_int_equal(ev.n, 1);
    assert_string_equal(r.err, "the server sent an SSE error event: upstream?failed");
    assert_false(sse_reader_feed(&r, "data: c\n\n", 9)); /* a failed reader reads no more */
    assert_int_equal(ev.n, 1);
    sse_reader_free(&r);

    assert_false(read_all(&r, &ev, 1024, "data: a\n\ndata: STOP\n\ndata: b\n\n", false));
    assert_int_equal(ev.n, 2);
    assert_string_equal(r.err, "the callback refused STOP");
    sse_reader_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_and_line_ends),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
