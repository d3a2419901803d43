/* Jinja filters and tests (see filters.h), with jinja2's semantics; tojson
 * is transformers' json.dumps(x, ensure_ascii=False, indent, separators,
 * sort_keys). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/eval.h"
#include "template/filters.h"
#include "template/text.h"

jv jarg(const jargs *a, size_t idx, const char *name, jv dflt)
{
    if (idx < a->n)
        return a->pos[idx];
    for (size_t i = 0; name && i < a->nkw; i++)
        if (!strcmp(a->kwn[i]->data, name))
            return a->kwv[i];
    return dflt;
}

void jargs_check(jrt *rt, const jargs *a, size_t max, const char *const *names, const char *what)
{
    if (a->n > max)
        jrt_fail(rt, PLUME_ERR_INVALID, "%s takes at most %zu arguments (%zu given)", what, max,
                 a->n);
    for (size_t i = 0; i < a->nkw; i++) {
        bool ok = false;
        for (size_t k = 0; names && names[k]; k++)
            if (!strcmp(names[k], a->kwn[i]->data))
                ok = true;
        if (!ok)
            jrt_fail(rt, PLUME_ERR_INVALID, "%s got an unexpected keyword argument '%s'", what,
                     a->kwn[i]->data);
    }
}

int64_t jarg_int(jrt *rt, jv v, const char *what)
{
    if (v.kind == JV_INT)
        return v.u.i;
    if (v.kind == JV_BOOL)
        return v.u.b;
    jrt_fail(rt, PLUME_ERR_INVALID, "%s must be an integer, not %s", what, jv_type_name(v));
}

const jstr *jarg_str(jrt *rt, jv v, const char *what)
{
    if (v.kind == JV_STR)
        return v.u.s;
    if (v.kind == JV_UNDEF)
        jrt_fail(rt, PLUME_ERR_INVALID, "%s is undefined", what);
    return jv_to_str(rt, v).u.s;
}

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE_ARGS ((const char *const[]){NULL})

static const jstr *soft_str(jrt *rt, jv v)
{
    return jv_to_str(rt, v).u.s;
}

/* ---- attribute paths ("a.b.0") as jinja2's make_attrgetter reads them ---- */
static jv get_path(jrt *rt, jv item, const jstr *path)
{
    const char *p = path->data, *e = p + path->len;
    while (p <= e) {
        const char *dot = memchr(p, '.', (size_t)(e - p));
        if (!dot)
            dot = e;
        jv key;
        bool digits = dot > p;
        for (const char *q = p; q < dot; q++)
            if (*q < '0' || *q > '9')
                digits = false;
        if (digits)
            key = jv_int(strtoll(p, NULL, 10));
        else
            key = jv_str(rt, p, (size_t)(dot - p));
        item = jeval_getitem(rt, item, key);
        p = dot + 1;
    }
    return item;
}

static jv f_tojson(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 4, NAMES("ensure_ascii", "indent", "separators", "sort_keys"), "tojson");
    jv ascii = jarg(a, 0, "ensure_ascii", jv_bool(false));
    jv indent = jarg(a, 1, "indent", jv_none());
    jv seps = jarg(a, 2, "separators", jv_none());
    jv sort = jarg(a, 3, "sort_keys", jv_bool(false));
    int ind = -1;
    const jstr *ind_str = NULL;
    if (indent.kind == JV_INT || indent.kind == JV_BOOL) {
        int64_t v = jarg_int(rt, indent, "tojson's indent");
        ind = v < 0 ? 0 : v > 64 ? 64 : (int)v;
    } else if (indent.kind == JV_STR)
        ind_str = indent.u.s;
    else if (indent.kind != JV_NONE)
        jrt_fail(rt, PLUME_ERR_INVALID, "tojson's indent must be an int, a str or None");
    const jstr *isep = NULL, *ksep = NULL;
    if (seps.kind == JV_LIST && seps.u.l->n == 2 && seps.u.l->items[0].kind == JV_STR &&
        seps.u.l->items[1].kind == JV_STR) {
        isep = seps.u.l->items[0].u.s;
        ksep = seps.u.l->items[1].u.s;
    } else if (seps.kind != JV_NONE)
        jrt_fail(rt, PLUME_ERR_INVALID, "tojson's separators must be a pair of strings");
    jbuf b = {0};
    jv_write_json(rt, &b, in, jv_truthy(ascii), ind, ind_str, isep, ksep, jv_truthy(sort));
    return jbuf_take(rt, &b);
}

