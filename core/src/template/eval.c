/* The evaluator (see eval.h): jinja2's semantics for statements, scopes,
 * operators, attribute and item access, macros and calls. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "template/eval.h"

enum { CTRL_NONE, CTRL_BREAK, CTRL_CONTINUE };

typedef struct jeval {
    jbuf *out;
    int ctrl;
} jeval;

static jeval *EV(jrt *rt)
{
    return (jeval *)rt->eval;
}

static void at(jrt *rt, const jnode *n)
{
    rt->line = n->line;
    rt->col = n->col;
    jrt_step(rt);
}

_Noreturn void jeval_undefined_fail(jrt *rt, jv u)
{
    if (u.u.s)
        jrt_fail(rt, PLUME_ERR_INVALID, "%s", u.u.s->data);
    jrt_fail(rt, PLUME_ERR_INVALID, "a value is undefined");
}

static jv undef_named(jrt *rt, const char *fmt, const char *a, const char *b)
{
    char buf[300];
    snprintf(buf, sizeof buf, fmt, a, b);
    return jv_undef(jstr_cstr(rt, buf));
}

static jv lookup(jframe *f, const jstr *name)
{
    jv k = jv_strv(name), v;
    for (; f; f = f->parent)
        if (jdict_get(&f->vars, k, &v))
            return v;
    return jv_undef(NULL);
}

static void assign(jrt *rt, jframe *f, const jnode *target, jv v)
{
    if (target->kind == JN_NAME) {
        jdict_set(rt, &f->vars, jv_strv(target->name), v);
        return;
    }
    if (target->kind == JN_ATTR) {
        jv ns = lookup(f, target->a->name);
        if (ns.kind != JV_DICT || !ns.u.d->ns)
            jrt_fail(rt, PLUME_ERR_INVALID,
                     "cannot assign attribute on non-namespace object '%s'; create it with "
                     "namespace()",
                     target->a->name->data);
        jdict_set(rt, ns.u.d, jv_strv(target->name), v);
        return;
    }
    /* a tuple of names: unpack */
    jlist *items = NULL;
    if (v.kind == JV_LIST)
        items = v.u.l;
    else if (v.kind == JV_STR || (v.kind == JV_DICT && !v.u.d->ns))
        items = jv_iterate(rt, v);
    else
        jrt_fail(rt, PLUME_ERR_INVALID, "cannot unpack a non-iterable %s object", jv_type_name(v));
    if (items->n != target->nargs)
        jrt_fail(rt, PLUME_ERR_INVALID, "%s values to unpack (expected %zu, got %zu)",
                 items->n > target->nargs ? "too many" : "not enough", target->nargs, items->n);
    for (size_t i = 0; i < target->nargs; i++)
        jdict_set(rt, &f->vars, jv_strv(target->args[i]->name), items->items[i]);
}

static jv eval(jrt *rt, const jnode *n, jframe *f);
static void exec_body(jrt *rt, const jnode *body, jframe *f);

static void deeper(jrt *rt)
{
    if (++rt->cdepth > JRT_MAX_CDEPTH)
        jrt_fail(rt, PLUME_ERR_RANGE,
                 "the template nests evaluation more than %d levels deep (macros calling "
                 "macros within blocks)",
                 JRT_MAX_CDEPTH);
}

/* ---- attribute and item access ---- */

jv jeval_getattr(jrt *rt, jv obj, const jstr *name)
{
    jv v;
    switch (obj.kind) {
    case JV_UNDEF: jeval_undefined_fail(rt, obj);
    case JV_DICT:
        if (obj.u.d->ns) {
            if (jdict_get(obj.u.d, jv_strv(name), &v))
                return v;
            return undef_named(rt, "'Namespace object' has no attribute '%s'%s", name->data, "");
        }
        if (jmethod_get(rt, obj, name, &v))
            return v;
        if (jdict_get(obj.u.d, jv_strv(name), &v))
            return v;
        return undef_named(rt, "'dict object' has no attribute '%s'%s", name->data, "");
    case JV_STR:
    case JV_LIST:
        if (jmethod_get(rt, obj, name, &v))
            return v;
        break;
    default: break;
    }
    char tn[64];
    snprintf(tn, sizeof tn, "%s", jv_type_name(obj));
    return undef_named(rt, "'%s object' has no attribute '%s'", tn, name->data);
}

/* Python's index normalisation: false when out of range. */
static bool norm_index(int64_t i, size_t n, size_t *out)
{
    if (i < 0)
        i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n)
        return false;
    *out = (size_t)i;
    return true;
}

