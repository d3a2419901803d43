/* sample-structured: JSON Schema -> grammar (json_schema.h). */
#include "json_schema.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "regex.h"

typedef struct ref_memo {
    json_t *node;
    int32_t rule;
} ref_memo;

typedef struct js {
    ss_grammar *g;
    json_t *doc;
    int32_t ws, sep, str_char, string, integer, number, boolean, null, value;
    ref_memo *refs;
    size_t n_refs, cap_refs;
} js;

static int32_t js_err(js *c, const char *path, const char *fmt, const char *arg)
{
    if (!c->g->failed) {
        char msg[512];
        snprintf(msg, sizeof msg, fmt, arg);
        plume_err(c->g->err, PLUME_ERR_UNSUPPORTED, "JSON Schema at %s: %s", path[0] ? path : "#",
                  msg);
    }
    c->g->failed = true;
    return -1;
}

static int32_t lit(js *c, const char *s) { return g_lit(c->g, s, strlen(s)); }

static int32_t seq2(js *c, int32_t a, int32_t b) { int32_t r[2] = {a, b}; return g_seq(c->g, r, 2); }
static int32_t seq3(js *c, int32_t a, int32_t b, int32_t d)
{
    int32_t r[3] = {a, b, d};
    return g_seq(c->g, r, 3);
}
static int32_t alt2(js *c, int32_t a, int32_t b) { int32_t r[2] = {a, b}; return g_alts(c->g, r, 2); }

static int32_t range_set(js *c, int lo, int hi)
{
    ss_set s = {{0}};
    for (int b = lo; b <= hi; b++)
        ss_set_add(&s, (uint8_t)b);
    return g_setrule(c->g, &s);
}

/* ---- the shared pieces of JSON ---- */

static int32_t ws(js *c)
{
    if (c->ws < 0) { /* "" | " " | "\n" [ \t]{0,20} : bounded, so no runaway whitespace */
        ss_set ind = {{0}};
        ss_set_add(&ind, ' ');
        ss_set_add(&ind, '\t');
        int32_t nl = seq2(c, lit(c, "\n"), g_repeat(c->g, g_setrule(c->g, &ind), 0, 20));
        int32_t r = g_new_rule(c->g);
        ss_item sp = it_ref(lit(c, " ")), n = it_ref(nl);
        if (r < 0 || g_add_alt(c->g, r, NULL, 0) || g_add_alt(c->g, r, &sp, 1) ||
            g_add_alt(c->g, r, &n, 1))
            return -1;
        c->ws = r;
    }
    return c->ws;
}

static int32_t sep(js *c)
{
    if (c->sep < 0)
        c->sep = seq3(c, ws(c), lit(c, ","), ws(c));
    return c->sep;
}

static int32_t str_char(js *c)
{
    if (c->str_char < 0) {
        ss_set ok = {{~0ull, ~0ull, 0, 0}};
        for (int b = 0; b < 0x20; b++)
            ok.w[0] &= ~(1ull << b);
        ok.w[0] &= ~(1ull << '"');
        ok.w[1] &= ~(1ull << ('\\' - 64));
        int32_t plain = g_utf8_char(c->g, &ok);
        ss_set simple = {{0}};
        for (const char *p = "\"\\/bfnrt"; *p; p++)
            ss_set_add(&simple, (uint8_t)*p);
        /* \uXXXX without surrogate halves (a pair would count as two characters) */
        ss_set hex = {{0}}, first = {{0}}, d07 = {{0}};
        for (const char *p = "0123456789abcdefABCDEF"; *p; p++)
            ss_set_add(&hex, (uint8_t)*p);
        for (const char *p = "0123456789abcefABCEF"; *p; p++)
            ss_set_add(&first, (uint8_t)*p);
        for (const char *p = "01234567"; *p; p++)
            ss_set_add(&d07, (uint8_t)*p);
        int32_t h = g_setrule(c->g, &hex);
        int32_t u1 = g_seq(c->g, (int32_t[]){g_setrule(c->g, &first), h, h, h}, 4);
        int32_t dd = range_set(c, 'd', 'd'), dD = range_set(c, 'D', 'D');
        int32_t u2 = g_seq(c->g, (int32_t[]){alt2(c, dd, dD), g_setrule(c->g, &d07), h, h}, 4);
        int32_t u = seq2(c, lit(c, "u"), alt2(c, u1, u2));
        int32_t esc = seq2(c, lit(c, "\\"), alt2(c, g_setrule(c->g, &simple), u));
        c->str_char = alt2(c, plain, esc);
    }
    return c->str_char;
}

static int32_t string_any(js *c)
{
    if (c->string < 0)
        c->string = seq3(c, lit(c, "\""), g_repeat(c->g, str_char(c), 0, -1), lit(c, "\""));
    return c->string;
}

static int32_t digits(js *c, uint32_t lo, int64_t hi)
{
    return g_repeat(c->g, range_set(c, '0', '9'), lo, hi);
}

static int32_t integer_any(js *c)
{
    if (c->integer < 0) {
        int32_t nz = seq2(c, range_set(c, '1', '9'), digits(c, 0, 15));
        c->integer = seq2(c, g_opt(c->g, lit(c, "-")), alt2(c, lit(c, "0"), nz));
    }
    return c->integer;
}

static int32_t fraction(js *c) { return seq2(c, lit(c, "."), digits(c, 1, 16)); }

