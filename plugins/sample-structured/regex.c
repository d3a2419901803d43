/* sample-structured: regex -> grammar (regex.h).  Recursive descent. */
#include "regex.h"

#include <string.h>

typedef struct rx {
    ss_grammar *g;
    const char *s;
    size_t n, i;
    int depth;
    bool json;
} rx;

static int32_t rx_err(rx *r, const char *what)
{
    if (!r->g->failed)
        plume_err(r->g->err, PLUME_ERR_UNSUPPORTED, "regex at offset %zu: %s", r->i, what);
    r->g->failed = true;
    return -1;
}

/* Bytes a JSON string may hold unescaped. */
static void json_safe(ss_set *s)
{
    for (int b = 0; b < 0x20; b++)
        s->w[0] &= ~(1ull << b);
    s->w['"' >> 6] &= ~(1ull << ('"' & 63));
    s->w['\\' >> 6] &= ~(1ull << ('\\' & 63));
}

static void set_range(ss_set *s, int lo, int hi)
{
    for (int b = lo; b <= hi; b++)
        ss_set_add(s, (uint8_t)b);
}

static void set_class(ss_set *s, char c)
{
    switch (c) {
    case 'd': set_range(s, '0', '9'); break;
    case 'w': set_range(s, '0', '9'); set_range(s, 'a', 'z'); set_range(s, 'A', 'Z');
              ss_set_add(s, '_'); break;
    case 's': ss_set_add(s, ' '); set_range(s, '\t', '\r'); break;
    }
}

/* A rule for one literal byte sequence (a character), JSON-escaped in json mode. */
static int32_t lit_char(rx *r, const char *c, size_t n)
{
    if (r->json && n == 1 && (c[0] == '"' || c[0] == '\\'))
        return g_lit(r->g, c[0] == '"' ? "\\\"" : "\\\\", 2);
    if (r->json && n == 1 && (unsigned char)c[0] < 0x20) {
        static const char hex[] = "0123456789abcdef";
        char e[6] = {'\\', 'u', '0', '0', hex[(unsigned char)c[0] >> 4], hex[c[0] & 15]};
        if (c[0] == '\n')
            return g_lit(r->g, "\\n", 2);
        if (c[0] == '\t')
            return g_lit(r->g, "\\t", 2);
        return g_lit(r->g, e, 6);
    }
    return g_lit(r->g, c, n);
}

/* One character of the ASCII set s (or any non-ASCII character too when
 * negated), honouring json mode. */
static int32_t class_rule(rx *r, ss_set s, bool negate)
{
    if (negate) {
        ss_set t = {{~s.w[0], ~s.w[1], 0, 0}};
        s = t;
    }
    if (r->json)
        json_safe(&s);
    if (negate)
        return g_utf8_char(r->g, &s);
    return g_setrule(r->g, &s);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads an escape after '\\' (r->i at the escaped char).  Sets *cls to a
 * class letter (d w s, upper case = negated) or fills out/n with the
 * literal's UTF-8 bytes. */
static int escape(rx *r, char *cls, char out[4], size_t *n)
{
    if (r->i >= r->n)
        return rx_err(r, "the pattern ends with a lone '\\'");
    char c = r->s[r->i++];
    *cls = 0;
    *n = 1;
    switch (c) {
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S':
        *cls = c;
        return 0;
    case 'n': out[0] = '\n'; return 0;
    case 't': out[0] = '\t'; return 0;
    case 'r': out[0] = '\r'; return 0;
    case 'f': out[0] = '\f'; return 0;
    case 'v': out[0] = '\v'; return 0;
    case 'x': case 'u': {
        int digits = c == 'x' ? 2 : 4;
        unsigned v = 0;
        for (int k = 0; k < digits; k++) {
            int h = r->i < r->n ? hexval(r->s[r->i]) : -1;
            if (h < 0)
                return rx_err(r, c == 'x' ? "\\x needs two hex digits" : "\\u needs four hex digits");
            v = v * 16 + (unsigned)h;
            r->i++;
        }
        if (v >= 0xD800 && v <= 0xDFFF)
            return rx_err(r, "\\u escapes of surrogate halves are not supported");
        if (v < 0x80) {
            out[0] = (char)v;
        } else if (v < 0x800) {
            out[0] = (char)(0xC0 | v >> 6);
            out[1] = (char)(0x80 | (v & 63));
            *n = 2;
        } else {
            out[0] = (char)(0xE0 | v >> 12);
            out[1] = (char)(0x80 | ((v >> 6) & 63));
            out[2] = (char)(0x80 | (v & 63));
            *n = 3;
        }
        return 0;
    }
    case 'b': case 'B':
        return rx_err(r, "word boundaries (\\b, \\B) are not supported");
    default:
        if (c >= '1' && c <= '9')
            return rx_err(r, "backreferences are not supported (they are not regular)");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '0')
            return rx_err(r, "unknown escape; escape only punctuation, or use \\d \\w \\s \\n "
                             "\\t \\xHH \\uHHHH");
        out[0] = c;
        return 0;
    }
}

