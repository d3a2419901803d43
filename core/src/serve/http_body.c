#include "serve/http_body.h"

#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"

int serve_body_append(serve_body *b, const char *data, size_t n, size_t max)
{
    if (b->too_big || b->len + n > max) {
        b->too_big = true;
        return 0;
    }
    char *p = plume_grow(b->data, &b->cap, b->len + n + 1, 4096, 1);
    if (!p)
        return -1;
    b->data = p;
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
