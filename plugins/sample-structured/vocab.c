/* sample-structured: vocabulary trie and masks (vocab.h). */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "sort.h"

void ss_vocab_free(ss_vocab *v)
{
    free(v->tok_off);
    free(v->bytes);
    free(v->eog);
    free(v->eog_ids);
    free(v->nodes);
    free(v->ids);
    free(v->sub_bytes);
    free(v->sub_tok);
    memset(v, 0, sizeof *v);
}


/* Token x's bytes, for ss_sort_by_bytes. */
static const void *token_bytes(const void *ctx, uint32_t x, size_t *len)
{
    const ss_vocab *v = ctx;
    *len = v->tok_off[x + 1] - v->tok_off[x];
    return v->bytes + v->tok_off[x];
}

static int build_trie(ss_vocab *v, plume_error *err)
{
    uint32_t n = 0;
    uint32_t *ids = malloc((size_t)v->n_vocab * sizeof *ids + 1);
    uint32_t *tmp = malloc((size_t)v->n_vocab * sizeof *tmp + 1);
    if (!ids || !tmp) {
        free(ids);
        free(tmp);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory indexing the vocabulary");
    }
    for (int32_t t = 0; t < v->n_vocab; t++)
        if (!v->eog[t] && v->tok_off[t + 1] > v->tok_off[t])
            ids[n++] = (uint32_t)t;
    ss_sort_by_bytes(ids, tmp, n, token_bytes, v);
    free(tmp);
    size_t cap = 1024, nn = 1;
    ss_trie_node *nodes = malloc(cap * sizeof *nodes);
    uint32_t *path = malloc(65537 * sizeof *path);
    uint32_t depth = 0; /* path[0..depth] : node indices of the current path (path[0] root) */
    if (!nodes || !path) {
        free(nodes);
        free(path);
        free(ids);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory indexing the vocabulary");
    }
    nodes[0] = (ss_trie_node){0, 0, 0, 0, 0};
    path[0] = 0;
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = ids[i];
        const uint8_t *s = v->bytes + v->tok_off[t];
        uint32_t len = v->tok_off[t + 1] - v->tok_off[t];
        if (len > 65535)
            len = 65535; /* never reached by real vocabularies; keeps depth in 16 bits */
        uint32_t l = 0;
        while (prev && l < len && l < prev_len && s[l] == prev[l])
            l++;
        while (depth > l) { /* close the nodes past the common prefix */
            nodes[path[depth]].end = (uint32_t)nn;
            depth--;
        }
        for (uint32_t d = l; d < len; d++) {
            cap = ss_grow((void **)&nodes, cap, nn + 1, sizeof *nodes, 1024);
            if (!cap) {
                free(nodes);
                free(path);
                free(ids);
                return plume_err(err, PLUME_ERR_NOMEM, "out of memory indexing the vocabulary");
            }
            nodes[nn] = (ss_trie_node){0, i, 0, (uint16_t)(d + 1), s[d]};
            path[++depth] = (uint32_t)nn++;
            if (d + 1 > v->max_depth)
                v->max_depth = (uint16_t)(d + 1);
        }
        ss_trie_node *end = &nodes[path[depth]];
        if (end->tok_n == 0)
            end->tok_first = i;
        end->tok_n++;
        prev = s;
        prev_len = len;
    }
    while (depth > 0) {
        nodes[path[depth]].end = (uint32_t)nn;
        depth--;
    }
    nodes[0].end = (uint32_t)nn;
    free(path);
    v->nodes = nodes;
    v->n_nodes = (uint32_t)nn;
    v->ids = ids;
    v->sub_bytes = calloc(nn, sizeof *v->sub_bytes);
    v->sub_tok = malloc((nn + 1) * sizeof *v->sub_tok);
    if (!v->sub_bytes || !v->sub_tok)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory indexing the vocabulary");
    v->sub_tok[nn] = n;
    for (size_t i = nn; i-- > 0;) {
        v->sub_tok[i] = nodes[i].tok_n ? nodes[i].tok_first : v->sub_tok[i + 1];
        if (i > 0)
            ss_set_add(&v->sub_bytes[i], nodes[i].byte);
        /* children follow their parent in preorder: fold each child into it */
        for (size_t c = i + 1; c < nodes[i].end; c = nodes[c].end)
            for (int w = 0; w < 4; w++)
                v->sub_bytes[i].w[w] |= v->sub_bytes[c].w[w];
    }
    return 0;
}

