/* sample-structured: GBNF -> grammar (gbnf.h). */
#include "gbnf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex.h"

typedef struct named {
    char *name;
    int32_t rule;
    bool defined;
    int line;
} named;

typedef struct gp {
    ss_grammar *g;
    const char *s;
    size_t n, i;
    int line, depth;
    named *rules;
    size_t n_rules;
} gp;

static int32_t gp_err(gp *p, const char *what)
{
    if (!p->g->failed)
        plume_err(p->g->err, PLUME_ERR_INVALID, "grammar line %d: %s", p->line, what);
    p->g->failed = true;
    return -1;
}

static bool is_name(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* Skips blanks and comments; newlines too when nl. */
static void skip(gp *p, bool nl)
{
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == '#') {
            while (p->i < p->n && p->s[p->i] != '\n')
                p->i++;
        } else if (c == ' ' || c == '\t' || c == '\r' || (nl && c == '\n')) {
            if (c == '\n')
                p->line++;
            p->i++;
        } else {
            break;
        }
    }
}

/* True when a `name ::=` starts at p->i. */
static bool at_rule_start(gp *p)
{
    size_t j = p->i;
    while (j < p->n && is_name(p->s[j]))
        j++;
    if (j == p->i)
        return false;
    while (j < p->n && (p->s[j] == ' ' || p->s[j] == '\t'))
        j++;
    return j + 2 < p->n + 0 + 1 && j + 3 <= p->n && !memcmp(p->s + j, "::=", 3);
}

static int32_t rule_named(gp *p, const char *name, size_t len, bool define)
{
    for (size_t i = 0; i < p->n_rules; i++)
        if (strlen(p->rules[i].name) == len && !memcmp(p->rules[i].name, name, len)) {
            if (define && p->rules[i].defined)
                return gp_err(p, "a rule is defined twice");
            p->rules[i].defined |= define;
            return p->rules[i].rule;
        }
    if (p->n_rules >= SS_GBNF_MAX_RULES)
        return gp_err(p, "more than 4096 rule names");
    named *r = realloc(p->rules, (p->n_rules + 1) * sizeof *r);
    if (!r)
        return gp_err(p, "out of memory");
    p->rules = r;
    char *nm = malloc(len + 1);
    int32_t id = g_new_rule(p->g);
    if (!nm || id < 0) {
        free(nm);
        return id < 0 ? -1 : gp_err(p, "out of memory");
    }
    memcpy(nm, name, len);
    nm[len] = 0;
    p->rules[p->n_rules++] = (named){nm, id, define, p->line};
    return id;
}

static int32_t parse_alts(gp *p);

/* A literal "..." or class [...] becomes a regex over the same text. */
static int32_t literal(gp *p)
{
    size_t st = p->i++;
    char buf[1024];
    size_t n = 0;
    int32_t items[256];
    size_t k = 0;
    while (p->i < p->n && p->s[p->i] != '"') {
        char c = p->s[p->i++];
        if (c == '\n')
            return gp_err(p, "a literal runs past the end of its line");
        if (c == '\\') {
            if (p->i >= p->n)
                break;
            char e = p->s[p->i++];
            if (e == 'x' || e == 'u') {
                /* reuse the regex escape reader */
                size_t digits = e == 'x' ? 2 : 4;
                if (p->i + digits > p->n)
                    return gp_err(p, "a \\x or \\u escape needs its hex digits");
                char re[8] = {'\\', e};
                memcpy(re + 2, p->s + p->i, digits);
                p->i += digits;
                if (n) {
                    items[k++] = g_lit(p->g, buf, n);
                    n = 0;
                }
                items[k++] = ss_regex_compile(p->g, re, 2 + digits, false);
                if (items[k - 1] < 0)
                    return -1;
            } else {
                buf[n++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
            }
        } else {
            buf[n++] = c;
        }
        if (n == sizeof buf || k >= 250) {
            if (n) {
                items[k++] = g_lit(p->g, buf, n);
                n = 0;
            }
            int32_t r = g_seq(p->g, items, k);
            k = 0;
            items[k++] = r;
        }
    }
    if (p->i >= p->n) {
        p->i = st;
        return gp_err(p, "unterminated literal");
    }
    p->i++;
    if (n || k == 0)
        items[k++] = g_lit(p->g, buf, n);
    return k == 1 ? items[0] : g_seq(p->g, items, k);
}

static int32_t char_class(gp *p)
{
    size_t st = p->i++;
    while (p->i < p->n && p->s[p->i] != ']') {
        if (p->s[p->i] == '\n')
            return gp_err(p, "a character class runs past the end of its line");
        if (p->s[p->i] == '\\')
            p->i++;
        p->i++;
    }
    if (p->i >= p->n)
        return gp_err(p, "unterminated character class");
    p->i++;
    int32_t r = ss_regex_compile(p->g, p->s + st, p->i - st, false);
    if (r < 0)
        plume_err_prefix(p->g->err, "grammar line %d", p->line);
    return r;
}

static int32_t parse_atom(gp *p)
{
    char c = p->s[p->i];
    if (c == '"')
        return literal(p);
    if (c == '[')
        return char_class(p);
    if (c == '.') {
        p->i++;
        return ss_regex_compile(p->g, ".", 1, false);
    }
    if (c == '(') {
        p->i++;
        if (++p->depth > 64)
            return gp_err(p, "groups nest deeper than 64");
        int32_t r = parse_alts(p);
        p->depth--;
        skip(p, true);
        if (r < 0)
            return -1;
        if (p->i >= p->n || p->s[p->i] != ')')
            return gp_err(p, "missing ')'");
        p->i++;
        return r;
    }
    if (is_name(c)) {
        size_t st = p->i;
        while (p->i < p->n && is_name(p->s[p->i]))
            p->i++;
        return rule_named(p, p->s + st, p->i - st, false);
    }
    char msg[64];
    snprintf(msg, sizeof msg, "unexpected character '%c'", c);
    return gp_err(p, msg);
}

/* A decimal count at p->i between optional blanks (the text is not
 * NUL-terminated, so no strtol): its value, capped at 1000000, or -1 when
 * no digit is there. */
static long parse_count(gp *p)
{
    long v = -1;
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t'))
        p->i++;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
        long d = p->s[p->i++] - '0';
        v = v < 0 ? d : v > 1000000 ? v : v * 10 + d;
    }
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t'))
        p->i++;
    return v;
}