static size_t length_of(jrt *rt, jv v)
{
    if (v.kind == JV_STR)
        jrt_work(rt, v.u.s->len);
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_STR: return jutf8_count(v.u.s->data, v.u.s->len);
    case JV_LIST:
        if (v.u.l->gen)
            break;
        return v.u.l->n;
    case JV_DICT:
        if (!v.u.d->ns)
            return v.u.d->n;
        break;
    default: break;
    }
    jrt_fail(rt, PLUME_ERR_INVALID, "object of type '%s' has no len()", jv_type_name(v));
}

static jv f_length(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "length");
    return jv_int((int64_t)length_of(rt, in));
}

static jv f_trim(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 1, NAMES("chars"), "trim");
    jv chars = jarg(a, 0, "chars", jv_none());
    return jtext_strip(rt, soft_str(rt, in), chars.kind == JV_STR ? chars.u.s : NULL, 'b');
}

static jv f_string(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "string");
    return jv_to_str(rt, in);
}

static jv f_default(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 2, NAMES("default_value", "boolean"), "default");
    jv dv = jarg(a, 0, "default_value", jv_cstr(rt, ""));
    jv boolean = jarg(a, 1, "boolean", jv_bool(false));
    if (in.kind == JV_UNDEF || (jv_truthy(boolean) && !jv_truthy(in)))
        return dv;
    return in;
}

static jv f_join(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 2, NAMES("d", "attribute"), "join");
    const jstr *sep = jarg_str(rt, jarg(a, 0, "d", jv_cstr(rt, "")), "join's separator");
    jv attr = jarg(a, 1, "attribute", jv_none());
    jlist *l = jv_iterate(rt, in);
    jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            jbuf_put(rt, &b, sep->data, sep->len);
        jv v = l->items[i];
        if (attr.kind != JV_NONE)
            v = get_path(rt, v, jarg_str(rt, attr, "join's attribute"));
        jv_write_str(rt, &b, v);
    }
    return jbuf_take(rt, &b);
}

static jv f_items(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "items");
    jv out = jv_list(rt, 0);
    out.u.l->gen = true;
    if (in.kind == JV_UNDEF)
        return out;
    if (in.kind != JV_DICT || in.u.d->ns)
        jrt_fail(rt, PLUME_ERR_INVALID, "can only get item pairs from a mapping, not %s",
                 jv_type_name(in));
    for (size_t i = 0; i < in.u.d->n; i++)
        jlist_push(rt, out.u.l, jv_pair(rt, in.u.d->keys[i], in.u.d->vals[i]));
    return out;
}

static jv f_upper(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "upper");
    return jtext_case(rt, soft_str(rt, in), 'u');
}

static jv f_lower(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "lower");
    return jtext_case(rt, soft_str(rt, in), 'l');
}

static jv f_capitalize(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "capitalize");
    return jtext_case(rt, soft_str(rt, in), 'c');
}

static jv f_title(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "title");
    return jtext_title_words(rt, soft_str(rt, in));
}

static jv f_safe(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "safe");
    jv v = jv_to_str(rt, in);
    v.markup = true;
    return v;
}

static jv f_escape(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "escape");
    if (in.kind == JV_STR && in.markup)
        return in;
    return jv_html_escape(rt, soft_str(rt, in));
}

static jv f_list(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "list");
    jlist *l = jv_iterate(rt, in);
    jv out = jv_list(rt, l->n);
    jcopy(out.u.l->items, l->items, l->n * sizeof(jv));
    out.u.l->n = l->n;
    return out;
}

static jv f_replace(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 3, NAMES("old", "new", "count"), "replace");
    const jstr *old = jarg_str(rt, jarg(a, 0, "old", jv_undef(NULL)), "replace's old");
    const jstr *rep = jarg_str(rt, jarg(a, 1, "new", jv_undef(NULL)), "replace's new");
    jv count = jarg(a, 2, "count", jv_none());
    return jtext_replace(rt, soft_str(rt, in), old, rep,
                         count.kind == JV_NONE ? -1 : jarg_int(rt, count, "replace's count"));
}

/* Applies test name (a string) with extra arguments, as select/selectattr do. */
static bool run_test(jrt *rt, jv v, const jv *targs, size_t ntargs)
{
    if (!ntargs)
        return jv_truthy(v);
    const jstr *name = jarg_str(rt, targs[0], "the test's name");
    const jtest_def *t = jtest_find(name->data);
    if (!t || !t->fn)
        jrt_fail(rt, PLUME_ERR_INVALID, "no test named '%s'", name->data);
    jargs ta = {.pos = targs + 1, .n = ntargs - 1};
    return t->fn(rt, v, &ta);
}

