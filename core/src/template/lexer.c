/* The Jinja lexer (see lexer.h).  Follows jinja2's lexer: text runs up to the
 * next {{, {% or {#; "-" on a tag strips the whitespace beside it, "+"
 * keeps it; lstrip_blocks removes the spaces and tabs between a line's start
 * and a block or comment tag; trim_blocks removes the first newline after a
 * block or comment tag. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"
#include "template/lexer.h"

typedef struct lexer {
    const char *s; /* normalised source */
    size_t n, pos;
    jtoklist *out;
    size_t cap;
    char *store;
    size_t store_n, store_cap;
    plume_error *err;
} lexer;

static void pos_of(const lexer *lx, size_t pos, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && i < lx->n; i++) {
        if (lx->s[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)lx->s[i] & 0xC0) != 0x80)
            c++;
    }
    *line = l;
    *col = c;
}

static int fail_at(lexer *lx, size_t pos, const char *what)
{
    int l, c;
    pos_of(lx, pos, &l, &c);
    return plume_err(lx->err, PLUME_ERR_FORMAT, "line %d, column %d: %s", l, c, what);
}

/* Tokens keep offsets into store until the end (store may move). */
static int emit(lexer *lx, jtok_kind kind, size_t pos, const char *text, size_t len)
{
    jtok *toks = plume_grow(lx->out->toks, &lx->cap, lx->out->n + 1, 256, sizeof *toks);
    if (toks)
        lx->out->toks = toks;
    char *st = plume_grow(lx->store, &lx->store_cap, lx->store_n + len + 1, 4096, 1);
    if (st)
        lx->store = st;
    if (!toks || !st)
        return plume_err(lx->err, PLUME_ERR_NOMEM, "out of memory reading the template");
    jtok *t = &lx->out->toks[lx->out->n++];
    t->kind = kind;
    t->line = (int)pos; /* the offset for now; turned into line/column at the end */
    t->col = 0;
    t->text = (const char *)(uintptr_t)lx->store_n;
    t->len = len;
    if (len)
        memcpy(lx->store + lx->store_n, text, len);
    lx->store[lx->store_n + len] = 0;
    lx->store_n += len + 1;
    return 0;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string literal at lx->pos (on its quote): decoded as Python's
 * unicode-escape decodes it, as jinja2 does. */
static int lex_string(lexer *lx)
{
    size_t start = lx->pos;
    char q = lx->s[lx->pos++];
    size_t i = lx->pos;
    while (i < lx->n && lx->s[i] != q) {
        if (lx->s[i] == '\\')
            i++;
        i++;
    }
    if (i >= lx->n)
        return fail_at(lx, start, "unterminated string literal; close it with its quote");
    size_t raw = i - lx->pos;
    char *buf = malloc(raw * 2 + 8);
    if (!buf)
        return plume_err(lx->err, PLUME_ERR_NOMEM, "out of memory reading the template");
    size_t o = 0;
    for (size_t k = lx->pos; k < i; k++) {
        char c = lx->s[k];
        if (c != '\\' || k + 1 >= i) {
            buf[o++] = c;
            continue;
        }
        char e = lx->s[++k];
        int digits = 0;
        switch (e) {
        case 'n': buf[o++] = '\n'; break;
        case 't': buf[o++] = '\t'; break;
        case 'r': buf[o++] = '\r'; break;
        case '\\': buf[o++] = '\\'; break;
        case '\'': buf[o++] = '\''; break;
        case '"': buf[o++] = '"'; break;
        case 'a': buf[o++] = '\a'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'v': buf[o++] = '\v'; break;
        case '\n': break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                unsigned v = 0;
                int m = 0;
                while (m < 3 && k < i && lx->s[k] >= '0' && lx->s[k] <= '7') {
                    v = v * 8 + (unsigned)(lx->s[k] - '0');
                    k++;
                    m++;
                }
                k--;
                o += put_utf8(buf + o, v);
            } else {
                buf[o++] = '\\';
                buf[o++] = e;
            }
        }
        if (digits) {
            unsigned v = 0;
            for (int m = 0; m < digits; m++) {
                int h = k + 1 < i ? hexval(lx->s[k + 1]) : -1;
                if (h < 0) {
                    free(buf);
                    return fail_at(lx, k, "truncated \\x, \\u or \\U escape in a string literal");
                }
                v = v * 16 + (unsigned)h;
                k++;
            }
            if (v > 0x10FFFF) {
                free(buf);
                return fail_at(lx, k, "\\U escape beyond U+10FFFF in a string literal");
            }
            o += put_utf8(buf + o, v);
        }
    }
    int rc = emit(lx, JT_STRING, start, buf, o);
    free(buf);
    lx->pos = i + 1;
    return rc;
}

