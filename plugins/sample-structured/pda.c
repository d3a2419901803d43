/* sample-structured: the pushdown automaton and its lazy DFA (pda.h). */
#include "pda.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

static int fail(ss_pda *p, const char *msg)
{
    plume_err(&p->err, PLUME_ERR_RANGE, "%s", msg);
    return -2;
}

static int nomem(ss_pda *p) { return fail(p, "out of memory running the structured-output grammar"); }

static uint32_t hash2(uint32_t a, uint32_t b)
{
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

/* Rebuilds the open-addressing table *tab (entries i + 1, 0 empty) at
 * twice its capacity (1024 at first) for entries 0 .. n-1, entry i at
 * hash_of(p, i).  0, or -1 when out of memory (the table unchanged). */
static int tab_grow(ss_pda *p, uint32_t **tab, uint32_t *cap, uint32_t n,
                    uint32_t (*hash_of)(const ss_pda *p, uint32_t i))
{
    const uint32_t c = *cap ? *cap * 2 : 1024;
    uint32_t *t = calloc(c, sizeof *t);
    if (!t)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = hash_of(p, i) & (c - 1);
        while (t[h])
            h = (h + 1) & (c - 1);
        t[h] = i + 1;
    }
    free(*tab);
    *tab = t;
    *cap = c;
    return 0;
}

static uint32_t node_hash(const ss_pda *p, uint32_t i)
{
    return hash2(p->nodes[i].pos, p->nodes[i].parent);
}

static int ntab_grow(ss_pda *p) { return tab_grow(p, &p->ntab, &p->ntab_cap, p->n_nodes, node_hash); }

/* The node of stack (pos, parent): found or made.  -2 on failure. */
static int64_t node_of(ss_pda *p, uint32_t pos, uint32_t parent)
{
    uint32_t h = hash2(pos, parent) & (p->ntab_cap - 1);
    for (; p->ntab[h]; h = (h + 1) & (p->ntab_cap - 1)) {
        const ss_node *n = &p->nodes[p->ntab[h] - 1];
        if (n->pos == pos && n->parent == parent)
            return p->ntab[h] - 1;
    }
    if (p->n_nodes >= SS_MAX_NODES)
        return fail(p, "the structured-output grammar reached its bound of parse stacks "
                       "(deeper nesting than it allows); give a shallower schema or grammar");
    if (p->n_nodes == p->cap_nodes) { /* nodes and their marks share the capacity */
        const size_t cap = ss_grow((void **)&p->nodes, p->cap_nodes, p->n_nodes + 1,
                                   sizeof *p->nodes, 1024);
        if (!cap || !ss_grow((void **)&p->mark, p->cap_nodes, cap, sizeof *p->mark, cap))
            return nomem(p);
        memset(p->mark + p->cap_nodes, 0, (cap - p->cap_nodes) * sizeof *p->mark);
        p->cap_nodes = (uint32_t)cap;
    }
    uint32_t id = p->n_nodes++;
    p->nodes[id] = (ss_node){pos, parent, -1, 0};
    p->ntab[h] = id + 1;
    if (2 * p->n_nodes > p->ntab_cap && ntab_grow(p))
        return nomem(p);
    return id;
}