jv jeval_getitem(jrt *rt, jv obj, jv key)
{
    jv v;
    size_t idx;
    switch (obj.kind) {
    case JV_UNDEF: jeval_undefined_fail(rt, obj);
    case JV_DICT:
        if (!obj.u.d->ns && jdict_get(obj.u.d, key, &v))
            return v;
        break;
    case JV_LIST:
        if (obj.u.l->gen)
            break;
        if ((key.kind == JV_INT || key.kind == JV_BOOL) &&
            norm_index(key.kind == JV_INT ? key.u.i : key.u.b, obj.u.l->n, &idx))
            return obj.u.l->items[idx];
        break;
    case JV_STR:
        if (key.kind == JV_INT || key.kind == JV_BOOL) {
            const jstr *s = obj.u.s;
            jrt_work(rt, s->len);
            size_t n = jutf8_count(s->data, s->len);
            if (norm_index(key.kind == JV_INT ? key.u.i : key.u.b, n, &idx)) {
                size_t o = jutf8_offset(s->data, s->len, idx);
                size_t e = jutf8_offset(s->data + o, s->len - o, 1);
                return jv_str(rt, s->data + o, e);
            }
        }
        break;
    default: break;
    }
    if (key.kind == JV_STR && obj.kind != JV_DICT) {
        if ((obj.kind == JV_STR || obj.kind == JV_LIST) && jmethod_get(rt, obj, key.u.s, &v))
            return v;
    } else if (key.kind == JV_STR && !obj.u.d->ns && jmethod_get(rt, obj, key.u.s, &v))
        return v;
    jbuf b = {0};
    jbuf_printf(rt, &b, "'%s object' has no attribute ", jv_type_name(obj));
    jv_write_repr(rt, &b, key);
    return jv_undef(jstr_new(rt, b.p, b.n));
}

static int64_t slice_bound(jrt *rt, jv v, int64_t dflt)
{
    if (v.kind == JV_NONE || v.kind == JV_UNDEF)
        return dflt;
    if (v.kind == JV_INT)
        return v.u.i;
    if (v.kind == JV_BOOL)
        return v.u.b;
    jrt_fail(rt, PLUME_ERR_INVALID, "slice indices must be integers or None, not %s",
             jv_type_name(v));
}

/* A slice bound given as a number: a negative one counts from the end of
 * the len items; the result is clamped to [lo, hi]. */
static int64_t clamp_bound(int64_t x, int64_t len, int64_t lo, int64_t hi)
{
    if (x < 0) {
        x += len;
        if (x < lo)
            x = lo;
    } else if (x > hi)
        x = hi;
    return x;
}

/* Python's slice.indices(): start, stop, step over n items. */
static void slice_indices(jrt *rt, jv s0, jv s1, jv s2, size_t n, int64_t *start, int64_t *stop,
                          int64_t *step)
{
    int64_t len = (int64_t)n;
    int64_t st = slice_bound(rt, s2, 1);
    if (st == 0)
        jrt_fail(rt, PLUME_ERR_INVALID, "slice step cannot be zero");
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? len - 1 : len;
    int64_t a = slice_bound(rt, s0, st < 0 ? hi : lo);
    int64_t b = slice_bound(rt, s1, st < 0 ? lo : hi);
    if (s0.kind == JV_INT || s0.kind == JV_BOOL)
        a = clamp_bound(a, len, lo, hi);
    if (s1.kind == JV_INT || s1.kind == JV_BOOL)
        b = clamp_bound(b, len, lo, hi);
    *start = a;
    *stop = b;
    *step = st;
}

static jv do_slice(jrt *rt, jv obj, jv s0, jv s1, jv s2)
{
    int64_t a, b, st;
    if (obj.kind == JV_UNDEF)
        jeval_undefined_fail(rt, obj);
    if (obj.kind == JV_LIST) {
        slice_indices(rt, s0, s1, s2, obj.u.l->n, &a, &b, &st);
        jv out = jv_list(rt, 0);
        out.u.l->tuple = obj.u.l->tuple;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
            jlist_push(rt, out.u.l, obj.u.l->items[i]);
        return out;
    }
    if (obj.kind == JV_STR) {
        const jstr *s = obj.u.s;
        jrt_work(rt, s->len);
        size_t n = jutf8_count(s->data, s->len);
        slice_indices(rt, s0, s1, s2, n, &a, &b, &st);
        if (n == s->len && st == 1) /* ASCII, contiguous */
            return jv_str(rt, s->data + a, b > a ? (size_t)(b - a) : 0);
        jlist *chars = jv_iterate(rt, obj);
        jbuf out = {0};
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
            jbuf_put(rt, &out, chars->items[i].u.s->data, chars->items[i].u.s->len);
        return jbuf_take(rt, &out);
    }
    if (obj.kind == JV_NONE || obj.kind == JV_INT || obj.kind == JV_FLOAT || obj.kind == JV_BOOL)
        return undef_named(rt, "'%s object' is not subscriptable%s", jv_type_name(obj), "");
    jrt_fail(rt, PLUME_ERR_INVALID, "'%s' object cannot be sliced", jv_type_name(obj));
}

/* ---- operators ---- */