static jv select_common(jrt *rt, jv in, const jargs *a, bool attr, bool keep)
{
    jv out = jv_list(rt, 0);
    out.u.l->gen = true;
    if (!jv_truthy(in)) /* jinja2: `if value:` before iterating */
        return out;
    jlist *l = jv_iterate(rt, in);
    size_t skip = attr ? 1 : 0;
    const jstr *path = attr ? jarg_str(rt, jarg(a, 0, NULL, jv_undef(NULL)), "the attribute") : NULL;
    for (size_t i = 0; i < l->n; i++) {
        jv v = path ? get_path(rt, l->items[i], path) : l->items[i];
        bool r = run_test(rt, v, a->n > skip ? a->pos + skip : NULL, a->n > skip ? a->n - skip : 0);
        if (r == keep)
            jlist_push(rt, out.u.l, l->items[i]);
    }
    return out;
}

static jv f_select(jrt *rt, jv in, const jargs *a) { return select_common(rt, in, a, false, true); }
static jv f_reject(jrt *rt, jv in, const jargs *a) { return select_common(rt, in, a, false, false); }
static jv f_selectattr(jrt *rt, jv in, const jargs *a) { return select_common(rt, in, a, true, true); }
static jv f_rejectattr(jrt *rt, jv in, const jargs *a) { return select_common(rt, in, a, true, false); }

static jv f_map(jrt *rt, jv in, const jargs *a)
{
    if (!jv_truthy(in)) { /* jinja2: `if value:` before iterating */
        jv empty = jv_list(rt, 0);
        empty.u.l->gen = true;
        return empty;
    }
    jlist *l = jv_iterate(rt, in);
    jv out = jv_list(rt, l->n);
    out.u.l->gen = true;
    jv attr = jarg(a, SIZE_MAX, "attribute", jv_undef(NULL));
    if (attr.kind != JV_UNDEF) {
        const jstr *path = jarg_str(rt, attr, "map's attribute");
        jv dflt = jarg(a, SIZE_MAX, "default", jv_undef(NULL));
        for (size_t i = 0; i < l->n; i++) {
            jv v = get_path(rt, l->items[i], path);
            out.u.l->items[i] = v.kind == JV_UNDEF && dflt.kind != JV_UNDEF ? dflt : v;
        }
        out.u.l->n = l->n;
        return out;
    }
    if (!a->n)
        jrt_fail(rt, PLUME_ERR_INVALID, "map needs a filter name or attribute=");
    const jstr *name = jarg_str(rt, a->pos[0], "map's filter name");
    const jfilter_def *f = jfilter_find(name->data);
    if (!f || !f->fn)
        jrt_fail(rt, PLUME_ERR_INVALID, "no filter named '%s'", name->data);
    jargs fa = {.pos = a->pos + 1, .n = a->n - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    for (size_t i = 0; i < l->n; i++)
        out.u.l->items[i] = f->fn(rt, l->items[i], &fa);
    out.u.l->n = l->n;
    return out;
}

/* Python's splitlines semantics for indent: lines of s + "\n". */
static jv f_indent(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 3, NAMES("width", "first", "blank"), "indent");
    jv width = jarg(a, 0, "width", jv_int(4));
    bool first = jv_truthy(jarg(a, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(jarg(a, 2, "blank", jv_bool(false)));
    jbuf ind = {0};
    if (width.kind == JV_STR)
        jbuf_put(rt, &ind, width.u.s->data, width.u.s->len);
    else {
        int64_t w = jarg_int(rt, width, "indent's width");
        for (int64_t i = 0; i < w && i < 1000; i++)
            jbuf_putc(rt, &ind, ' ');
    }
    const jstr *s = soft_str(rt, in);
    jbuf sn = {0};
    jbuf_put(rt, &sn, s->data, s->len);
    jbuf_putc(rt, &sn, '\n');
    jlist *lines = jtext_splitlines(rt, jstr_new(rt, sn.p, sn.n)).u.l;
    jbuf b = {0};
    if (first)
        jbuf_put(rt, &b, ind.p ? ind.p : "", ind.n);
    for (size_t i = 0; i < lines->n; i++) {
        const jstr *line = lines->items[i].u.s;
        if (i) {
            jbuf_putc(rt, &b, '\n');
            if (blank || line->len)
                jbuf_put(rt, &b, ind.p ? ind.p : "", ind.n);
        }
        jbuf_put(rt, &b, line->data, line->len);
    }
    return jbuf_take(rt, &b);
}

static jv lower_key(jrt *rt, jv v, bool case_sensitive)
{
    if (!case_sensitive && v.kind == JV_STR)
        return jtext_case(rt, v.u.s, 'l');
    return v;
}

static jv f_unique(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 2, NAMES("case_sensitive", "attribute"), "unique");
    bool cs = jv_truthy(jarg(a, 0, "case_sensitive", jv_bool(false)));
    jv attr = jarg(a, 1, "attribute", jv_none());
    jlist *l = jv_iterate(rt, in);
    jv out = jv_list(rt, 0), seen = jv_list(rt, 0);
    out.u.l->gen = true;
    for (size_t i = 0; i < l->n; i++) {
        jv k = attr.kind == JV_NONE ? l->items[i]
                                    : get_path(rt, l->items[i], jarg_str(rt, attr, "attribute"));
        k = lower_key(rt, k, cs);
        bool dup = false;
        jrt_work(rt, seen.u.l->n * 8);
        for (size_t j = 0; j < seen.u.l->n && !dup; j++)
            dup = jv_equal(seen.u.l->items[j], k);
        if (!dup) {
            jlist_push(rt, seen.u.l, k);
            jlist_push(rt, out.u.l, l->items[i]);
        }
    }
    return out;
}

static jv f_int(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 2, NAMES("default", "base"), "int");
    jv dflt = jarg(a, 0, "default", jv_int(0));
    switch (in.kind) {
    case JV_INT: return in;
    case JV_BOOL: return jv_int(in.u.b);
    case JV_FLOAT:
        if (isfinite(in.u.f) && fabs(in.u.f) < 9.2e18)
            return jv_int((int64_t)in.u.f);
        return dflt;
    case JV_STR: {
        char *end;
        const jstr *s = jtext_strip(rt, in.u.s, NULL, 'b').u.s;
        long long v = strtoll(s->data, &end, 10);
        if (s->len && *end == 0)
            return jv_int(v);
        double d = strtod(s->data, &end);
        if (s->len && *end == 0 && isfinite(d) && fabs(d) < 9.2e18)
            return jv_int((int64_t)d);
        return dflt;
    }
    default: return dflt;
    }
}