static int32_t number_any(js *c)
{
    if (c->number < 0) {
        ss_set e = {{0}}, pm = {{0}};
        ss_set_add(&e, 'e');
        ss_set_add(&e, 'E');
        ss_set_add(&pm, '+');
        ss_set_add(&pm, '-');
        int32_t ex = seq3(c, g_setrule(c->g, &e), g_opt(c->g, g_setrule(c->g, &pm)), digits(c, 1, 3));
        c->number = seq3(c, integer_any(c), g_opt(c->g, fraction(c)), g_opt(c->g, ex));
    }
    return c->number;
}

static int32_t value_any(js *c);

static int32_t object_of(js *c, int32_t val)
{
    int32_t kv = g_seq(c->g, (int32_t[]){string_any(c), ws(c), lit(c, ":"), ws(c), val}, 5);
    int32_t more = g_repeat(c->g, seq2(c, sep(c), kv), 0, -1);
    int32_t body = g_opt(c->g, seq3(c, kv, more, ws(c)));
    return g_seq(c->g, (int32_t[]){lit(c, "{"), ws(c), body, lit(c, "}")}, 4);
}

static int32_t array_of(js *c, int32_t val)
{
    int32_t more = g_repeat(c->g, seq2(c, sep(c), val), 0, -1);
    int32_t body = g_opt(c->g, seq3(c, val, more, ws(c)));
    return g_seq(c->g, (int32_t[]){lit(c, "["), ws(c), body, lit(c, "]")}, 4);
}

static int32_t value_any(js *c)
{
    if (c->value < 0) {
        int32_t v = g_new_rule(c->g); /* recursive: defined after its uses */
        if (v < 0)
            return -1;
        c->value = v;
        if (c->boolean < 0)
            c->boolean = alt2(c, lit(c, "true"), lit(c, "false"));
        if (c->null < 0)
            c->null = lit(c, "null");
        int32_t parts[6] = {object_of(c, v), array_of(c, v), string_any(c), number_any(c),
                            c->boolean, c->null};
        for (int i = 0; i < 6; i++) {
            ss_item it = it_ref(parts[i]);
            if (g_add_alt(c->g, v, &it, 1))
                return -1;
        }
    }
    return c->value;
}

int32_t ss_json_any_object(ss_grammar *g)
{
    js c = {g, NULL, -1, -1, -1, -1, -1, -1, -1, -1, -1, NULL, 0, 0};
    return object_of(&c, value_any(&c));
}

/* ---- integer ranges: decimal strings between two bounds ---- */

/* Equal-length digit strings between a and b (leading zeros allowed). */
static int32_t digits_between(js *c, const char *a, const char *b, size_t n)
{
    if (n == 0)
        return g_seq(c->g, NULL, 0);
    if (a[0] == b[0])
        return seq2(c, range_set(c, a[0], a[0]), digits_between(c, a + 1, b + 1, n - 1));
    bool a0 = true, b9 = true;
    for (size_t i = 1; i < n; i++) {
        a0 &= a[i] == '0';
        b9 &= b[i] == '9';
    }
    if (a0 && b9)
        return seq2(c, range_set(c, a[0], b[0]), digits(c, (uint32_t)n - 1, (int64_t)n - 1));
    char nines[24], zeros[24];
    memset(nines, '9', n);
    memset(zeros, '0', n);
    int32_t alts[3];
    size_t k = 0;
    alts[k++] = seq2(c, range_set(c, a[0], a[0]), digits_between(c, a + 1, nines, n - 1));
    if (a[0] + 1 <= b[0] - 1)
        alts[k++] = seq2(c, range_set(c, a[0] + 1, b[0] - 1), digits(c, (uint32_t)n - 1, (int64_t)n - 1));
    alts[k++] = seq2(c, range_set(c, b[0], b[0]), digits_between(c, zeros, b + 1, n - 1));
    return g_alts(c->g, alts, k);
}

/* Decimal numbers (no leading zeros) in [lo, hi], 0 <= lo <= hi. */
static int32_t uint_range(js *c, uint64_t lo, uint64_t hi)
{
    char a[24], b[24];
    int da = snprintf(a, sizeof a, "%llu", (unsigned long long)lo);
    int db = snprintf(b, sizeof b, "%llu", (unsigned long long)hi);
    int32_t alts[24];
    size_t k = 0;
    for (int d = da; d <= db; d++) {
        char x[24], y[24];
        if (d == da)
            memcpy(x, a, (size_t)d);
        else {
            x[0] = '1';
            memset(x + 1, '0', (size_t)d - 1);
        }
        if (d == db)
            memcpy(y, b, (size_t)d);
        else
            memset(y, '9', (size_t)d);
        alts[k++] = digits_between(c, x, y, (size_t)d);
    }
    return g_alts(c->g, alts, k);
}

#define INT_BOUND 9999999999999999LL /* 16 digits, as integer_any */

static int32_t int_range(js *c, int64_t lo, int64_t hi)
{
    if (lo >= 0)
        return uint_range(c, (uint64_t)lo, (uint64_t)hi);
    if (hi < 0)
        return seq2(c, lit(c, "-"), uint_range(c, (uint64_t)-hi, (uint64_t)-lo));
    return alt2(c, seq2(c, lit(c, "-"), uint_range(c, 1, (uint64_t)-lo)),
                uint_range(c, 0, (uint64_t)hi));
}

/* Reads a numeric bound; true when present. */
static int num_kw(js *c, json_t *s, const char *k, const char *path, bool *has, double *v)
{
    json_t *x = json_object_get(s, k);
    *has = false;
    if (!x)
        return 0;
    if (json_is_boolean(x))
        return js_err(c, path, "'%s' as a boolean (draft 4) is not supported; give the bound "
                               "itself as a number",
                      k);
    if (!json_is_number(x))
        return js_err(c, path, "'%s' must be a number", k);
    *v = json_number_value(x);
    if (!(fabs(*v) <= (double)INT_BOUND))
        return js_err(c, path, "'%s' is beyond the 16 digits the grammar writes", k);
    *has = true;
    return 0;
}

