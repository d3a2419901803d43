/* tokenizer.json and tokenizer_config.json from a GGUF byte-level BPE
 * vocabulary (tokenizer.ggml.model "gpt2"; formats.md §3.3), in the layout
 * the HF `tokenizers` library reads: model BPE with the vocabulary and
 * merges verbatim (GGUF already stores byte-level token texts), the
 * pre-tokenizer that llama.cpp's `tokenizer.ggml.pre` name stands for,
 * a ByteLevel decoder, and CONTROL / UNKNOWN / USER_DEFINED tokens as
 * added tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/convert_internal.h"
#include "tokenizer/tok_internal.h"

/* GGUF's tokenizer arrays. */
typedef struct gguf_vocab {
    const gguf_value *tokens, *types, *merges;
    uint64_t n, n_merges;
    char pre[64];
    bool ignore_merges;
    bool add_bos; /* the file's add_bos_token, else the pre-tokenizer's default */
    const char *const *patterns;
    size_t n_patterns;
} gguf_vocab;

static int read_vocab(const gguf_file *f, gguf_vocab *v, plume_error *err)
{
    memset(v, 0, sizeof *v);
    gguf_str model;
    if (!gguf_get_str(f, "tokenizer.ggml.model", &model))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s has no tokenizer.ggml.model; there is no tokenizer to convert",
                         gguf_path(f));
    if (!(model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: tokenizer.ggml.model \"%.*s\" is not converted: plume convert "
                         "writes byte-level BPE (\"gpt2\") tokenizers only; SentencePiece "
                         "(\"llama\") vocabularies are not supported yet",
                         gguf_path(f), (int)(model.len > 32 ? 32 : model.len), model.ptr);
    gguf_type et;
    if (!gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &v->n, &v->tokens) ||
        et != GGUF_TYPE_STRING || v->n == 0 || v->n > INT32_MAX)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tokenizer.ggml.tokens is missing or not a non-empty string array",
                         gguf_path(f));
    uint64_t nt;
    if (gguf_get_arr(f, "tokenizer.ggml.token_type", &et, &nt, &v->types) && nt != v->n)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens",
                         gguf_path(f), (unsigned long long)nt, (unsigned long long)v->n);
    if (!gguf_get_arr(f, "tokenizer.ggml.merges", &et, &v->n_merges, &v->merges) ||
        et != GGUF_TYPE_STRING)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tokenizer.ggml.merges (strings) is missing", gguf_path(f));
    gguf_str pre = {"default", 7};
    gguf_get_str(f, "tokenizer.ggml.pre", &pre);
    snprintf(v->pre, sizeof v->pre, "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.ptr);
    v->patterns = tok_pretok_lookup(v->pre, &v->n_patterns, &v->ignore_merges, &v->add_bos);
    if (!v->patterns)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: pre-tokenizer \"%s\" (tokenizer.ggml.pre) is unknown; supported: %s",
                         gguf_path(f), v->pre, tok_pretok_supported());
    return 0;
}

static int token_type(const gguf_vocab *v, uint64_t i)
{
    return v->types ? (int)gguf_value_int(&v->types[i], TOK_NORMAL) : TOK_NORMAL;
}

/* A JSON string of a GGUF string (NULL when not valid UTF-8 or holding NUL). */
static json_t *gstr(const gguf_value *s)
{
    if (memchr(s->s.ptr, 0, (size_t)s->s.len))
        return NULL;
    return json_stringn(s->s.ptr, (size_t)s->s.len);
}

static json_t *byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex)
{
    return json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space",
                     add_prefix_space, "trim_offsets", trim_offsets, "use_regex", use_regex);
}

/* The pre-tokenizer for llama.cpp's regex sequence: GPT-2's regex as the
 * last step becomes ByteLevel(use_regex), "\p{N}" becomes Digits(individual),
 * any other regex an isolating Split followed by a regex-less ByteLevel. */
static json_t *pre_tokenizer(const gguf_vocab *v)
{
    size_t ng;
    bool im;
    const char *gpt2 = tok_pretok_patterns("gpt2", &ng, &im)[0];
    json_t *steps = json_array();
    bool mapped = false;
    for (size_t i = 0; i < v->n_patterns; i++) {
        const char *p = v->patterns[i];
        if (strcmp(p, gpt2) == 0 && i + 1 == v->n_patterns) {
            json_array_append_new(steps, byte_level(false, true, true));
            mapped = true;
        } else if (strcmp(p, "\\p{N}") == 0) {
            json_array_append_new(steps, json_pack("{s:s,s:b}", "type", "Digits",
                                                   "individual_digits", 1));
        } else {
            json_array_append_new(steps, json_pack("{s:s,s:{s:s},s:s,s:b}", "type", "Split",
                                                   "pattern", "Regex", p, "behavior",
                                                   "Isolated", "invert", 0));
        }
    }
    if (!mapped)
        json_array_append_new(steps, byte_level(false, true, false));
    if (json_array_size(steps) == 1) {
        json_t *only = json_incref(json_array_get(steps, 0));
        json_decref(steps);
        return only;
    }
    return json_pack("{s:s,s:o}", "type", "Sequence", "pretokenizers", steps);
}

