/* The str, list and dict methods templates call, and the global functions
 * transformers gives a template (range, dict, namespace, raise_exception,
 * strftime_now).  Methods that would modify a list or dict are refused as
 * jinja2's ImmutableSandboxedEnvironment refuses them. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "template/eval.h"
#include "template/filters.h"
#include "template/text.h"

typedef jv (*method_fn)(jrt *rt, jv self, const jargs *a);

typedef struct method_def {
    const char *name;
    method_fn fn; /* NULL: unsafe (modifies its object) */
} method_def;

static jargs mkargs(const jv *args, size_t n, const jstr *const *kwn, const jv *kwv, size_t nkw)
{
    jargs a = {.pos = args, .n = n, .kwn = kwn, .kwv = kwv, .nkw = nkw};
    return a;
}

static const jstr *opt_str(jrt *rt, jv v, const char *what)
{
    return v.kind == JV_NONE || v.kind == JV_UNDEF ? NULL : jarg_str(rt, v, what);
}

/* ---- str ---- */
static jv s_strip(jrt *rt, jv s, const jargs *a) { return jtext_strip(rt, s.u.s, opt_str(rt, jarg(a, 0, "chars", jv_none()), "strip's chars"), 'b'); }
static jv s_lstrip(jrt *rt, jv s, const jargs *a) { return jtext_strip(rt, s.u.s, opt_str(rt, jarg(a, 0, "chars", jv_none()), "lstrip's chars"), 'l'); }
static jv s_rstrip(jrt *rt, jv s, const jargs *a) { return jtext_strip(rt, s.u.s, opt_str(rt, jarg(a, 0, "chars", jv_none()), "rstrip's chars"), 'r'); }
static jv s_upper(jrt *rt, jv s, const jargs *a) { (void)a; return jtext_case(rt, s.u.s, 'u'); }
static jv s_lower(jrt *rt, jv s, const jargs *a) { (void)a; return jtext_case(rt, s.u.s, 'l'); }
static jv s_title(jrt *rt, jv s, const jargs *a) { (void)a; return jtext_case(rt, s.u.s, 't'); }
static jv s_capitalize(jrt *rt, jv s, const jargs *a) { (void)a; return jtext_case(rt, s.u.s, 'c'); }

static jv s_split_common(jrt *rt, jv s, const jargs *a, bool right)
{
    const jstr *sep = opt_str(rt, jarg(a, 0, "sep", jv_none()), "split's sep");
    jv ms = jarg(a, 1, "maxsplit", jv_int(-1));
    return jtext_split(rt, s.u.s, sep, jarg_int(rt, ms, "split's maxsplit"), right);
}
static jv s_split(jrt *rt, jv s, const jargs *a) { return s_split_common(rt, s, a, false); }
static jv s_rsplit(jrt *rt, jv s, const jargs *a) { return s_split_common(rt, s, a, true); }
static jv s_splitlines(jrt *rt, jv s, const jargs *a) { (void)a; return jtext_splitlines(rt, s.u.s); }

static bool affix(const jstr *s, const jstr *p, bool end)
{
    if (p->len > s->len)
        return false;
    return !memcmp(s->data + (end ? s->len - p->len : 0), p->data, p->len);
}

static jv s_affix(jrt *rt, jv s, const jargs *a, bool end)
{
    jv p = jarg(a, 0, "prefix", jv_undef(NULL));
    if (p.kind == JV_LIST && p.u.l->tuple) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (affix(s.u.s, jarg_str(rt, p.u.l->items[i], "the affix"), end))
                return jv_bool(true);
        return jv_bool(false);
    }
    if (p.kind != JV_STR)
        jrt_fail(rt, PLUME_ERR_INVALID, "%s first arg must be str or a tuple of str, not %s",
                 end ? "endswith" : "startswith", jv_type_name(p));
    return jv_bool(affix(s.u.s, p.u.s, end));
}
static jv s_startswith(jrt *rt, jv s, const jargs *a) { return s_affix(rt, s, a, false); }
static jv s_endswith(jrt *rt, jv s, const jargs *a) { return s_affix(rt, s, a, true); }

static jv s_replace(jrt *rt, jv s, const jargs *a)
{
    const jstr *old = jarg_str(rt, jarg(a, 0, "old", jv_undef(NULL)), "replace's old");
    const jstr *rep = jarg_str(rt, jarg(a, 1, "new", jv_undef(NULL)), "replace's new");
    jv count = jarg(a, 2, "count", jv_int(-1));
    return jtext_replace(rt, s.u.s, old, rep, jarg_int(rt, count, "replace's count"));
}