static jv f_float(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 1, NAMES("default"), "float");
    jv dflt = jarg(a, 0, "default", jv_float(0.0));
    switch (in.kind) {
    case JV_INT: return jv_float((double)in.u.i);
    case JV_BOOL: return jv_float(in.u.b);
    case JV_FLOAT: return in;
    case JV_STR: {
        char *end;
        const jstr *s = jtext_strip(rt, in.u.s, NULL, 'b').u.s;
        double d = strtod(s->data, &end);
        return s->len && *end == 0 ? jv_float(d) : dflt;
    }
    default: return dflt;
    }
}

static jv f_first(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "first");
    jlist *l = jv_iterate(rt, in);
    return l->n ? l->items[0] : jv_undef(jstr_cstr(rt, "No first item, sequence was empty."));
}

static jv f_last(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "last");
    if (in.kind == JV_LIST && in.u.l->gen)
        jrt_fail(rt, PLUME_ERR_INVALID, "'generator' object is not reversible");
    jlist *l = jv_iterate(rt, in);
    return l->n ? l->items[l->n - 1] : jv_undef(jstr_cstr(rt, "No last item, sequence was empty."));
}

typedef struct sort_ctx {
    jrt *rt;
    bool cs;
    const jstr *attr;
} sort_ctx;

static jv sort_key(sort_ctx *c, jv v)
{
    if (c->attr)
        v = get_path(c->rt, v, c->attr);
    return lower_key(c->rt, v, c->cs);
}

/* A stable merge sort (Python's sort is stable); keys computed per compare. */
static void msort(sort_ctx *c, jv *v, jv *tmp, size_t n, bool rev)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    msort(c, v, tmp, h, rev);
    msort(c, v + h, tmp, n - h, rev);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        jrt_step(c->rt);
        int cmp = jv_compare(c->rt, sort_key(c, v[j]), sort_key(c, v[i]));
        bool take_right = rev ? cmp > 0 : cmp < 0;
        tmp[k++] = take_right ? v[j++] : v[i++];
    }
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    jcopy(v, tmp, n * sizeof(jv));
}

static jv sorted(jrt *rt, jlist *l, bool rev, bool cs, const jstr *attr)
{
    jv out = jv_list(rt, l->n);
    jcopy(out.u.l->items, l->items, l->n * sizeof(jv));
    out.u.l->n = l->n;
    jv *tmp = jrt_alloc(rt, (l->n + 1) * sizeof(jv));
    sort_ctx c = {rt, cs, attr};
    msort(&c, out.u.l->items, tmp, l->n, rev);
    return out;
}