static int finish_eog(ss_vocab *v, plume_error *err)
{
    v->n_eog = 0;
    for (int32_t t = 0; t < v->n_vocab; t++)
        v->n_eog += v->eog[t];
    v->eog_ids = malloc(((size_t)v->n_eog + 1) * sizeof *v->eog_ids);
    if (!v->eog_ids)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory indexing the vocabulary");
    int32_t k = 0;
    for (int32_t t = 0; t < v->n_vocab; t++)
        if (v->eog[t])
            v->eog_ids[k++] = t;
    return build_trie(v, err);
}

int ss_vocab_build(ss_vocab *v, const plume_tokenizer *tok, int32_t n_vocab, plume_error *err)
{
    memset(v, 0, sizeof *v);
    int32_t nt = plume_tokenizer_n_vocab(tok);
    v->n_vocab = n_vocab;
    v->tok_off = malloc(((size_t)n_vocab + 1) * sizeof *v->tok_off);
    v->eog = calloc((size_t)n_vocab + 1, 1);
    size_t cap = (size_t)n_vocab * 8 + 64, used = 0;
    v->bytes = malloc(cap);
    if (!v->tok_off || !v->eog || !v->bytes)
        goto nomem;
    for (int32_t t = 0; t < n_vocab; t++) {
        v->tok_off[t] = (uint32_t)used;
        if (t >= nt)
            continue;
        if (plume_tokenizer_is_eog(tok, t)) {
            v->eog[t] = true;
            continue;
        }
        if (plume_tokenizer_is_special(tok, t))
            continue;
        int len = plume_token_bytes(tok, t, false, NULL, 0);
        if (len <= 0)
            continue;
        cap = ss_grow((void **)&v->bytes, cap, used + (size_t)len, 1, 64);
        if (!cap)
            goto nomem;
        plume_token_bytes(tok, t, false, (char *)v->bytes + used, (size_t)len);
        used += (size_t)len;
    }
    v->tok_off[n_vocab] = (uint32_t)used;
    return finish_eog(v, err);
nomem:
    ss_vocab_free(v);
    return plume_err(err, PLUME_ERR_NOMEM, "out of memory indexing the vocabulary");
}

int ss_vocab_build_raw(ss_vocab *v, const char *const *texts, const uint32_t *lens,
                       const bool *eog, int32_t n_vocab, plume_error *err)
{
    memset(v, 0, sizeof *v);
    size_t total = 0;
    for (int32_t t = 0; t < n_vocab; t++)
        total += lens[t];
    v->n_vocab = n_vocab;
    v->tok_off = malloc(((size_t)n_vocab + 1) * sizeof *v->tok_off);
    v->eog = calloc((size_t)n_vocab + 1, 1);
    v->bytes = malloc(total + 1);
    if (!v->tok_off || !v->eog || !v->bytes) {
        ss_vocab_free(v);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory indexing the vocabulary");
    }
    size_t used = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        v->tok_off[t] = (uint32_t)used;
        v->eog[t] = eog && eog[t];
        if (v->eog[t])
            continue;
        memcpy(v->bytes + used, texts[t], lens[t]);
        used += lens[t];
    }
    v->tok_off[n_vocab] = (uint32_t)used;
    return finish_eog(v, err);
}

