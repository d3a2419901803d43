/* plume serve: SSE framing (sse.h). */
#include "serve/sse.h"

#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"

static bool append(sse_buf *b, const char *s, size_t n)
{
    if (b->off == b->len)
        b->off = b->len = 0;
    char *p = plume_grow(b->p, &b->cap, b->len + n, 1024, 1);
    if (!p)
        return false;
    b->p = p;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return true;
}

bool sse_event(sse_buf *b, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return false;
    bool ok = append(b, "data: ", 6) && append(b, s, strlen(s)) && append(b, "\n\n", 2);
    free(s);
    return ok;
}

bool sse_done(sse_buf *b)
{
    return append(b, "data: [DONE]\n\n", 14);
}

size_t sse_take(sse_buf *b, char *out, size_t max)
{
    size_t n = b->len - b->off;
    if (n > max)
        n = max;
    memcpy(out, b->p + b->off, n);
    b->off += n;
    return n;
}

void sse_free(sse_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