static jv f_sort(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 3, NAMES("reverse", "case_sensitive", "attribute"), "sort");
    bool rev = jv_truthy(jarg(a, 0, "reverse", jv_bool(false)));
    bool cs = jv_truthy(jarg(a, 1, "case_sensitive", jv_bool(false)));
    jv attr = jarg(a, 2, "attribute", jv_none());
    return sorted(rt, jv_iterate(rt, in), rev, cs,
                  attr.kind == JV_NONE ? NULL : jarg_str(rt, attr, "sort's attribute"));
}

static jv f_dictsort(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 3, NAMES("case_sensitive", "by", "reverse"), "dictsort");
    bool cs = jv_truthy(jarg(a, 0, "case_sensitive", jv_bool(false)));
    const jstr *by = jarg_str(rt, jarg(a, 1, "by", jv_cstr(rt, "key")), "dictsort's by");
    bool rev = jv_truthy(jarg(a, 2, "reverse", jv_bool(false)));
    jv items = f_items(rt, in, &(jargs){0});
    return sorted(rt, items.u.l, rev, cs, jstr_cstr(rt, !strcmp(by->data, "value") ? "1" : "0"));
}

static jv minmax(jrt *rt, jv in, const jargs *a, bool want_max)
{
    jargs_check(rt, a, 2, NAMES("case_sensitive", "attribute"), want_max ? "max" : "min");
    bool cs = jv_truthy(jarg(a, 0, "case_sensitive", jv_bool(false)));
    jv attr = jarg(a, 1, "attribute", jv_none());
    jlist *l = jv_iterate(rt, in);
    if (!l->n)
        return jv_undef(jstr_cstr(rt, "No aggregated item, sequence was empty."));
    sort_ctx c = {rt, cs, attr.kind == JV_NONE ? NULL : jarg_str(rt, attr, "attribute")};
    jv best = l->items[0];
    for (size_t i = 1; i < l->n; i++) {
        int cmp = jv_compare(rt, sort_key(&c, l->items[i]), sort_key(&c, best));
        if (want_max ? cmp > 0 : cmp < 0)
            best = l->items[i];
    }
    return best;
}

static jv f_min(jrt *rt, jv in, const jargs *a) { return minmax(rt, in, a, false); }
static jv f_max(jrt *rt, jv in, const jargs *a) { return minmax(rt, in, a, true); }

static jv f_abs(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "abs");
    if (in.kind == JV_INT)
        return jv_int(in.u.i < 0 ? -in.u.i : in.u.i);
    if (in.kind == JV_FLOAT)
        return jv_float(fabs(in.u.f));
    if (in.kind == JV_BOOL)
        return jv_int(in.u.b);
    jrt_fail(rt, PLUME_ERR_INVALID, "bad operand type for abs(): '%s'", jv_type_name(in));
}

static jv f_round(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 2, NAMES("precision", "method"), "round");
    int64_t prec = jarg_int(rt, jarg(a, 0, "precision", jv_int(0)), "round's precision");
    const jstr *method = jarg_str(rt, jarg(a, 1, "method", jv_cstr(rt, "common")), "round's method");
    if (in.kind != JV_INT && in.kind != JV_FLOAT && in.kind != JV_BOOL)
        jrt_fail(rt, PLUME_ERR_INVALID, "round needs a number, not %s", jv_type_name(in));
    double x = in.kind == JV_FLOAT ? in.u.f : in.kind == JV_INT ? (double)in.u.i : in.u.b;
    prec = prec < -300 ? -300 : prec > 300 ? 300 : prec;
    double m = pow(10.0, (double)prec);
    double r;
    if (!strcmp(method->data, "common")) {
        /* Python's round(value, precision), which jinja2 calls: an int
         * stays an int (to the nearest multiple of 10^-precision, ties to
         * even), a float is the correctly rounded decimal, ties to even on
         * the exact binary value (glibc's %.*f rounds the same way) */
        if (in.kind != JV_FLOAT) {
            int64_t v = in.kind == JV_INT ? in.u.i : in.u.b;
            if (prec >= 0)
                return jv_int(v);
            /* to a multiple of p = 10^-prec: q = floor(v / p), rem in [0, p) */
            int64_t p = 1, q, rem, rounded;
            bool fits = -prec <= 18;
            for (int64_t k = 0; fits && k < -prec; k++)
                p *= 10;
            if (fits) {
                q = v / p;
                rem = v % p;
                if (rem < 0) {
                    q--;
                    rem += p;
                }
                if (rem > p - rem || (rem == p - rem && (q & 1)))
                    q++;
                fits = !__builtin_mul_overflow(q, p, &rounded);
            } else { /* p >= 10^19 > |v|: 0, but for 10^19 above 5*10^18 (ties go to even 0) */
                rounded = 0;
                fits = prec < -19 || (v <= 5000000000000000000LL && v >= -5000000000000000000LL);
            }
            if (!fits)
                jrt_fail(rt, PLUME_ERR_RANGE, "round: %lld rounded to precision %lld does not "
                                              "fit in a 64-bit integer",
                         (long long)v, (long long)prec);
            return jv_int(rounded);
        }
        if (!isfinite(x))
            return jv_float(x);
        char buf[400];
        if (prec >= 0) {
            snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
            return jv_float(strtod(buf, NULL));
        }
        const double unit = pow(10.0, (double)-prec);
        snprintf(buf, sizeof buf, "%.0f", x / unit);
        return jv_float(strtod(buf, NULL) * unit);
    } else if (!strcmp(method->data, "ceil"))
        r = ceil(x * m) / m;
    else if (!strcmp(method->data, "floor"))
        r = floor(x * m) / m;
    else
        jrt_fail(rt, PLUME_ERR_INVALID, "method must be common, ceil or floor");
    return jv_float(r);
}

