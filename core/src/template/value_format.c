/* Values as text, the way Python writes them: str(), repr(), float repr and
 * json.dumps (transformers' tojson). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/text.h"
#include "template/value.h"

void jv_write_float(jbuf *b, jrt *rt, double f)
{
    if (isnan(f)) {
        jbuf_puts(rt, b, "nan");
        return;
    }
    if (isinf(f)) {
        jbuf_puts(rt, b, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f)
            break;
    }
    /* tmp is [-]d[.ddd]e[+-]XX: collect the digits and the exponent */
    char digits[32];
    size_t nd = 0;
    const char *p = tmp;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (exp >= -5 + 1 && exp < 16) {
        if (exp < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -exp - 1; i++)
                out[o++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++)
                    out[o++] = digits[i];
            else
                out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++)
                out[o++] = digits[i];
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    jbuf_puts(rt, b, out);
}

/* Whether Python's str.isprintable() is false for cp (the common cases). */
static bool unprintable(unsigned cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
           (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF ||
           (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xE000 && cp <= 0xF8FF);
}

static void write_str_repr(jrt *rt, jbuf *b, const jstr *s)
{
    bool sq = memchr(s->data, '\'', s->len) != NULL, dq = memchr(s->data, '"', s->len) != NULL;
    char q = sq && !dq ? '"' : '\'';
    jbuf_putc(rt, b, q);
    const unsigned char *p = (const unsigned char *)s->data;
    for (size_t i = 0; i < s->len;) {
        size_t l;
        unsigned cp = jtext_cp_at(s->data + i, s->len - i, &l);
        if (cp == (unsigned char)q || cp == '\\') {
            jbuf_putc(rt, b, '\\');
            jbuf_putc(rt, b, (char)cp);
        } else if (cp == '\n')
            jbuf_puts(rt, b, "\\n");
        else if (cp == '\r')
            jbuf_puts(rt, b, "\\r");
        else if (cp == '\t')
            jbuf_puts(rt, b, "\\t");
        else if (unprintable(cp) && cp != ' ') {
            if (cp < 0x100)
                jbuf_printf(rt, b, "\\x%02x", cp);
            else
                jbuf_printf(rt, b, "\\u%04x", cp);
        } else
            jbuf_put(rt, b, (const char *)p + i, l);
        i += l;
    }
    jbuf_putc(rt, b, q);
}

static void write_repr(jrt *rt, jbuf *b, jv v, int depth);

void jv_write_repr(jrt *rt, jbuf *b, jv v)
{
    write_repr(rt, b, v, 0);
}

static void write_repr(jrt *rt, jbuf *b, jv v, int depth)
{
    jrt_step(rt);
    if (depth > JV_MAX_NESTING)
        jrt_fail(rt, PLUME_ERR_RANGE, "a value nested more than %d deep cannot be printed",
                 JV_MAX_NESTING);
    switch (v.kind) {
    case JV_STR: write_str_repr(rt, b, v.u.s); return;
    case JV_LIST:
        if (v.u.l->gen) {
            jbuf_puts(rt, b, "<generator object>");
            return;
        }
        jbuf_putc(rt, b, v.u.l->tuple ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jbuf_puts(rt, b, ", ");
            write_repr(rt, b, v.u.l->items[i], depth + 1);
        }
        if (v.u.l->tuple && v.u.l->n == 1)
            jbuf_putc(rt, b, ',');
        jbuf_putc(rt, b, v.u.l->tuple ? ')' : ']');
        return;
    case JV_DICT:
        if (v.u.d->ns)
            jbuf_puts(rt, b, "<Namespace ");
        jbuf_putc(rt, b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i)
                jbuf_puts(rt, b, ", ");
            write_repr(rt, b, v.u.d->keys[i], depth + 1);
            jbuf_puts(rt, b, ": ");
            write_repr(rt, b, v.u.d->vals[i], depth + 1);
        }
        jbuf_putc(rt, b, '}');
        if (v.u.d->ns)
            jbuf_putc(rt, b, '>');
        return;
    default: jv_write_str(rt, b, v);
    }
}