_Noreturn static void bad_operands(jrt *rt, const char *op, jv a, jv b)
{
    if (a.kind == JV_UNDEF)
        jeval_undefined_fail(rt, a);
    if (b.kind == JV_UNDEF)
        jeval_undefined_fail(rt, b);
    if (a.kind == JV_STR && !strcmp(op, "+"))
        jrt_fail(rt, PLUME_ERR_INVALID, "can only concatenate str (not \"%s\") to str",
                 jv_type_name(b));
    jrt_fail(rt, PLUME_ERR_INVALID, "unsupported operand type(s) for %s: '%s' and '%s'", op,
             jv_type_name(a), jv_type_name(b));
}

/* Python's printf-style str % args, for %s %d %i %r %f %x and %%. */
static jv str_format_percent(jrt *rt, const jstr *fmt, jv args)
{
    jlist one = {.n = 1, .cap = 1, .items = &args};
    jlist *l = args.kind == JV_LIST && args.u.l->tuple ? args.u.l : &one;
    size_t ai = 0;
    jbuf b = {0};
    for (size_t i = 0; i < fmt->len; i++) {
        char c = fmt->data[i];
        if (c != '%') {
            jbuf_putc(rt, &b, c);
            continue;
        }
        if (++i >= fmt->len)
            jrt_fail(rt, PLUME_ERR_INVALID, "incomplete format");
        char spec[32];
        size_t sn = 0;
        spec[sn++] = '%';
        while (i < fmt->len && strchr("-+ #0123456789.", fmt->data[i]) && sn < 20)
            spec[sn++] = fmt->data[i++];
        if (i >= fmt->len)
            jrt_fail(rt, PLUME_ERR_INVALID, "incomplete format");
        char conv = fmt->data[i];
        if (conv == '%') {
            jbuf_putc(rt, &b, '%');
            continue;
        }
        if (ai >= l->n)
            jrt_fail(rt, PLUME_ERR_INVALID, "not enough arguments for format string");
        jv v = l->items[ai++];
        if (conv == 's' || conv == 'r') {
            jbuf t = {0};
            if (conv == 's')
                jv_write_str(rt, &t, v);
            else
                jv_write_repr(rt, &t, v);
            spec[sn++] = 's';
            spec[sn] = 0;
            jbuf_printf(rt, &b, spec, t.p ? t.p : "");
        } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
            if (!jv_is_num(v))
                jrt_fail(rt, PLUME_ERR_INVALID, "%%%c format: a real number is required, not %s",
                         conv, jv_type_name(v));
            spec[sn++] = 'l';
            spec[sn++] = 'l';
            spec[sn++] = conv == 'i' ? 'd' : conv;
            spec[sn] = 0;
            jbuf_printf(rt, &b, spec, (long long)(v.kind == JV_FLOAT ? (int64_t)v.u.f : jv_ival(v)));
        } else if (conv == 'f' || conv == 'e' || conv == 'g' || conv == 'F' || conv == 'E' || conv == 'G') {
            if (!jv_is_num(v))
                jrt_fail(rt, PLUME_ERR_INVALID, "must be real number, not %s", jv_type_name(v));
            spec[sn++] = conv;
            spec[sn] = 0;
            jbuf_printf(rt, &b, spec, jv_fval(v));
        } else
            jrt_fail(rt, PLUME_ERR_INVALID, "unsupported format character '%c'", conv);
    }
    if (ai < l->n)
        jrt_fail(rt, PLUME_ERR_INVALID, "not all arguments converted during string formatting");
    return jbuf_take(rt, &b);
}

jv jeval_percent(jrt *rt, jv fmt, jv args)
{
    return str_format_percent(rt, fmt.u.s, args);
}

static jv repeat(jrt *rt, jv seq, int64_t k)
{
    if (k < 0)
        k = 0;
    if (seq.kind == JV_STR) {
        if (seq.u.s->len && (uint64_t)k > rt->lim.max_output / seq.u.s->len)
            jrt_fail(rt, PLUME_ERR_RANGE, "a string repeated %lld times is too long",
                     (long long)k);
        jbuf b = {0};
        for (int64_t i = 0; i < k; i++)
            jbuf_put(rt, &b, seq.u.s->data, seq.u.s->len);
        return jbuf_take(rt, &b);
    }
    if (seq.u.l->n && (uint64_t)k > rt->lim.max_loop / seq.u.l->n)
        jrt_fail(rt, PLUME_ERR_RANGE, "a list repeated %lld times is too long", (long long)k);
    jv out = jv_list(rt, 0);
    out.u.l->tuple = seq.u.l->tuple;
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < seq.u.l->n; j++)
            jlist_push(rt, out.u.l, seq.u.l->items[j]);
    return out;
}