static int push_work(ss_pda *p, uint32_t id, uint32_t *nw)
{
    if (p->mark[id] == p->stamp)
        return 0;
    p->mark[id] = p->stamp;
    if (*nw == p->cap_work) {
        const size_t cap = ss_grow((void **)&p->work, p->cap_work, *nw + 1, sizeof *p->work, 256);
        if (!cap)
            return nomem(p);
        p->cap_work = (uint32_t)cap;
    }
    p->work[(*nw)++] = id;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Expands the stacks seeded in p->work[0..nw) (already marked) until each
 * has a byte set on top, or is empty (node 0); writes them sorted to out
 * (at most SS_MAX_STATE_STACKS).  Returns the count or -2. */
static int closure(ss_pda *p, uint32_t nw, uint32_t *out)
{
    const ss_grammar *g = p->g;
    uint32_t nout = 0;
    while (nw) {
        uint32_t id = p->work[--nw];
        if (id == 0) {
            if (nout == SS_MAX_STATE_STACKS)
                goto too_many;
            out[nout++] = 0;
            continue;
        }
        ss_node n = p->nodes[id];
        ss_elem e = g->el[n.pos];
        if (e.kind == GE_SET) {
            if (nout == SS_MAX_STATE_STACKS)
                goto too_many;
            out[nout++] = id;
        } else if (e.kind == GE_END) {
            /* pop: continue at the parent (the empty stack when it is 0) */
            if (push_work(p, n.parent, &nw))
                return -2;
        } else {
            uint32_t next = n.pos + 1, cont = n.parent;
            if (g->el[next].kind != GE_END) { /* not a tail call: remember where to return */
                int64_t c = node_of(p, next, n.parent);
                if (c < 0)
                    return -2;
                cont = (uint32_t)c;
            }
            uint32_t r = e.val;
            for (uint32_t a = 0; a < g->rule_n[r]; a++) {
                int64_t k = node_of(p, g->alt[g->rule_first[r] + a], cont);
                if (k < 0 || push_work(p, (uint32_t)k, &nw))
                    return -2;
            }
        }
    }
    qsort(out, nout, sizeof *out, cmp_u32);
    return (int)nout;
too_many:
    fail(p, "the structured-output grammar is too ambiguous (more than 1024 parses of one "
            "prefix); make its alternatives distinct");
    return -2;
}

/* The successors of stack id after its top byte set matched. */
static int advance(ss_pda *p, uint32_t id)
{
    if (p->nodes[id].succ_off >= 0)
        return 0;
    p->stamp++;
    uint32_t nw = 0;
    ss_node n = p->nodes[id];
    int64_t k = node_of(p, n.pos + 1, n.parent);
    if (k < 0 || push_work(p, (uint32_t)k, &nw))
        return -2;
    uint32_t *tmp = malloc((SS_MAX_STATE_STACKS + 1) * sizeof *tmp);
    if (!tmp)
        return nomem(p);
    int c = closure(p, nw, tmp);
    if (c < 0) {
        free(tmp);
        return -2;
    }
    if (p->n_succ + (uint32_t)c > p->cap_succ) {
        const size_t cap = ss_grow((void **)&p->succ, p->cap_succ, p->n_succ + (uint32_t)c,
                                   sizeof *p->succ, 4096);
        if (!cap) {
            free(tmp);
            return nomem(p);
        }
        p->cap_succ = (uint32_t)cap;
    }
    memcpy(p->succ + p->n_succ, tmp, (size_t)c * sizeof *tmp);
    free(tmp);
    p->nodes[id].succ_off = (int32_t)p->n_succ;
    p->nodes[id].succ_len = (uint32_t)c;
    p->n_succ += (uint32_t)c;
    return 0;
}

int ss_pda_init(ss_pda *p, const ss_grammar *g, plume_error *err)
{
    memset(p, 0, sizeof *p);
    p->g = g;
    p->start = -1;
    p->max_masks = SS_MAX_MASKS;
    p->scratch = malloc((SS_MAX_STATE_STACKS + 1) * sizeof *p->scratch);
    if (!p->scratch || ntab_grow(p) || node_of(p, UINT32_MAX, 0) != 0) { /* node 0: empty stack */
        ss_pda_free(p);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory setting up the grammar");
    }
    return 0;
}

void ss_pda_flush(ss_pda *p)
{
    for (uint32_t i = 0; i < p->n_ds; i++) {
        free(p->ds[i].next);
        free(p->ds[i].mask);
    }
    p->n_ds = 0;
    p->n_stk = 0;
    if (p->dtab)
        memset(p->dtab, 0, p->dtab_cap * sizeof *p->dtab);
    p->dfa_bytes = 0;
    p->n_masks = 0;
    p->start = -1;
    p->epoch++;
}

void ss_pda_free(ss_pda *p)
{
    ss_pda_flush(p);
    free(p->nodes);
    free(p->ntab);
    free(p->succ);
    free(p->mark);
    free(p->ds);
    free(p->stk);
    free(p->dtab);
    free(p->scratch);
    free(p->work);
    memset(p, 0, sizeof *p);
}

static uint32_t hash_list(const uint32_t *s, uint32_t n)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h ? h : 1;
}

static uint32_t ds_hash(const ss_pda *p, uint32_t i) { return p->ds[i].hash; }

static int dtab_grow(ss_pda *p) { return tab_grow(p, &p->dtab, &p->dtab_cap, p->n_ds, ds_hash); }

