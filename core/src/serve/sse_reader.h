/* A reader of server-sent events (the HTML "event stream" format) as the
 * bytes of a response arrive, in pieces of any size: lines end with \r\n,
 * \n or \r; "data:" lines (one leading space dropped) are joined with '\n'
 * into an event's data, which a blank line hands to a callback; comments
 * (":"), event:, id:, retry: and unknown fields are ignored; an "error:"
 * line fails the stream.  The same bytes give the same events and the same
 * failure however they are cut.  Used by the HTTP client (http_client_sse.c);
 * nothing here does I/O. */
#ifndef PLUME_SERVE_SSE_READER_H
#define PLUME_SERVE_SSE_READER_H

#include <stdbool.h>
#include <stddef.h>

/* One event's data (NUL-terminated, len bytes; it holds no \r, and \n only
 * between its data lines).  Returns 0 to go on; anything else fails the
 * stream with the message the callback wrote into err (or a generic one). */
typedef int (*sse_event_fn)(void *user, const char *data, size_t len, char *err,
                            size_t errsize);

typedef struct sse_reader {
    sse_event_fn fn;
    void *user;
    size_t max;          /* longest line and event data, bytes (NUL not counted) */
    char *line, *data;   /* the current line; the current event's data */
    size_t line_len, line_cap, data_len, data_cap;
    bool has_data, after_cr;
    bool failed;
    char err[512];       /* why, once failed: one line */
} sse_reader;

/* A reader that hands events to fn(user, ...) and fails on a line or an
 * event's data longer than max bytes. */
void sse_reader_init(sse_reader *r, size_t max, sse_event_fn fn, void *user);
/* Reads n more bytes of the stream.  False once the stream failed (a
 * callback's refusal, an error line, a line or event over max, out of
 * memory): r->err says why, and later bytes are ignored. */
bool sse_reader_feed(sse_reader *r, const char *p, size_t n);
/* The end of the stream: a last line without its terminator and a last
 * event without its blank line still count (lenient where the standard
 * drops them).  False when that failed the stream. */
bool sse_reader_end(sse_reader *r);
/* Frees the buffers; r is not used again until sse_reader_init. */
void sse_reader_free(sse_reader *r);

#endif