/* Appends [bos] Sequence(A or B) [eos] for part 0 or 1 to arr. */
static void template_part(json_t *arr, const gguf_vocab *v, int64_t bos, int64_t eos, int part)
{
    if (bos >= 0)
        json_array_append_new(arr, json_pack("{s:{s:o,s:i}}", "SpecialToken", "id",
                                             gstr(&v->tokens[bos]), "type_id", part));
    json_array_append_new(arr, json_pack("{s:{s:s,s:i}}", "Sequence", "id", part ? "B" : "A",
                                         "type_id", part));
    if (eos >= 0)
        json_array_append_new(arr, json_pack("{s:{s:o,s:i}}", "SpecialToken", "id",
                                             gstr(&v->tokens[eos]), "type_id", part));
}

/* TemplateProcessing adding bos and/or eos (-1 = not added) around each
 * sequence, as transformers' LlamaTokenizerFast.update_post_processor. */
static json_t *template_processor(const gguf_vocab *v, int64_t bos, int64_t eos)
{
    json_t *single = json_array(), *pair = json_array(), *specials = json_object();
    template_part(single, v, bos, eos, 0);
    template_part(pair, v, bos, eos, 0);
    template_part(pair, v, bos, eos, 1);
    int64_t ids[2] = {bos, eos};
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0)
            continue;
        json_t *tok = gstr(&v->tokens[ids[k]]);
        json_object_set_new(specials, json_string_value(tok),
                            json_pack("{s:O,s:[I],s:[O]}", "id", tok, "ids", (json_int_t)ids[k],
                                      "tokens", tok));
        json_decref(tok);
    }
    return json_pack("{s:s,s:o,s:o,s:o}", "type", "TemplateProcessing", "single", single, "pair",
                     pair, "special_tokens", specials);
}

static int64_t meta_id(const gguf_file *f, const char *key, uint64_t n)
{
    int64_t v;
    return gguf_get_i64(f, key, &v) && v >= 0 && (uint64_t)v < n ? v : -1;
}

static bool meta_bool(const gguf_file *f, const char *key, bool def)
{
    bool b;
    return gguf_get_bool(f, key, &b) ? b : def;
}

/* Builds tokenizer.json; NULL with err set when a token or merge cannot be
 * represented. */
