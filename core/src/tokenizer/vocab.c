/* Token table: texts, types and scores by id, and a text -> id hash map. */
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"
#include "tokenizer/tok_internal.h"

static uint32_t hash_text(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

void tok_vocab_init(tok_vocab *v)
{
    memset(v, 0, sizeof *v);
}

void tok_vocab_free(tok_vocab *v)
{
    free(v->arena);
    free(v->off);
    free(v->len);
    free(v->type);
    free(v->score);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

/* Inserts id under its text, replacing an equal text's entry. */
static void slot_insert(tok_vocab *v, int32_t id)
{
    const char *s = tok_vocab_text(v, id);
    uint32_t n = v->len[id];
    uint32_t mask = v->n_slots - 1;
    for (uint32_t i = hash_text(s, n) & mask;; i = (i + 1) & mask) {
        int32_t cur = v->slots[i];
        if (cur < 0 || (v->len[cur] == n && memcmp(tok_vocab_text(v, cur), s, n) == 0)) {
            v->slots[i] = id;
            return;
        }
    }
}

/* Doubles the hash table (load kept under 1/2) and reinserts every id. */
static int slots_grow(tok_vocab *v)
{
    uint32_t ns = v->n_slots ? v->n_slots * 2 : 1024;
    int32_t *slots = malloc((size_t)ns * sizeof *slots);
    if (!slots)
        return -1;
    free(v->slots);
    v->slots = slots;
    v->n_slots = ns;
    memset(slots, 0xff, (size_t)ns * sizeof *slots);
    for (int32_t i = 0; i < v->n; i++)
        slot_insert(v, i);
    return 0;
}

int32_t tok_vocab_add(tok_vocab *v, const char *text, size_t len, int type, float score)
{
    if (len > UINT32_MAX || v->n == INT32_MAX)
        return -1;
    if (v->n == v->cap) {
        int32_t nc = v->cap ? v->cap * 2 : 256;
        uint64_t *off = realloc(v->off, (size_t)nc * sizeof *off);
        if (off)
            v->off = off;
        uint32_t *ln = realloc(v->len, (size_t)nc * sizeof *ln);
        if (ln)
            v->len = ln;
        uint8_t *ty = realloc(v->type, (size_t)nc);
        if (ty)
            v->type = ty;
        float *sc = realloc(v->score, (size_t)nc * sizeof *sc);
        if (sc)
            v->score = sc;
        if (!off || !ln || !ty || !sc)
            return -1;
        v->cap = nc;
    }
    char *a = plume_grow(v->arena, &v->arena_cap, v->arena_len + len + 1, 4096, 1);
    if (!a)
        return -1;
    v->arena = a;
    int32_t id = v->n;
    memcpy(v->arena + v->arena_len, text, len);
    v->arena[v->arena_len + len] = '\0'; /* texts are also NUL-terminated for convenience */
    v->off[id] = v->arena_len;
    v->len[id] = (uint32_t)len;
    v->type[id] = (uint8_t)type;
    v->score[id] = score;
    v->arena_len += len + 1;
    v->n++;
    if ((uint64_t)v->n * 2 > v->n_slots) {
        if (slots_grow(v) < 0) {
            v->n--;
            return -1;
        }
    } else {
        slot_insert(v, id);
    }
    return id;
}

int32_t tok_vocab_find(const tok_vocab *v, const char *text, size_t len)
{
    if (!v->n_slots)
        return -1;
    uint32_t mask = v->n_slots - 1;
    for (uint32_t i = hash_text(text, len) & mask;; i = (i + 1) & mask) {
        int32_t cur = v->slots[i];
        if (cur < 0)
            return -1;
        if (v->len[cur] == len && memcmp(tok_vocab_text(v, cur), text, len) == 0)
            return cur;
    }
}