static int32_t parse_class(rx *r)
{
    /* r->i just past '[' */
    bool neg = false;
    ss_set s = {{0}};
    if (r->i < r->n && r->s[r->i] == '^') {
        neg = true;
        r->i++;
    }
    bool first = true;
    for (;;) {
        if (r->i >= r->n)
            return rx_err(r, "unterminated character class '['");
        char c = r->s[r->i];
        if (c == ']' && !first) {
            r->i++;
            break;
        }
        first = false;
        r->i++;
        int lo;
        if ((unsigned char)c >= 0x80)
            return rx_err(r, "non-ASCII characters inside a class are not supported; use an "
                             "alternation (a|b) instead");
        if (c == '\\') {
            char cls, b[4];
            size_t nb;
            if (escape(r, &cls, b, &nb))
                return -1;
            if (cls) {
                ss_set t = {{0}};
                set_class(&t, (char)(cls | 0x20));
                if (cls >= 'A' && cls <= 'Z') {
                    t.w[0] = ~t.w[0];
                    t.w[1] = ~t.w[1];
                }
                for (int k = 0; k < 2; k++)
                    s.w[k] |= t.w[k];
                continue;
            }
            if (nb != 1 || (unsigned char)b[0] >= 0x80)
                return rx_err(r, "non-ASCII characters inside a class are not supported");
            lo = (unsigned char)b[0];
        } else if (c == '[' && r->i < r->n && r->s[r->i] == ':') {
            return rx_err(r, "POSIX classes ([:alpha:]) are not supported; use ranges");
        } else {
            lo = (unsigned char)c;
        }
        int hi = lo;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            r->i++;
            char d = r->s[r->i++];
            if (d == '\\') {
                char cls, b[4];
                size_t nb;
                if (escape(r, &cls, b, &nb))
                    return -1;
                if (cls || nb != 1 || (unsigned char)b[0] >= 0x80)
                    return rx_err(r, "a class range must end at an ASCII character");
                hi = (unsigned char)b[0];
            } else {
                if ((unsigned char)d >= 0x80)
                    return rx_err(r, "non-ASCII characters inside a class are not supported");
                hi = (unsigned char)d;
            }
            if (hi < lo)
                return rx_err(r, "a class range runs backwards (e.g. z-a)");
        }
        set_range(&s, lo, hi);
    }
    return class_rule(r, s, neg);
}

static int32_t parse_alt(rx *r);

static int32_t parse_atom(rx *r)
{
    char c = r->s[r->i];
    if (c == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') {
                r->i += 2;
            } else if (r->i + 1 < r->n && (r->s[r->i + 1] == '<' || r->s[r->i + 1] == 'P') &&
                       r->i + 2 < r->n && r->s[r->i + 2] != '=' && r->s[r->i + 2] != '!') {
                while (r->i < r->n && r->s[r->i] != '>')
                    r->i++;
                if (r->i >= r->n)
                    return rx_err(r, "unterminated group name");
                r->i++;
            } else {
                return rx_err(r, "lookaround and inline flags ((?=, (?!, (?<=, (?i)) are not "
                                 "supported");
            }
        }
        if (++r->depth > SS_REGEX_MAX_DEPTH)
            return rx_err(r, "groups nest deeper than 64");
        int32_t x = parse_alt(r);
        r->depth--;
        if (x < 0)
            return -1;
        if (r->i >= r->n || r->s[r->i] != ')')
            return rx_err(r, "missing ')'");
        r->i++;
        return x;
    }
    if (c == '[') {
        r->i++;
        return parse_class(r);
    }
    if (c == '.') {
        r->i++;
        ss_set s = {{~0ull, ~0ull, 0, 0}};
        s.w[0] &= ~(1ull << '\n');
        if (r->json)
            json_safe(&s);
        return g_utf8_char(r->g, &s);
    }
    if (c == '\\') {
        r->i++;
        char cls, b[4];
        size_t nb;
        if (escape(r, &cls, b, &nb))
            return -1;
        if (cls) {
            ss_set s = {{0}};
            set_class(&s, (char)(cls | 0x20));
            return class_rule(r, s, cls >= 'A' && cls <= 'Z');
        }
        return lit_char(r, b, nb);
    }
    if (c == '^' || c == '$')
        return rx_err(r, "anchors (^, $) are supported only at the ends of the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{')
        return rx_err(r, "a quantifier with nothing to repeat");
    if (c == ')')
        return rx_err(r, "unbalanced ')'");
    /* a literal character: all of its UTF-8 bytes */
    size_t n = 1;
    unsigned char u = (unsigned char)c;
    if (u >= 0xC0)
        n = u >= 0xF0 ? 4 : u >= 0xE0 ? 3 : 2;
    if (r->i + n > r->n)
        n = r->n - r->i;
    int32_t x = lit_char(r, r->s + r->i, n);
    r->i += n;
    return x;
}

