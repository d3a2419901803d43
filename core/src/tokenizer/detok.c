/* Detokenization: the bytes of one token, and a streaming decoder that
 * emits only whole UTF-8 characters. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* The decoded bytes of id, empty for special tokens unless render_special;
 * false for an id outside the vocabulary. */
static bool token_piece(const plume_tokenizer *t, int32_t id, bool render_special,
                        const char **s, size_t *n)
{
    if (id < 0 || id >= t->vocab.n)
        return false;
    int ty = t->vocab.type[id];
    if (!render_special && (ty == TOK_CONTROL || ty == TOK_UNKNOWN || ty == TOK_UNUSED)) {
        *s = "";
        *n = 0;
        return true;
    }
    *s = t->dec_arena + t->dec_off[id];
    *n = t->dec_len[id];
    return true;
}

int plume_token_bytes(const plume_tokenizer *t, int32_t id, bool render_special, char *buf,
                      size_t cap)
{
    const char *s;
    size_t n;
    if (!token_piece(t, id, render_special, &s, &n))
        return -1;
    if (buf && cap)
        memcpy(buf, s, n < cap ? n : cap);
    return (int)n;
}

void plume_detok_init(plume_detok *d, const plume_tokenizer *t, bool render_special)
{
    memset(d, 0, sizeof *d);
    d->tok = t;
    d->render_special = render_special;
    d->at_start = true;
}

int plume_detok_push(plume_detok *d, int32_t id, char *out, size_t cap)
{
    const plume_tokenizer *t = d->tok;
    const char *s = "";
    size_t n = 0;
    if (!cap)
        return -1;
    if (!token_piece(t, id, d->render_special, &s, &n))
        n = 0; /* an id outside the vocabulary stands for nothing */
    bool strip = d->at_start && n > 0 && t->kind == TOK_KIND_SPM && t->add_space_prefix &&
                 s[0] == ' ';
    if (strip) {
        s++;
        n--;
    }
    char small[512];
    size_t total = d->n_pending + n;
    char *buf = total <= sizeof small ? small : malloc(total);
    if (!buf)
        return -1;
    memcpy(buf, d->pending, d->n_pending);
    memcpy(buf + d->n_pending, s, n);
    size_t tail = tok_utf8_incomplete_tail(buf, total);
    size_t need = tok_utf8_lossy(buf, total - tail, out, cap - 1);
    if (need > cap - 1) {
        if (buf != small)
            free(buf);
        return -1; /* nothing consumed: the caller may retry with more room */
    }
    out[need] = '\0';
    memcpy(d->pending, buf + total - tail, tail);
    d->n_pending = tail;
    if (n > 0 || strip)
        d->at_start = false;
    if (buf != small)
        free(buf);
    return (int)need;
}

int plume_detok_flush(plume_detok *d, char *out, size_t cap)
{
    if (!cap)
        return -1;
    size_t need = tok_utf8_lossy(d->pending, d->n_pending, out, cap - 1);
    if (need > cap - 1)
        return -1;
    out[need] = '\0';
    d->n_pending = 0;
    return (int)need;
}

int plume_detokenize(const plume_tokenizer *t, const int32_t *ids, size_t n, bool render_special,
                     char **out, plume_error *err)
{
    if (!t || !out || (!ids && n))
        return plume_err(err, PLUME_ERR_INVALID,
                         "plume_detokenize: tokenizer, ids and output must not be NULL");
    *out = NULL;
    size_t chunk = 64 + 3 * (size_t)t->max_token_bytes + 8;
    size_t cap = chunk * 2, len = 0;
    char *s = malloc(cap);
    if (!s)
        goto oom;
    plume_detok d;
    plume_detok_init(&d, t, render_special);
    for (size_t i = 0; i <= n; i++) {
        if (cap - len < chunk) {
            size_t nc = cap * 2;
            char *ns = realloc(s, nc);
            if (!ns)
                goto oom;
            s = ns;
            cap = nc;
        }
        int w = i < n ? plume_detok_push(&d, ids[i], s + len, cap - len)
                      : plume_detok_flush(&d, s + len, cap - len);
        if (w < 0) {
            free(s);
            return plume_err(err, PLUME_ERR_INTERNAL,
                             "detokenizing: a token's text did not fit the decode buffer");
        }
        len += (size_t)w;
    }
    s[len] = '\0';
    *out = s;
    return 0;
oom:
    free(s);
    return plume_err(err, PLUME_ERR_NOMEM, "out of memory detokenizing %zu tokens", n);
}
