/* Jinja filters and tests by name (jinja2's builtins plus transformers'
 * tojson), and the helpers they share for reading their arguments. */
#ifndef PLUME_TEMPLATE_FILTERS_H
#define PLUME_TEMPLATE_FILTERS_H

#include "template/value.h"

/* Arguments of one call: positional args[0..n) and keyword kwv[0..nkw). */
typedef struct jargs {
    const jv *pos;
    size_t n;
    const jstr *const *kwn;
    const jv *kwv;
    size_t nkw;
} jargs;

typedef jv (*jfilter_fn)(jrt *rt, jv in, const jargs *a);
typedef struct jfilter_def {
    const char *name;
    jfilter_fn fn;
} jfilter_def;

typedef bool (*jtest_fn)(jrt *rt, jv in, const jargs *a);
typedef struct jtest_def {
    const char *name;
    jtest_fn fn;
} jtest_def;

/* The filter or test called name, or NULL when there is none. */
const jfilter_def *jfilter_find(const char *name);
const jtest_def *jtest_find(const char *name);

/* Argument idx (positional) or name (keyword) of a, or dflt when absent. */
jv jarg(const jargs *a, size_t idx, const char *name, jv dflt);
/* Fails when a has more positional arguments than max or a keyword not in
 * names (a NULL-terminated list); what names the callable in the message. */
void jargs_check(jrt *rt, const jargs *a, size_t max, const char *const *names, const char *what);
/* v as an integer argument, failing with a message naming what otherwise. */
int64_t jarg_int(jrt *rt, jv v, const char *what);
/* v as a string argument (str() of it unless undefined), failing on undefined. */
const jstr *jarg_str(jrt *rt, jv v, const char *what);

#endif