static int32_t parse_item(gp *p)
{
    int32_t x = parse_atom(p);
    while (x >= 0 && p->i < p->n) {
        char c = p->s[p->i];
        long lo, hi;
        if (c == '*' || c == '+' || c == '?') {
            p->i++;
            lo = c == '+';
            hi = c == '?' ? 1 : -1;
        } else if (c == '{') {
            p->i++;
            lo = parse_count(p);
            if (lo < 0)
                return gp_err(p, "'{' must start a repetition {m}, {m,} or {m,n}");
            hi = lo;
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                hi = parse_count(p); /* none: {m,} */
            }
            if (p->i >= p->n || p->s[p->i] != '}')
                return gp_err(p, "unterminated repetition '{'");
            p->i++;
            if (lo < 0 || lo > 1000 || hi > 1000 || (hi >= 0 && hi < lo))
                return gp_err(p, "repetition bounds must satisfy 0 <= m <= n <= 1000");
        } else {
            break;
        }
        x = g_repeat(p->g, x, (uint32_t)lo, hi);
    }
    return x;
}

static int32_t parse_seq(gp *p)
{
    ss_seq_acc seq = {.n = 0};
    for (;;) {
        skip(p, p->depth > 0);
        if (p->i < p->n && p->s[p->i] == '\n') { /* a newline ends the rule unless one continues */
            size_t save = p->i;
            int line = p->line;
            skip(p, true);
            if (p->i >= p->n || at_rule_start(p) || p->s[p->i] != '|') {
                p->i = save;
                p->line = line;
                break;
            }
            break; /* "|" on the next line: parse_alts takes it */
        }
        if (p->i >= p->n || p->s[p->i] == '|' || p->s[p->i] == ')')
            break;
        if (p->depth == 0 && at_rule_start(p))
            break;
        int32_t x = parse_item(p);
        if (x < 0 || g_seq_push(p->g, &seq, x))
            return -1;
    }
    return g_seq_end(p->g, &seq);
}

static int32_t parse_alts(gp *p)
{
    int32_t r = g_new_rule(p->g);
    if (r < 0)
        return -1;
    for (;;) {
        int32_t x = parse_seq(p);
        ss_item it = it_ref(x);
        if (x < 0 || g_add_alt(p->g, r, &it, 1))
            return -1;
        skip(p, p->depth > 0);
        size_t save = p->i;
        int line = p->line;
        skip(p, true);
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            continue;
        }
        p->i = save;
        p->line = line;
        return r;
    }
}

int32_t ss_gbnf_compile(ss_grammar *g, const char *text, size_t len)
{
    gp p = {g, text, len, 0, 1, 0, NULL, 0};
    int32_t root = -1;
    if (len > SS_GBNF_MAX_BYTES)
        return gp_err(&p, "the grammar is longer than 1 MiB");
    for (;;) {
        skip(&p, true);
        if (p.i >= p.n)
            break;
        size_t st = p.i;
        while (p.i < p.n && is_name(p.s[p.i]))
            p.i++;
        if (p.i == st || (skip(&p, false), p.i + 3 > p.n) || memcmp(p.s + p.i, "::=", 3)) {
            root = gp_err(&p, "expected a rule: name ::= ...");
            goto out;
        }
        size_t name_end = st;
        while (name_end < p.n && is_name(p.s[name_end]))
            name_end++;
        int32_t r = rule_named(&p, p.s + st, name_end - st, true);
        p.i += 3;
        int32_t body = parse_alts(&p);
        ss_item it = it_ref(body);
        if (r < 0 || body < 0 || g_add_alt(g, r, &it, 1)) {
            root = -1;
            goto out;
        }
    }
    for (size_t i = 0; i < p.n_rules; i++)
        if (!p.rules[i].defined) {
            char msg[160];
            p.line = p.rules[i].line;
            snprintf(msg, sizeof msg, "rule '%.64s' is used but never defined", p.rules[i].name);
            root = gp_err(&p, msg);
            goto out;
        }
    for (size_t i = 0; i < p.n_rules; i++)
        if (!strcmp(p.rules[i].name, "root"))
            root = p.rules[i].rule;
    if (root < 0)
        root = gp_err(&p, "the grammar has no rule named root");
out:
    for (size_t i = 0; i < p.n_rules; i++)
        free(p.rules[i].name);
    free(p.rules);
    return root;
}
