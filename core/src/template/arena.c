/* The render's arena, its limits and its error exit, and the bounded byte
 * buffer output is written to. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/value.h"

struct jchunk {
    jchunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void jrt_init(jrt *rt, const jlimits *lim)
{
    memset(rt, 0, sizeof *rt);
    if (lim)
        rt->lim = *lim;
    if (!rt->lim.max_steps)
        rt->lim.max_steps = 20000000;
    if (!rt->lim.max_output)
        rt->lim.max_output = (size_t)16 << 20;
    if (!rt->lim.max_memory)
        rt->lim.max_memory = (size_t)256 << 20;
    if (!rt->lim.max_depth)
        rt->lim.max_depth = 200;
    if (!rt->lim.max_loop)
        rt->lim.max_loop = 1000000;
    rt->construct = "template";
}

void jrt_free(jrt *rt)
{
    for (jchunk *c = rt->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    rt->chunks = NULL;
    rt->mem_used = 0;
}

void *jrt_alloc(jrt *rt, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    jchunk *c = rt->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = n > 65536 ? n : 65536;
        if (n > rt->lim.max_memory || rt->mem_used + size > rt->lim.max_memory)
            jrt_fail(rt, PLUME_ERR_RANGE,
                     "the template used more than %zu MiB of memory; it is too large or loops "
                     "without end",
                     rt->lim.max_memory >> 20);
        c = malloc(sizeof *c + size);
        if (!c)
            jrt_fail(rt, PLUME_ERR_NOMEM, "out of memory while rendering");
        c->size = size;
        c->used = 0;
        c->next = rt->chunks;
        rt->chunks = c;
        rt->mem_used += size;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

_Noreturn void jrt_fail(jrt *rt, plume_status code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    plume_err(rt->err, code, "line %d, column %d, in %s: %s", rt->line, rt->col,
              rt->construct ? rt->construct : "template", msg);
    longjmp(*rt->jb, 1);
}

void jrt_step(jrt *rt)
{
    if (++rt->steps > rt->lim.max_steps)
        jrt_fail(rt, PLUME_ERR_RANGE,
                 "the template ran more than %llu steps; it loops without end or is too large",
                 (unsigned long long)rt->lim.max_steps);
}

void jrt_work(jrt *rt, size_t n)
{
    rt->steps += n / 16;
    jrt_step(rt);
}

void jbuf_put(jrt *rt, jbuf *b, const char *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        if (b->n + n > rt->lim.max_output)
            jrt_fail(rt, PLUME_ERR_RANGE,
                     "the template's output passed %zu bytes; it is too large or loops without "
                     "end",
                     rt->lim.max_output);
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *np = jrt_alloc(rt, cap);
        if (b->n)
            memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

void jbuf_puts(jrt *rt, jbuf *b, const char *s)
{
    jbuf_put(rt, b, s, strlen(s));
}

void jbuf_putc(jrt *rt, jbuf *b, char c)
{
    jbuf_put(rt, b, &c, 1);
}

void jbuf_printf(jrt *rt, jbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    jbuf_put(rt, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

jv jbuf_take(jrt *rt, jbuf *b)
{
    jv v = jv_str(rt, b->p ? b->p : "", b->n);
    return v;
}
