/* The evaluator: runs a parsed template over a context of variables. */
#ifndef PLUME_TEMPLATE_EVAL_H
#define PLUME_TEMPLATE_EVAL_H

#include "template/ast.h"
#include "template/filters.h"

/* One scope: the root (template variables), a loop iteration, a macro call. */
typedef struct jframe {
    struct jframe *parent;
    jdict vars;
} jframe;

/* Renders body with globals as the outermost scope, appending to out.
 * Errors raise through rt. */
void jeval_render(jrt *rt, const jnode *body, jframe *globals, jbuf *out);

/* Calls fn (a builtin, a macro or caller) with arguments a. */
jv jeval_call(jrt *rt, jv fn, const jargs *a);
/* obj.name with jinja2's sandboxed getattr rules (methods first for str,
 * list and dict, then items; missing is undefined; undefined fails). */
jv jeval_getattr(jrt *rt, jv obj, const jstr *name);
/* obj[key] with jinja2's sandboxed getitem rules. */
jv jeval_getitem(jrt *rt, jv obj, jv key);
/* Python's fmt % args (printf-style formatting of a str). */
jv jeval_percent(jrt *rt, jv fmt, jv args);
/* Fails with jinja2's UndefinedError message for u. */
_Noreturn void jeval_undefined_fail(jrt *rt, jv u);

/* The method name of str, list or dict obj, bound to obj; false when obj's
 * type has no such method (methods.c). */
bool jmethod_get(jrt *rt, jv obj, const jstr *name, jv *out);
/* Puts range, dict, namespace, raise_exception and strftime_now into
 * globals (methods.c); jinja2's cycler, joiner and lipsum are not there. */
void jglobals_install(jrt *rt, jdict *globals);

#endif
