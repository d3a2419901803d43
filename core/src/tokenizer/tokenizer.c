/* The tokenizer object: finishing a loaded vocabulary, accessors and encoding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"
#include "tokenizer/tok_internal.h"

char *tok_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

int tok_add_chat_variant(plume_tokenizer *t, const char *name, size_t name_len, const char *text,
                         size_t text_len)
{
    char **names = realloc(t->chat_variant_names, (t->n_chat_variants + 1) * sizeof *names);
    if (names)
        t->chat_variant_names = names;
    char **texts = realloc(t->chat_variant_texts, (t->n_chat_variants + 1) * sizeof *texts);
    if (texts)
        t->chat_variant_texts = texts;
    char *nm = names && texts ? tok_strndup(name, name_len) : NULL;
    char *tx = nm ? tok_strndup(text, text_len) : NULL;
    if (!tx) {
        free(nm);
        return -1;
    }
    names[t->n_chat_variants] = nm;
    texts[t->n_chat_variants] = tx;
    t->n_chat_variants++;
    return 0;
}

int tok_ids_push(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    int32_t *v = plume_grow(*ids, cap, *n + 1, 64, sizeof *v);
    if (!v)
        return -1;
    *ids = v;
    (*ids)[(*n)++] = id;
    return 0;
}

int32_t tok_text_unk(const plume_tokenizer *t)
{
    if (t->unk < 0 || t->unk >= t->vocab.n || t->vocab.type[t->unk] != TOK_UNKNOWN)
        return -1;
    return t->unk;
}

plume_tokenizer *tok_new(tok_kind kind)
{
    plume_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->kind = kind;
    t->merge_mode = kind == TOK_KIND_BPE ? TOK_MERGE_RANKS : TOK_MERGE_SCORES;
    snprintf(t->model_name, sizeof t->model_name, "%s", kind == TOK_KIND_BPE ? "gpt2" : "llama");
    tok_vocab_init(&t->vocab);
    tok_merges_init(&t->merges);
    t->bos = t->eos = t->unk = t->pad = t->eot = t->eom = t->harmony_end = -1;
    for (int b = 0; b < 256; b++)
        t->byte_tok[b] = -1;
    return t;
}

void plume_tokenizer_free(plume_tokenizer *t)
{
    if (!t)
        return;
    tok_vocab_free(&t->vocab);
    tok_merges_free(&t->merges);
    tok_pretok_free(&t->pretok);
    tok_special_free(t);
    free(t->pre_name);
    free(t->dec_arena);
    free(t->dec_off);
    free(t->dec_len);
    free(t->chat_template);
    tok_chat_free(t);
    free(t);
}

/* Parses "<0xNN>"; -1 when text is not a byte token. */
static int parse_byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                     : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Writes the bytes token id stands for into out (room for len*1 bytes:
 * decoding never lengthens a text); returns the count. */
static size_t decode_token(const plume_tokenizer *t, int32_t id, char *out)
{
    const char *s = tok_vocab_text(&t->vocab, id);
    size_t n = t->vocab.len[id];
    int ty = t->vocab.type[id];
    if (ty == TOK_CONTROL || ty == TOK_UNKNOWN || ty == TOK_UNUSED || ty == TOK_USER_DEFINED) {
        memcpy(out, s, n);
        return n;
    }
    if (t->kind == TOK_KIND_SPM) {
        int b = ty == TOK_BYTE ? parse_byte_token(s, n) : -1;
        if (b >= 0) {
            out[0] = (char)b;
            return 1;
        }
        size_t w = 0;
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && (uint8_t)s[i] == 0xe2 && (uint8_t)s[i + 1] == 0x96 &&
                (uint8_t)s[i + 2] == 0x81) {
                out[w++] = ' ';
                i += 3;
            } else {
                out[w++] = s[i++];
            }
        }
        return w;
    }
    /* byte-level: each GPT-2 character back to its byte; others copied as is */
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tok_utf8_decode(s + i, n - i, &cp);
        int b = k > 0 ? tok_unicode_to_byte(cp) : -1;
        if (b >= 0) {
            out[w++] = (char)b;
            i += (size_t)k;
        } else {
            size_t m = k > 0 ? (size_t)k : 1;
            memcpy(out + w, s + i, m);
            w += m;
            i += m;
        }
    }
    return w;
}