/* The numeric bounds of an integer or number schema: has[i] when keyword
 * k_bounds[i] is given, v[i] its value. */
enum { B_MIN, B_MAX, B_XMIN, B_XMAX };
static const char *const k_bounds[4] = {"minimum", "maximum", "exclusiveMinimum",
                                        "exclusiveMaximum"};
typedef struct bounds {
    bool has[4];
    double v[4];
} bounds;

/* Reads s's four bounds with num_kw and refuses multipleOf; 0, or -1 with
 * the error set. */
static int read_bounds(js *c, json_t *s, const char *path, bounds *b)
{
    for (int i = 0; i < 4; i++) {
        b->v[i] = 0;
        if (num_kw(c, s, k_bounds[i], path, &b->has[i], &b->v[i]))
            return -1;
    }
    if (json_object_get(s, "multipleOf"))
        return js_err(c, path, "unsupported keyword '%s'", "multipleOf");
    return 0;
}

/* An integer with at least one bound. */
static int32_t integer_bounded(js *c, const bounds *b, const char *path)
{
    int64_t lo = -INT_BOUND, hi = INT_BOUND;
    if (b->has[B_MIN] && (int64_t)ceil(b->v[B_MIN]) > lo)
        lo = (int64_t)ceil(b->v[B_MIN]);
    if (b->has[B_XMIN] && (int64_t)floor(b->v[B_XMIN]) + 1 > lo)
        lo = (int64_t)floor(b->v[B_XMIN]) + 1;
    if (b->has[B_MAX] && (int64_t)floor(b->v[B_MAX]) < hi)
        hi = (int64_t)floor(b->v[B_MAX]);
    if (b->has[B_XMAX] && (int64_t)ceil(b->v[B_XMAX]) - 1 < hi)
        hi = (int64_t)ceil(b->v[B_XMAX]) - 1;
    if (lo > hi)
        return js_err(c, path, "%s: no integer lies between the bounds", "minimum/maximum");
    return int_range(c, lo, hi);
}

/* A number with at least one bound. */
static int32_t number_bounded(js *c, const bounds *b, const char *path)
{
    /* bounds on a number: integer-valued and >= 0 (the common 0..1, 0..100); a
     * number with no lower bound also takes every negative number */
    const char *bad = NULL;
    for (int i = 0; i < 4; i++)
        if (b->has[i] && (b->v[i] < 0 || b->v[i] != floor(b->v[i])))
            bad = k_bounds[i];
    const bool hmin = b->has[B_MIN], hmax = b->has[B_MAX], hxmin = b->has[B_XMIN],
               hxmax = b->has[B_XMAX];
    if (bad)
        return js_err(c, path, "'%s' on a number must be a whole number >= 0 (use type "
                               "integer, or drop the bound)",
                      bad);
    if (hmin && hxmin)
        return js_err(c, path, "'%s' with minimum together is not supported", "exclusiveMinimum");
    if (hmax && hxmax)
        return js_err(c, path, "'%s' with maximum together is not supported", "exclusiveMaximum");
    /* no lower bound: every negative number is in (the upper bound is >= 0),
     * and the part from 0 up is bounded as if by minimum 0 */
    const bool no_lo = !hmin && !hxmin;
    int64_t lo = hmin ? (int64_t)b->v[B_MIN] : hxmin ? (int64_t)b->v[B_XMIN] : 0;
    int64_t hi = hmax ? (int64_t)b->v[B_MAX] : hxmax ? (int64_t)b->v[B_XMAX] : INT_BOUND;
    ss_set nz = {{0}};
    for (int ch = '1'; ch <= '9'; ch++)
        ss_set_add(&nz, (uint8_t)ch);
    int32_t nonzero_frac = g_seq(c->g, (int32_t[]){lit(c, "."), digits(c, 0, 14), g_setrule(c->g, &nz)}, 3);
    int32_t frac = g_opt(c->g, fraction(c));
    int32_t alts[4];
    size_t k = 0;
    if (no_lo) { /* "-" and a magnitude that is not zero (no "-0", "-0.0") */
        int32_t whole = seq2(c, seq2(c, g_setrule(c->g, &nz), digits(c, 0, 15)), frac);
        alts[k++] = seq2(c, lit(c, "-"), alt2(c, whole, seq2(c, lit(c, "0"), nonzero_frac)));
        if (hxmax && hi == 0) /* exclusiveMaximum 0: the negatives only */
            return alts[0];
    }
    if (lo > hi || (hxmin && hxmax && lo >= hi) || ((hxmin || hxmax) && lo == hi))
        return js_err(c, path, "%s: no number lies between the bounds", "minimum/maximum");
    /* whole part strictly between lo and hi: any fraction */
    if (lo + 1 <= hi - 1)
        alts[k++] = seq2(c, uint_range(c, (uint64_t)lo + 1, (uint64_t)hi - 1), frac);
    /* exactly lo: lo itself when inclusive, lo.<some nonzero digit> always (lo < hi) */
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)lo);
    int32_t lo_r = lit(c, buf);
    if (lo < hi)
        alts[k++] = seq2(c, lo_r, hxmin ? nonzero_frac : frac);
    else
        alts[k++] = lo_r;
    /* exactly hi (inclusive): hi or hi.000 */
    if (!hxmax && hi > lo) {
        snprintf(buf, sizeof buf, "%lld", (long long)hi);
        alts[k++] = seq2(c, lit(c, buf),
                         g_opt(c->g, seq2(c, lit(c, "."), g_repeat(c->g, lit(c, "0"), 1, 3))));
    }
    return g_alts(c->g, alts, k);
}

