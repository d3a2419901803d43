/* sample-structured: building and laying out grammars (grammar.h). */
#include "grammar.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "sort.h"

void g_init(ss_grammar *g, plume_error *err)
{
    memset(g, 0, sizeof *g);
    for (int i = 0; i < 256; i++)
        g->byte_set[i] = -1;
    g->err = err;
}

void g_free(ss_grammar *g)
{
    free(g->el);
    free(g->alt);
    free(g->alt_rule);
    free(g->rule_first);
    free(g->rule_n);
    free(g->sets);
    memset(g, 0, sizeof *g);
}

static int too_big(ss_grammar *g, const char *what, uint32_t limit)
{
    if (!g->failed)
        plume_err(g->err, PLUME_ERR_RANGE,
                  "the constraint compiles to more than %u grammar %s; simplify it (fewer enum "
                  "values, smaller repetition bounds, a shorter pattern)",
                  limit, what);
    g->failed = true;
    return -1;
}

static int nomem(ss_grammar *g)
{
    if (!g->failed)
        plume_err(g->err, PLUME_ERR_NOMEM, "out of memory compiling the constraint");
    g->failed = true;
    return -1;
}

/* Grows *p (elements of size sz, capacity *cap) to hold need (ss_grow). */
static int grow(ss_grammar *g, void **p, uint32_t *cap, uint32_t need, size_t sz)
{
    const size_t c = ss_grow(p, *cap, need, sz, 64);
    if (!c)
        return nomem(g);
    *cap = (uint32_t)c;
    return 0;
}

/* Grows two parallel uint32_t arrays that share the capacity *cap. */
static int grow_pair(ss_grammar *g, uint32_t **a, uint32_t **b, uint32_t *cap, uint32_t need)
{
    uint32_t c = *cap;
    if (grow(g, (void **)a, &c, need, sizeof(uint32_t)))
        return -1;
    c = *cap;
    if (grow(g, (void **)b, &c, need, sizeof(uint32_t)))
        return -1;
    *cap = c;
    return 0;
}

int32_t g_new_rule(ss_grammar *g)
{
    if (g->failed)
        return -1;
    if (g->n_rule >= SS_MAX_RULES)
        return too_big(g, "rules", SS_MAX_RULES);
    if (grow_pair(g, &g->rule_first, &g->rule_n, &g->cap_rule, g->n_rule + 1))
        return -1;
    g->rule_n[g->n_rule] = 0;
    g->rule_first[g->n_rule] = 0;
    return (int32_t)g->n_rule++;
}