static jv binop(jrt *rt, jop op, jv a, jv b)
{
    if (op == JOP_CONCAT) {
        jbuf s = {0};
        jv_write_str(rt, &s, a);
        jv_write_str(rt, &s, b);
        return jbuf_take(rt, &s);
    }
    bool nums = jv_is_num(a) && jv_is_num(b);
    bool flt = nums && (a.kind == JV_FLOAT || b.kind == JV_FLOAT);
    int64_t r;
    switch (op) {
    case JOP_ADD:
        if (nums) {
            if (flt)
                return jv_float(jv_fval(a) + jv_fval(b));
            if (__builtin_add_overflow(jv_ival(a), jv_ival(b), &r))
                jrt_fail(rt, PLUME_ERR_RANGE, "integer overflow in +");
            return jv_int(r);
        }
        if (a.kind == JV_STR && b.kind == JV_STR) {
            if (a.markup != b.markup) { /* Markup + str escapes the str */
                if (!a.markup)
                    a = jv_html_escape(rt, a.u.s);
                else
                    b = jv_html_escape(rt, b.u.s);
            }
            jbuf s = {0};
            jbuf_put(rt, &s, a.u.s->data, a.u.s->len);
            jbuf_put(rt, &s, b.u.s->data, b.u.s->len);
            jv joined = jbuf_take(rt, &s);
            joined.markup = a.markup;
            return joined;
        }
        if (a.kind == JV_LIST && b.kind == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
            jv out = jv_list(rt, a.u.l->n + b.u.l->n);
            out.u.l->tuple = a.u.l->tuple;
            jcopy(out.u.l->items, a.u.l->items, a.u.l->n * sizeof(jv));
            jcopy(out.u.l->items + a.u.l->n, b.u.l->items, b.u.l->n * sizeof(jv));
            out.u.l->n = a.u.l->n + b.u.l->n;
            return out;
        }
        bad_operands(rt, "+", a, b);
    case JOP_SUB:
        if (!nums)
            bad_operands(rt, "-", a, b);
        if (flt)
            return jv_float(jv_fval(a) - jv_fval(b));
        if (__builtin_sub_overflow(jv_ival(a), jv_ival(b), &r))
            jrt_fail(rt, PLUME_ERR_RANGE, "integer overflow in -");
        return jv_int(r);
    case JOP_MUL:
        if (nums) {
            if (flt)
                return jv_float(jv_fval(a) * jv_fval(b));
            if (__builtin_mul_overflow(jv_ival(a), jv_ival(b), &r))
                jrt_fail(rt, PLUME_ERR_RANGE, "integer overflow in *");
            return jv_int(r);
        }
        if ((a.kind == JV_STR || a.kind == JV_LIST) && (b.kind == JV_INT || b.kind == JV_BOOL))
            return repeat(rt, a, jv_ival(b));
        if ((b.kind == JV_STR || b.kind == JV_LIST) && (a.kind == JV_INT || a.kind == JV_BOOL))
            return repeat(rt, b, jv_ival(a));
        bad_operands(rt, "*", a, b);
    case JOP_DIV:
        if (!nums)
            bad_operands(rt, "/", a, b);
        if (jv_fval(b) == 0)
            jrt_fail(rt, PLUME_ERR_INVALID, "division by zero");
        return jv_float(jv_fval(a) / jv_fval(b));
    case JOP_FLOORDIV:
    case JOP_MOD:
        if (op == JOP_MOD && a.kind == JV_STR)
            return str_format_percent(rt, a.u.s, b);
        if (!nums)
            bad_operands(rt, op == JOP_MOD ? "%" : "//", a, b);
        if (jv_fval(b) == 0)
            jrt_fail(rt, PLUME_ERR_INVALID, "integer division or modulo by zero");
        if (flt) {
            double x = jv_fval(a), y = jv_fval(b);
            double m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0)))
                m += y;
            if (op == JOP_MOD)
                return jv_float(m);
            return jv_float(floor((x - m) / y + 0.5));
        } else {
            int64_t x = jv_ival(a), y = jv_ival(b);
            if (x == INT64_MIN && y == -1)
                jrt_fail(rt, PLUME_ERR_RANGE, "integer overflow in //");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            return jv_int(op == JOP_MOD ? m : q);
        }
    case JOP_POW:
        if (!nums)
            bad_operands(rt, "**", a, b);
        if (!flt && jv_ival(b) >= 0) {
            int64_t base = jv_ival(a), e = jv_ival(b), res = 1;
            while (e-- > 0)
                if (__builtin_mul_overflow(res, base, &res))
                    jrt_fail(rt, PLUME_ERR_RANGE, "integer overflow in **");
                else if (res == 0 || res == 1)
                    break;
            return jv_int(res);
        }
        return jv_float(pow(jv_fval(a), jv_fval(b)));
    default: break;
    }
    jrt_fail(rt, PLUME_ERR_INTERNAL, "unknown operator");
}