static jv f_reverse(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "reverse");
    jlist *l = jv_iterate(rt, in);
    if (in.kind == JV_STR) {
        jbuf b = {0};
        for (size_t i = l->n; i-- > 0;)
            jbuf_put(rt, &b, l->items[i].u.s->data, l->items[i].u.s->len);
        return jbuf_take(rt, &b);
    }
    jv out = jv_list(rt, l->n);
    for (size_t i = 0; i < l->n; i++)
        out.u.l->items[i] = l->items[l->n - 1 - i];
    out.u.l->n = l->n;
    return out;
}

static jv f_sum(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 2, NAMES("attribute", "start"), "sum");
    jv attr = jarg(a, 0, "attribute", jv_none());
    jv total = jarg(a, 1, "start", jv_int(0));
    jlist *l = jv_iterate(rt, in);
    for (size_t i = 0; i < l->n; i++) {
        jv v = attr.kind == JV_NONE ? l->items[i]
                                    : get_path(rt, l->items[i], jarg_str(rt, attr, "attribute"));
        if ((total.kind != JV_INT && total.kind != JV_FLOAT) || (v.kind != JV_INT && v.kind != JV_FLOAT && v.kind != JV_BOOL))
            jrt_fail(rt, PLUME_ERR_INVALID, "sum needs numbers, not %s", jv_type_name(v));
        if (total.kind == JV_FLOAT || v.kind == JV_FLOAT)
            total = jv_float((total.kind == JV_FLOAT ? total.u.f : (double)total.u.i) +
                             (v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b));
        else
            total = jv_int(total.u.i + (v.kind == JV_INT ? v.u.i : v.u.b));
    }
    return total;
}

static jv f_attribute(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 1, NAMES("name"), "attribute");
    return jeval_getattr(rt, in, jarg_str(rt, jarg(a, 0, "name", jv_undef(NULL)), "the name"));
}

static jv f_center(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 1, NAMES("width"), "center");
    int64_t w = jarg_int(rt, jarg(a, 0, "width", jv_int(80)), "center's width");
    const jstr *s = soft_str(rt, in);
    size_t len = jutf8_count(s->data, s->len);
    if (w <= (int64_t)len || w > 100000)
        return jv_strv(s);
    size_t pad = (size_t)w - len, left = pad / 2 + (pad & (size_t)w & 1);
    jbuf b = {0};
    for (size_t i = 0; i < left; i++)
        jbuf_putc(rt, &b, ' ');
    jbuf_put(rt, &b, s->data, s->len);
    for (size_t i = left; i < pad; i++)
        jbuf_putc(rt, &b, ' ');
    return jbuf_take(rt, &b);
}

static jv f_wordcount(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 0, NONE_ARGS, "wordcount");
    return jv_int((int64_t)jtext_split(rt, soft_str(rt, in), NULL, -1, false).u.l->n);
}

static jv f_format(jrt *rt, jv in, const jargs *a)
{
    jv t = jv_list_of(rt, a->pos, a->n, true);
    /* value % args, through the evaluator's % operator */
    jv fmt = jv_to_str(rt, in);
    return jeval_percent(rt, fmt, t);
}

