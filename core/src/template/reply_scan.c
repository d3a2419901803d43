/* Scanning a reply for markup (reply_scan.h). */
#include "template/reply_scan.h"

#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"

const char *reply_find(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k))
            return s + i;
    return NULL;
}

bool reply_is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

size_t reply_partial_tag(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && !memcmp(s + n - k, tag, k))
            return k;
    return 0;
}

int reply_append(char **s, const char *p, size_t n)
{
    if (!n)
        return 0;
    size_t old = *s ? strlen(*s) : 0;
    char *ns = realloc(*s, old + n + 1);
    if (!ns)
        return -1;
    memcpy(ns + old, p, n);
    ns[old + n] = 0;
    *s = ns;
    return 0;
}

char *reply_dup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *reply_call_id(uint64_t seed, uint64_t *n_ids)
{
    static const char AL[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t x = seed + 0x9E3779B97F4A7C15ull * ++*n_ids;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    char id[16] = "call_";
    for (int i = 0; i < 9; i++) {
        id[5 + i] = AL[x % 62];
        x /= 62;
    }
    return reply_dup(id, 14);
}

int reply_buf_add(reply_buf *b, const char *text, size_t len)
{
    char *nb = plume_grow(b->p, &b->cap, b->n + len + 1, 256, 1);
    if (!nb)
        return -1;
    b->p = nb;
    if (len)
        memcpy(b->p + b->n, text, len);
    b->n += len;
    b->p[b->n] = 0;
    return 0;
}

void reply_buf_drop(reply_buf *b, size_t used)
{
    memmove(b->p, b->p + used, b->n - used);
    b->n -= used;
    b->p[b->n] = 0;
}

int reply_push_call(plume_tool_call **calls, size_t *n, plume_tool_call c)
{
    plume_tool_call *nc = c.id && c.name && c.arguments
                              ? realloc(*calls, (*n + 1) * sizeof *nc)
                              : NULL;
    if (!nc) {
        free(c.id);
        free(c.name);
        free(c.arguments);
        return -1;
    }
    nc[(*n)++] = c;
    *calls = nc;
    return 0;
}