static int build_decoded(plume_tokenizer *t)
{
    const tok_vocab *v = &t->vocab;
    t->dec_arena = malloc(v->arena_len ? v->arena_len : 1);
    t->dec_off = malloc((size_t)v->n * sizeof *t->dec_off);
    t->dec_len = malloc((size_t)v->n * sizeof *t->dec_len);
    if (!t->dec_arena || !t->dec_off || !t->dec_len)
        return -1;
    size_t pos = 0;
    for (int32_t i = 0; i < v->n; i++) {
        size_t n = decode_token(t, i, t->dec_arena + pos);
        t->dec_off[i] = pos;
        t->dec_len[i] = (uint32_t)n;
        if (n > t->max_token_bytes)
            t->max_token_bytes = (uint32_t)n;
        pos += n;
    }
    return 0;
}

static void build_byte_tokens(plume_tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char buf[8];
        int n;
        if (t->kind == TOK_KIND_BPE)
            n = tok_byte_to_unicode((uint8_t)b, buf);
        else
            n = snprintf(buf, sizeof buf, "<0x%02X>", b);
        t->byte_tok[b] = tok_vocab_find(&t->vocab, buf, (size_t)n);
    }
}

int tok_finalize(plume_tokenizer *t, plume_error *err)
{
    int32_t nv = t->vocab.n;
    if (nv <= 0)
        return plume_err(err, PLUME_ERR_FORMAT, "the tokenizer has an empty vocabulary");
    struct {
        const char *name;
        int32_t *id;
    } ids[] = {{"bos", &t->bos}, {"eos", &t->eos}, {"unknown", &t->unk},
               {"padding", &t->pad}, {"eot", &t->eot}, {"eom", &t->eom}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (*ids[i].id >= nv)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "the %s token id %d is outside the vocabulary of %d tokens; the "
                             "tokenizer metadata is inconsistent",
                             ids[i].name, (int)*ids[i].id, (int)nv);
    if (!t->pre_name && !(t->pre_name = tok_strndup("default", 7)))
        goto oom;
    build_byte_tokens(t);
    /* As llama.cpp's vocabulary loader decides for o200k_harmony: with
     * <|return|> and <|call|> present, those end a reply and <|end|> does not. */
    if (tok_vocab_find(&t->vocab, "<|return|>", 10) >= 0 &&
        tok_vocab_find(&t->vocab, "<|call|>", 8) >= 0)
        t->harmony_end = tok_vocab_find(&t->vocab, "<|end|>", 7);
    if (build_decoded(t) < 0 || tok_special_build(t) < 0)
        goto oom;
    if (tok_pretok_compile(&t->pretok, err) < 0)
        return -1;
    if (tok_chat_detect(t) < 0)
        goto oom;
    return 0;
oom:
    return plume_err(err, PLUME_ERR_NOMEM, "out of memory building a tokenizer of %d tokens",
                     (int)nv);
}

int32_t plume_tokenizer_n_vocab(const plume_tokenizer *t) { return t->vocab.n; }
const char *plume_tokenizer_model(const plume_tokenizer *t) { return t->model_name; }
const char *plume_tokenizer_pre(const plume_tokenizer *t) { return t->pre_name; }
int32_t plume_tokenizer_bos(const plume_tokenizer *t) { return t->bos; }
int32_t plume_tokenizer_eos(const plume_tokenizer *t) { return t->eos; }
bool plume_tokenizer_add_bos(const plume_tokenizer *t) { return t->add_bos && t->bos >= 0; }

bool plume_tokenizer_is_special(const plume_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->vocab.n)
        return false;
    int ty = t->vocab.type[id];
    return ty == TOK_CONTROL || ty == TOK_UNKNOWN || ty == TOK_UNUSED;
}

bool plume_tokenizer_is_eog(const plume_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->vocab.n || id == t->harmony_end)
        return false;
    if (id == t->eos || id == t->eot || id == t->eom)
        return true;
    if (t->vocab.type[id] != TOK_CONTROL)
        return false;
    static const char *const EOG_TEXTS[] = {"<|im_end|>",    "<|endoftext|>", "<|eot_id|>",
                                            "<|end|>",       "</s>",          "<end_of_turn>",
                                            "<|eom_id|>",    "<|return|>",    "<|call|>"};
    const char *s = tok_vocab_text(&t->vocab, id);
    for (size_t i = 0; i < sizeof EOG_TEXTS / sizeof EOG_TEXTS[0]; i++)
        if (strcmp(s, EOG_TEXTS[i]) == 0)
            return true;
    return false;
}