static jv s_find(jrt *rt, jv s, const jargs *a)
{
    return jv_int(jtext_find(s.u.s, jarg_str(rt, jarg(a, 0, NULL, jv_undef(NULL)), "find's sub"), false));
}
static jv s_rfind(jrt *rt, jv s, const jargs *a)
{
    return jv_int(jtext_find(s.u.s, jarg_str(rt, jarg(a, 0, NULL, jv_undef(NULL)), "rfind's sub"), true));
}
static jv s_index(jrt *rt, jv s, const jargs *a)
{
    jv r = s_find(rt, s, a);
    if (r.u.i < 0)
        jrt_fail(rt, PLUME_ERR_INVALID, "substring not found");
    return r;
}

static jv s_count(jrt *rt, jv s, const jargs *a)
{
    const jstr *sub = jarg_str(rt, jarg(a, 0, NULL, jv_undef(NULL)), "count's sub");
    if (!sub->len)
        return jv_int((int64_t)jutf8_count(s.u.s->data, s.u.s->len) + 1);
    int64_t c = 0;
    for (size_t i = 0; i + sub->len <= s.u.s->len;)
        if (!memcmp(s.u.s->data + i, sub->data, sub->len)) {
            c++;
            i += sub->len;
        } else
            i++;
    return jv_int(c);
}

static jv s_join(jrt *rt, jv s, const jargs *a)
{
    jlist *l = jv_iterate(rt, jarg(a, 0, NULL, jv_undef(NULL)));
    jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            jbuf_put(rt, &b, s.u.s->data, s.u.s->len);
        if (l->items[i].kind != JV_STR)
            jrt_fail(rt, PLUME_ERR_INVALID, "sequence item %zu: expected str instance, %s found",
                     i, jv_type_name(l->items[i]));
        jbuf_put(rt, &b, l->items[i].u.s->data, l->items[i].u.s->len);
    }
    return jbuf_take(rt, &b);
}

static jv s_format(jrt *rt, jv s, const jargs *a)
{
    return jtext_format(rt, s.u.s, a->pos, a->n, a->kwn, a->kwv, a->nkw);
}