/* An integer (integer true) or number schema: its bounds, or any when it
 * has none. */
static int32_t compile_numeric(js *c, json_t *s, const char *path, bool integer)
{
    bounds b;
    if (read_bounds(c, s, path, &b))
        return -1;
    if (!b.has[B_MIN] && !b.has[B_MAX] && !b.has[B_XMIN] && !b.has[B_XMAX])
        return integer ? integer_any(c) : number_any(c);
    return integer ? integer_bounded(c, &b, path) : number_bounded(c, &b, path);
}

/* ---- strings ---- */

/* A calendar date of RFC 3339 (full-date): years 0001-9999, each month's
 * days, February 29 in leap years only (divisible by 4 and not by 100, or
 * by 400). */
#define FMT_DATE                                                                               \
    "((000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-((0[13578]|1[02])-(0[1-9]|[12][0-9]|" \
    "3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|([0-9]{2}(0[48]|"        \
    "[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29)"
#define FMT_TIME                                                                               \
    "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
/* a DNS label: letters, digits and hyphens, not starting or ending with a hyphen */
#define FMT_LABEL "[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"

static const struct {
    const char *name, *re;
} formats[] = {
    {"date", FMT_DATE},
    {"time", FMT_TIME},
    {"date-time", FMT_DATE "T" FMT_TIME},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    /* a dot-atom local part (no leading, trailing or doubled dot; at most 63
     * bytes) @ labels . a TLD */
    {"email", "[a-zA-Z0-9_%+-]{1,30}(\\.[a-zA-Z0-9_%+-]{1,10}){0,3}@(" FMT_LABEL "\\.){1,4}[a-zA-Z]{2,12}"},
    {"ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
    {"hostname", FMT_LABEL "(\\." FMT_LABEL "){0,8}"},
    /* scheme :// host (labels) [:port] path [?query] [#fragment] */
    {"uri", "(https?|ftp)://" FMT_LABEL "(\\." FMT_LABEL "){0,8}(:[0-9]{1,5})?"
            "(/[a-zA-Z0-9._~%!$&'()*+,;=:@-]{0,64}){0,16}"
            "(\\?[a-zA-Z0-9._~%!$&'()*+,;=:@/?-]{0,128})?(#[a-zA-Z0-9._~%!$&'()*+,;=:@/?-]{0,64})?"},
};

static int32_t compile_string(js *c, json_t *s, const char *path)
{
    json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
    if (mn && (!json_is_integer(mn) || json_integer_value(mn) < 0 || json_integer_value(mn) > 100000))
        return js_err(c, path, "'%s' must be an integer in [0, 100000]", "minLength");
    if (mx && (!json_is_integer(mx) || json_integer_value(mx) < 0 || json_integer_value(mx) > 100000))
        return js_err(c, path, "'%s' must be an integer in [0, 100000]", "maxLength");
    if ((pat || fmt) && (mn || mx))
        return js_err(c, path, "'%s' together with pattern or format is not supported; put the "
                               "length into the pattern ({n,m})",
                      mn ? "minLength" : "maxLength");
    if (pat && fmt)
        return js_err(c, path, "'%s' together with pattern is not supported", "format");
    const char *re = NULL;
    if (pat) {
        if (!json_is_string(pat))
            return js_err(c, path, "'%s' must be a string", "pattern");
        re = json_string_value(pat);
    } else if (fmt) {
        if (!json_is_string(fmt))
            return js_err(c, path, "'%s' must be a string", "format");
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (!strcmp(formats[i].name, json_string_value(fmt)))
                re = formats[i].re;
        if (!re)
            return js_err(c, path, "unsupported format '%s' (supported: date, time, date-time, "
                                   "uuid, email, ipv4, hostname, uri)",
                          json_string_value(fmt));
    }
    if (re) {
        int32_t body = ss_regex_compile(c->g, re, pat ? json_string_length(pat) : strlen(re), true);
        if (body < 0) {
            plume_err_prefix(c->g->err, "JSON Schema at %s: pattern", path[0] ? path : "#");
            return -1;
        }
        return seq3(c, lit(c, "\""), body, lit(c, "\""));
    }
    if (!mn && !mx)
        return string_any(c);
    int64_t lo = mn ? json_integer_value(mn) : 0, hi = mx ? json_integer_value(mx) : -1;
    if (hi >= 0 && hi < lo)
        return js_err(c, path, "%s: maxLength is below minLength", "maxLength");
    return seq3(c, lit(c, "\""), g_repeat(c->g, str_char(c), (uint32_t)lo, hi), lit(c, "\""));
}

/* ---- schemas ---- */

static int32_t compile(js *c, json_t *s, const char *path, int depth);

static const char *const annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "strict", "name", "$anchor"};
static const char *const keywords[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems",
    "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
    "nullable", "uniqueItems"};

static bool in_list(const char *k, const char *const *l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, l[i]))
            return true;
    return false;
}
#define IN(k, l) in_list(k, l, sizeof l / sizeof *l)

static void child_path(char *out, size_t cap, const char *path, const char *a, const char *b)
{
    snprintf(out, cap, "%s/%s%s%s", path[0] ? path : "#", a, b ? "/" : "", b ? b : "");
}

