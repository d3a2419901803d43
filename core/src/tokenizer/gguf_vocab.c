/* Loading a tokenizer from a GGUF file's tokenizer.ggml.* metadata
 * (formats.md §3.3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tok_internal.h"

/* Reads a special-token id key into *id (left unchanged when absent; a
 * negative id means none).  An id outside the vocabulary (written as
 * 4294967295 or -1 for "none" by llama2.c's exporter and older converters,
 * or simply out of range) is an error naming the key when the token is
 * required, and otherwise means "absent", with one warning on stderr, as
 * llama.cpp treats it. */
static int read_id(const gguf_file *f, const char *key, int32_t n_vocab, bool required,
                   int32_t *id, plume_error *err)
{
    const gguf_value *v = gguf_get(f, key);
    if (!v)
        return 0;
    int64_t x;
    unsigned long long shown;
    if (gguf_get_i64(f, key, &x)) {
        if (x < 0) {
            *id = -1;
            return 0;
        }
        if (x < n_vocab) {
            *id = (int32_t)x;
            return 0;
        }
        shown = (unsigned long long)x;
    } else if (v->type == GGUF_TYPE_UINT64) {
        shown = (unsigned long long)v->u;
    } else {
        return plume_err(err, PLUME_ERR_FORMAT, "GGUF key %s has type %s, expected an integer",
                         key, gguf_type_name(v->type));
    }
    if (required)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "GGUF key %s = %llu is outside the vocabulary of %d tokens, and the "
                         "model needs this token; fix the metadata",
                         key, shown, (int)n_vocab);
    fprintf(stderr,
            "plume: warning: %s: GGUF key %s = %llu is outside the vocabulary of %d tokens; "
            "treating the token as absent\n",
            gguf_path(f), key, shown, (int)n_vocab);
    *id = -1;
    return 0;
}

static int read_bool(const gguf_file *f, const char *key, bool *out, plume_error *err)
{
    const gguf_value *v = gguf_get(f, key);
    if (v && !gguf_get_bool(f, key, out))
        return plume_err(err, PLUME_ERR_FORMAT, "GGUF key %s has type %s, expected bool", key,
                         gguf_type_name(v->type));
    return 0;
}

/* Reads an optional array key and checks its element kind and length. */
static int read_arr(const gguf_file *f, const char *key, uint64_t want_n, bool want_float,
                    const gguf_value **items, plume_error *err)
{
    *items = NULL;
    gguf_type et;
    uint64_t n;
    if (!gguf_get(f, key))
        return 0;
    if (!gguf_get_arr(f, key, &et, &n, items))
        return plume_err(err, PLUME_ERR_FORMAT, "GGUF key %s is not an array", key);
    bool ok = want_float ? (et == GGUF_TYPE_FLOAT32 || et == GGUF_TYPE_FLOAT64)
                         : (et >= GGUF_TYPE_UINT8 && et <= GGUF_TYPE_INT32) ||
                               et == GGUF_TYPE_UINT64 || et == GGUF_TYPE_INT64;
    if (!ok)
        return plume_err(err, PLUME_ERR_FORMAT, "GGUF key %s is an array of %s, expected %s",
                         key, gguf_type_name(et), want_float ? "floats" : "integers");
    if (n != want_n)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "GGUF key %s has %llu entries but tokenizer.ggml.tokens has %llu", key,
                         (unsigned long long)n, (unsigned long long)want_n);
    return 0;
}