static bool contains(jrt *rt, jv item, jv seq)
{
    jrt_work(rt, seq.kind == JV_STR ? seq.u.s->len * (item.kind == JV_STR ? item.u.s->len / 8 + 1 : 1)
                 : seq.kind == JV_LIST ? seq.u.l->n * 8
                 : seq.kind == JV_DICT ? seq.u.d->n * 8 : 0);
    switch (seq.kind) {
    case JV_STR:
        if (item.kind != JV_STR)
            jrt_fail(rt, PLUME_ERR_INVALID, "'in <string>' requires string as left operand, not %s",
                     jv_type_name(item));
        if (!item.u.s->len)
            return true;
        for (size_t i = 0; i + item.u.s->len <= seq.u.s->len; i++)
            if (!memcmp(seq.u.s->data + i, item.u.s->data, item.u.s->len))
                return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < seq.u.l->n; i++)
            if (jv_equal(item, seq.u.l->items[i]))
                return true;
        return false;
    case JV_DICT: {
        jv v;
        if (seq.u.d->ns)
            break;
        return jdict_get(seq.u.d, item, &v);
    }
    case JV_UNDEF: return false;
    default: break;
    }
    jrt_fail(rt, PLUME_ERR_INVALID, "argument of type '%s' is not iterable", jv_type_name(seq));
}

static bool compare(jrt *rt, jop op, jv a, jv b)
{
    switch (op) {
    case JOP_EQ: return jv_equal(a, b);
    case JOP_NE: return !jv_equal(a, b);
    case JOP_IN: return contains(rt, a, b);
    case JOP_NOTIN: return !contains(rt, a, b);
    default: break;
    }
    if (a.kind == JV_UNDEF)
        jeval_undefined_fail(rt, a);
    if (b.kind == JV_UNDEF)
        jeval_undefined_fail(rt, b);
    int c = jv_compare(rt, a, b);
    switch (op) {
    case JOP_LT: return c < 0;
    case JOP_LE: return c <= 0;
    case JOP_GT: return c > 0;
    default: return c >= 0;
    }
}

/* ---- calls ---- */

static void eval_args(jrt *rt, const jnode *n, jframe *f, jargs *a)
{
    jv *pos = n->nargs ? jrt_alloc(rt, n->nargs * sizeof(jv)) : NULL;
    jv *kw = n->nkw ? jrt_alloc(rt, n->nkw * sizeof(jv)) : NULL;
    for (size_t i = 0; i < n->nargs; i++)
        pos[i] = eval(rt, n->args[i], f);
    for (size_t i = 0; i < n->nkw; i++)
        kw[i] = eval(rt, n->kwargs[i], f);
    a->pos = pos;
    a->n = n->nargs;
    a->kwn = n->kwnames;
    a->kwv = kw;
    a->nkw = n->nkw;
}

static jv call_macro(jrt *rt, jfunc *fn, const jargs *a)
{
    const jnode *m = fn->macro;
    if (++rt->depth > rt->lim.max_depth)
        jrt_fail(rt, PLUME_ERR_RANGE,
                 "macros nested more than %u calls deep; the template recurses without end",
                 rt->lim.max_depth);
    jframe *f = jrt_alloc(rt, sizeof *f);
    f->parent = fn->closure;
    size_t np = m->nkw;
    jv varargs = jv_list(rt, 0);
    varargs.u.l->tuple = true;
    jv kwargs = jv_dict(rt, 0);
    bool *bound = np ? jrt_alloc(rt, np * sizeof(bool)) : NULL;
    for (size_t i = 0; i < a->n; i++) {
        if (i < np) {
            jdict_set(rt, &f->vars, jv_strv(m->kwnames[i]), a->pos[i]);
            bound[i] = true;
        } else
            jlist_push(rt, varargs.u.l, a->pos[i]);
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < np && strcmp(m->kwnames[i]->data, a->kwn[k]->data))
            i++;
        if (i < np) {
            jdict_set(rt, &f->vars, jv_strv(m->kwnames[i]), a->kwv[k]);
            bound[i] = true;
        } else
            jdict_set(rt, kwargs.u.d, jv_strv(a->kwn[k]), a->kwv[k]);
    }
    for (size_t i = 0; i < np; i++)
        if (!bound[i]) {
            jv d = m->kwargs[i] ? eval(rt, m->kwargs[i], f)
                                : undef_named(rt, "parameter '%s' was not provided%s",
                                              m->kwnames[i]->data, "");
            jdict_set(rt, &f->vars, jv_strv(m->kwnames[i]), d);
        }
    jdict_set(rt, &f->vars, jv_cstr(rt, "varargs"), varargs);
    jdict_set(rt, &f->vars, jv_cstr(rt, "kwargs"), kwargs);
    if (fn->caller) {
        jv c = {.kind = JV_FUNC};
        c.u.fn = (jfunc *)fn->caller;
        jdict_set(rt, &f->vars, jv_cstr(rt, "caller"), c);
    }
    jeval *ev = EV(rt);
    jbuf out = {0}, *saved = ev->out;
    int saved_ctrl = ev->ctrl;
    const char *saved_construct = rt->construct;
    ev->out = &out;
    ev->ctrl = CTRL_NONE;
    exec_body(rt, m->body, f);
    ev->out = saved;
    ev->ctrl = saved_ctrl;
    rt->construct = saved_construct;
    rt->depth--;
    return jbuf_take(rt, &out);
}