/* Byte-level BPE of one pre-tokenized piece, appending ids. */
static int encode_bpe_piece(const plume_tokenizer *t, tok_work *w, const char *s, size_t n,
                            int32_t **ids, size_t *nids, size_t *cap)
{
    if (t->ignore_merges && n <= 256) {
        char buf[512];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            k += (size_t)tok_byte_to_unicode((uint8_t)s[i], buf + k);
        int32_t id = tok_vocab_find(&t->vocab, buf, k);
        if (id >= 0)
            return tok_ids_push(ids, nids, cap, id);
    }
    if (tok_work_load(t, w, s, n, true) < 0 || tok_bpe_merge(t, w, s, TOK_MERGE_RANKS) < 0)
        return -1;
    for (int32_t i = w->n_syms ? 0 : -1; i >= 0; i = w->syms[i].next) {
        int32_t id = w->syms[i].id >= 0 ? w->syms[i].id : tok_text_unk(t);
        if (id >= 0 && tok_ids_push(ids, nids, cap, id) < 0)
            return -1;
    }
    return 0;
}

int plume_tokenize(const plume_tokenizer *t, const char *text, size_t len, bool add_bos,
                   bool parse_special, int32_t **ids, size_t *n, plume_error *err)
{
    if (!t || !ids || !n || (!text && len))
        return plume_err(err, PLUME_ERR_INVALID, "plume_tokenize: tokenizer, text and outputs "
                                                 "must not be NULL");
    *ids = NULL;
    *n = 0;
    int32_t *out = NULL;
    size_t nout = 0, cap = 0;
    tok_fragments frags = {0};
    tok_spans pieces = {0};
    tok_work w = {0};
    int rc = -1;
    char *valid = NULL;
    if (!tok_utf8_valid(text, len)) {
        /* each maximal invalid sequence becomes U+FFFD (as llama.cpp; HF
         * tokenizers only ever sees valid text), so no stray byte can reach
         * a token that is not its own */
        size_t vlen = tok_utf8_lossy(text, len, NULL, 0);
        if (!(valid = malloc(vlen)))
            goto oom;
        tok_utf8_lossy(text, len, valid, vlen);
        text = valid;
        len = vlen;
    }

    if (add_bos && t->bos >= 0 && tok_ids_push(&out, &nout, &cap, t->bos) < 0)
        goto oom;
    if (t->n_specials) {
        if (tok_special_split(t, text, len, parse_special, &frags) < 0)
            goto oom;
    } else if (len) {
        frags.v = malloc(sizeof *frags.v);
        if (!frags.v)
            goto oom;
        frags.v[0] = (tok_fragment){.off = 0, .len = len, .id = -1};
        frags.n = frags.cap = 1;
    }
    bool prev_special = true; /* SPM: the text start counts as after a special token */
    for (size_t f = 0; f < frags.n; f++) {
        const tok_fragment *fr = &frags.v[f];
        if (fr->id >= 0) {
            if (tok_ids_push(&out, &nout, &cap, fr->id) < 0)
                goto oom;
            prev_special = true;
            continue;
        }
        const char *s = text + fr->off;
        if (t->kind == TOK_KIND_SPM) {
            if (tok_spm_encode(t, &w, s, fr->len, t->add_space_prefix && prev_special, &out, &nout,
                               &cap, err) < 0)
                goto done;
            prev_special = false;
            continue;
        }
        if (tok_pretok_split(&t->pretok, s, fr->len, &pieces, err) < 0)
            goto done;
        for (size_t p = 0; p < pieces.n; p++)
            if (encode_bpe_piece(t, &w, s + pieces.v[p].off, pieces.v[p].len, &out, &nout, &cap) <
                0)
                goto oom;
    }
    if (!out && !(out = malloc(sizeof *out)))
        goto oom;
    *ids = out;
    *n = nout;
    out = NULL;
    rc = 0;
    goto done;
oom:
    plume_err(err, PLUME_ERR_NOMEM, "out of memory tokenizing %zu bytes of text", len);
done:
    free(valid);
    free(out);
    free(frags.v);
    free(pieces.v);
    tok_work_free(&w);
    return rc;
}