int ss_mask_compute(const ss_vocab *v, ss_pda *p, int32_t s, uint8_t *out)
{
    memset(out, 0, ss_mask_bytes(v));
    int32_t lvl_buf[256];
    int32_t *lvl = v->max_depth < 256 ? lvl_buf : malloc(((size_t)v->max_depth + 1) * sizeof *lvl);
    if (!lvl) {
        plume_err(&p->err, PLUME_ERR_NOMEM, "out of memory computing a token mask");
        return -1;
    }
    int rc = 0;
    lvl[0] = s;
    const ss_trie_node *nodes = v->nodes;
    /* the bytes that leave s where it is: a subtree made of them only is
     * allowed whole (each of its tokens' prefixes stays in s, which lives) */
    ss_set loop = {{0}};
    /* A byte that fails from s (a limit of the grammar) is simply not a
     * loop byte: it matters only if some token takes it from s, and then
     * the walk below steps it again and fails as the brute force would.
     * Its message is not this mask's failure, so p->err is kept. */
    const plume_error kept = p->err;
    for (int b = 0; b < 256; b++)
        if (ss_pda_step(p, s, (uint8_t)b) == s)
            ss_set_add(&loop, (uint8_t)b);
    p->err = kept;
    for (uint32_t i = 1; i < v->n_nodes;) {
        const ss_trie_node *nd = &nodes[i];
        int32_t from = lvl[nd->depth - 1];
        if (from == s) {
            const ss_set *sb = &v->sub_bytes[i];
            if (!(sb->w[0] & ~loop.w[0]) && !(sb->w[1] & ~loop.w[1]) &&
                !(sb->w[2] & ~loop.w[2]) && !(sb->w[3] & ~loop.w[3])) {
                for (uint32_t k = v->sub_tok[i]; k < v->sub_tok[nd->end]; k++) {
                    uint32_t id = v->ids[k];
                    out[id >> 3] |= (uint8_t)(1u << (id & 7));
                }
                i = nd->end;
                continue;
            }
        }
        const int32_t *nx = p->ds[from].next;
        int32_t t = nx ? nx[nd->byte] : -2;
        if (t == -2)
            t = ss_pda_step(p, from, nd->byte);
        if (t == -2) {
            rc = -1;
            break;
        }
        if (t == -1) {
            i = nd->end;
            continue;
        }
        lvl[nd->depth] = t;
        for (uint32_t k = 0; k < nd->tok_n; k++) {
            uint32_t id = v->ids[nd->tok_first + k];
            out[id >> 3] |= (uint8_t)(1u << (id & 7));
        }
        i++;
    }
    if (lvl != lvl_buf)
        free(lvl);
    if (rc)
        return -1;
    if (p->ds[s].accepting)
        for (int32_t k = 0; k < v->n_eog; k++)
            out[v->eog_ids[k] >> 3] |= (uint8_t)(1u << (v->eog_ids[k] & 7));
    return 0;
}

const uint8_t *ss_mask(const ss_vocab *v, ss_pda *p, int32_t s)
{
    p->clock++;
    if (p->ds[s].mask) {
        p->ds[s].mask_use = p->clock;
        return p->ds[s].mask;
    }
    if (p->n_masks >= p->max_masks) { /* drop the least recently used */
        size_t slot = 0;
        for (size_t i = 1; i < p->n_masks; i++)
            if (p->ds[p->mask_ids[i]].mask_use < p->ds[p->mask_ids[slot]].mask_use)
                slot = i;
        ss_dstate *victim = &p->ds[p->mask_ids[slot]];
        free(victim->mask);
        victim->mask = NULL;
        p->mask_ids[slot] = p->mask_ids[--p->n_masks];
        p->dfa_bytes -= ss_mask_bytes(v);
    }
    uint8_t *m = malloc(ss_mask_bytes(v));
    if (!m) {
        plume_err(&p->err, PLUME_ERR_NOMEM, "out of memory computing a token mask");
        return NULL;
    }
    if (ss_mask_compute(v, p, s, m)) {
        free(m);
        return NULL;
    }
    p->ds[s].mask = m; /* ds may have moved during the walk: index again */
    p->ds[s].mask_use = p->clock;
    p->mask_ids[p->n_masks++] = s;
    p->dfa_bytes += ss_mask_bytes(v);
    return m;
}

int ss_mask_brute(const ss_vocab *v, ss_pda *p, int32_t s, uint8_t *out)
{
    memset(out, 0, ss_mask_bytes(v));
    for (int32_t t = 0; t < v->n_vocab; t++) {
        if (v->eog[t]) {
            if (p->ds[s].accepting)
                out[t >> 3] |= (uint8_t)(1u << (t & 7));
            continue;
        }
        uint32_t a = v->tok_off[t], b = v->tok_off[t + 1];
        if (a == b)
            continue;
        int32_t st = s;
        for (uint32_t i = a; i < b && st >= 0; i++)
            st = ss_pda_step(p, st, v->bytes[i]);
        if (st == -2)
            return -1;
        if (st >= 0)
            out[t >> 3] |= (uint8_t)(1u << (t & 7));
    }
    return 0;
}