static jv s_is(jrt *rt, jv s, char kind)
{
    const jstr *t = s.u.s;
    if (!t->len)
        return jv_bool(false);
    bool cased = false;
    for (size_t i = 0; i < t->len; i++) {
        unsigned char c = (unsigned char)t->data[i];
        bool ok;
        switch (kind) {
        case 'd': ok = c >= '0' && c <= '9'; break;
        case 'a': ok = (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; break;
        case 'n': ok = (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); break;
        case 's': ok = jtext_space_at(t->data + i, t->len - i) > 0; break;
        case 'l': ok = !(c >= 'A' && c <= 'Z'); cased |= c >= 'a' && c <= 'z'; break;
        default: ok = !(c >= 'a' && c <= 'z'); cased |= c >= 'A' && c <= 'Z'; break;
        }
        if (!ok)
            return jv_bool(false);
    }
    (void)rt;
    return jv_bool(kind == 'l' || kind == 'u' ? cased : true);
}
static jv s_isdigit(jrt *rt, jv s, const jargs *a) { (void)a; return s_is(rt, s, 'd'); }
static jv s_isalpha(jrt *rt, jv s, const jargs *a) { (void)a; return s_is(rt, s, 'a'); }
static jv s_isalnum(jrt *rt, jv s, const jargs *a) { (void)a; return s_is(rt, s, 'n'); }
static jv s_isspace(jrt *rt, jv s, const jargs *a) { (void)a; return s_is(rt, s, 's'); }
static jv s_islower(jrt *rt, jv s, const jargs *a) { (void)a; return s_is(rt, s, 'l'); }
static jv s_isupper(jrt *rt, jv s, const jargs *a) { (void)a; return s_is(rt, s, 'u'); }

static jv s_removeaffix(jrt *rt, jv s, const jargs *a, bool end)
{
    const jstr *p = jarg_str(rt, jarg(a, 0, NULL, jv_undef(NULL)), "the affix");
    if (!affix(s.u.s, p, end))
        return s;
    return jv_str(rt, s.u.s->data + (end ? 0 : p->len), s.u.s->len - p->len);
}
static jv s_removeprefix(jrt *rt, jv s, const jargs *a) { return s_removeaffix(rt, s, a, false); }
static jv s_removesuffix(jrt *rt, jv s, const jargs *a) { return s_removeaffix(rt, s, a, true); }

static jv s_partition(jrt *rt, jv s, const jargs *a, bool right)
{
    const jstr *sep = jarg_str(rt, jarg(a, 0, NULL, jv_undef(NULL)), "the separator");
    jv parts = jtext_split(rt, s.u.s, sep, 1, right);
    jv t = jv_list(rt, 3);
    t.u.l->tuple = true;
    t.u.l->n = 3;
    jv empty = jv_cstr(rt, "");
    if (parts.u.l->n == 2) {
        t.u.l->items[0] = parts.u.l->items[0];
        t.u.l->items[1] = jv_strv(sep);
        t.u.l->items[2] = parts.u.l->items[1];
    } else if (right) {
        t.u.l->items[0] = empty;
        t.u.l->items[1] = empty;
        t.u.l->items[2] = s;
    } else {
        t.u.l->items[0] = s;
        t.u.l->items[1] = empty;
        t.u.l->items[2] = empty;
    }
    return t;
}
static jv s_partition_l(jrt *rt, jv s, const jargs *a) { return s_partition(rt, s, a, false); }
static jv s_partition_r(jrt *rt, jv s, const jargs *a) { return s_partition(rt, s, a, true); }

static const method_def STR_METHODS[] = {
    {"capitalize", s_capitalize}, {"count", s_count}, {"endswith", s_endswith},
    {"find", s_find}, {"format", s_format}, {"index", s_index}, {"isalnum", s_isalnum},
    {"isalpha", s_isalpha}, {"isdigit", s_isdigit}, {"islower", s_islower},
    {"isspace", s_isspace}, {"isupper", s_isupper}, {"join", s_join}, {"lower", s_lower},
    {"lstrip", s_lstrip}, {"partition", s_partition_l}, {"removeprefix", s_removeprefix},
    {"removesuffix", s_removesuffix}, {"replace", s_replace}, {"rfind", s_rfind},
    {"rpartition", s_partition_r}, {"rsplit", s_rsplit}, {"rstrip", s_rstrip},
    {"split", s_split}, {"splitlines", s_splitlines}, {"startswith", s_startswith},
    {"strip", s_strip}, {"title", s_title}, {"upper", s_upper},
};

/* ---- list ---- */
static jv l_index(jrt *rt, jv l, const jargs *a)
{
    jv x = jarg(a, 0, NULL, jv_undef(NULL));
    for (size_t i = 0; i < l.u.l->n; i++)
        if (jv_equal(l.u.l->items[i], x))
            return jv_int((int64_t)i);
    jrt_fail(rt, PLUME_ERR_INVALID, "value is not in list");
}
static jv l_count(jrt *rt, jv l, const jargs *a)
{
    (void)rt;
    jv x = jarg(a, 0, NULL, jv_undef(NULL));
    int64_t c = 0;
    for (size_t i = 0; i < l.u.l->n; i++)
        c += jv_equal(l.u.l->items[i], x);
    return jv_int(c);
}
static jv l_copy(jrt *rt, jv l, const jargs *a)
{
    (void)a;
    jv out = jv_list(rt, l.u.l->n);
    jcopy(out.u.l->items, l.u.l->items, l.u.l->n * sizeof(jv));
    out.u.l->n = l.u.l->n;
    return out;
}

static const method_def LIST_METHODS[] = {
    {"append", NULL}, {"clear", NULL}, {"copy", l_copy}, {"count", l_count}, {"extend", NULL},
    {"index", l_index}, {"insert", NULL}, {"pop", NULL}, {"remove", NULL}, {"reverse", NULL},
    {"sort", NULL},
};

/* ---- dict ---- */
static jv d_items(jrt *rt, jv d, const jargs *a)
{
    (void)a;
    jv out = jv_list(rt, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++)
        out.u.l->items[i] = jv_pair(rt, d.u.d->keys[i], d.u.d->vals[i]);
    out.u.l->n = d.u.d->n;
    return out;
}
static jv d_keys(jrt *rt, jv d, const jargs *a)
{
    (void)a;
    return jv_list_of(rt, d.u.d->keys, d.u.d->n, false);
}
static jv d_values(jrt *rt, jv d, const jargs *a)
{
    (void)a;
    return jv_list_of(rt, d.u.d->vals, d.u.d->n, false);
}
static jv d_get(jrt *rt, jv d, const jargs *a)
{
    (void)rt;
    jv k = jarg(a, 0, NULL, jv_undef(NULL)), v;
    if (jdict_get(d.u.d, k, &v))
        return v;
    return jarg(a, 1, NULL, jv_none());
}
static jv d_copy(jrt *rt, jv d, const jargs *a)
{
    (void)a;
    jv out = jv_dict(rt, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++)
        jdict_set(rt, out.u.d, d.u.d->keys[i], d.u.d->vals[i]);
    return out;
}

static const method_def DICT_METHODS[] = {
    {"clear", NULL}, {"copy", d_copy}, {"get", d_get}, {"items", d_items}, {"keys", d_keys},
    {"pop", NULL}, {"popitem", NULL}, {"setdefault", NULL}, {"update", NULL},
    {"values", d_values},
};

/* Methods are called through one builtin that finds its method_def again
 * from the bound pair (object, name). */
static const method_def *find(const method_def *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name))
            return &t[i];
    return NULL;
}

