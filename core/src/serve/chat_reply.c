/* plume serve: the reasoning splitter and the tool-call parser in a row
 * (chat_reply.h). */
#include "serve/chat_reply.h"

#include <stdlib.h>
#include <string.h>

struct chat_reply {
    chat_reply_opts o;
    plume_reasoning *r;    /* NULL: no reasoning split */
    plume_tool_parser *p;  /* NULL: no tool parsing */
    plume_harmony *h;      /* harmony: the one reader (r and p are NULL) */
    size_t n_calls;        /* calls emitted (after the parallel rule) */
};

chat_reply *chat_reply_new(const chat_reply_opts *o)
{
    chat_reply *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->o = *o;
    if (o->harmony) {
        if (!(c->h = plume_harmony_new(o->tools != PLUME_TOOLS_NONE, o->seed))) {
            free(c);
            return NULL;
        }
        return c;
    }
    if ((o->reasoning && !(c->r = plume_reasoning_new(o->starts_inside))) ||
        (o->tools != PLUME_TOOLS_NONE && !(c->p = plume_tool_parser_new(o->tools, o->seed)))) {
        chat_reply_free(c);
        return NULL;
    }
    return c;
}

void chat_reply_free(chat_reply *c)
{
    if (!c)
        return;
    plume_reasoning_free(c->r);
    plume_tool_parser_free(c->p);
    plume_harmony_free(c->h);
    free(c);
}

size_t chat_reply_n_calls(const chat_reply *c) { return c->n_calls; }

bool chat_delta_empty(const chat_delta *d)
{
    return !d->reasoning && !d->content && d->n_calls == 0;
}

void chat_delta_clear(chat_delta *d)
{
    free(d->reasoning);
    free(d->content);
    plume_tool_calls_free(d->calls, d->n_calls);
    memset(d, 0, sizeof *d);
}

/* Drops the calls past the reply's first when parallel calls are not
 * allowed, and numbers the rest. */
static void limit_calls(chat_reply *c, chat_delta *d)
{
    if (!c->o.parallel && d->n_calls) {
        size_t keep = c->n_calls ? 0 : 1; /* only the reply's first call */
        for (size_t i = keep; i < d->n_calls; i++) {
            free(d->calls[i].id);
            free(d->calls[i].name);
            free(d->calls[i].arguments);
        }
        d->n_calls = keep;
        if (!keep) {
            free(d->calls);
            d->calls = NULL;
        }
    }
    d->first_index = c->n_calls;
    c->n_calls += d->n_calls;
}

int chat_reply_feed(chat_reply *c, const char *text, size_t len, bool final, chat_delta *d)
{
    memset(d, 0, sizeof *d);
    plume_error err = {0};
    if (c->h) {
        if (plume_harmony_feed(c->h, text, len, final, &d->reasoning, &d->content, &d->calls,
                               &d->n_calls, &err))
            goto oom;
        limit_calls(c, d);
        return 0;
    }
    char *answer = NULL;
    if (c->r) {
        if (plume_reasoning_feed(c->r, text, len, final, &d->reasoning, &answer, &err))
            goto oom;
    } else if (len && !(answer = strndup(text, len))) {
        goto oom;
    }
    if (!c->p) {
        d->content = answer;
        return 0;
    }
    int rc = plume_tool_parser_feed(c->p, answer ? answer : "", answer ? strlen(answer) : 0,
                                    final, &d->content, &d->calls, &d->n_calls, &err);
    free(answer);
    if (rc)
        goto oom;
    limit_calls(c, d);
    return 0;
oom:
    chat_delta_clear(d);
    return -1;
}