int g_add_alt(ss_grammar *g, int32_t rule, const ss_item *items, size_t n)
{
    if (g->failed || rule < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((int32_t)items[i].val < 0)
            return -1; /* an item built from a failed call */
    if ((size_t)g->n_el + n + 1 > SS_MAX_ELEMS)
        return too_big(g, "elements", SS_MAX_ELEMS);
    if (grow(g, (void **)&g->el, &g->cap_el, g->n_el + (uint32_t)n + 1, sizeof(ss_elem)))
        return -1;
    if (grow_pair(g, &g->alt, &g->alt_rule, &g->cap_alt, g->n_alt + 1))
        return -1;
    g->alt[g->n_alt] = g->n_el;
    g->alt_rule[g->n_alt++] = (uint32_t)rule;
    g->rule_n[rule]++;
    for (size_t i = 0; i < n; i++)
        g->el[g->n_el++] = (ss_elem){items[i].kind, items[i].val};
    g->el[g->n_el++] = (ss_elem){GE_END, 0};
    return 0;
}

int32_t g_set(ss_grammar *g, const ss_set *s)
{
    if (g->failed)
        return -1;
    if (g->n_sets >= (1u << 29))
        return too_big(g, "byte sets", 1u << 29);
    if (grow(g, (void **)&g->sets, &g->cap_sets, g->n_sets + 1, sizeof(ss_set)))
        return -1;
    g->sets[g->n_sets] = *s;
    return (int32_t)g->n_sets++;
}

int32_t g_byte(ss_grammar *g, uint8_t b)
{
    if (g->byte_set[b] >= 0)
        return g->byte_set[b];
    ss_set s = {{0}};
    ss_set_add(&s, b);
    int32_t i = g_set(g, &s);
    if (i >= 0)
        g->byte_set[b] = i;
    return i;
}

/* A new rule of one alternative of n items: item i the byte s[i] when s
 * is given, else a reference to rules[i]. */
static int32_t one_alt_rule(ss_grammar *g, const char *s, const int32_t *rules, size_t n)
{
    int32_t r = g_new_rule(g);
    if (r < 0)
        return -1;
    ss_item buf[64] = {{0}};
    ss_item *items = n <= 64 ? buf : malloc(n * sizeof *items);
    if (!items)
        return nomem(g);
    for (size_t i = 0; i < n; i++)
        items[i] = s ? it_set(g_byte(g, (uint8_t)s[i])) : it_ref(rules[i]);
    int rc = g_add_alt(g, r, items, n);
    if (items != buf)
        free(items);
    return rc ? -1 : r;
}

int32_t g_lit(ss_grammar *g, const char *s, size_t n) { return one_alt_rule(g, s, NULL, n); }

int32_t g_seq(ss_grammar *g, const int32_t *rules, size_t n)
{
    return one_alt_rule(g, NULL, rules, n);
}

int g_seq_push(ss_grammar *g, ss_seq_acc *s, int32_t x)
{
    if (s->n == sizeof s->items / sizeof s->items[0]) {
        const int32_t r = g_seq(g, s->items, s->n);
        if (r < 0)
            return -1;
        s->items[0] = r;
        s->n = 1;
    }
    s->items[s->n++] = x;
    return 0;
}

int32_t g_seq_end(ss_grammar *g, const ss_seq_acc *s) { return g_seq(g, s->items, s->n); }

int32_t g_alts(ss_grammar *g, const int32_t *rules, size_t n)
{
    int32_t r = g_new_rule(g);
    if (r < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        ss_item it = it_ref(rules[i]);
        if (g_add_alt(g, r, &it, 1))
            return -1;
    }
    return r;
}

int32_t g_setrule(ss_grammar *g, const ss_set *s)
{
    int32_t si = g_set(g, s), r = g_new_rule(g);
    if (si < 0 || r < 0)
        return -1;
    ss_item it = it_set(si);
    return g_add_alt(g, r, &it, 1) ? -1 : r;
}

int32_t g_opt(ss_grammar *g, int32_t x)
{
    int32_t r = g_new_rule(g);
    ss_item it = it_ref(x);
    if (r < 0 || g_add_alt(g, r, &it, 1) || g_add_alt(g, r, NULL, 0))
        return -1;
    return r;
}

int32_t g_repeat(ss_grammar *g, int32_t x, uint32_t min, int64_t max)
{
    if (g->failed || x < 0)
        return -1;
    if (min > SS_MAX_ELEMS || max > (int64_t)SS_MAX_ELEMS)
        return too_big(g, "elements", SS_MAX_ELEMS);
    /* the optional tail: x* as  S ::= x S | ""  , x{0,k} as a chain
     * T_k ::= x T_{k-1} | ""  (both recursions in tail position) */
    int32_t tail;
    if (max < 0) {
        tail = g_new_rule(g);
        ss_item its[2] = {it_ref(x), it_ref(tail)};
        if (tail < 0 || g_add_alt(g, tail, its, 2) || g_add_alt(g, tail, NULL, 0))
            return -1;
    } else {
        if (max < min)
            max = min;
        tail = g_new_rule(g);
        if (tail < 0 || g_add_alt(g, tail, NULL, 0))
            return -1;
        for (int64_t k = 0; k < max - (int64_t)min; k++) {
            int32_t t = g_new_rule(g);
            ss_item its[2] = {it_ref(x), it_ref(tail)};
            if (t < 0 || g_add_alt(g, t, its, 2) || g_add_alt(g, t, NULL, 0))
                return -1;
            tail = t;
        }
    }
    if (min == 0)
        return tail;
    int32_t r = g_new_rule(g);
    if (r < 0)
        return -1;
    ss_item *items = malloc(((size_t)min + 1) * sizeof *items);
    if (!items)
        return nomem(g);
    for (uint32_t i = 0; i < min; i++)
        items[i] = it_ref(x);
    items[min] = it_ref(tail);
    int rc = g_add_alt(g, r, items, (size_t)min + 1);
    free(items);
    return rc ? -1 : r;
}

/* The set of bytes lo..hi as a grammar set, or -1. */
static int32_t byte_range(ss_grammar *g, int lo, int hi)
{
    ss_set s = {{0}};
    for (int b = lo; b <= hi; b++)
        ss_set_add(&s, (uint8_t)b);
    return g_set(g, &s);
}

int32_t g_utf8_char(ss_grammar *g, const ss_set *ascii_ok)
{
    /* the well-formed sequences of RFC 3629 (section 4): no overlong forms,
     * no surrogates (ED A0..BF), nothing above U+10FFFF */
    static const uint8_t seqs[8][4][2] = {
        {{0xC2, 0xDF}, {0x80, 0xBF}},
        {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
        {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
        {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}},
    };
    static const size_t lens[8] = {2, 3, 3, 3, 3, 4, 4, 4};
    ss_set a = *ascii_ok;
    a.w[2] = a.w[3] = 0; /* ASCII only */
    const int32_t sa = g_set(g, &a), r = g_new_rule(g);
    if (r < 0 || sa < 0)
        return -1;
    ss_item one[1] = {it_set(sa)};
    if (g_add_alt(g, r, one, 1))
        return -1;
    const int32_t cont = byte_range(g, 0x80, 0xBF); /* shared by most positions */
    if (cont < 0)
        return -1;
    for (size_t i = 0; i < 8; i++) {
        ss_item items[4];
        for (size_t k = 0; k < lens[i]; k++) {
            const uint8_t lo = seqs[i][k][0], hi = seqs[i][k][1];
            const int32_t set = lo == 0x80 && hi == 0xBF ? cont : byte_range(g, lo, hi);
            if (set < 0)
                return -1;
            items[k] = it_set(set);
        }
        if (g_add_alt(g, r, items, lens[i]))
            return -1;
    }
    return r;
}

/* ---- layout and checks ---- */

typedef struct edge {
    uint32_t to;
    bool tail;
} edge;

/* Left-recursion check: an edge A -> B when B can start A's alternative
 * (everything before it nullable); tail when B ends it.  A cycle of tail
 * edges only is harmless (the automaton's stack does not grow along it);
 * a cycle through a non-tail edge grows the stack forever: refused.
 * Tarjan's strongly connected components, iteratively. */
static int check_left_recursion(ss_grammar *g, const bool *nullable)
{
    uint32_t nr = g->n_rule;
    uint32_t *eoff = calloc((size_t)nr + 1, sizeof *eoff);
    edge *ed = NULL;
    size_t ne = 0, cap = 0;
    int rc = 0;
    if (!eoff)
        return nomem(g);
    for (uint32_t r = 0; r < nr; r++) {
        eoff[r] = (uint32_t)ne;
        for (uint32_t a = 0; a < g->rule_n[r]; a++) {
            for (uint32_t p = g->alt[g->rule_first[r] + a]; g->el[p].kind != GE_END; p++) {
                if (g->el[p].kind == GE_SET)
                    break;
                cap = ss_grow((void **)&ed, cap, ne + 1, sizeof *ed, 256);
                if (!cap) {
                    free(ed);
                    free(eoff);
                    return nomem(g);
                }
                ed[ne++] = (edge){g->el[p].val, g->el[p + 1].kind == GE_END};
                if (!nullable[g->el[p].val])
                    break;
            }
        }
    }
    eoff[nr] = (uint32_t)ne;
    int32_t *idx = malloc(nr * sizeof *idx), *low = malloc(nr * sizeof *low),
            *comp = malloc(nr * sizeof *comp);
    uint32_t *stk = malloc(nr * sizeof *stk), *cs = malloc(nr * sizeof *cs),
             *ci = malloc(nr * sizeof *ci);
    bool *on = calloc(nr, 1);
    if (!idx || !low || !comp || !stk || !cs || !ci || !on) {
        rc = nomem(g);
        goto out;
    }
    for (uint32_t r = 0; r < nr; r++)
        idx[r] = -1;
    int32_t counter = 0, ncomp = 0;
    uint32_t sp = 0;
    for (uint32_t s = 0; s < nr; s++) {
        if (idx[s] >= 0)
            continue;
        uint32_t csp = 0;
        cs[csp] = s;
        ci[csp++] = eoff[s];
        idx[s] = low[s] = counter++;
        stk[sp++] = s;
        on[s] = true;
        while (csp) {
            uint32_t v = cs[csp - 1];
            if (ci[csp - 1] < eoff[v + 1]) {
                uint32_t w = ed[ci[csp - 1]++].to;
                if (idx[w] < 0) {
                    idx[w] = low[w] = counter++;
                    stk[sp++] = w;
                    on[w] = true;
                    cs[csp] = w;
                    ci[csp++] = eoff[w];
                } else if (on[w] && idx[w] < low[v]) {
                    low[v] = idx[w];
                }
                continue;
            }
            if (low[v] == idx[v]) {
                uint32_t w;
                do {
                    w = stk[--sp];
                    on[w] = false;
                    comp[w] = ncomp;
                } while (w != v);
                ncomp++;
            }
            csp--;
            if (csp) {
                uint32_t u = cs[csp - 1];
                if (low[v] < low[u])
                    low[u] = low[v];
            }
        }
    }
    for (uint32_t r = 0; r < nr && !rc; r++)
        for (uint32_t e = eoff[r]; e < eoff[r + 1]; e++)
            if (!ed[e].tail && comp[ed[e].to] == comp[r]) {
                rc = plume_err(g->err, PLUME_ERR_INVALID,
                               "the grammar is left-recursive (a rule can reach itself before "
                               "reading any byte, e.g. a ::= a \"x\"); rewrite the recursion on the "
                               "right (a ::= \"x\" a) or with a repetition (a ::= \"x\"*)");
                g->failed = true;
                break;
            }
out:
    free(idx);
    free(low);
    free(comp);
    free(stk);
    free(cs);
    free(ci);
    free(on);
    free(ed);
    free(eoff);
    return rc;
}

int g_finish(ss_grammar *g, int32_t root)
{
    if (g->failed || root < 0)
        return -1;
    for (uint32_t r = 0; r < g->n_rule; r++)
        if (g->rule_n[r] == 0) {
            g->failed = true;
            return plume_err(g->err, PLUME_ERR_INVALID,
                             "a grammar rule has no definition (an unresolved reference)");
        }
    /* group the alternatives by rule (counting sort, stable) */
    uint32_t *pos = malloc((size_t)g->n_alt * sizeof *pos);
    if (!pos)
        return nomem(g);
    uint32_t acc = 0;
    for (uint32_t r = 0; r < g->n_rule; r++) {
        g->rule_first[r] = acc;
        acc += g->rule_n[r];
    }
    uint32_t *fill = calloc(g->n_rule ? g->n_rule : 1, sizeof *fill);
    if (!fill) {
        free(pos);
        return nomem(g);
    }
    for (uint32_t a = 0; a < g->n_alt; a++) {
        uint32_t r = g->alt_rule[a];
        pos[g->rule_first[r] + fill[r]++] = g->alt[a];
    }
    free(fill);
    free(g->alt);
    g->alt = pos;
    /* nullable rules: a work list, linear in the grammar's size (an
     * alternative is nullable once all of its references are; one made of
     * references only counts them down) */
    bool *nullable = calloc(g->n_rule ? g->n_rule : 1, 1);
    uint32_t *pending = malloc(((size_t)g->n_alt + 1) * sizeof *pending);
    uint32_t *alt_of = malloc(((size_t)g->n_alt + 1) * sizeof *alt_of);
    uint32_t *occ_off = calloc((size_t)g->n_rule + 1, sizeof *occ_off);
    uint32_t *occ = malloc(((size_t)g->n_el + 1) * sizeof *occ);
    uint32_t *queue = malloc(((size_t)g->n_rule + 1) * sizeof *queue);
    uint32_t *fillp = malloc(((size_t)g->n_rule + 1) * sizeof *fillp);
    if (!nullable || !pending || !alt_of || !occ_off || !occ || !queue || !fillp) {
        free(nullable);
        free(pending);
        free(alt_of);
        free(occ_off);
        free(occ);
        free(queue);
        free(fillp);
        return nomem(g);
    }
    for (uint32_t r = 0; r < g->n_rule; r++)
        for (uint32_t a = 0; a < g->rule_n[r]; a++)
            alt_of[g->rule_first[r] + a] = r;
    for (uint32_t a = 0; a < g->n_alt; a++) {
        uint32_t refs = 0;
        bool has_set = false;
        for (uint32_t p = g->alt[a]; g->el[p].kind != GE_END; p++) {
            if (g->el[p].kind == GE_SET)
                has_set = true;
            else
                refs++;
        }
        pending[a] = has_set ? UINT32_MAX : refs;
        if (!has_set)
            for (uint32_t p = g->alt[a]; g->el[p].kind != GE_END; p++)
                occ_off[g->el[p].val + 1]++;
    }
    for (uint32_t r = 0; r < g->n_rule; r++)
        occ_off[r + 1] += occ_off[r];
    memcpy(fillp, occ_off, ((size_t)g->n_rule + 1) * sizeof *fillp);
    for (uint32_t a = 0; a < g->n_alt; a++)
        if (pending[a] != UINT32_MAX)
            for (uint32_t p = g->alt[a]; g->el[p].kind != GE_END; p++)
                occ[fillp[g->el[p].val]++] = a;
    free(fillp);
    uint32_t qh = 0, qt = 0;
    for (uint32_t a = 0; a < g->n_alt; a++)
        if (pending[a] == 0 && !nullable[alt_of[a]]) {
            nullable[alt_of[a]] = true;
            queue[qt++] = alt_of[a];
        }
    while (qh < qt) {
        uint32_t r = queue[qh++];
        for (uint32_t k = occ_off[r]; k < occ_off[r + 1]; k++) {
            uint32_t a = occ[k];
            if (--pending[a] == 0 && !nullable[alt_of[a]]) {
                nullable[alt_of[a]] = true;
                queue[qt++] = alt_of[a];
            }
        }
    }
    free(pending);
    free(alt_of);
    free(occ_off);
    free(occ);
    free(queue);
    int rc = check_left_recursion(g, nullable);
    free(nullable);
    if (rc)
        return -1;
    g->root = (uint32_t)root;
    g->finished = true;
    return 0;
}

/* ---- literal sets as tries ---- */

typedef struct lit_ctx {
    ss_grammar *g;
    const char *const *s;
    const size_t *len;
    uint32_t *ord; /* indices sorted by string */
} lit_ctx;

/* Literal i's bytes, for ss_sort_by_bytes. */
static const void *lit_bytes(const void *ctx, uint32_t i, size_t *len)
{
    const lit_ctx *c = ctx;
    *len = c->len[i];
    return c->s[i];
}

/* The rule for the strings ord[lo..hi) from byte d on (all share d bytes). */
static int32_t lit_node(lit_ctx *c, size_t lo, size_t hi, size_t d)
{
    ss_grammar *g = c->g;
    int32_t r = g_new_rule(g);
    if (r < 0)
        return -1;
    size_t i = lo;
    if (c->len[c->ord[i]] == d) { /* a string ends here */
        if (g_add_alt(g, r, NULL, 0))
            return -1;
        while (i < hi && c->len[c->ord[i]] == d)
            i++;
    }
    while (i < hi) {
        uint8_t b = (uint8_t)c->s[c->ord[i]][d];
        size_t j = i;
        while (j < hi && (uint8_t)c->s[c->ord[j]][d] == b)
            j++;
        /* the run of bytes every string of [i, j) shares from d, ending where
         * one string ends or they branch */
        size_t e = d + 1;
        for (;;) {
            bool same = true;
            for (size_t k = i; k < j && same; k++)
                if (c->len[c->ord[k]] <= e || c->s[c->ord[k]][e] != c->s[c->ord[i]][e])
                    same = false;
            if (!same)
                break;
            e++;
        }
        size_t run = e - d;
        ss_item *items = malloc((run + 1) * sizeof *items);
        if (!items) {
            g->failed = true;
            return plume_err(g->err, PLUME_ERR_NOMEM, "out of memory compiling the constraint");
        }
        for (size_t k = 0; k < run; k++)
            items[k] = it_set(g_byte(g, (uint8_t)c->s[c->ord[i]][d + k]));
        size_t n_items = run;
        bool all_end = true;
        for (size_t k = i; k < j; k++)
            all_end &= c->len[c->ord[k]] == e;
        if (!all_end) {
            int32_t child = lit_node(c, i, j, e);
            if (child < 0) {
                free(items);
                return -1;
            }
            items[n_items++] = it_ref(child);
        }
        int rc = g_add_alt(g, r, items, n_items);
        free(items);
        if (rc)
            return -1;
        i = j;
    }
    return r;
}

int32_t g_literals(ss_grammar *g, const char *const *strs, const size_t *lens, size_t n)
{
    if (g->failed)
        return -1;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += lens[i];
    if (n > SS_MAX_LITERALS || total > SS_MAX_LITERAL_BYTES) {
        g->failed = true;
        return plume_err(g->err, PLUME_ERR_RANGE,
                         "%zu alternatives of %zu bytes in all: the limit is %d alternatives and "
                         "%u bytes; shorten the enum or choice list",
                         n, total, SS_MAX_LITERALS, SS_MAX_LITERAL_BYTES);
    }
    if (n == 0) {
        g->failed = true;
        return plume_err(g->err, PLUME_ERR_INVALID, "an empty enum or choice list matches nothing; "
                                                    "give at least one value");
    }
    uint32_t *ord = malloc(n * sizeof *ord), *tmp = malloc(n * sizeof *tmp);
    if (!ord || !tmp) {
        free(ord);
        free(tmp);
        return nomem(g);
    }
    for (size_t i = 0; i < n; i++)
        ord[i] = (uint32_t)i; /* n <= SS_MAX_LITERALS */
    lit_ctx c = {g, strs, lens, ord};
    ss_sort_by_bytes(ord, tmp, n, lit_bytes, &c);
    free(tmp);
    int32_t r = lit_node(&c, 0, n, 0);
    free(ord);
    return r;
}