static jv f_batch(jrt *rt, jv in, const jargs *a)
{
    jargs_check(rt, a, 2, NAMES("linecount", "fill_with"), "batch");
    int64_t n = jarg_int(rt, jarg(a, 0, "linecount", jv_undef(NULL)), "batch's linecount");
    jv fill = jarg(a, 1, "fill_with", jv_undef(NULL));
    if (n <= 0)
        jrt_fail(rt, PLUME_ERR_INVALID, "batch's linecount must be positive");
    jlist *l = jv_iterate(rt, in);
    jv out = jv_list(rt, 0), cur = jv_list(rt, 0);
    for (size_t i = 0; i < l->n; i++) {
        if ((int64_t)cur.u.l->n == n) {
            jlist_push(rt, out.u.l, cur);
            cur = jv_list(rt, 0);
        }
        jlist_push(rt, cur.u.l, l->items[i]);
    }
    if (cur.u.l->n) {
        if (fill.kind != JV_UNDEF)
            while ((int64_t)cur.u.l->n < n)
                jlist_push(rt, cur.u.l, fill);
        jlist_push(rt, out.u.l, cur);
    }
    return out;
}

static const jfilter_def FILTERS[] = {
    {"abs", f_abs},           {"attribute", f_attribute}, {"batch", f_batch},
    {"capitalize", f_capitalize}, {"center", f_center},   {"count", f_length},
    {"d", f_default},         {"default", f_default},     {"dictsort", f_dictsort},
    {"e", f_escape},          {"escape", f_escape},       {"first", f_first},
    {"float", f_float},       {"forceescape", f_escape},  {"format", f_format},
    {"indent", f_indent},     {"int", f_int},             {"items", f_items},
    {"join", f_join},         {"last", f_last},           {"length", f_length},
    {"list", f_list},         {"lower", f_lower},         {"map", f_map},
    {"max", f_max},           {"min", f_min},             
    {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse},   {"round", f_round},         {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string},     {"sum", f_sum},             {"title", f_title},
    {"tojson", f_tojson},     {"trim", f_trim},           {"unique", f_unique},
    {"upper", f_upper},       {"wordcount", f_wordcount},
    /* jinja2 filters plume does not run: refused when the template is read */
    {"filesizeformat", NULL}, {"pprint", NULL}, {"groupby", NULL}, {"random", NULL}, {"slice", NULL},
    {"striptags", NULL}, {"truncate", NULL}, {"urlencode", NULL}, {"urlize", NULL},
    {"wordwrap", NULL}, {"xmlattr", NULL},
};

const jfilter_def *jfilter_find(const char *name)
{
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (!strcmp(FILTERS[i].name, name))
            return &FILTERS[i];
    return NULL;
}

/* ---- tests ---- */

static jv targ(jrt *rt, const jargs *a, const char *test)
{
    if (!a->n)
        jrt_fail(rt, PLUME_ERR_INVALID, "the test '%s' needs an argument", test);
    return a->pos[0];
}