#define COUNT(t) (sizeof t / sizeof t[0])

static const method_def *method_of(jv self, const char *name)
{
    switch (self.kind) {
    case JV_STR: return find(STR_METHODS, COUNT(STR_METHODS), name);
    case JV_LIST: return self.u.l->gen ? NULL : find(LIST_METHODS, COUNT(LIST_METHODS), name);
    case JV_DICT: return self.u.d->ns ? NULL : find(DICT_METHODS, COUNT(DICT_METHODS), name);
    default: return NULL;
    }
}

static jv call_method(jrt *rt, jv self, const jv *args, size_t n, const jstr *const *kwn,
                      const jv *kwv, size_t nkw)
{
    /* self is a 2-item list: the object and the method's name */
    jv obj = self.u.l->items[0];
    const char *name = self.u.l->items[1].u.s->data;
    const method_def *m = method_of(obj, name);
    if (!m || !m->fn)
        jrt_fail(rt, PLUME_ERR_INVALID,
                 "access to attribute '%s' of '%s' object is unsafe: templates may not modify "
                 "values (transformers renders them in jinja2's immutable sandbox)",
                 name, jv_type_name(obj));
    jargs a = mkargs(args, n, kwn, kwv, nkw);
    /* a method scans its object (find, count, split, strip, index, ...):
     * charged by its size times the longest string argument's */
    size_t arg_len = 1;
    for (size_t i = 0; i < n; i++)
        if (args[i].kind == JV_STR && args[i].u.s->len / 8 + 1 > arg_len)
            arg_len = args[i].u.s->len / 8 + 1;
    jrt_work(rt, (obj.kind == JV_STR ? obj.u.s->len : obj.kind == JV_LIST ? obj.u.l->n * 8
                                                                         : obj.u.d->n * 8) *
                     arg_len);
    return m->fn(rt, obj, &a);
}

bool jmethod_get(jrt *rt, jv obj, const jstr *name, jv *out)
{
    if (!method_of(obj, name->data))
        return false;
    jfunc *fn = jrt_alloc(rt, sizeof *fn);
    fn->name = name->data;
    fn->builtin = call_method;
    fn->self = jv_list(rt, 2);
    fn->self.u.l->items[0] = obj;
    fn->self.u.l->items[1] = jv_strv(name);
    fn->self.u.l->n = 2;
    out->kind = JV_FUNC;
    out->u.fn = fn;
    return true;
}

/* ---- globals ---- */

static jv g_range(jrt *rt, jv self, const jv *args, size_t n, const jstr *const *kwn,
                  const jv *kwv, size_t nkw)
{
    (void)self;
    (void)kwn;
    (void)kwv;
    if (nkw || n < 1 || n > 3)
        jrt_fail(rt, PLUME_ERR_INVALID, "range takes 1 to 3 positional arguments");
    int64_t start = 0, stop, step = 1;
    if (n == 1)
        stop = jarg_int(rt, args[0], "range's stop");
    else {
        start = jarg_int(rt, args[0], "range's start");
        stop = jarg_int(rt, args[1], "range's stop");
        if (n == 3)
            step = jarg_int(rt, args[2], "range's step");
    }
    if (!step)
        jrt_fail(rt, PLUME_ERR_INVALID, "range() arg 3 must not be zero");
    jv out = jv_list(rt, 0);
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.u.l->n >= rt->lim.max_loop)
            jrt_fail(rt, PLUME_ERR_RANGE, "range() of more than %zu items", rt->lim.max_loop);
        jlist_push(rt, out.u.l, jv_int(i));
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
            break;
    }
    return out;
}

