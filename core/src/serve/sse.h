/* plume serve: server-sent events framing ("data: {json}\n\n", and the
 * closing "data: [DONE]\n\n") into a growable byte buffer. */
#ifndef PLUME_SERVE_SSE_H
#define PLUME_SERVE_SSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct sse_buf {
    char *p;
    size_t len, cap, off;            /* off: bytes already handed to the socket */
} sse_buf;

/* Appends "data: " + compact JSON + "\n\n" and takes ownership of j;
 * false when out of memory. */
bool sse_event(sse_buf *b, json_t *j);
bool sse_done(sse_buf *b);
/* Copies up to max pending bytes to out and returns the count. */
size_t sse_take(sse_buf *b, char *out, size_t max);
void sse_free(sse_buf *b);

#endif