static bool t_defined(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind != JV_UNDEF; }
static bool t_undefined(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_UNDEF; }
static bool t_none(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_NONE; }
static bool t_string(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_STR; }
static bool t_mapping(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_DICT && !v.u.d->ns; }
static bool t_iterable(jrt *rt, jv v, const jargs *a)
{
    (void)rt;
    (void)a;
    return v.kind == JV_STR || v.kind == JV_LIST || (v.kind == JV_DICT && !v.u.d->ns) ||
           v.kind == JV_UNDEF;
}
static bool t_sequence(jrt *rt, jv v, const jargs *a) { return t_iterable(rt, v, a); }
static bool t_number(jrt *rt, jv v, const jargs *a)
{
    (void)rt;
    (void)a;
    return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
}
static bool t_integer(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_INT; }
static bool t_float(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_FLOAT; }
static bool t_boolean(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_BOOL; }
static bool t_true(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_BOOL && v.u.b; }
static bool t_false(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_BOOL && !v.u.b; }
static bool t_callable(jrt *rt, jv v, const jargs *a) { (void)rt; (void)a; return v.kind == JV_FUNC; }
static bool t_eq(jrt *rt, jv v, const jargs *a) { return jv_equal(v, targ(rt, a, "eq")); }
static bool t_ne(jrt *rt, jv v, const jargs *a) { return !jv_equal(v, targ(rt, a, "ne")); }
static bool t_lt(jrt *rt, jv v, const jargs *a) { return jv_compare(rt, v, targ(rt, a, "lt")) < 0; }
static bool t_le(jrt *rt, jv v, const jargs *a) { return jv_compare(rt, v, targ(rt, a, "le")) <= 0; }
static bool t_gt(jrt *rt, jv v, const jargs *a) { return jv_compare(rt, v, targ(rt, a, "gt")) > 0; }
static bool t_ge(jrt *rt, jv v, const jargs *a) { return jv_compare(rt, v, targ(rt, a, "ge")) >= 0; }
static bool t_in(jrt *rt, jv v, const jargs *a)
{
    jv seq = targ(rt, a, "in");
    jrt_work(rt, seq.kind == JV_STR ? seq.u.s->len * (v.kind == JV_STR ? v.u.s->len / 8 + 1 : 1)
                 : seq.kind == JV_LIST ? seq.u.l->n * 8 : 0);
    if (seq.kind == JV_STR) {
        if (v.kind != JV_STR)
            jrt_fail(rt, PLUME_ERR_INVALID, "'in <string>' requires string as left operand");
        return jtext_find(seq.u.s, v.u.s, false) >= 0;
    }
    jlist *l = jv_iterate(rt, seq);
    for (size_t i = 0; i < l->n; i++)
        if (jv_equal(v, l->items[i]))
            return true;
    return false;
}
static bool t_sameas(jrt *rt, jv v, const jargs *a)
{
    jv o = targ(rt, a, "sameas");
    if (v.kind != o.kind)
        return false;
    switch (v.kind) {
    case JV_NONE:
    case JV_UNDEF: return true;
    case JV_BOOL: return v.u.b == o.u.b;
    case JV_INT: return v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256;
    case JV_STR: return v.u.s == o.u.s;
    case JV_LIST: return v.u.l == o.u.l;
    case JV_DICT: return v.u.d == o.u.d;
    case JV_FUNC: return v.u.fn == o.u.fn;
    default: return false;
    }
}
static bool t_divisibleby(jrt *rt, jv v, const jargs *a)
{
    int64_t d = jarg_int(rt, targ(rt, a, "divisibleby"), "divisibleby's argument");
    if (!d)
        jrt_fail(rt, PLUME_ERR_INVALID, "integer division or modulo by zero");
    return jarg_int(rt, v, "the value") % d == 0;
}
static bool t_even(jrt *rt, jv v, const jargs *a) { (void)a; return jarg_int(rt, v, "the value") % 2 == 0; }
static bool t_odd(jrt *rt, jv v, const jargs *a) { (void)a; return jarg_int(rt, v, "the value") % 2 != 0; }
/* Python's str.isupper() (upper) or str.islower() on ASCII letters: at
 * least one letter of that case and none of the other. */
static bool all_cased(jrt *rt, jv v, bool upper)
{
    const jstr *s = soft_str(rt, v);
    bool cased = false;
    for (size_t i = 0; i < s->len; i++) {
        char c = s->data[i];
        bool is_upper = c >= 'A' && c <= 'Z', is_lower = c >= 'a' && c <= 'z';
        if (upper ? is_lower : is_upper)
            return false;
        if (upper ? is_upper : is_lower)
            cased = true;
    }
    return cased;
}
static bool t_lower(jrt *rt, jv v, const jargs *a) { (void)a; return all_cased(rt, v, false); }
static bool t_upper(jrt *rt, jv v, const jargs *a) { (void)a; return all_cased(rt, v, true); }
static bool t_escaped(jrt *rt, jv v, const jargs *a) { (void)rt; (void)v; (void)a; return false; }
static bool t_filter(jrt *rt, jv v, const jargs *a)
{
    (void)rt;
    (void)a;
    return v.kind == JV_STR && jfilter_find(v.u.s->data) && jfilter_find(v.u.s->data)->fn;
}
static bool t_test(jrt *rt, jv v, const jargs *a)
{
    (void)rt;
    (void)a;
    return v.kind == JV_STR && jtest_find(v.u.s->data);
}

static const jtest_def TESTS[] = {
    {"!=", t_ne},         {"<", t_lt},          {"<=", t_le},         {"==", t_eq},
    {">", t_gt},          {">=", t_ge},         {"boolean", t_boolean}, {"callable", t_callable},
    {"defined", t_defined}, {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq},
    {"escaped", t_escaped}, {"even", t_even},   {"false", t_false},   {"filter", t_filter},
    {"float", t_float},   {"ge", t_ge},         {"greaterthan", t_gt}, {"gt", t_gt},
    {"in", t_in},         {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le},
    {"lessthan", t_lt},   {"lower", t_lower},   {"lt", t_lt},         {"mapping", t_mapping},
    {"ne", t_ne},         {"none", t_none},     {"number", t_number}, {"odd", t_odd},
    {"sameas", t_sameas}, {"sequence", t_sequence}, {"string", t_string}, {"test", t_test},
    {"true", t_true},     {"undefined", t_undefined}, {"upper", t_upper},
};

const jtest_def *jtest_find(const char *name)
{
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
        if (!strcmp(TESTS[i].name, name))
            return &TESTS[i];
    return NULL;
}