static json_t *build_tokenizer(const gguf_file *f, const gguf_vocab *v, plume_error *err)
{
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    json_t *root = NULL;
    for (uint64_t i = 0; i < v->n; i++) {
        json_t *s = gstr(&v->tokens[i]);
        if (!s) {
            plume_err(err, PLUME_ERR_UNSUPPORTED,
                      "%s: token %llu is not valid UTF-8 (or holds a NUL byte) and cannot be "
                      "written to tokenizer.json",
                      gguf_path(f), (unsigned long long)i);
            goto fail;
        }
        json_object_set_new(vocab, json_string_value(s), json_integer((json_int_t)i));
        int ty = token_type(v, i);
        if (ty == TOK_CONTROL || ty == TOK_UNKNOWN || ty == TOK_USER_DEFINED)
            json_array_append_new(
                added, json_pack("{s:I,s:O,s:b,s:b,s:b,s:b,s:b}", "id", (json_int_t)i, "content",
                                 s, "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                 "special", ty != TOK_USER_DEFINED));
        json_decref(s);
    }
    if (json_object_size(vocab) != v->n) {
        plume_err(err, PLUME_ERR_UNSUPPORTED,
                  "%s: %llu tokens share their text with another token; tokenizer.json's "
                  "vocabulary (a JSON object) cannot hold them",
                  gguf_path(f), (unsigned long long)(v->n - json_object_size(vocab)));
        goto fail;
    }
    for (uint64_t i = 0; i < v->n_merges; i++) {
        const gguf_value *m = &v->merges[i];
        const char *sp = m->s.len > 1 ? memchr(m->s.ptr + 1, ' ', (size_t)m->s.len - 1) : NULL;
        json_t *s = sp ? gstr(m) : NULL;
        if (!s) {
            plume_err(err, PLUME_ERR_FORMAT,
                      "%s: tokenizer.ggml.merges[%llu] is not \"left right\" UTF-8 text",
                      gguf_path(f), (unsigned long long)i);
            goto fail;
        }
        json_array_append_new(merges, s);
    }
    int64_t bos = meta_id(f, "tokenizer.ggml.bos_token_id", v->n);
    int64_t eos = meta_id(f, "tokenizer.ggml.eos_token_id", v->n);
    bool add_bos = meta_bool(f, "tokenizer.ggml.add_bos_token", v->add_bos) && bos >= 0;
    bool add_eos = meta_bool(f, "tokenizer.ggml.add_eos_token", false) && eos >= 0;
    json_t *post = add_bos || add_eos
                       ? template_processor(v, add_bos ? bos : -1, add_eos ? eos : -1)
                       : byte_level(true, false, true);
    json_t *model = json_pack(
        "{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:o,s:o}", "type", "BPE", "dropout", "unk_token",
        "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
        "ignore_merges", v->ignore_merges, "vocab", vocab, "merges", merges);
    vocab = merges = NULL;
    root = json_pack("{s:s,s:n,s:n,s:o,s:n,s:o,s:o,s:o,s:o}", "version", "1.0", "truncation",
                     "padding", "added_tokens", added, "normalizer", "pre_tokenizer",
                     pre_tokenizer(v), "post_processor", post, "decoder",
                     byte_level(true, true, true), "model", model);
    if (!root)
        plume_err(err, PLUME_ERR_NOMEM, "out of memory building tokenizer.json");
    return root;
fail:
    json_decref(vocab);
    json_decref(merges);
    json_decref(added);
    return NULL;
}

int conv_check_tokenizer(const gguf_file *f, plume_error *err)
{
    gguf_vocab v;
    if (read_vocab(f, &v, err))
        return -1;
    json_t *root = build_tokenizer(f, &v, err);
    if (!root)
        return -1;
    json_decref(root);
    return 0;
}

/* The text of token id as a JSON string, or null. */
static json_t *token_or_null(const gguf_vocab *v, int64_t id)
{
    json_t *s = id >= 0 ? gstr(&v->tokens[id]) : NULL;
    return s ? s : json_null();
}

static json_t *build_config(const conv_model *cm, const gguf_vocab *v)
{
    const gguf_file *f = cm->gguf;
    json_t *dec = json_object();
    for (uint64_t i = 0; i < v->n; i++) {
        int ty = token_type(v, i);
        if (ty != TOK_CONTROL && ty != TOK_UNKNOWN && ty != TOK_USER_DEFINED)
            continue;
        char key[32];
        snprintf(key, sizeof key, "%llu", (unsigned long long)i);
        json_object_set_new(dec, key,
                            json_pack("{s:o,s:b,s:b,s:b,s:b,s:b}", "content",
                                      token_or_null(v, (int64_t)i), "lstrip", 0, "normalized", 0,
                                      "rstrip", 0, "single_word", 0, "special",
                                      ty != TOK_USER_DEFINED));
    }
    int64_t bos = meta_id(f, "tokenizer.ggml.bos_token_id", v->n);
    int64_t eos = meta_id(f, "tokenizer.ggml.eos_token_id", v->n);
    json_t *o = json_object();
    json_object_set_new(o, "add_bos_token",
                        json_boolean(meta_bool(f, "tokenizer.ggml.add_bos_token", v->add_bos)));
    json_object_set_new(o, "add_eos_token",
                        json_boolean(meta_bool(f, "tokenizer.ggml.add_eos_token", false)));
    json_object_set_new(o, "added_tokens_decoder", dec);
    json_object_set_new(o, "bos_token", token_or_null(v, bos));
    json_object_set_new(o, "eos_token", token_or_null(v, eos));
    json_object_set_new(o, "pad_token",
                        token_or_null(v, meta_id(f, "tokenizer.ggml.padding_token_id", v->n)));
    json_object_set_new(o, "unk_token",
                        token_or_null(v, meta_id(f, "tokenizer.ggml.unknown_token_id", v->n)));
    gguf_str tmpl;
    if (gguf_get_str(f, "tokenizer.chat_template", &tmpl)) {
        json_t *t = json_stringn(tmpl.ptr, (size_t)tmpl.len);
        if (t)
            json_object_set_new(o, "chat_template", t);
    }
    json_object_set_new(o, "clean_up_tokenization_spaces", json_false());
    json_object_set_new(o, "model_max_length", json_integer(cm->cfg.n_ctx_train));
    json_object_set_new(o, "tokenizer_class", json_string("PreTrainedTokenizerFast"));
    return o;
}

int conv_write_tokenizer(const conv_model *cm, const char *dir, plume_error *err)
{
    gguf_vocab v;
    if (read_vocab(cm->gguf, &v, err))
        return -1;
    json_t *root = build_tokenizer(cm->gguf, &v, err);
    if (!root || conv_dump_json(root, dir, "tokenizer.json", err))
        return -1;
    return conv_dump_json(build_config(cm, &v), dir, "tokenizer_config.json", err);
}
