/* Values: construction, lists and dicts, and Python's truth, equality,
 * ordering and iteration rules, and conversion from jansson. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "template/value.h"

const jstr *jstr_new(jrt *rt, const char *p, size_t n)
{
    jstr *s = jrt_alloc(rt, sizeof(jstr) + n + 1);
    s->len = n;
    if (n)
        memcpy(s->data, p, n);
    s->data[n] = 0;
    return s;
}

const jstr *jstr_cstr(jrt *rt, const char *s)
{
    return jstr_new(rt, s, strlen(s));
}

jv jv_str(jrt *rt, const char *p, size_t n)
{
    return jv_strv(jstr_new(rt, p, n));
}

jv jv_cstr(jrt *rt, const char *s)
{
    return jv_strv(jstr_cstr(rt, s));
}

jv jv_list(jrt *rt, size_t cap)
{
    jv v = {.kind = JV_LIST};
    v.u.l = jrt_alloc(rt, sizeof(jlist));
    if (cap) {
        v.u.l->items = jrt_alloc(rt, cap * sizeof(jv));
        v.u.l->cap = cap;
    }
    return v;
}

jv jv_list_of(jrt *rt, const jv *items, size_t n, bool tuple)
{
    jv v = jv_list(rt, n);
    jcopy(v.u.l->items, items, n * sizeof(jv));
    v.u.l->n = n;
    v.u.l->tuple = tuple;
    return v;
}

jv jv_dict(jrt *rt, size_t cap)
{
    jv v = {.kind = JV_DICT};
    v.u.d = jrt_alloc(rt, sizeof(jdict));
    if (cap) {
        v.u.d->keys = jrt_alloc(rt, cap * sizeof(jv));
        v.u.d->vals = jrt_alloc(rt, cap * sizeof(jv));
        v.u.d->cap = cap;
    }
    return v;
}

void jlist_push(jrt *rt, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *items = jrt_alloc(rt, cap * sizeof(jv));
        if (l->n)
            memcpy(items, l->items, l->n * sizeof(jv));
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = v;
}

static bool key_eq(jv a, jv b)
{
    if (a.kind == JV_STR && b.kind == JV_STR)
        return a.u.s->len == b.u.s->len && memcmp(a.u.s->data, b.u.s->data, a.u.s->len) == 0;
    return jv_equal(a, b);
}

/* Appends k: v without looking for k (the caller knows it is new). */
static void dict_append(jrt *rt, jdict *d, jv k, jv v)
{
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *keys = jrt_alloc(rt, cap * sizeof(jv));
        jv *vals = jrt_alloc(rt, cap * sizeof(jv));
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof(jv));
            memcpy(vals, d->vals, d->n * sizeof(jv));
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
    }
    d->keys[d->n] = k;
    d->vals[d->n] = v;
    d->n++;
}

void jdict_set(jrt *rt, jdict *d, jv k, jv v)
{
    jrt_work(rt, d->n * 4);
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(d->keys[i], k)) {
            d->vals[i] = v;
            return;
        }
    dict_append(rt, d, k, v);
}

bool jdict_get(const jdict *d, jv k, jv *out)
{
    for (size_t i = 0; i < d->n; i++)
        if (key_eq(d->keys[i], k)) {
            *out = d->vals[i];
            return true;
        }
    return false;
}

bool jdict_get_c(const jdict *d, const char *k, jv *out)
{
    size_t n = strlen(k);
    for (size_t i = 0; i < d->n; i++) {
        jv key = d->keys[i];
        if (key.kind == JV_STR && key.u.s->len == n && memcmp(key.u.s->data, k, n) == 0) {
            *out = d->vals[i];
            return true;
        }
    }
    return false;
}

const char *jv_type_name(jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.u.l->gen ? "generator" : v.u.l->tuple ? "tuple" : "list";
    case JV_DICT: return v.u.d->ns ? "Namespace" : "dict";
    case JV_FUNC: return v.u.fn->builtin ? "builtin_function_or_method" : "Macro";
    }
    return "?";
}

bool jv_truthy(jv v)
{
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->len != 0;
    case JV_LIST: return v.u.l->gen || v.u.l->n != 0;
    case JV_DICT: return v.u.d->ns || v.u.d->n != 0;
    case JV_FUNC: return true;
    }
    return false;
}

static bool equal_at(jv a, jv b, int depth);