/* Adds the merges: "left right", split at the first space after position 0. */
static int load_merges(plume_tokenizer *t, const gguf_file *f, plume_error *err)
{
    gguf_type et;
    uint64_t n;
    const gguf_value *items;
    if (!gguf_get_arr(f, "tokenizer.ggml.merges", &et, &n, &items))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "GGUF tokenizer model \"gpt2\" needs tokenizer.ggml.merges (an array of "
                         "strings), which is missing; re-convert the model with llama.cpp's "
                         "convert_hf_to_gguf.py");
    if (et != GGUF_TYPE_STRING)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "GGUF key tokenizer.ggml.merges is an array of %s, expected strings",
                         gguf_type_name(et));
    for (uint64_t i = 0; i < n && i < INT32_MAX; i++) {
        const char *s = items[i].s.ptr;
        size_t len = (size_t)items[i].s.len;
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "tokenizer.ggml.merges[%llu] has no space separating its two parts",
                             (unsigned long long)i);
        size_t ll = (size_t)(sp - s), rl = len - ll - 1;
        int32_t l = tok_vocab_find(&t->vocab, s, ll);
        int32_t r = tok_vocab_find(&t->vocab, sp + 1, rl);
        if (l < 0 || r < 0)
            continue; /* a merge of unknown parts can never apply */
        char buf[1024];
        char *cat = ll + rl <= sizeof buf ? buf : malloc(ll + rl);
        if (!cat)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading merges");
        memcpy(cat, s, ll);
        memcpy(cat + ll, sp + 1, rl);
        int32_t res = tok_vocab_find(&t->vocab, cat, ll + rl);
        if (cat != buf)
            free(cat);
        if (res >= 0 && tok_merges_add(&t->merges, l, r, res, (int32_t)i) < 0)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading merges");
    }
    return 0;
}