static int32_t compile_ref(js *c, const char *ref, const char *path, int depth)
{
    if (ref[0] != '#')
        return js_err(c, path, "'$ref' to '%s': only references inside the schema (\"#/...\") "
                               "are supported; inline the referenced schema",
                      ref);
    json_t *node = c->doc;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0') {
                tok[n++] = '~';
                p += 2;
            } else if (p[0] == '~' && p[1] == '1') {
                tok[n++] = '/';
                p += 2;
            } else {
                tok[n++] = *p++;
            }
        }
        tok[n] = 0;
        if (json_is_object(node))
            node = json_object_get(node, tok);
        else if (json_is_array(node))
            node = json_array_get(node, (size_t)strtoul(tok, NULL, 10));
        else
            node = NULL;
        if (!node)
            return js_err(c, path, "'$ref' '%s' points at nothing in the schema", ref);
    }
    if (*p)
        return js_err(c, path, "'$ref' '%s' is not a JSON pointer (\"#/$defs/Name\")", ref);
    for (size_t i = 0; i < c->n_refs; i++)
        if (c->refs[i].node == node)
            return c->refs[i].rule;
    /* a rule made before compiling the target, so recursion refers to it */
    int32_t r = g_new_rule(c->g);
    if (r < 0)
        return -1;
    const size_t cap =
        ss_grow((void **)&c->refs, c->cap_refs, c->n_refs + 1, sizeof *c->refs, 16);
    if (!cap)
        return js_err(c, path, "%s", "out of memory");
    c->cap_refs = cap;
    c->refs[c->n_refs++] = (ref_memo){node, r};
    int32_t body = compile(c, node, ref, depth + 1);
    ss_item it = it_ref(body);
    if (body < 0 || g_add_alt(c->g, r, &it, 1))
        return -1;
    return r;
}

static bool type_matches(const char *type, json_t *v)
{
    if (!strcmp(type, "string"))
        return json_is_string(v);
    if (!strcmp(type, "integer"))
        return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(type, "number"))
        return json_is_number(v);
    if (!strcmp(type, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(type, "null"))
        return json_is_null(v);
    if (!strcmp(type, "object"))
        return json_is_object(v);
    if (!strcmp(type, "array"))
        return json_is_array(v);
    return false;
}

static bool type_allows(json_t *type, json_t *v)
{
    if (!type)
        return true;
    if (json_is_string(type))
        return type_matches(json_string_value(type), v);
    size_t i;
    json_t *t;
    json_array_foreach(type, i, t)
        if (json_is_string(t) && type_matches(json_string_value(t), v))
            return true;
    return false;
}

/* Whether v holds a real anywhere. */
static bool has_real(json_t *v)
{
    if (json_is_real(v))
        return true;
    size_t i;
    const char *k;
    json_t *x;
    if (json_is_array(v)) {
        json_array_foreach(v, i, x) if (has_real(x)) return true;
    } else if (json_is_object(v)) {
        json_object_foreach(v, k, x) if (has_real(x)) return true;
    }
    return false;
}

/* Whether JSON text t has an exponent in a number: an e or E after a
 * digit or point outside strings (true and false have theirs after letters). */
static bool has_exponent(const char *t)
{
    bool in_str = false;
    for (const char *c = t; *c; c++) {
        if (in_str && *c == '\\' && c[1])
            c++;
        else if (*c == '"')
            in_str = !in_str;
        else if (!in_str && (*c == 'e' || *c == 'E') && c > t &&
                 ((c[-1] >= '0' && c[-1] <= '9') || c[-1] == '.'))
            return true;
    }
    return false;
}

/* v as the JSON text a model would write: compact, and its reals in the
 * fewest digits that read back as the same value (jansson's default of 17
 * spells 0.1 as 0.10000000000000001), without an exponent where one can
 * be avoided.  NULL when out of memory. */
static char *dump_value(json_t *v)
{
    const size_t flags = JSON_COMPACT | JSON_ENCODE_ANY;
    if (!has_real(v))
        return json_dumps(v, flags);
    char *with_e = NULL;
    for (int p = 1; p <= 17; p++) {
        char *t = json_dumps(v, flags | JSON_REAL_PRECISION(p));
        if (!t)
            break;
        json_t *back = json_loads(t, JSON_DECODE_ANY, NULL);
        const bool same = back && json_equal(back, v);
        json_decref(back);
        if (same && !has_exponent(t)) {
            free(with_e);
            return t;
        }
        if (same && !with_e)
            with_e = t;
        else
            free(t);
    }
    return with_e ? with_e : json_dumps(v, flags);
}