jv jeval_call(jrt *rt, jv fn, const jargs *a)
{
    if (fn.kind == JV_UNDEF)
        jeval_undefined_fail(rt, fn);
    if (fn.kind != JV_FUNC)
        jrt_fail(rt, PLUME_ERR_INVALID, "'%s' object is not callable", jv_type_name(fn));
    if (fn.u.fn->builtin)
        return fn.u.fn->builtin(rt, fn.u.fn->self, a->pos, a->n, a->kwn, a->kwv, a->nkw);
    return call_macro(rt, fn.u.fn, a);
}

/* n's input is its expression a, or in a filter block or block set (a chain
 * of filters whose innermost has no a) the captured body, input. */
static jv apply_filter(jrt *rt, const jnode *n, jframe *f, jv input)
{
    jv in = !n->a                   ? input
            : n->a->kind == JN_FILTER ? apply_filter(rt, n->a, f, input)
                                      : eval(rt, n->a, f);
    if (!n->filter || !n->filter->fn) {
        at(rt, n);
        jrt_fail(rt, PLUME_ERR_UNSUPPORTED, "%s filter named '%s'",
                 n->filter ? "plume does not support the jinja2" : "no", n->name->data);
    }
    jargs a;
    eval_args(rt, n, f, &a);
    at(rt, n);
    const char *saved = rt->construct;
    char what[96];
    snprintf(what, sizeof what, "filter '%s'", n->name->data);
    rt->construct = what;
    /* filters scan their input: charged by its size */
    jrt_work(rt, in.kind == JV_STR ? in.u.s->len : in.kind == JV_LIST ? in.u.l->n * 8
                 : in.kind == JV_DICT ? in.u.d->n * 8 : 0);
    jv r = n->filter->fn(rt, in, &a);
    rt->construct = saved;
    return r;
}

/* ---- expressions ---- */

static jv eval_node(jrt *rt, const jnode *n, jframe *f);

static jv eval(jrt *rt, const jnode *n, jframe *f)
{
    deeper(rt);
    jv v = eval_node(rt, n, f);
    rt->cdepth--;
    return v;
}

static jv eval_node(jrt *rt, const jnode *n, jframe *f)
{
    at(rt, n);
    switch (n->kind) {
    case JN_CONST: return n->val;
    case JN_NAME: {
        jv v = lookup(f, n->name);
        if (v.kind == JV_UNDEF)
            return undef_named(rt, "'%s' is undefined%s", n->name->data, "");
        return v;
    }
    case JN_ATTR: {
        jv obj = eval(rt, n->a, f);
        at(rt, n);
        return jeval_getattr(rt, obj, n->name);
    }
    case JN_ITEM: {
        jv obj = eval(rt, n->a, f);
        jv key = eval(rt, n->b, f);
        at(rt, n);
        return jeval_getitem(rt, obj, key);
    }
    case JN_SLICE: {
        jv obj = eval(rt, n->a, f);
        jv s0 = n->b ? eval(rt, n->b, f) : jv_none();
        jv s1 = n->c ? eval(rt, n->c, f) : jv_none();
        jv s2 = n->d ? eval(rt, n->d, f) : jv_none();
        at(rt, n);
        return do_slice(rt, obj, s0, s1, s2);
    }
    case JN_CALL: {
        jv fn = eval(rt, n->a, f);
        jargs a;
        eval_args(rt, n, f, &a);
        at(rt, n);
        return jeval_call(rt, fn, &a);
    }
    case JN_FILTER: return apply_filter(rt, n, f, jv_undef(NULL));
    case JN_TEST: {
        jv in = eval(rt, n->a, f);
        jargs a;
        eval_args(rt, n, f, &a);
        at(rt, n);
        if (!n->test)
            jrt_fail(rt, PLUME_ERR_UNSUPPORTED, "no test named '%s'", n->name->data);
        bool r = n->test->fn(rt, in, &a);
        return jv_bool(n->negate ? !r : r);
    }
    case JN_BINOP: {
        jv a = eval(rt, n->a, f);
        jv b = eval(rt, n->b, f);
        at(rt, n);
        return binop(rt, n->op, a, b);
    }
    case JN_NEG:
    case JN_POS: {
        jv a = eval(rt, n->a, f);
        at(rt, n);
        if (a.kind == JV_UNDEF)
            jeval_undefined_fail(rt, a);
        if (!jv_is_num(a))
            jrt_fail(rt, PLUME_ERR_INVALID, "bad operand type for unary %c: '%s'",
                     n->kind == JN_NEG ? '-' : '+', jv_type_name(a));
        if (n->kind == JN_POS)
            return a.kind == JV_BOOL ? jv_int(a.u.b) : a;
        if (a.kind == JV_FLOAT)
            return jv_float(-a.u.f);
        if (jv_ival(a) == INT64_MIN)
            jrt_fail(rt, PLUME_ERR_RANGE, "integer overflow in unary -");
        return jv_int(-jv_ival(a));
    }
    case JN_NOT: return jv_bool(!jv_truthy(eval(rt, n->a, f)));
    case JN_AND: {
        jv a = eval(rt, n->a, f);
        return jv_truthy(a) ? eval(rt, n->b, f) : a;
    }
    case JN_OR: {
        jv a = eval(rt, n->a, f);
        return jv_truthy(a) ? a : eval(rt, n->b, f);
    }
    case JN_COMPARE: {
        jv a = eval(rt, n->a, f);
        for (size_t i = 0; i < n->nargs; i++) {
            jv b = eval(rt, n->args[i], f);
            at(rt, n);
            if (!compare(rt, n->ops[i], a, b))
                return jv_bool(false);
            a = b;
        }
        return jv_bool(true);
    }
    case JN_COND:
        if (jv_truthy(eval(rt, n->b, f)))
            return eval(rt, n->a, f);
        return n->c ? eval(rt, n->c, f)
                    : undef_named(rt, "the inline if-expression evaluated to false and no else section was defined%s%s", "", "");
    case JN_LIST:
    case JN_TUPLE: {
        jv l = jv_list(rt, n->nargs);
        for (size_t i = 0; i < n->nargs; i++)
            l.u.l->items[i] = eval(rt, n->args[i], f);
        l.u.l->n = n->nargs;
        l.u.l->tuple = n->kind == JN_TUPLE;
        return l;
    }
    case JN_DICT: {
        jv d = jv_dict(rt, n->nargs / 2);
        for (size_t i = 0; i + 1 < n->nargs; i += 2) {
            jv k = eval(rt, n->args[i], f);
            jv v = eval(rt, n->args[i + 1], f);
            if (k.kind == JV_LIST && !k.u.l->tuple)
                jrt_fail(rt, PLUME_ERR_INVALID, "unhashable type: 'list'");
            if (k.kind == JV_DICT)
                jrt_fail(rt, PLUME_ERR_INVALID, "unhashable type: 'dict'");
            jdict_set(rt, d.u.d, k, v);
        }
        return d;
    }
    default: break;
    }
    jrt_fail(rt, PLUME_ERR_INTERNAL, "a statement where an expression was expected");
}