static const char *const OPS[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                  "~",  "<",  ">",  "=",  "(",  ")",  "[", "]", "{", "}", ",",
                                  ".",  ":",  "|",  ";"};

/* Tokens inside a {{ }} or {% %} tag up to its end; end is "}}" or "%}". */
static int lex_tag(lexer *lx, bool block, size_t tag_start, bool *line_starting)
{
    const char end0 = block ? '%' : '}';
    for (;;) {
        while (lx->pos < lx->n && is_ws(lx->s[lx->pos]))
            lx->pos++;
        if (lx->pos >= lx->n)
            return fail_at(lx, tag_start, block ? "unclosed block tag '{%'; close it with '%}'"
                                                : "unclosed expression '{{'; close it with '}}'");
        const char *p = lx->s + lx->pos;
        size_t left = lx->n - lx->pos;
        /* the tag's end, with its whitespace control */
        int strip = 0;
        size_t endlen = 0;
        if (left >= 3 && p[0] == '-' && p[1] == end0 && p[2] == '}')
            strip = '-', endlen = 3;
        else if (left >= 3 && p[0] == '+' && p[1] == end0 && p[2] == '}' && block)
            strip = '+', endlen = 3;
        else if (left >= 2 && p[0] == end0 && p[1] == '}')
            endlen = 2;
        if (endlen) {
            if (emit(lx, block ? JT_BLOCK_END : JT_VAR_END, lx->pos, "", 0))
                return -1;
            lx->pos += endlen;
            if (strip == '-') {
                size_t s0 = lx->pos;
                while (lx->pos < lx->n && is_ws(lx->s[lx->pos]))
                    lx->pos++;
                *line_starting = lx->pos > s0 && lx->s[lx->pos - 1] == '\n';
            } else if (block && strip == 0 && lx->pos < lx->n && lx->s[lx->pos] == '\n') {
                lx->pos++; /* trim_blocks */
                *line_starting = true;
            } else
                *line_starting = false;
            return 0;
        }
        char c = *p;
        if (c == '\'' || c == '"') {
            if (lex_string(lx))
                return -1;
            continue;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t k = 1;
            while (k < left && ((p[k] >= 'a' && p[k] <= 'z') || (p[k] >= 'A' && p[k] <= 'Z') ||
                                (p[k] >= '0' && p[k] <= '9') || p[k] == '_'))
                k++;
            if (emit(lx, JT_NAME, lx->pos, p, k))
                return -1;
            lx->pos += k;
            continue;
        }
        if (c >= '0' && c <= '9') {
            size_t k = 0;
            bool is_float = false;
            while (k < left && ((p[k] >= '0' && p[k] <= '9') || p[k] == '_'))
                k++;
            bool after_dot = lx->pos > 0 && lx->s[lx->pos - 1] == '.';
            if (!after_dot && k + 1 < left && p[k] == '.' && p[k + 1] >= '0' && p[k + 1] <= '9') {
                is_float = true;
                k++;
                while (k < left && ((p[k] >= '0' && p[k] <= '9') || p[k] == '_'))
                    k++;
            }
            if (!after_dot && k < left && (p[k] == 'e' || p[k] == 'E')) {
                size_t e = k + 1;
                if (e < left && (p[e] == '+' || p[e] == '-'))
                    e++;
                if (e < left && p[e] >= '0' && p[e] <= '9') {
                    while (e < left && p[e] >= '0' && p[e] <= '9')
                        e++;
                    k = e;
                    is_float = true;
                }
            }
            char num[128];
            size_t m = 0;
            for (size_t q = 0; q < k && m + 1 < sizeof num; q++)
                if (p[q] != '_')
                    num[m++] = p[q];
            if (emit(lx, is_float ? JT_FLOAT : JT_INT, lx->pos, num, m))
                return -1;
            lx->pos += k;
            continue;
        }
        bool matched = false;
        for (size_t o = 0; o < sizeof OPS / sizeof OPS[0]; o++) {
            size_t ol = strlen(OPS[o]);
            if (ol <= left && memcmp(p, OPS[o], ol) == 0) {
                if (emit(lx, JT_OP, lx->pos, p, ol))
                    return -1;
                lx->pos += ol;
                matched = true;
                break;
            }
        }
        if (!matched) {
            char what[96];
            snprintf(what, sizeof what, "unexpected character '%c' inside a tag",
                     (unsigned char)c >= 0x20 && (unsigned char)c < 0x7F ? c : '?');
            return fail_at(lx, lx->pos, what);
        }
    }
}

