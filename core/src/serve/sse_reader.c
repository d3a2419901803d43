/* Server-sent events read as the bytes arrive (sse_reader.h). */
#include "serve/sse_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sse_reader_init(sse_reader *r, size_t max, sse_event_fn fn, void *user)
{
    memset(r, 0, sizeof *r);
    r->fn = fn;
    r->user = user;
    r->max = max;
}

static bool grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *p = realloc(*buf, c);
    if (!p)
        return false;
    *buf = p;
    *cap = c;
    return true;
}

/* Fails the stream with msg (the first failure is kept); returns false. */
static bool fail(sse_reader *r, const char *msg)
{
    if (!r->failed) {
        snprintf(r->err, sizeof r->err, "%s", msg);
        for (char *c = r->err; *c; c++) /* one line, whatever the stream held */
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    }
    r->failed = true;
    return false;
}

/* Hands the pending event to the callback. */
static bool dispatch(sse_reader *r)
{
    if (!r->has_data)
        return true;
    r->data[r->data_len] = '\0';
    char msg[sizeof r->err];
    msg[0] = '\0';
    const int rc = r->fn(r->user, r->data, r->data_len, msg, sizeof msg);
    r->has_data = false;
    r->data_len = 0;
    return rc ? fail(r, msg[0] ? msg : "the stream was aborted") : true;
}

/* One complete line (without its terminator). */
static bool line(sse_reader *r, const char *s, size_t n)
{
    if (n == 0)
        return dispatch(r);
    if (s[0] == ':') /* a comment (keep-alive ping) */
        return true;
    const char *colon = memchr(s, ':', n);
    const size_t flen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = (size_t)(s + n - v);
    if (vlen && *v == ' ') {
        v++;
        vlen--;
    }
    if (flen == 4 && memcmp(s, "data", 4) == 0) {
        const size_t need = r->data_len + (r->has_data ? 1 : 0) + vlen;
        char msg[160];
        if (need > r->max) {
            snprintf(msg, sizeof msg, "an SSE event over %zu bytes: the server's stream is not "
                     "what an OpenAI-compatible server sends", r->max);
            return fail(r, msg);
        }
        if (!grow(&r->data, &r->data_cap, need + 1))
            return fail(r, "out of memory reading an SSE event");
        if (r->has_data)
            r->data[r->data_len++] = '\n';
        memcpy(r->data + r->data_len, v, vlen);
        r->data_len += vlen;
        r->has_data = true;
    } else if (flen == 5 && memcmp(s, "error", 5) == 0) {
        char msg[sizeof r->err];
        snprintf(msg, sizeof msg, "the server sent an SSE error event: %.*s",
                 (int)(vlen > 300 ? 300 : vlen), v);
        return fail(r, msg);
    }
    /* event:, id:, retry: and unknown fields are ignored, as the standard says */
    return true;
}

bool sse_reader_feed(sse_reader *r, const char *p, size_t n)
{
    if (r->failed)
        return false;
    for (size_t i = 0; i < n; i++) {
        const char c = p[i];
        if (c == '\n' && r->after_cr) { /* the \n of a \r\n */
            r->after_cr = false;
            continue;
        }
        r->after_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            if (!line(r, r->line, r->line_len))
                return false;
            r->line_len = 0;
            continue;
        }
        /* the run up to the next terminator, appended at once */
        size_t j = i;
        while (j < n && p[j] != '\n' && p[j] != '\r')
            j++;
        if (r->line_len + (j - i) > r->max) {
            char msg[160];
            snprintf(msg, sizeof msg, "an SSE line over %zu bytes: the server's stream is not "
                     "what an OpenAI-compatible server sends", r->max);
            return fail(r, msg);
        }
        if (!grow(&r->line, &r->line_cap, r->line_len + (j - i) + 1))
            return fail(r, "out of memory reading an SSE line");
        memcpy(r->line + r->line_len, p + i, j - i);
        r->line_len += j - i;
        i = j - 1;
    }
    return true;
}

bool sse_reader_end(sse_reader *r)
{
    if (r->failed)
        return false;
    if (r->line_len && !line(r, r->line, r->line_len))
        return false;
    r->line_len = 0;
    return dispatch(r);
}

void sse_reader_free(sse_reader *r)
{
    free(r->line);
    free(r->data);
    r->line = r->data = NULL;
    r->line_len = r->line_cap = r->data_len = r->data_cap = 0;
    r->has_data = false;
}