/* ---- statements ---- */

static jv loop_cycle(jrt *rt, jv self, const jv *args, size_t n, const jstr *const *kwn,
                     const jv *kwv, size_t nkw)
{
    (void)kwn;
    (void)kwv;
    (void)nkw;
    if (!n)
        jrt_fail(rt, PLUME_ERR_INVALID, "no items for cycling given");
    jv idx;
    jdict_get_c(self.u.d, "index0", &idx);
    return args[idx.u.i % (int64_t)n];
}

static void exec_for(jrt *rt, const jnode *n, jframe *f)
{
    jv seq = eval(rt, n->a, f);
    at(rt, n);
    jlist *items = jv_iterate(rt, seq);
    if (items->n > rt->lim.max_loop)
        jrt_fail(rt, PLUME_ERR_RANGE, "a loop over %zu items; at most %zu are allowed", items->n,
                 rt->lim.max_loop);
    if (++rt->depth > rt->lim.max_depth)
        jrt_fail(rt, PLUME_ERR_RANGE, "loops and macros nested more than %u deep",
                 rt->lim.max_depth);
    if (n->b) { /* for x in seq if cond: filter first, loop.length counts what passes */
        jlist *kept = jv_list(rt, items->n).u.l;
        for (size_t i = 0; i < items->n; i++) {
            jframe *it = jrt_alloc(rt, sizeof *it);
            it->parent = f;
            assign(rt, it, n->target, items->items[i]);
            if (jv_truthy(eval(rt, n->b, it)))
                kept->items[kept->n++] = items->items[i];
        }
        items = kept;
    }
    jeval *ev = EV(rt);
    jv loop = jv_dict(rt, 12);
    jfunc *cyc = jrt_alloc(rt, sizeof *cyc);
    cyc->name = "loop.cycle";
    cyc->builtin = loop_cycle;
    cyc->self = loop;
    jv cycv = {.kind = JV_FUNC};
    cycv.u.fn = cyc;
    int64_t len = (int64_t)items->n;
    jv k_loop = jv_cstr(rt, "loop");
    /* the loop object's keys are made once; each iteration sets the values */
    static const char *const KEYS[] = {"index", "index0", "revindex", "revindex0", "first",
                                       "last", "length", "depth", "depth0", "previtem",
                                       "nextitem", "cycle"};
    for (size_t k = 0; k < 12; k++)
        jdict_set(rt, loop.u.d, jv_cstr(rt, KEYS[k]), jv_none());
    jv no_prev = jv_undef(jstr_cstr(rt, "there is no previous item"));
    jv no_next = jv_undef(jstr_cstr(rt, "there is no next item"));
    for (size_t i = 0; i < items->n; i++) {
        int64_t ix = (int64_t)i;
        jv *v = loop.u.d->vals;
        v[0] = jv_int(ix + 1);
        v[1] = jv_int(ix);
        v[2] = jv_int(len - ix);
        v[3] = jv_int(len - ix - 1);
        v[4] = jv_bool(i == 0);
        v[5] = jv_bool(ix == len - 1);
        v[6] = jv_int(len);
        v[7] = jv_int(1);
        v[8] = jv_int(0);
        v[9] = i ? items->items[i - 1] : no_prev;
        v[10] = ix + 1 < len ? items->items[i + 1] : no_next;
        v[11] = cycv;
        jframe *it = jrt_alloc(rt, sizeof *it);
        it->parent = f;
        jdict_set(rt, &it->vars, k_loop, loop);
        assign(rt, it, n->target, items->items[i]);
        exec_body(rt, n->body, it);
        if (ev->ctrl == CTRL_BREAK) {
            ev->ctrl = CTRL_NONE;
            break;
        }
        ev->ctrl = CTRL_NONE;
    }
    rt->depth--;
    if (!items->n && n->else_body)
        exec_body(rt, n->else_body, f);
}