static bool read_int(rx *r, long *v)
{
    size_t st = r->i;
    long x = 0;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
        if (x > 100000000)
            x = 100000000;
        else
            x = x * 10 + (r->s[r->i] - '0');
        r->i++;
    }
    *v = x;
    return r->i > st;
}

static int32_t parse_repeat(rx *r)
{
    int32_t x = parse_atom(r);
    while (x >= 0 && r->i < r->n) {
        char c = r->s[r->i];
        long lo, hi;
        if (c == '*') {
            lo = 0, hi = -1;
            r->i++;
        } else if (c == '+') {
            lo = 1, hi = -1;
            r->i++;
        } else if (c == '?') {
            lo = 0, hi = 1;
            r->i++;
        } else if (c == '{') {
            size_t save = r->i++;
            if (!read_int(r, &lo)) {
                r->i = save;
                return rx_err(r, "'{' must start a repetition {n}, {n,} or {n,m} (escape it as "
                                 "\\{ for a literal)");
            }
            hi = lo;
            if (r->i < r->n && r->s[r->i] == ',') {
                r->i++;
                if (!read_int(r, &hi))
                    hi = -1;
            }
            if (r->i >= r->n || r->s[r->i] != '}')
                return rx_err(r, "unterminated repetition '{'");
            r->i++;
            if (lo > SS_REGEX_MAX_REPEAT || hi > SS_REGEX_MAX_REPEAT)
                return rx_err(r, "repetition bounds above 1000 are not supported");
            if (hi >= 0 && hi < lo)
                return rx_err(r, "a repetition {n,m} needs n <= m");
        } else {
            break;
        }
        if (r->i < r->n && r->s[r->i] == '?')
            r->i++; /* lazy: the same strings */
        else if (r->i < r->n && r->s[r->i] == '+')
            return rx_err(r, "possessive quantifiers are not supported");
        x = g_repeat(r->g, x, (uint32_t)lo, hi);
    }
    return x;
}

static int32_t parse_seq(rx *r)
{
    ss_seq_acc seq = {.n = 0}; /* sequences longer than 64 fold into nested rules */
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (r->s[r->i] == '$' && r->i + 1 == r->n && r->depth == 0) {
            r->i++;
            break;
        }
        int32_t x = parse_repeat(r);
        if (x < 0 || g_seq_push(r->g, &seq, x))
            return -1;
    }
    return g_seq_end(r->g, &seq);
}

static int32_t parse_alt(rx *r)
{
    int32_t r0 = g_new_rule(r->g);
    if (r0 < 0)
        return -1;
    for (;;) {
        int32_t x = parse_seq(r);
        ss_item it = it_ref(x);
        if (x < 0 || g_add_alt(r->g, r0, &it, 1))
            return -1;
        if (r->i < r->n && r->s[r->i] == '|') {
            r->i++;
            continue;
        }
        return r0;
    }
}

int32_t ss_regex_compile(ss_grammar *g, const char *pattern, size_t len, bool json_string)
{
    rx r = {g, pattern, len, 0, 0, json_string};
    if (len > SS_REGEX_MAX_LEN)
        return rx_err(&r, "the pattern is longer than 65536 bytes");
    if (len && pattern[0] == '^')
        r.i = 1;
    int32_t x = parse_alt(&r);
    if (x < 0)
        return -1;
    if (r.i < r.n)
        return rx_err(&r, "unbalanced ')'");
    return x;
}