/* The text before a tag, with the tag's whitespace control applied. */
static int emit_text(lexer *lx, size_t from, size_t to, char sign, bool lstrip, bool line_starting)
{
    const char *t = lx->s + from;
    size_t len = to - from;
    if (sign == '-') {
        while (len && is_ws(t[len - 1]))
            len--;
    } else if (sign != '+' && lstrip) {
        size_t lpos = len;
        while (lpos && t[lpos - 1] != '\n')
            lpos--;
        if (lpos > 0 || line_starting) {
            bool only_blank = true;
            for (size_t i = lpos; i < len; i++)
                if (t[i] != ' ' && t[i] != '\t') {
                    only_blank = false;
                    break;
                }
            if (only_blank)
                len = lpos;
        }
    }
    return len ? emit(lx, JT_TEXT, from, t, len) : 0;
}

/* Whether a tag {%[-+]? ws name ws [-+]?%} starts at i; fills its sign
 * characters and the index after it. */
static bool tag_at(const lexer *lx, size_t i, const char *name, char *open_sign, char *close_sign,
                   size_t *after)
{
    const char *s = lx->s;
    size_t n = lx->n, nl = strlen(name);
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%')
        return false;
    i += 2;
    *open_sign = i < n && (s[i] == '-' || s[i] == '+') ? s[i++] : 0;
    while (i < n && is_ws(s[i]))
        i++;
    if (i + nl > n || memcmp(s + i, name, nl) != 0)
        return false;
    i += nl;
    while (i < n && is_ws(s[i]))
        i++;
    *close_sign = i < n && (s[i] == '-' || s[i] == '+') ? s[i++] : 0;
    if (i + 2 > n || s[i] != '%' || s[i + 1] != '}')
        return false;
    *after = i + 2;
    return true;
}

/* {% raw %}...{% endraw %}: the text between is output as it is.  name_end
 * is just past "raw" in the opening tag. */
static int lex_raw(lexer *lx, size_t tag_at_pos, size_t name_end, bool *line_starting)
{
    char os, cs;
    size_t after;
    (void)name_end;
    if (!tag_at(lx, tag_at_pos, "raw", &os, &cs, &after) || cs == '+')
        return fail_at(lx, tag_at_pos, "malformed {% raw %} tag");
    lx->pos = after;
    *line_starting = false;
    if (cs == '-') {
        size_t s0 = lx->pos;
        while (lx->pos < lx->n && is_ws(lx->s[lx->pos]))
            lx->pos++;
        *line_starting = lx->pos > s0 && lx->s[lx->pos - 1] == '\n';
    }
    for (size_t i = lx->pos; i + 1 < lx->n; i++) {
        char es_open, es_close;
        size_t end_after;
        if (!tag_at(lx, i, "endraw", &es_open, &es_close, &end_after))
            continue;
        if (emit_text(lx, lx->pos, i, es_open, true, *line_starting))
            return -1;
        lx->pos = end_after;
        if (es_close == '-') {
            size_t s0 = lx->pos;
            while (lx->pos < lx->n && is_ws(lx->s[lx->pos]))
                lx->pos++;
            *line_starting = lx->pos > s0 && lx->s[lx->pos - 1] == '\n';
        } else if (es_close != '+' && lx->pos < lx->n && lx->s[lx->pos] == '\n') {
            lx->pos++;
            *line_starting = true;
        } else
            *line_starting = false;
        return 0;
    }
    return fail_at(lx, tag_at_pos, "unclosed {% raw %}; close it with {% endraw %}");
}

