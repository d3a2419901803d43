/* The Jinja engine's entry points: compile a template once, render it many
 * times over a JSON context.  Used by the chat-template code in
 * src/tokenizer and by tests; callers outside libplume use
 * plume/chat_template.h. */
#ifndef PLUME_TEMPLATE_JINJA_H
#define PLUME_TEMPLATE_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "template/value.h"

struct json_t;
typedef struct jinja_template jinja_template;

/* Compiles src[0..len) with transformers' settings (trim_blocks,
 * lstrip_blocks).  On a syntax error, an unknown tag, filter or test, or a
 * construct plume does not run, returns -1 with one line naming the line,
 * column and what was wrong. */
int jinja_compile(const char *src, size_t len, jinja_template **out, plume_error *err);
void jinja_free(jinja_template *t);

typedef struct jinja_render_opts {
    jlimits limits;  /* zero fields take the defaults (value.h) */
    int64_t now;     /* strftime_now's time (seconds since the epoch); 0: the clock */
    bool now_utc;    /* strftime_now in UTC rather than local time */
} jinja_render_opts;

/* Renders t with the members of the JSON object ctx as its variables (plus
 * range, dict, namespace, raise_exception and strftime_now) into a malloc'd
 * NUL-terminated string *out of *out_len bytes.  Runs within opts' limits
 * (NULL: defaults).  A template error (raise_exception, an undefined value
 * used, a limit reached) returns -1 with one line naming the line, column
 * and construct. */
int jinja_render(const jinja_template *t, const struct json_t *ctx, const jinja_render_opts *opts,
                 char **out, size_t *out_len, plume_error *err);

#endif