static int32_t compile_enum(js *c, json_t *values, json_t *type, const char *kw, const char *path)
{
    size_t n = json_array_size(values);
    if (n > SS_MAX_LITERALS)
        return js_err(c, path, "an enum of more than 4096 values is refused (%s)", "enum");
    char **strs = calloc(n ? n : 1, sizeof *strs);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    size_t k = 0;
    int32_t r = -1;
    if (!strs || !lens) {
        js_err(c, path, "%s", "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(values, i);
        if (!type_allows(type, v))
            continue;
        strs[k] = dump_value(v);
        if (!strs[k]) {
            js_err(c, path, "%s", "out of memory");
            goto out;
        }
        lens[k] = strlen(strs[k]);
        k++;
    }
    if (k == 0) {
        js_err(c, path, "%s has no value the schema's type allows", kw);
        goto out;
    }
    r = g_literals(c->g, (const char *const *)strs, lens, k);
    if (r < 0)
        plume_err_prefix(c->g->err, "JSON Schema at %s: %s", path[0] ? path : "#", kw);
out:
    for (size_t i = 0; i < k; i++)
        free(strs[i]);
    free(strs);
    free(lens);
    return r;
}

typedef struct prop {
    const char *name;
    json_t *schema;
    bool required;
    int32_t kv;
} prop;

static int32_t compile_object(js *c, json_t *s, const char *path, int depth)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return js_err(c, path, "'%s' must be an object", "properties");
    if (req && !json_is_array(req))
        return js_err(c, path, "'%s' must be a list of names", "required");
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return js_err(c, path, "'%s' must be a boolean or a schema", "additionalProperties");
    size_t n_props = json_object_size(props), n_req = json_array_size(req);
    if (n_props > SS_SCHEMA_MAX_PROPS || n_req > SS_SCHEMA_MAX_PROPS)
        return js_err(c, path, "more than 256 properties in one object are refused (%s)",
                      n_props > SS_SCHEMA_MAX_PROPS ? "properties" : "required");
    if (n_props == 0 && n_req == 0) { /* a map: any keys, values per additionalProperties */
        if (json_is_false(addl))
            return g_seq(c->g, (int32_t[]){lit(c, "{"), ws(c), lit(c, "}")}, 3);
        char cp[512];
        child_path(cp, sizeof cp, path, "additionalProperties", NULL);
        int32_t val = addl && json_is_object(addl) ? compile(c, addl, cp, depth + 1) : value_any(c);
        return object_of(c, val);
    }
    prop *pl = calloc(n_props + n_req, sizeof *pl);
    if (!pl)
        return js_err(c, path, "%s", "out of memory");
    size_t n = 0;
    const char *key;
    json_t *sub;
    json_object_foreach(props, key, sub) pl[n++] = (prop){key, sub, false, -1};
    for (size_t i = 0; i < n_req; i++) {
        json_t *rn = json_array_get(req, i);
        if (!json_is_string(rn)) {
            free(pl);
            return js_err(c, path, "'%s' entries must be strings", "required");
        }
        size_t j;
        for (j = 0; j < n && strcmp(pl[j].name, json_string_value(rn)); j++)
            ;
        if (j == n) { /* required but not described: additionalProperties' value */
            if (json_is_false(addl)) {
                free(pl);
                return js_err(c, path, "'%s' is required but not in properties, and "
                                       "additionalProperties is false: no object satisfies "
                                       "this schema",
                              json_string_value(rn));
            }
            pl[n++] = (prop){json_string_value(rn), addl && json_is_object(addl) ? addl : json_true(),
                             false, -1};
        }
        pl[j].required = true;
    }
    if (n > SS_SCHEMA_MAX_PROPS) { /* distinct names: properties and required ones not in them */
        free(pl);
        return js_err(c, path, "more than 256 properties in one object are refused (%s)",
                      "properties and required");
    }
    int32_t r = -1;
    for (size_t i = 0; i < n; i++) {
        char cp[512];
        child_path(cp, sizeof cp, path, "properties", pl[i].name);
        json_t *name = json_string(pl[i].name);
        char *qn = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
        json_decref(name);
        if (!qn) {
            js_err(c, path, "%s", "out of memory");
            goto out;
        }
        int32_t val = compile(c, pl[i].schema, cp, depth + 1);
        pl[i].kv = g_seq(c->g, (int32_t[]){lit(c, qn), ws(c), lit(c, ":"), ws(c), val}, 5);
        free(qn);
        if (pl[i].kv < 0)
            goto out;
    }
    /* body[i][k]: the properties from i on, k = whether one came before
     * (then each starts with a separator); a property j >= i may come next
     * when every one in [i, j) is optional */
    int32_t *body = malloc(2 * (n + 1) * sizeof *body);
    if (!body) {
        js_err(c, path, "%s", "out of memory");
        goto out;
    }
    for (size_t i = n + 1; i-- > 0;) {
        for (int k = 0; k < 2; k++) {
            int32_t br = g_new_rule(c->g);
            body[2 * i + (size_t)k] = br;
            if (br < 0) {
                free(body);
                goto out;
            }
            bool all_opt = true;
            for (size_t j = i; j < n; j++) {
                ss_item items[3];
                size_t m = 0;
                if (k)
                    items[m++] = it_ref(sep(c));
                items[m++] = it_ref(pl[j].kv);
                items[m++] = it_ref(body[2 * (j + 1) + 1]);
                if (g_add_alt(c->g, br, items, m)) {
                    free(body);
                    goto out;
                }
                if (pl[j].required) {
                    all_opt = false;
                    break;
                }
            }
            if (all_opt && g_add_alt(c->g, br, NULL, 0)) {
                free(body);
                goto out;
            }
        }
    }
    r = g_seq(c->g, (int32_t[]){lit(c, "{"), ws(c), body[0], ws(c), lit(c, "}")}, 5);
    free(body);
out:
    free(pl);
    return r;
}