bool jv_equal(jv a, jv b)
{
    return equal_at(a, b, 0);
}

/* Beyond JV_MAX_NESTING levels values compare unequal (Python would raise
 * RecursionError; unequal is the safe answer). */
static bool equal_at(jv a, jv b, int depth)
{
    if (depth > JV_MAX_NESTING)
        return false;
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT)
            return jv_fval(a) == jv_fval(b);
        return jv_ival(a) == jv_ival(b);
    }
    if (a.kind != b.kind)
        return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return key_eq(a, b);
    case JV_LIST:
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple)
            return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_at(a.u.l->items[i], b.u.l->items[i], depth + 1))
                return false;
        return true;
    case JV_DICT:
        if (a.u.d->ns || b.u.d->ns)
            return a.u.d == b.u.d;
        if (a.u.d->n != b.u.d->n)
            return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jv o;
            if (!jdict_get(b.u.d, a.u.d->keys[i], &o) || !equal_at(a.u.d->vals[i], o, depth + 1))
                return false;
        }
        return true;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return false;
    }
}

static int compare_at(jrt *rt, jv a, jv b, int depth);

int jv_compare(jrt *rt, jv a, jv b)
{
    return compare_at(rt, a, b, 0);
}

static int compare_at(jrt *rt, jv a, jv b, int depth)
{
    if (depth > JV_MAX_NESTING)
        jrt_fail(rt, PLUME_ERR_RANGE, "values nested more than %d deep cannot be compared",
                 JV_MAX_NESTING);
    if (jv_is_num(a) && jv_is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            double x = jv_fval(a), y = jv_fval(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = jv_ival(a), y = jv_ival(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        jrt_work(rt, n);
        int c = memcmp(a.u.s->data, b.u.s->data, n);
        if (c)
            return c < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len ? 1 : 0;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST) {
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_equal(a.u.l->items[i], b.u.l->items[i]))
                continue;
            return compare_at(rt, a.u.l->items[i], b.u.l->items[i], depth + 1);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n ? 1 : 0;
    }
    jrt_fail(rt, PLUME_ERR_INVALID, "'<' not supported between instances of '%s' and '%s'",
             jv_type_name(a), jv_type_name(b));
}

size_t jutf8_count(const char *p, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)p[i] & 0xC0) != 0x80;
    return c;
}

size_t jutf8_offset(const char *p, size_t n, size_t cp)
{
    size_t i = 0;
    while (i < n && cp > 0) {
        i++;
        while (i < n && ((unsigned char)p[i] & 0xC0) == 0x80)
            i++;
        cp--;
    }
    return i;
}

jlist *jv_iterate(jrt *rt, jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return jv_list(rt, 0).u.l;
    case JV_LIST: return v.u.l;
    case JV_DICT: {
        if (v.u.d->ns)
            break;
        jlist *l = jv_list(rt, v.u.d->n).u.l;
        for (size_t i = 0; i < v.u.d->n; i++)
            l->items[i] = v.u.d->keys[i];
        l->n = v.u.d->n;
        return l;
    }
    case JV_STR: {
        const char *p = v.u.s->data;
        size_t n = v.u.s->len;
        jlist *l = jv_list(rt, jutf8_count(p, n)).u.l;
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            while (j < n && ((unsigned char)p[j] & 0xC0) == 0x80)
                j++;
            l->items[l->n++] = jv_str(rt, p + i, j - i);
            i = j;
        }
        return l;
    }
    default: break;
    }
    jrt_fail(rt, PLUME_ERR_INVALID, "'%s' object is not iterable", jv_type_name(v));
}

jv jv_from_json(jrt *rt, const json_t *j)
{
    if (!j)
        return jv_none();
    switch (json_typeof(j)) {
    case JSON_NULL: return jv_none();
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    case JSON_INTEGER: return jv_int(json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_STRING: return jv_str(rt, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jv l = jv_list(rt, n);
        for (size_t i = 0; i < n; i++)
            l.u.l->items[i] = jv_from_json(rt, json_array_get(j, i));
        l.u.l->n = n;
        return l;
    }
    case JSON_OBJECT: {
        jv d = jv_dict(rt, json_object_size(j));
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)j, k, val)
        {
            /* a JSON object's keys are unique (jansson keeps the last of duplicates) */
            dict_append(rt, d.u.d, jv_cstr(rt, k), jv_from_json(rt, val));
        }
        return d;
    }
    }
    return jv_none();
}