static jv g_dict(jrt *rt, jv self, const jv *args, size_t n, const jstr *const *kwn,
                 const jv *kwv, size_t nkw)
{
    (void)self;
    jv d = jv_dict(rt, nkw);
    if (n > 1)
        jrt_fail(rt, PLUME_ERR_INVALID, "dict expected at most 1 argument, got %zu", n);
    if (n == 1) {
        if (args[0].kind == JV_DICT && !args[0].u.d->ns)
            for (size_t i = 0; i < args[0].u.d->n; i++)
                jdict_set(rt, d.u.d, args[0].u.d->keys[i], args[0].u.d->vals[i]);
        else {
            jlist *l = jv_iterate(rt, args[0]);
            for (size_t i = 0; i < l->n; i++) {
                if (l->items[i].kind != JV_LIST || l->items[i].u.l->n != 2)
                    jrt_fail(rt, PLUME_ERR_INVALID, "dictionary update sequence element #%zu "
                                                    "is not a pair", i);
                jdict_set(rt, d.u.d, l->items[i].u.l->items[0], l->items[i].u.l->items[1]);
            }
        }
    }
    for (size_t i = 0; i < nkw; i++)
        jdict_set(rt, d.u.d, jv_strv(kwn[i]), kwv[i]);
    return d;
}

static jv g_namespace(jrt *rt, jv self, const jv *args, size_t n, const jstr *const *kwn,
                      const jv *kwv, size_t nkw)
{
    jv d = g_dict(rt, self, args, n, kwn, kwv, nkw);
    d.u.d->ns = true;
    for (size_t i = 0; i < d.u.d->n; i++)
        if (d.u.d->keys[i].kind == JV_STR && d.u.d->keys[i].u.s->data[0] == '_')
            jrt_fail(rt, PLUME_ERR_INVALID,
                     "Chat templates cannot store underscore-prefixed attributes on a "
                     "namespace, but got '%s'",
                     d.u.d->keys[i].u.s->data);
    return d;
}

static jv g_raise(jrt *rt, jv self, const jv *args, size_t n, const jstr *const *kwn,
                  const jv *kwv, size_t nkw)
{
    (void)self;
    jargs a = mkargs(args, n, kwn, kwv, nkw);
    jv msg = jarg(&a, 0, "message", jv_undef(NULL));
    jbuf b = {0};
    jv_write_str(rt, &b, msg);
    rt->construct = "raise_exception";
    jrt_fail(rt, PLUME_ERR_INVALID, "the template raised an error: %s", b.p ? b.p : "");
}

static jv g_strftime_now(jrt *rt, jv self, const jv *args, size_t n, const jstr *const *kwn,
                         const jv *kwv, size_t nkw)
{
    (void)self;
    jargs a = mkargs(args, n, kwn, kwv, nkw);
    const jstr *fmt = jarg_str(rt, jarg(&a, 0, "format", jv_undef(NULL)), "strftime_now's format");
    time_t t = rt->now ? (time_t)rt->now : time(NULL);
    struct tm tm;
    if (rt->now_utc)
        gmtime_r(&t, &tm);
    else
        localtime_r(&t, &tm);
    if (fmt->len > 256)
        jrt_fail(rt, PLUME_ERR_INVALID, "strftime_now's format is longer than 256 bytes");
    char out[1024];
    size_t len = strftime(out, sizeof out, fmt->data, &tm);
    return jv_str(rt, out, len);
}

static void put_fn(jrt *rt, jdict *g, const char *name, jbuiltin_fn f)
{
    jfunc *fn = jrt_alloc(rt, sizeof *fn);
    fn->name = name;
    fn->builtin = f;
    jv v = {.kind = JV_FUNC};
    v.u.fn = fn;
    jdict_set(rt, g, jv_cstr(rt, name), v);
}

void jglobals_install(jrt *rt, jdict *g)
{
    put_fn(rt, g, "range", g_range);
    put_fn(rt, g, "dict", g_dict);
    put_fn(rt, g, "namespace", g_namespace);
    put_fn(rt, g, "raise_exception", g_raise);
    put_fn(rt, g, "strftime_now", g_strftime_now);
}