static int32_t compile_array(js *c, json_t *s, const char *path, int depth)
{
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
    json_t *uniq = json_object_get(s, "uniqueItems");
    if (json_is_true(uniq))
        return js_err(c, path, "'%s': true is not supported (a grammar cannot compare items)",
                      "uniqueItems");
    if (mn && (!json_is_integer(mn) || json_integer_value(mn) < 0 || json_integer_value(mn) > 1000))
        return js_err(c, path, "'%s' must be an integer in [0, 1000]", "minItems");
    if (mx && (!json_is_integer(mx) || json_integer_value(mx) < 0 || json_integer_value(mx) > 1000))
        return js_err(c, path, "'%s' must be an integer in [0, 1000] (leave it out for no bound)",
                      "maxItems");
    if (json_is_array(items)) { /* draft 4 tuples */
        if (prefix)
            return js_err(c, path, "'%s' as a list next to prefixItems", "items");
        prefix = items;
        items = json_object_get(s, "additionalItems");
    } else if (json_object_get(s, "additionalItems")) {
        return js_err(c, path, "unsupported keyword '%s' (without a list of items)", "additionalItems");
    }
    if (prefix && !json_is_array(prefix))
        return js_err(c, path, "'%s' must be a list of schemas", "prefixItems");
    int64_t lo = mn ? json_integer_value(mn) : 0, hi = mx ? json_integer_value(mx) : -1;
    size_t k = json_array_size(prefix);
    bool rest_ok = !json_is_false(items);
    if (!rest_ok && (hi < 0 || hi > (int64_t)k))
        hi = (int64_t)k;
    if (hi >= 0 && hi < lo)
        return js_err(c, path, "%s: maxItems (or the prefixItems allowed) is below minItems",
                      "minItems");
    char cp[512];
    child_path(cp, sizeof cp, path, "items", NULL);
    int32_t rest = -1;
    if (rest_ok)
        rest = items && !json_is_true(items) ? compile(c, items, cp, depth + 1) : value_any(c);
    int32_t *el = malloc((k + 1) * sizeof *el);
    if (!el)
        return js_err(c, path, "%s", "out of memory");
    for (size_t i = 0; i < k; i++) {
        char ip[32];
        snprintf(ip, sizeof ip, "%zu", i);
        child_path(cp, sizeof cp, path, "prefixItems", ip);
        el[i] = compile(c, json_array_get(prefix, i), cp, depth + 1);
        if (el[i] < 0) {
            free(el);
            return -1;
        }
    }
    /* tail(i): the elements from index i on, each after a separator */
    size_t fixed = k > (size_t)lo ? k : (size_t)lo;
    size_t start = fixed > 1 ? fixed : 1; /* index 0 is `first` below */
    int32_t tail;
    int64_t left = hi < 0 ? -1 : hi > (int64_t)start ? hi - (int64_t)start : 0;
    if (rest_ok && left != 0)
        tail = g_repeat(c->g, seq2(c, sep(c), rest), 0, left);
    else
        tail = g_seq(c->g, NULL, 0);
    for (size_t i = start; i-- > 1;) {
        if (hi >= 0 && (int64_t)i >= hi) { /* past the bound: no more elements */
            tail = g_seq(c->g, NULL, 0);
            continue;
        }
        int32_t e = i < k ? el[i] : rest;
        int32_t one = seq3(c, sep(c), e, tail);
        tail = (int64_t)i >= lo ? g_opt(c->g, one) : one;
    }
    int32_t first = k > 0 ? el[0] : rest;
    free(el);
    int32_t r = g_new_rule(c->g);
    if (r < 0)
        return -1;
    if (lo == 0) {
        ss_item empty[3] = {it_ref(lit(c, "[")), it_ref(ws(c)), it_ref(lit(c, "]"))};
        if (g_add_alt(c->g, r, empty, 3))
            return -1;
    }
    if (hi != 0 && first >= 0) {
        ss_item full[6] = {it_ref(lit(c, "[")), it_ref(ws(c)), it_ref(first), it_ref(tail),
                           it_ref(ws(c)), it_ref(lit(c, "]"))};
        if (g_add_alt(c->g, r, full, 6))
            return -1;
    }
    return r;
}

static int32_t compile_typed(js *c, json_t *s, const char *type, const char *path, int depth)
{
    if (!strcmp(type, "string"))
        return compile_string(c, s, path);
    if (!strcmp(type, "integer"))
        return compile_numeric(c, s, path, true);
    if (!strcmp(type, "number"))
        return compile_numeric(c, s, path, false);
    if (!strcmp(type, "boolean")) {
        if (c->boolean < 0)
            c->boolean = alt2(c, lit(c, "true"), lit(c, "false"));
        return c->boolean;
    }
    if (!strcmp(type, "null")) {
        if (c->null < 0)
            c->null = lit(c, "null");
        return c->null;
    }
    if (!strcmp(type, "object"))
        return compile_object(c, s, path, depth);
    if (!strcmp(type, "array"))
        return compile_array(c, s, path, depth);
    return js_err(c, path, "unknown type '%s' (string, integer, number, boolean, null, object, "
                           "array)",
                  type);
}