/* Fills t from the GGUF metadata; t->kind is already set. */
static int load(plume_tokenizer *t, const gguf_file *f, plume_error *err)
{
    gguf_type et;
    uint64_t n;
    const gguf_value *toks, *types, *scores;
    if (!gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n, &toks) || et != GGUF_TYPE_STRING)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "GGUF key tokenizer.ggml.tokens (an array of strings) is missing or "
                         "has the wrong type; the file has no usable vocabulary");
    if (n == 0 || n > INT32_MAX)
        return plume_err(err, PLUME_ERR_FORMAT, "tokenizer.ggml.tokens has %llu entries",
                         (unsigned long long)n);
    if (read_arr(f, "tokenizer.ggml.token_type", n, false, &types, err) < 0 ||
        read_arr(f, "tokenizer.ggml.scores", n, true, &scores, err) < 0)
        return -1;
    for (uint64_t i = 0; i < n; i++) {
        int64_t ty = types ? gguf_value_int(&types[i], TOK_NORMAL) : TOK_NORMAL;
        if (ty < TOK_NORMAL || ty > TOK_BYTE)
            ty = TOK_NORMAL; /* llama.cpp treats undefined types as normal */
        float sc = scores ? (float)scores[i].f : 0.0f;
        if (tok_vocab_add(&t->vocab, toks[i].s.ptr, (size_t)toks[i].s.len, (int)ty, sc) < 0)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading %llu tokens",
                             (unsigned long long)n);
    }

    gguf_str pre = {"default", 7};
    const gguf_value *pv = gguf_get(f, "tokenizer.ggml.pre");
    if (pv && !gguf_get_str(f, "tokenizer.ggml.pre", &pre))
        return plume_err(err, PLUME_ERR_FORMAT, "GGUF key tokenizer.ggml.pre is not a string");
    if (!pv && t->kind == TOK_KIND_BPE) /* llama.cpp's words, and its fallback */
        fprintf(stderr, "plume: warning: %s: tokenizer.ggml.pre is missing; using llama.cpp's "
                        "'default' pre-tokenizer, which may split text unlike the model's own "
                        "(generation quality may be degraded; consider regenerating the GGUF)\n",
                gguf_path(f));
    if (!(t->pre_name = tok_strndup(pre.ptr, (size_t)pre.len)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");

    if (t->kind == TOK_KIND_BPE) {
        size_t np;
        const char *const *pats =
            tok_pretok_lookup(t->pre_name, &np, &t->ignore_merges, &t->add_bos);
        if (!pats)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "unknown pre-tokenizer \"%s\" (tokenizer.ggml.pre); plume supports: "
                             "%s",
                             t->pre_name, tok_pretok_supported());
        for (size_t i = 0; i < np; i++)
            if (tok_pretok_add(&t->pretok, pats[i], err) < 0)
                return -1;
        if (load_merges(t, f, err) < 0)
            return -1;
    } else {
        /* llama.cpp's SentencePiece defaults */
        t->bos = t->vocab.n > 1 ? 1 : -1;
        t->eos = t->vocab.n > 2 ? 2 : -1;
        t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
        if (!scores)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "GGUF tokenizer model \"llama\" needs tokenizer.ggml.scores, which is "
                             "missing");
    }

    /* EOS ends every generation and BOS starts every prompt when add_bos is
     * set: those two must be real tokens.  The rest are optional. */
    int32_t nv = t->vocab.n;
    if (read_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos, err) < 0 ||
        read_bool(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err) < 0 ||
        read_id(f, "tokenizer.ggml.bos_token_id", nv, t->add_bos, &t->bos, err) < 0 ||
        read_id(f, "tokenizer.ggml.eos_token_id", nv, true, &t->eos, err) < 0 ||
        read_id(f, "tokenizer.ggml.unknown_token_id", nv, false, &t->unk, err) < 0 ||
        read_id(f, "tokenizer.ggml.padding_token_id", nv, false, &t->pad, err) < 0 ||
        read_id(f, "tokenizer.ggml.eot_token_id", nv, false, &t->eot, err) < 0 ||
        read_id(f, "tokenizer.ggml.eom_token_id", nv, false, &t->eom, err) < 0)
        return -1;

    gguf_str tmpl;
    const gguf_value *tv = gguf_get(f, "tokenizer.chat_template");
    if (tv && !gguf_get_str(f, "tokenizer.chat_template", &tmpl))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "GGUF key tokenizer.chat_template has type %s, expected a string; fix "
                         "or remove the key",
                         gguf_type_name(tv->type));
    if (tv && !(t->chat_template = tok_strndup(tmpl.ptr, (size_t)tmpl.len)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    /* named variants: tokenizer.chat_template.<name> (e.g. tool_use) */
    static const char PFX[] = "tokenizer.chat_template.";
    for (size_t i = 0; i < gguf_n_kv(f); i++) {
        gguf_str key = gguf_kv_key(f, i);
        size_t pl = sizeof PFX - 1;
        if (key.len <= pl || memcmp(key.ptr, PFX, pl) != 0)
            continue;
        const gguf_value *v = gguf_kv_value(f, i);
        if (v->type != GGUF_TYPE_STRING)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "GGUF key %.*s has type %s, expected a string; fix or remove the key",
                             (int)(key.len < 200 ? key.len : 200), key.ptr,
                             gguf_type_name(v->type));
        if (tok_add_chat_variant(t, key.ptr + pl, (size_t)key.len - pl, v->s.ptr,
                                 (size_t)v->s.len))
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch) &&
        !(t->arch = tok_strndup(arch.ptr, (size_t)arch.len)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    return 0;
}

int plume_tokenizer_from_gguf(const struct gguf_file *f, plume_tokenizer **out, plume_error *err)
{
    if (!f || !out)
        return plume_err(err, PLUME_ERR_INVALID, "plume_tokenizer_from_gguf: NULL argument");
    *out = NULL;
    gguf_str model;
    if (!gguf_get_str(f, "tokenizer.ggml.model", &model))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s has no tokenizer.ggml.model string; it carries no tokenizer (use "
                         "an HF tokenizer.json instead)",
                         gguf_path(f));
    tok_kind kind;
    if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0)
        kind = TOK_KIND_BPE;
    else if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0)
        kind = TOK_KIND_SPM;
    else
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: unsupported tokenizer model \"%.*s\" (tokenizer.ggml.model); plume "
                         "supports \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece BPE)",
                         gguf_path(f), (int)(model.len > 64 ? 64 : model.len), model.ptr);
    plume_tokenizer *t = tok_new(kind);
    if (!t)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating a tokenizer");
    if (load(t, f, err) < 0 || tok_finalize(t, err) < 0) {
        plume_tokenizer_free(t);
        return plume_err_prefix(err, "%s", gguf_path(f));
    }
    *out = t;
    return 0;
}