static int run(lexer *lx)
{
    bool line_starting = true;
    while (lx->pos < lx->n) {
        const char *open = NULL;
        for (size_t i = lx->pos; i + 1 < lx->n; i++)
            if (lx->s[i] == '{' && (lx->s[i + 1] == '{' || lx->s[i + 1] == '%' || lx->s[i + 1] == '#')) {
                open = lx->s + i;
                break;
            }
        if (!open)
            return emit(lx, JT_TEXT, lx->pos, lx->s + lx->pos, lx->n - lx->pos);
        size_t at = (size_t)(open - lx->s);
        char kind = open[1];
        char sign = at + 2 < lx->n && (open[2] == '-' || open[2] == '+') ? open[2] : 0;
        if (kind == '{' && sign == '+')
            sign = 0; /* {{+ is not whitespace control */
        if (emit_text(lx, lx->pos, at, sign, kind != '{', line_starting))
            return -1;
        lx->pos = at + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t i = lx->pos;
            while (i + 1 < lx->n && !(lx->s[i] == '#' && lx->s[i + 1] == '}'))
                i++;
            if (i + 1 >= lx->n)
                return fail_at(lx, at, "unclosed comment '{#'; close it with '#}'");
            char esign = i > lx->pos && (lx->s[i - 1] == '-' || lx->s[i - 1] == '+') ? lx->s[i - 1] : 0;
            lx->pos = i + 2;
            if (esign == '-') {
                size_t s0 = lx->pos;
                while (lx->pos < lx->n && is_ws(lx->s[lx->pos]))
                    lx->pos++;
                line_starting = lx->pos > s0 && lx->s[lx->pos - 1] == '\n';
            } else if (esign != '+' && lx->pos < lx->n && lx->s[lx->pos] == '\n') {
                lx->pos++;
                line_starting = true;
            } else
                line_starting = false;
            continue;
        }
        bool block = kind == '%';
        if (block) {
            /* {% raw %} ... {% endraw %} */
            size_t k = lx->pos;
            while (k < lx->n && is_ws(lx->s[k]))
                k++;
            if (lx->n - k >= 3 && memcmp(lx->s + k, "raw", 3) == 0 &&
                (k + 3 >= lx->n || !((lx->s[k + 3] >= 'a' && lx->s[k + 3] <= 'z') || lx->s[k + 3] == '_'))) {
                if (lex_raw(lx, at, k + 3, &line_starting))
                    return -1;
                continue;
            }
        }
        if (emit(lx, block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, at, "", 0))
            return -1;
        if (lex_tag(lx, block, at, &line_starting))
            return -1;
    }
    return 0;
}

int jlex(const char *src, size_t len, jtoklist *out, plume_error *err)
{
    memset(out, 0, sizeof *out);
    /* newlines as jinja2 normalises them; one trailing newline dropped */
    char *s = malloc(len + 1);
    if (!s)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading the template");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else
            s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n')
        n--;
    s[n] = 0;
    lexer lx = {.s = s, .n = n, .out = out, .err = err};
    int rc = run(&lx);
    if (rc == 0)
        rc = emit(&lx, JT_EOF, n, "", 0);
    out->store = lx.store;
    if (rc == 0) {
        /* offsets to line/column (one pass), and text offsets to pointers */
        int line = 1, col = 1;
        size_t at = 0;
        for (size_t t = 0; t < out->n; t++) {
            size_t off = (size_t)out->toks[t].line;
            for (; at < off && at < n; at++) {
                if (s[at] == '\n') {
                    line++;
                    col = 1;
                } else if (((unsigned char)s[at] & 0xC0) != 0x80)
                    col++;
            }
            out->toks[t].line = line;
            out->toks[t].col = col;
            out->toks[t].text = lx.store + (uintptr_t)out->toks[t].text;
        }
    } else
        jlex_free(out);
    free(s);
    return rc;
}

void jlex_free(jtoklist *l)
{
    free(l->toks);
    free(l->store);
    memset(l, 0, sizeof *l);
}