static int32_t compile(js *c, json_t *s, const char *path, int depth)
{
    if (c->g->failed)
        return -1;
    if (depth > SS_SCHEMA_MAX_DEPTH)
        return js_err(c, path, "schemas nest deeper than %s levels", "64");
    if (json_is_true(s))
        return value_any(c);
    if (json_is_false(s))
        return js_err(c, path, "the schema %s matches nothing", "false");
    if (!json_is_object(s))
        return js_err(c, path, "a schema must be an object or a boolean, not %s",
                      json_is_array(s) ? "a list" : "a scalar");
    const char *key;
    json_t *v;
    json_object_foreach(s, key, v)
    {
        if (!IN(key, annotations) && !IN(key, keywords) && strcmp(key, "additionalItems") &&
            strcmp(key, "multipleOf"))
            return js_err(c, path, "unsupported keyword '%s'; remove it or express it with the "
                                   "supported keywords (docs/structured-outputs.md)",
                          key);
    }
    json_t *nullable = json_object_get(s, "nullable");
    if (json_is_true(nullable)) {
        json_t *copy = json_copy(s);
        if (!copy)
            return js_err(c, path, "%s", "out of memory");
        json_object_del(copy, "nullable");
        int32_t inner = compile(c, copy, path, depth + 1);
        json_decref(copy);
        if (c->null < 0)
            c->null = lit(c, "null");
        return alt2(c, inner, c->null);
    }
    json_t *ref = json_object_get(s, "$ref");
    json_t *type = json_object_get(s, "type");
    if (ref) {
        json_object_foreach(s, key, v) if (IN(key, keywords) && strcmp(key, "$ref"))
            return js_err(c, path, "keyword '%s' next to $ref is not supported; move it into "
                                   "the referenced schema",
                          key);
        if (!json_is_string(ref))
            return js_err(c, path, "'%s' must be a string", "$ref");
        return compile_ref(c, json_string_value(ref), path, depth);
    }
    if (type && !json_is_string(type) && !json_is_array(type))
        return js_err(c, path, "'%s' must be a string or a list of strings", "type");
    json_t *cst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
    if (cst || en) { /* the listed values, those of them the type allows */
        const char *which = cst ? "const" : "enum";
        json_object_foreach(s, key, v) if (IN(key, keywords) && strcmp(key, "type") &&
                                           strcmp(key, "const") && strcmp(key, "enum"))
        {
            char what[128];
            snprintf(what, sizeof what, "'%.64s' next to %s", key, which);
            return js_err(c, path, "keyword %s is not supported; drop it and list only the "
                                   "values it allows",
                          what);
        }
        if (en && !json_is_array(en))
            return js_err(c, path, "'%s' must be a list", "enum");
        if (cst && en)
            return js_err(c, path, "'%s' and 'enum' together are not supported; keep one",
                          "const");
        if (en)
            return compile_enum(c, en, type, "enum", path);
        json_t *one = json_pack("[O]", cst);
        if (!one)
            return js_err(c, path, "%s", "out of memory");
        int32_t r = compile_enum(c, one, type, "const", path);
        json_decref(one);
        return r;
    }
    static const char *const combos[] = {"anyOf", "oneOf", "allOf"};
    for (int ci = 0; ci < 3; ci++) {
        json_t *list = json_object_get(s, combos[ci]);
        if (!list)
            continue;
        if (!json_is_array(list) || json_array_size(list) == 0)
            return js_err(c, path, "'%s' must be a non-empty list of schemas", combos[ci]);
        json_object_foreach(s, key, v) if (IN(key, keywords) && strcmp(key, combos[ci]))
            return js_err(c, path, "keyword '%s' next to anyOf/oneOf/allOf is not supported; "
                                   "move it into each alternative",
                          key);
        if (ci == 2 && json_array_size(list) != 1)
            return js_err(c, path, "'%s' with more than one schema is not supported; merge them "
                                   "into one",
                          "allOf");
        size_t n = json_array_size(list);
        int32_t *alts = malloc(n * sizeof *alts);
        if (!alts)
            return js_err(c, path, "%s", "out of memory");
        for (size_t i = 0; i < n; i++) {
            char cp[512], ip[32];
            snprintf(ip, sizeof ip, "%zu", i);
            child_path(cp, sizeof cp, path, combos[ci], ip);
            alts[i] = compile(c, json_array_get(list, i), cp, depth + 1);
            if (alts[i] < 0) {
                free(alts);
                return -1;
            }
        }
        int32_t r = g_alts(c->g, alts, n);
        free(alts);
        return r;
    }
    if (json_is_array(type)) {
        size_t n = json_array_size(type);
        if (n == 0 || n > 7)
            return js_err(c, path, "'%s' must list 1 to 7 type names", "type");
        int32_t alts[7];
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(type, i);
            if (!json_is_string(t))
                return js_err(c, path, "'%s' entries must be strings", "type");
            alts[i] = compile_typed(c, s, json_string_value(t), path, depth);
            if (alts[i] < 0)
                return -1;
        }
        return g_alts(c->g, alts, n);
    }
    if (type)
        return compile_typed(c, s, json_string_value(type), path, depth);
    /* no type: inferred from the keywords present */
    if (json_object_get(s, "properties") || json_object_get(s, "required") ||
        json_object_get(s, "additionalProperties"))
        return compile_object(c, s, path, depth);
    if (json_object_get(s, "items") || json_object_get(s, "prefixItems") ||
        json_object_get(s, "minItems") || json_object_get(s, "maxItems"))
        return compile_array(c, s, path, depth);
    if (json_object_get(s, "pattern") || json_object_get(s, "format") ||
        json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
        return compile_string(c, s, path);
    if (json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
        json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum"))
        return compile_numeric(c, s, path, false);
    return value_any(c);
}

int32_t ss_json_schema_compile(ss_grammar *g, const char *text, size_t len)
{
    if (len > SS_SCHEMA_MAX_BYTES)
        return plume_err(g->err, PLUME_ERR_RANGE,
                         "the JSON schema is %zu bytes; the limit is %u", len, SS_SCHEMA_MAX_BYTES);
    json_error_t je;
    /* jansson refuses nesting past its own depth limit (2048) with an error */
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, &je);
    if (!doc)
        return plume_err(g->err, PLUME_ERR_INVALID, "the JSON schema is not valid JSON: %s "
                                                    "(line %d, column %d)",
                         je.text, je.line, je.column);
    js c = {g, doc, -1, -1, -1, -1, -1, -1, -1, -1, -1, NULL, 0, 0};
    int32_t r = compile(&c, doc, "", 0);
    free(c.refs);
    json_decref(doc);
    return r;
}
