#include "serve/http_body.h"

#include <stdlib.h>
#include <string.h>

int serve_body_append(serve_body *b, const char *data, size_t n, size_t max)
{
    if (b->too_big || b->len + n > max) {
        b->too_big = true;
        return 0;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return -1;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

void serve_body_free(serve_body *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