void jv_write_str(jrt *rt, jbuf *b, jv v)
{
    switch (v.kind) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_puts(rt, b, "None"); return;
    case JV_BOOL: jbuf_puts(rt, b, v.u.b ? "True" : "False"); return;
    case JV_INT: jbuf_printf(rt, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT: jv_write_float(b, rt, v.u.f); return;
    case JV_STR: jbuf_put(rt, b, v.u.s->data, v.u.s->len); return;
    case JV_FUNC: jbuf_printf(rt, b, "<function %s>", v.u.fn->name ? v.u.fn->name : "?"); return;
    default: jv_write_repr(rt, b, v);
    }
}

jv jv_to_str(jrt *rt, jv v)
{
    if (v.kind == JV_STR)
        return v;
    jbuf b = {0};
    jv_write_str(rt, &b, v);
    return jbuf_take(rt, &b);
}

static void json_string(jrt *rt, jbuf *b, const jstr *s, bool ascii)
{
    jbuf_putc(rt, b, '"');
    const unsigned char *p = (const unsigned char *)s->data;
    size_t run = 0; /* bytes copied as they are, flushed before an escape */
    size_t i = 0;
    while (i < s->len) {
        unsigned c = p[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default: break;
        }
        /* Python's json escapes DEL only with ensure_ascii */
        if (!esc && c >= 0x20 && (c < 0x7F || !ascii)) {
            run++;
            i++;
            continue;
        }
        jbuf_put(rt, b, s->data + i - run, run);
        run = 0;
        if (esc) {
            jbuf_puts(rt, b, esc);
            i++;
        } else if (c < 0x80) {
            jbuf_printf(rt, b, "\\u%04x", c);
            i++;
        } else {
            size_t l;
            unsigned cp = jtext_cp_at(s->data + i, s->len - i, &l);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                jbuf_printf(rt, b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else
                jbuf_printf(rt, b, "\\u%04x", cp);
            i += l;
        }
    }
    jbuf_put(rt, b, s->data + i - run, run);
    jbuf_putc(rt, b, '"');
}

typedef struct json_opts {
    bool ascii;
    int indent;
    const jstr *indent_str;
    const jstr *item_sep, *key_sep;
    bool sort_keys;
} json_opts;

static void json_newline(jrt *rt, jbuf *b, const json_opts *o, int level)
{
    jbuf_putc(rt, b, '\n');
    for (int i = 0; i < level; i++) {
        if (o->indent_str)
            jbuf_put(rt, b, o->indent_str->data, o->indent_str->len);
        else
            for (int k = 0; k < o->indent; k++)
                jbuf_putc(rt, b, ' ');
    }
}

static void json_value(jrt *rt, jbuf *b, jv v, const json_opts *o, int level);

static void json_key(jrt *rt, jbuf *b, jv k, const json_opts *o)
{
    switch (k.kind) {
    case JV_STR: json_string(rt, b, k.u.s, o->ascii); return;
    case JV_INT:
    case JV_FLOAT:
    case JV_BOOL:
    case JV_NONE:
        jbuf_putc(rt, b, '"');
        json_value(rt, b, k, o, 0);
        jbuf_putc(rt, b, '"');
        return;
    default:
        jrt_fail(rt, PLUME_ERR_INVALID, "keys must be str, int, float, bool or None, not %s",
                 jv_type_name(k));
    }
}

static int cmp_keys(jrt *rt, const jdict *d, size_t a, size_t b)
{
    return jv_compare(rt, d->keys[a], d->keys[b]);
}

static void json_value(jrt *rt, jbuf *b, jv v, const json_opts *o, int level)
{
    jrt_step(rt);
    if (level > JV_MAX_NESTING)
        jrt_fail(rt, PLUME_ERR_RANGE, "a value nested more than %d deep cannot be written as JSON",
                 JV_MAX_NESTING);
    bool pretty = o->indent >= 0 || o->indent_str;
    switch (v.kind) {
    case JV_NONE: jbuf_puts(rt, b, "null"); return;
    case JV_BOOL: jbuf_puts(rt, b, v.u.b ? "true" : "false"); return;
    case JV_INT: jbuf_printf(rt, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT:
        if (isnan(v.u.f))
            jbuf_puts(rt, b, "NaN");
        else if (isinf(v.u.f))
            jbuf_puts(rt, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else
            jv_write_float(b, rt, v.u.f);
        return;
    case JV_STR: json_string(rt, b, v.u.s, o->ascii); return;
    case JV_LIST:
        if (v.u.l->gen)
            break;
        if (!v.u.l->n) {
            jbuf_puts(rt, b, "[]");
            return;
        }
        jbuf_putc(rt, b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jbuf_put(rt, b, o->item_sep->data, o->item_sep->len);
            if (pretty)
                json_newline(rt, b, o, level + 1);
            json_value(rt, b, v.u.l->items[i], o, level + 1);
        }
        if (pretty)
            json_newline(rt, b, o, level);
        jbuf_putc(rt, b, ']');
        return;
    case JV_DICT: {
        if (v.u.d->ns)
            break;
        const jdict *d = v.u.d;
        if (!d->n) {
            jbuf_puts(rt, b, "{}");
            return;
        }
        size_t *order = jrt_alloc(rt, d->n * sizeof(size_t));
        for (size_t i = 0; i < d->n; i++)
            order[i] = i;
        if (o->sort_keys) /* insertion sort: stable, and dicts are small */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && cmp_keys(rt, d, order[j - 1], order[j]) > 0; j--) {
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        jbuf_putc(rt, b, '{');
        for (size_t i = 0; i < d->n; i++) {
            if (i)
                jbuf_put(rt, b, o->item_sep->data, o->item_sep->len);
            if (pretty)
                json_newline(rt, b, o, level + 1);
            json_key(rt, b, d->keys[order[i]], o);
            jbuf_put(rt, b, o->key_sep->data, o->key_sep->len);
            json_value(rt, b, d->vals[order[i]], o, level + 1);
        }
        if (pretty)
            json_newline(rt, b, o, level);
        jbuf_putc(rt, b, '}');
        return;
    }
    default: break;
    }
    jrt_fail(rt, PLUME_ERR_INVALID, "Object of type %s is not JSON serializable", jv_type_name(v));
}

void jv_write_json(jrt *rt, jbuf *b, jv v, bool ensure_ascii, int indent, const jstr *indent_str,
                   const jstr *item_sep, const jstr *key_sep, bool sort_keys)
{
    bool pretty = indent >= 0 || indent_str;
    json_opts o = {.ascii = ensure_ascii,
                   .indent = indent,
                   .indent_str = indent_str,
                   .item_sep = item_sep ? item_sep : jstr_cstr(rt, pretty ? "," : ", "),
                   .key_sep = key_sep ? key_sep : jstr_cstr(rt, ": "),
                   .sort_keys = sort_keys};
    json_value(rt, b, v, &o, 0);
}

jv jv_html_escape(jrt *rt, const jstr *s)
{
    jbuf b = {0};
    for (size_t i = 0; i < s->len; i++) {
        char c = s->data[i];
        switch (c) {
        case '&': jbuf_puts(rt, &b, "&amp;"); break;
        case '<': jbuf_puts(rt, &b, "&lt;"); break;
        case '>': jbuf_puts(rt, &b, "&gt;"); break;
        case '"': jbuf_puts(rt, &b, "&#34;"); break;
        case '\'': jbuf_puts(rt, &b, "&#39;"); break;
        default: jbuf_putc(rt, &b, c);
        }
    }
    jv v = jbuf_take(rt, &b);
    v.markup = true;
    return v;
}
