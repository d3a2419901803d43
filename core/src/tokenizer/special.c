/* Special tokens matched whole in the input before pre-tokenization. */
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"
#include "tokenizer/tok_internal.h"

static int cmp_special(const void *pa, const void *pb)
{
    const struct tok_special_entry *a = pa, *b = pb;
    uint8_t fa = (uint8_t)a->text[0], fb = (uint8_t)b->text[0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1; /* longest first */
    return a->id < b->id ? -1 : (a->id > b->id);
}

int tok_special_build(plume_tokenizer *t)
{
    const tok_vocab *v = &t->vocab;
    size_t n = 0;
    for (int32_t i = 0; i < v->n; i++) {
        int ty = v->type[i];
        if ((ty == TOK_CONTROL || ty == TOK_UNKNOWN || ty == TOK_USER_DEFINED) && v->len[i] > 0)
            n++;
    }
    t->specials = calloc(n ? n : 1, sizeof *t->specials);
    if (!t->specials)
        return -1;
    n = 0;
    for (int32_t i = 0; i < v->n; i++) {
        int ty = v->type[i];
        if ((ty == TOK_CONTROL || ty == TOK_UNKNOWN || ty == TOK_USER_DEFINED) && v->len[i] > 0) {
            struct tok_special_entry *e = &t->specials[n++];
            e->text = tok_vocab_text(v, i);
            e->len = v->len[i];
            e->id = i;
            e->always = ty == TOK_USER_DEFINED;
        }
    }
    qsort(t->specials, n, sizeof *t->specials, cmp_special);
    t->n_specials = n;
    size_t j = 0;
    for (unsigned b = 0; b <= 256; b++) {
        while (j < n && (uint8_t)t->specials[j].text[0] < b)
            j++;
        t->special_first[b] = (uint32_t)j;
    }
    return 0;
}

void tok_special_free(plume_tokenizer *t)
{
    free(t->specials);
    t->specials = NULL;
    t->n_specials = 0;
}

static int frag_push(tok_fragments *f, size_t off, size_t len, int32_t id)
{
    tok_fragment *v = plume_grow(f->v, &f->cap, f->n + 1, 16, sizeof *v);
    if (!v)
        return -1;
    f->v = v;
    f->v[f->n++] = (tok_fragment){.off = off, .len = len, .id = id};
    return 0;
}

int tok_special_split(const plume_tokenizer *t, const char *text, size_t len, bool parse_special,
                      tok_fragments *out)
{
    out->n = 0;
    size_t raw_start = 0;
    for (size_t i = 0; i < len;) {
        uint8_t c = (uint8_t)text[i];
        const struct tok_special_entry *hit = NULL;
        for (uint32_t k = t->special_first[c]; k < t->special_first[c + 1]; k++) {
            const struct tok_special_entry *e = &t->specials[k];
            if ((parse_special || e->always) && e->len <= len - i &&
                memcmp(text + i, e->text, e->len) == 0) {
                hit = e;
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        if (i > raw_start && frag_push(out, raw_start, i - raw_start, -1) < 0)
            return -1;
        if (frag_push(out, i, hit->len, hit->id) < 0)
            return -1;
        i += hit->len;
        raw_start = i;
    }
    if (raw_start < len && frag_push(out, raw_start, len - raw_start, -1) < 0)
        return -1;
    return 0;
}