/* The output of body, run in a frame of its own as jinja2 runs the body of
 * {% set x %}...{% endset %} and {% filter %}: what it sets stays inside. */
static jv capture(jrt *rt, const jnode *body, jframe *f)
{
    jeval *ev = EV(rt);
    jbuf out = {0}, *saved = ev->out;
    jframe *inner = jrt_alloc(rt, sizeof *inner);
    inner->parent = f;
    ev->out = &out;
    exec_body(rt, body, inner);
    ev->out = saved;
    return jbuf_take(rt, &out);
}

static void exec_stmt(jrt *rt, const jnode *n, jframe *f)
{
    jeval *ev = EV(rt);
    at(rt, n);
    switch (n->kind) {
    case JN_TEXT: jbuf_put(rt, ev->out, n->val.u.s->data, n->val.u.s->len); return;
    case JN_OUTPUT: {
        rt->construct = "expression";
        jv v = eval(rt, n->a, f);
        jv_write_str(rt, ev->out, v);
        return;
    }
    case JN_IF:
        rt->construct = "if";
        if (jv_truthy(eval(rt, n->a, f)))
            exec_body(rt, n->body, f);
        else if (n->else_body)
            exec_body(rt, n->else_body, f);
        return;
    case JN_FOR: rt->construct = "for"; exec_for(rt, n, f); return;
    case JN_SET:
        rt->construct = "set";
        assign(rt, f, n->target, eval(rt, n->a, f));
        return;
    case JN_SETBLOCK: {
        jv v = capture(rt, n->body, f);
        rt->construct = "set";
        if (n->a)
            v = apply_filter(rt, n->a, f, v);
        assign(rt, f, n->target, v);
        return;
    }
    case JN_FILTERBLOCK: {
        jv v = capture(rt, n->body, f);
        rt->construct = "filter";
        v = apply_filter(rt, n->a, f, v);
        jv_write_str(rt, ev->out, v);
        return;
    }
    case JN_MACRO: {
        jfunc *fn = jrt_alloc(rt, sizeof *fn);
        fn->name = n->name->data;
        fn->macro = n;
        fn->closure = f;
        jv v = {.kind = JV_FUNC};
        v.u.fn = fn;
        jdict_set(rt, &f->vars, jv_strv(n->name), v);
        return;
    }
    case JN_CALLBLOCK: {
        rt->construct = "call";
        const jnode *call = n->a;
        jv fn = eval(rt, call->a, f);
        jargs a;
        eval_args(rt, call, f, &a);
        at(rt, n);
        if (fn.kind != JV_FUNC || fn.u.fn->builtin)
            jrt_fail(rt, PLUME_ERR_INVALID, "{%% call %%} needs a macro, not a %s",
                     jv_type_name(fn));
        jfunc *caller = jrt_alloc(rt, sizeof *caller);
        caller->name = "caller";
        caller->macro = n; /* its params are n's kwnames, its body n's body */
        caller->closure = f;
        jfunc *bound = jrt_alloc(rt, sizeof *bound);
        *bound = *fn.u.fn;
        bound->caller = caller;
        jv_write_str(rt, ev->out, call_macro(rt, bound, &a));
        return;
    }
    case JN_BREAK: ev->ctrl = CTRL_BREAK; return;
    case JN_CONTINUE: ev->ctrl = CTRL_CONTINUE; return;
    case JN_BODY: exec_body(rt, n, f); return;
    default: jrt_fail(rt, PLUME_ERR_INTERNAL, "an expression where a statement was expected");
    }
}

static void exec_body(jrt *rt, const jnode *body, jframe *f)
{
    jeval *ev = EV(rt);
    deeper(rt);
    for (size_t i = 0; i < body->nargs && ev->ctrl == CTRL_NONE; i++)
        exec_stmt(rt, body->args[i], f);
    rt->cdepth--;
}

void jeval_render(jrt *rt, const jnode *body, jframe *globals, jbuf *out)
{
    jeval ev = {.out = out};
    rt->eval = &ev;
    jframe *root = jrt_alloc(rt, sizeof *root);
    root->parent = globals;
    exec_body(rt, body, root);
    rt->eval = NULL;
}