int32_t ss_pda_intern(ss_pda *p, const uint32_t *s, uint32_t n)
{
    if (!p->dtab && dtab_grow(p))
        return nomem(p);
    uint32_t hv = hash_list(s, n);
    uint32_t h = hv & (p->dtab_cap - 1);
    for (; p->dtab[h]; h = (h + 1) & (p->dtab_cap - 1)) {
        const ss_dstate *d = &p->ds[p->dtab[h] - 1];
        if (d->hash == hv && d->len == n && !memcmp(p->stk + d->off, s, n * sizeof *s))
            return (int32_t)(p->dtab[h] - 1);
    }
    const size_t cap_ds = ss_grow((void **)&p->ds, p->cap_ds, p->n_ds + 1, sizeof *p->ds, 256);
    if (!cap_ds)
        return nomem(p);
    p->cap_ds = (uint32_t)cap_ds;
    const size_t cap_stk =
        ss_grow((void **)&p->stk, p->cap_stk, (size_t)p->n_stk + n, sizeof *p->stk, 4096);
    if (!cap_stk)
        return nomem(p);
    p->cap_stk = (uint32_t)cap_stk;
    memcpy(p->stk + p->n_stk, s, n * sizeof *s);
    uint32_t id = p->n_ds++;
    p->ds[id] = (ss_dstate){p->n_stk, n, hv, NULL, NULL, 0, n > 0 && s[0] == 0};
    p->n_stk += n;
    p->dfa_bytes += sizeof(ss_dstate) + n * sizeof *s + 8;
    p->dtab[h] = id + 1;
    if (2 * p->n_ds > p->dtab_cap && dtab_grow(p))
        return nomem(p);
    return (int32_t)id;
}

const uint32_t *ss_pda_stacks(const ss_pda *p, int32_t s, uint32_t *n)
{
    *n = p->ds[s].len;
    return p->stk + p->ds[s].off;
}

int32_t ss_pda_start(ss_pda *p)
{
    if (p->start >= 0)
        return p->start;
    const ss_grammar *g = p->g;
    p->stamp++;
    uint32_t nw = 0;
    uint32_t r = g->root;
    for (uint32_t a = 0; a < g->rule_n[r]; a++) {
        int64_t k = node_of(p, g->alt[g->rule_first[r] + a], 0);
        if (k < 0 || push_work(p, (uint32_t)k, &nw))
            return -1;
    }
    int c = closure(p, nw, p->scratch);
    if (c < 0)
        return -1;
    int32_t s = ss_pda_intern(p, p->scratch, (uint32_t)c);
    if (s < 0)
        return -1;
    p->start = s;
    return s;
}

int32_t ss_pda_step(ss_pda *p, int32_t s, uint8_t b)
{
    ss_dstate *d = &p->ds[s];
    if (d->next && d->next[b] != -2)
        return d->next[b];
    if (!d->next) {
        d->next = malloc(256 * sizeof *d->next);
        if (!d->next)
            return nomem(p);
        for (int i = 0; i < 256; i++)
            d->next[i] = -2;
        p->dfa_bytes += 256 * sizeof *d->next;
    }
    const ss_grammar *g = p->g;
    uint32_t off = d->off, len = d->len;
    /* successors of every stack whose top set holds b (memoised per stack) */
    for (uint32_t i = 0; i < len; i++) {
        uint32_t id = p->stk[off + i];
        if (id != 0 && ss_set_has(&g->sets[g->el[p->nodes[id].pos].val], b) && advance(p, id))
            return -2;
    }
    p->stamp++;
    uint32_t n = 0;
    for (uint32_t i = 0; i < len; i++) {
        uint32_t id = p->stk[off + i];
        if (id == 0 || !ss_set_has(&g->sets[g->el[p->nodes[id].pos].val], b))
            continue;
        const ss_node *nd = &p->nodes[id];
        for (uint32_t j = 0; j < nd->succ_len; j++) {
            uint32_t k = p->succ[nd->succ_off + j];
            if (p->mark[k] == p->stamp)
                continue;
            p->mark[k] = p->stamp;
            if (n == SS_MAX_STATE_STACKS)
                return fail(p, "the structured-output grammar is too ambiguous (more than 1024 "
                               "parses of one prefix); make its alternatives distinct");
            p->scratch[n++] = k;
        }
    }
    int32_t r = -1;
    if (n) {
        qsort(p->scratch, n, sizeof *p->scratch, cmp_u32);
        r = ss_pda_intern(p, p->scratch, n);
        if (r < 0)
            return -2;
    }
    p->ds[s].next[b] = r;
    return r;
}
