/* BPE: the merge table (pair of ids -> rank, result) and the merge loop.
 *
 * The loop keeps the symbols of one piece in a doubly linked list and the
 * candidate pairs in a binary min-heap keyed by (rank, position), so a piece
 * of n symbols costs O(n log n) whatever the vocabulary size.  Heap entries
 * are not removed when a neighbour changes; a popped entry is used only if
 * both symbols are still adjacent with the same combined length. */
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"
#include "tokenizer/tok_internal.h"

#define EMPTY_KEY UINT64_MAX

static uint32_t hash_pair(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    key ^= key >> 33;
    return (uint32_t)key;
}

void tok_merges_init(tok_merges *m)
{
    memset(m, 0, sizeof *m);
}

void tok_merges_free(tok_merges *m)
{
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* Finds the slot for key: its entry, or the empty slot where it belongs. */
static tok_merge_entry *slot_for(const tok_merges *m, uint64_t key)
{
    uint32_t mask = m->n_slots - 1;
    for (uint32_t i = hash_pair(key) & mask;; i = (i + 1) & mask) {
        tok_merge_entry *e = &m->slots[i];
        if (e->key == key || e->key == EMPTY_KEY)
            return e;
    }
}

static int merges_grow(tok_merges *m)
{
    uint32_t ns = m->n_slots ? m->n_slots * 2 : 1024;
    tok_merge_entry *old = m->slots;
    uint32_t old_n = m->n_slots;
    m->slots = malloc((size_t)ns * sizeof *m->slots);
    if (!m->slots) {
        m->slots = old;
        return -1;
    }
    m->n_slots = ns;
    for (uint32_t i = 0; i < ns; i++)
        m->slots[i].key = EMPTY_KEY;
    for (uint32_t i = 0; i < old_n; i++)
        if (old[i].key != EMPTY_KEY)
            *slot_for(m, old[i].key) = old[i];
    free(old);
    return 0;
}

int tok_merges_add(tok_merges *m, int32_t left, int32_t right, int32_t result, int32_t rank)
{
    if ((uint64_t)(m->n + 1) * 2 > m->n_slots && merges_grow(m) < 0)
        return -1;
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    tok_merge_entry *e = slot_for(m, key);
    if (e->key == key)
        return 0; /* the first (best-ranked) occurrence wins */
    e->key = key;
    e->rank = rank;
    e->result = result;
    m->n++;
    return 0;
}

bool tok_merges_find(const tok_merges *m, int32_t left, int32_t right, int32_t *rank,
                     int32_t *result)
{
    if (!m->n_slots || left < 0 || right < 0)
        return false;
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    const tok_merge_entry *e = slot_for(m, key);
    if (e->key != key)
        return false;
    *rank = e->rank;
    *result = e->result;
    return true;
}

void tok_work_free(tok_work *w)
{
    free(w->syms);
    free(w->heap);
    memset(w, 0, sizeof *w);
}

int tok_work_load(const plume_tokenizer *t, tok_work *w, const char *text, size_t len,
                  bool per_byte)
{
    if (len > UINT32_MAX / 2)
        return -1;
    if (len > w->cap_syms) {
        size_t nc = len < 64 ? 64 : len;
        tok_sym *s = realloc(w->syms, nc * sizeof *s);
        if (!s)
            return -1;
        w->syms = s;
        w->cap_syms = nc;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k = 1;
        uint32_t cp;
        if (!per_byte) { /* one character; each byte of an invalid sequence alone */
            int c = tok_utf8_decode(text + i, len - i, &cp);
            k = c > 0 ? (size_t)c : 1;
        }
        tok_sym *s = &w->syms[n];
        s->start = (uint32_t)i;
        s->len = (uint32_t)k;
        s->id = per_byte ? t->byte_tok[(uint8_t)text[i]] : tok_vocab_find(&t->vocab, text + i, k);
        s->prev = (int32_t)n - 1;
        s->next = (int32_t)n + 1;
        n++;
        i += k;
    }
    if (n)
        w->syms[n - 1].next = -1;
    w->n_syms = n;
    return 0;
}

static bool cand_less(const tok_cand *a, const tok_cand *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(tok_work *w, tok_cand c)
{
    tok_cand *h = plume_grow(w->heap, &w->cap_heap, w->n_heap + 1, 64, sizeof *h);
    if (!h)
        return -1;
    w->heap = h;
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &w->heap[p]))
            break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
    return 0;
}

static tok_cand heap_pop(tok_work *w)
{
    tok_cand top = w->heap[0];
    tok_cand last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const tok_cand *best = &last;
        if (l < n && cand_less(&w->heap[l], best)) {
            m = l;
            best = &w->heap[l];
        }
        if (r < n && cand_less(&w->heap[r], best))
            m = r;
        if (m == i)
            break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

/* Queues the pair (left, left.next) if it merges. */
static int try_pair(const plume_tokenizer *t, tok_work *w, const char *text, tok_merge_mode mode,
                    int32_t left)
{
    if (left < 0)
        return 0;
    const tok_sym *a = &w->syms[left];
    if (a->next < 0)
        return 0;
    const tok_sym *b = &w->syms[a->next];
    tok_cand c = {.left = left, .right = a->next, .len = a->len + b->len};
    if (mode == TOK_MERGE_RANKS) {
        int32_t rank;
        if (!tok_merges_find(&t->merges, a->id, b->id, &rank, &c.result))
            return 0;
        c.key = rank;
    } else {
        c.result = tok_vocab_find(&t->vocab, text + a->start, c.len);
        if (c.result < 0)
            return 0;
        c.key = -(double)t->vocab.score[c.result];
    }
    return heap_push(w, c);
}

int tok_bpe_merge(const plume_tokenizer *t, tok_work *w, const char *text, tok_merge_mode mode)
{
    w->n_heap = 0;
    for (size_t i = 0; i + 1 < w->n_syms; i++)
        if (try_pair(t, w, text, mode, (int32_t)i) < 0)
            return -1;
    while (w->n_heap) {
        tok_cand c = heap_pop(w);
        tok_sym *a = &w->syms[c.left], *b = &w->syms[c.right];
        if (a->len == 0 || b->len == 0 || a->next != c.right || a->len + b->len != c.len)
            continue; /* stale: a neighbour changed since it was queued */
        a->len += b->len;
        a->id = c.result;
        a->next = b->next;
        if (b->next >= 0)
            w->syms[b->next].prev = c.left;
        b->len = 0;
        if (try_pair(t, w, text, mode, a->prev) < 0 || try_pair(t, w, text, mode, c.left) < 0)
            return -1;
    }
    return 0;
}
