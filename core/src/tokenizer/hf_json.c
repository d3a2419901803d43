/* Loading a tokenizer from an HF tokenizer.json (+ tokenizer_config.json).
 *
 * Supported: model type "BPE", either byte-level (a ByteLevel pre-tokenizer
 * or decoder, as GPT-2, SmolLM, Llama 3, Qwen2) or SentencePiece-style (a
 * '▁' normalizer or Metaspace pre-tokenizer, as Llama 2 and Mistral).  The
 * pre-tokenizer's Split/Digits/ByteLevel steps become the regex sequence. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

#define RX_GPT2_HF \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define SPM_SPACE "\xe2\x96\x81"

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool is_type(const json_t *o, const char *type)
{
    const char *t = jstr(o, "type");
    return t && strcmp(t, type) == 0;
}

/* Calls fn on o, or on each element when o is a Sequence (any nesting). */
static bool any_step(const json_t *o, bool (*fn)(const json_t *))
{
    if (!json_is_object(o))
        return false;
    const json_t *seq = json_object_get(o, "pretokenizers");
    if (!seq)
        seq = json_object_get(o, "normalizers");
    if (!seq)
        seq = json_object_get(o, "decoders");
    if (!seq)
        seq = json_object_get(o, "processors");
    if (is_type(o, "Sequence") && json_is_array(seq)) {
        size_t i;
        const json_t *e;
        json_array_foreach(seq, i, e) if (any_step(e, fn)) return true;
        return false;
    }
    return fn(o);
}

static bool step_bytelevel(const json_t *o) { return is_type(o, "ByteLevel"); }
static bool step_metaspace(const json_t *o) { return is_type(o, "Metaspace"); }
static bool step_replace_space(const json_t *o)
{
    const char *c = jstr(o, "content");
    return is_type(o, "Replace") && c && strcmp(c, SPM_SPACE) == 0;
}
static bool step_prepend_space(const json_t *o)
{
    const char *p = jstr(o, "prepend");
    return is_type(o, "Prepend") && p && strcmp(p, SPM_SPACE) == 0;
}
static bool step_metaspace_prefix(const json_t *o)
{
    if (!is_type(o, "Metaspace"))
        return false;
    const char *scheme = jstr(o, "prepend_scheme");
    if (scheme)
        return strcmp(scheme, "never") != 0;
    return json_is_true(json_object_get(o, "add_prefix_space"));
}
static bool step_metaspace_split(const json_t *o)
{
    return is_type(o, "Metaspace") && !json_is_false(json_object_get(o, "split"));
}

/* Turns one pre-tokenizer step into regexes. */
static int add_pretok_step(plume_tokenizer *t, const json_t *o, plume_error *err)
{
    if (is_type(o, "Sequence")) {
        size_t i;
        const json_t *e;
        json_array_foreach(json_object_get(o, "pretokenizers"), i, e)
        {
            if (add_pretok_step(t, e, err) < 0)
                return -1;
        }
        return 0;
    }
    if (is_type(o, "ByteLevel")) {
        if (json_is_true(json_object_get(o, "add_prefix_space")))
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "tokenizer.json: ByteLevel with add_prefix_space=true is not "
                             "supported");
        if (json_is_false(json_object_get(o, "use_regex")))
            return 0;
        return tok_pretok_add(&t->pretok, RX_GPT2_HF, err);
    }
    if (is_type(o, "Digits"))
        return tok_pretok_add(&t->pretok,
                              json_is_true(json_object_get(o, "individual_digits")) ? "\\p{N}"
                                                                                    : "\\p{N}+",
                              err);
    if (is_type(o, "Split")) {
        const json_t *pat = json_object_get(o, "pattern");
        const char *behavior = jstr(o, "behavior");
        if (!behavior || strcmp(behavior, "Isolated") != 0 ||
            json_is_true(json_object_get(o, "invert")))
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "tokenizer.json: Split pre-tokenizer with behavior \"%s\"%s is not "
                             "supported (only Isolated, not inverted)",
                             behavior ? behavior : "?",
                             json_is_true(json_object_get(o, "invert")) ? " inverted" : "");
        const char *rx = jstr(pat, "Regex");
        if (rx)
            return tok_pretok_add(&t->pretok, rx, err);
        const char *lit = jstr(pat, "String");
        if (lit) {
            size_t n = strlen(lit);
            char *q = malloc(n + 5);
            if (!q)
                return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
            snprintf(q, n + 5, "\\Q%s\\E", lit);
            int rc = tok_pretok_add(&t->pretok, q, err);
            free(q);
            return rc;
        }
        return plume_err(err, PLUME_ERR_FORMAT, "tokenizer.json: Split has no pattern");
    }
    return plume_err(err, PLUME_ERR_UNSUPPORTED,
                     "tokenizer.json: pre-tokenizer \"%s\" is not supported (plume handles "
                     "ByteLevel, Split, Digits and Sequence for byte-level BPE)",
                     jstr(o, "type") ? jstr(o, "type") : "?");
}

/* Names the regex sequence after a known GGUF pre-tokenizer, else "custom". */
static int name_pretok(plume_tokenizer *t)
{
    static const char *const NAMES[] = {"gpt2", "smollm", "llama-bpe", "qwen2", "gpt-4o"};
    const char *name = "custom";
    for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++) {
        size_t n;
        bool im;
        const char *const *p = tok_pretok_patterns(NAMES[k], &n, &im);
        bool same = n == t->pretok.n;
        for (size_t i = 0; same && i < n; i++)
            same = strcmp(p[i], t->pretok.src[i]) == 0;
        if (same) {
            name = NAMES[k];
            break;
        }
    }
    t->pre_name = tok_strndup(name, strlen(name));
    return t->pre_name ? 0 : -1;
}

/* A token given as a string or as {"content": ...} in tokenizer_config.json. */
static const char *token_text(const json_t *v)
{
    if (json_is_string(v))
        return json_string_value(v);
    return jstr(v, "content");
}

static int32_t find_text(const plume_tokenizer *t, const char *s)
{
    return s ? tok_vocab_find(&t->vocab, s, strlen(s)) : -1;
}

/* bos from a TemplateProcessing post-processor whose single template starts
 * with a special token. */
static bool post_bos(const json_t *o)
{
    if (!is_type(o, "TemplateProcessing"))
        return false;
    const json_t *first = json_array_get(json_object_get(o, "single"), 0);
    return jstr(json_object_get(first, "SpecialToken"), "id") != NULL;
}

/* The template text of a tokenizer_config.json chat_template: a string, or
 * a list of {"name", "template"} objects (the one named "default", else the
 * first).  Absent or null gives *tmpl = NULL; anything else is an error
 * naming path and the field, never a silent fallback to a built-in. */
static int pick_chat_template(const json_t *ct, const char *path, const char **tmpl,
                              plume_error *err)
{
    *tmpl = NULL;
    if (!ct || json_is_null(ct))
        return 0;
    if (json_is_string(ct)) {
        *tmpl = json_string_value(ct);
        return 0;
    }
    if (!json_is_array(ct))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: chat_template must be a string or a list of {\"name\", "
                         "\"template\"} objects, found %s; fix or remove the field",
                         path, json_is_object(ct) ? "an object" : json_is_number(ct) ? "a number"
                                                   : "a boolean");
    size_t i;
    const json_t *e;
    json_array_foreach(ct, i, e)
    {
        const char *name = jstr(e, "name"), *text = jstr(e, "template");
        if (!text)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "%s: chat_template[%zu] has no string \"template\"; each entry "
                             "must be {\"name\": ..., \"template\": \"...\"}",
                             path, i);
        if (!*tmpl || (name && strcmp(name, "default") == 0))
            *tmpl = text;
    }
    return 0;
}

/* Sets *id from a tokenizer_config.json token field (a string or
 * {"content": string}) when the vocabulary has that text; absent or null
 * leaves it.  Any other type is an error naming path and key. */
static int config_token(const plume_tokenizer *t, const json_t *cfg, const char *key,
                        const char *path, int32_t *id, plume_error *err)
{
    const json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v))
        return 0;
    const char *text = token_text(v);
    if (!text)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: %s must be a string or {\"content\": \"...\"}; fix or remove "
                         "the field",
                         path, key);
    int32_t found = find_text(t, text);
    if (found >= 0)
        *id = found;
    return 0;
}

/* chat_template.jinja in the directory of tokenizer_config.json (where
 * transformers saves the template since 4.43) replaces the config's field. */
static int read_chat_template_jinja(plume_tokenizer *t, const char *config_path, plume_error *err)
{
    const char *slash = strrchr(config_path, '/');
    size_t dir = slash ? (size_t)(slash - config_path) + 1 : 0;
    char *p = malloc(dir + sizeof "chat_template.jinja");
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    memcpy(p, config_path, dir);
    memcpy(p + dir, "chat_template.jinja", sizeof "chat_template.jinja");
    char *buf;
    size_t n;
    int rc = tok_read_template_file(p, true, &buf, &n, err);
    free(p);
    if (rc)
        return rc < 0 ? -1 : 0; /* 1: no such file */
    free(t->chat_template);
    t->chat_template = buf;
    return 0;
}

/* Reads tokenizer_config.json: special-token ids, add_bos_token and the chat
 * template; a malformed field is an error naming path and the field. */
static int read_config(plume_tokenizer *t, const char *path, plume_error *err)
{
    json_error_t je;
    json_t *cfg = json_load_file(path, 0, &je);
    if (!cfg)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: invalid JSON at line %d: %s", path, je.line,
                         je.text);
    const json_t *ab = json_object_get(cfg, "add_bos_token");
    int rc = 0;
    if (!json_is_object(cfg))
        rc = plume_err(err, PLUME_ERR_FORMAT, "%s: not a JSON object; fix or remove the file",
                       path);
    else if (config_token(t, cfg, "bos_token", path, &t->bos, err) < 0 ||
             config_token(t, cfg, "eos_token", path, &t->eos, err) < 0 ||
             config_token(t, cfg, "unk_token", path, &t->unk, err) < 0 ||
             config_token(t, cfg, "pad_token", path, &t->pad, err) < 0)
        rc = -1;
    else if (ab && !json_is_null(ab) && !json_is_boolean(ab))
        rc = plume_err(err, PLUME_ERR_FORMAT,
                       "%s: add_bos_token must be true or false; fix or remove the field", path);
    if (rc < 0) {
        json_decref(cfg);
        return -1;
    }
    if (json_is_boolean(ab))
        t->add_bos = json_is_true(ab);
    const char *tmpl = NULL;
    const json_t *ct = json_object_get(cfg, "chat_template");
    rc = pick_chat_template(ct, path, &tmpl, err);
    if (rc == 0 && tmpl && !(t->chat_template = tok_strndup(tmpl, strlen(tmpl))))
        rc = plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    /* a list's named entries are also variants (plume_chat_request.template_name) */
    size_t i;
    const json_t *e;
    if (rc == 0 && json_is_array(ct))
        json_array_foreach(ct, i, e)
        {
            const char *name = jstr(e, "name"), *text = jstr(e, "template");
            if (!name || rc)
                continue;
            if (tok_add_chat_variant(t, name, strlen(name), text, strlen(text)))
                rc = plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        }
    json_decref(cfg);
    if (rc == 0)
        rc = read_chat_template_jinja(t, path, err);
    return rc;
}

/* Checks one token id against the bound: an error naming the entry (what,
 * text) when it is negative, not an integer or not below limit. */
static int check_id(const json_t *id, const char *what, const char *text, size_t n_entries,
                    int64_t limit, plume_error *err)
{
    if (!json_is_integer(id) || json_integer_value(id) < 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "tokenizer.json: %s \"%.60s\" has no valid id (a non-negative "
                         "integer); fix the entry",
                         what, text);
    if (json_integer_value(id) >= limit)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "tokenizer.json: %s \"%.60s\" has id %lld, but the file has %zu tokens "
                         "and ids must lie below %lld; fix or remove the entry",
                         what, text, (long long)json_integer_value(id), n_entries,
                         (long long)limit);
    return 0;
}

/* Largest id of model.vocab and added_tokens, each checked to lie below
 * max(number of entries, n_vocab) before anything is sized by it: a
 * hostile id near 2^31 would otherwise cost tens of GB.  -1 on error. */
static int64_t vocab_max_id(const json_t *vocab, const json_t *added, int64_t n_vocab,
                            plume_error *err)
{
    size_t n_entries = json_object_size(vocab) + json_array_size(added);
    int64_t limit = (int64_t)n_entries > n_vocab ? (int64_t)n_entries : n_vocab;
    if (limit > INT32_MAX)
        limit = INT32_MAX;
    int64_t max_id = -1;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)vocab, key, val)
    {
        if (check_id(val, "model.vocab entry", key, n_entries, limit, err) < 0)
            return -1;
        if (json_integer_value(val) > max_id)
            max_id = json_integer_value(val);
    }
    size_t i;
    const json_t *e;
    json_array_foreach(added, i, e)
    {
        char what[48];
        snprintf(what, sizeof what, "added_tokens[%zu]", i);
        if (!jstr(e, "content"))
            return plume_err(err, PLUME_ERR_FORMAT,
                             "tokenizer.json: %s has no string \"content\"; fix the entry",
                             what);
        if (check_id(json_object_get(e, "id"), what, jstr(e, "content"), n_entries, limit,
                     err) < 0)
            return -1;
        if (json_integer_value(json_object_get(e, "id")) > max_id)
            max_id = json_integer_value(json_object_get(e, "id"));
    }
    if (max_id < 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "tokenizer.json: the vocabulary (model.vocab and added_tokens) is "
                         "empty");
    return max_id;
}

/* Adds the vocabulary: model.vocab plus added_tokens, ids 0..max (bounded
 * as vocab_max_id says).  Ids with no token become "[PAD<id>]" UNUSED, as
 * llama.cpp's converter does. */
static int load_vocab(plume_tokenizer *t, const json_t *model, const json_t *added,
                      int64_t n_vocab, plume_error *err)
{
    const json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return plume_err(err, PLUME_ERR_FORMAT, "tokenizer.json: model.vocab is not an object");
    if (added && !json_is_null(added) && !json_is_array(added))
        return plume_err(err, PLUME_ERR_FORMAT, "tokenizer.json: added_tokens is not a list");
    int64_t max_id = vocab_max_id(vocab, added, n_vocab, err);
    if (max_id < 0)
        return -1;
    const char *key;
    const json_t *val;
    size_t i;
    const json_t *e;
    size_t n = (size_t)max_id + 1;
    const char **text = calloc(n, sizeof *text);
    size_t *len = calloc(n, sizeof *len);
    uint8_t *type = calloc(n, 1);
    int rc = 0;
    if (!text || !len || !type) {
        rc = plume_err(err, PLUME_ERR_NOMEM, "out of memory reading the vocabulary");
        goto out;
    }
    json_object_foreach((json_t *)vocab, key, val)
    {
        size_t id = (size_t)json_integer_value(val);
        text[id] = key;
        len[id] = strlen(key);
        type[id] = TOK_NORMAL;
        if (t->kind == TOK_KIND_SPM && len[id] == 6 && strncmp(key, "<0x", 3) == 0 &&
            key[5] == '>')
            type[id] = TOK_BYTE;
    }
    json_array_foreach(added, i, e)
    {
        size_t id = (size_t)json_integer_value(json_object_get(e, "id"));
        text[id] = jstr(e, "content");
        len[id] = strlen(text[id]);
        type[id] = json_is_true(json_object_get(e, "special")) ? TOK_CONTROL : TOK_USER_DEFINED;
    }
    const char *unk = jstr(model, "unk_token");
    for (size_t id = 0; id < n && rc == 0; id++) {
        char pad[32];
        if (!text[id]) {
            snprintf(pad, sizeof pad, "[PAD%zu]", id);
            text[id] = pad;
            len[id] = strlen(pad);
            type[id] = TOK_UNUSED;
        }
        if (unk && strcmp(text[id], unk) == 0) {
            type[id] = TOK_UNKNOWN;
            t->unk = (int32_t)id;
        }
        if (tok_vocab_add(&t->vocab, text[id], len[id], type[id], 0.0f) < 0)
            rc = plume_err(err, PLUME_ERR_NOMEM, "out of memory reading the vocabulary");
    }
out:
    free(text);
    free(len);
    free(type);
    return rc;
}

static int load_merges(plume_tokenizer *t, const json_t *merges, plume_error *err)
{
    if (!json_is_array(merges))
        return plume_err(err, PLUME_ERR_FORMAT, "tokenizer.json: model.merges is not an array");
    size_t i;
    const json_t *e;
    char *cat = NULL;
    size_t cat_cap = 0;
    json_array_foreach(merges, i, e)
    {
        const char *l, *r;
        size_t ll, rl;
        if (json_is_string(e)) { /* "left right" */
            const char *s = json_string_value(e);
            const char *sp = s[0] ? strchr(s + 1, ' ') : NULL;
            if (!sp) {
                free(cat);
                return plume_err(err, PLUME_ERR_FORMAT,
                                 "tokenizer.json: merges[%zu] \"%.60s\" has no space", i, s);
            }
            l = s;
            ll = (size_t)(sp - s);
            r = sp + 1;
            rl = strlen(r);
        } else if (json_is_array(e) && json_array_size(e) == 2 &&
                   json_is_string(json_array_get(e, 0)) && json_is_string(json_array_get(e, 1))) {
            l = json_string_value(json_array_get(e, 0));
            r = json_string_value(json_array_get(e, 1));
            ll = strlen(l);
            rl = strlen(r);
        } else {
            free(cat);
            return plume_err(err, PLUME_ERR_FORMAT,
                             "tokenizer.json: merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]",
                             i);
        }
        if (ll == 0 || rl == 0) {
            free(cat);
            return plume_err(err, PLUME_ERR_FORMAT,
                             "tokenizer.json: merges[%zu] has an empty side; a merge joins two "
                             "tokens, fix or remove the entry",
                             i);
        }
        if (ll + rl > cat_cap) {
            cat_cap = (ll + rl) * 2;
            char *nc = realloc(cat, cat_cap);
            if (!nc) {
                free(cat);
                return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading merges");
            }
            cat = nc;
        }
        memcpy(cat, l, ll);
        memcpy(cat + ll, r, rl);
        int32_t li = tok_vocab_find(&t->vocab, l, ll), ri = tok_vocab_find(&t->vocab, r, rl);
        int32_t res = tok_vocab_find(&t->vocab, cat, ll + rl);
        if (li >= 0 && ri >= 0 && res >= 0 && tok_merges_add(&t->merges, li, ri, res, (int32_t)i) < 0) {
            free(cat);
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading merges");
        }
    }
    free(cat);
    return 0;
}

/* Builds *tp from a parsed tokenizer.json, not yet finalized; n_vocab
 * bounds ids as load_vocab says. */
static int load(plume_tokenizer **tp, const json_t *root, int64_t n_vocab, plume_error *err)
{
    const json_t *model = json_object_get(root, "model");
    if (!is_type(model, "BPE"))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "tokenizer.json: model type \"%s\" is not supported (plume handles BPE)",
                         jstr(model, "type") ? jstr(model, "type") : "?");
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    const json_t *norm = json_object_get(root, "normalizer");
    const json_t *dec = json_object_get(root, "decoder");
    tok_kind kind;
    if (any_step(pre, step_bytelevel) || any_step(dec, step_bytelevel))
        kind = TOK_KIND_BPE;
    else if (any_step(norm, step_replace_space) || any_step(pre, step_metaspace) ||
             any_step(dec, step_replace_space))
        kind = TOK_KIND_SPM;
    else
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "tokenizer.json: BPE without ByteLevel or SentencePiece '\u2581' "
                         "handling is not supported");
    plume_tokenizer *t = *tp = tok_new(kind);
    if (!t)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating a tokenizer");
    if (load_vocab(t, model, json_object_get(root, "added_tokens"), n_vocab, err) < 0 ||
        load_merges(t, json_object_get(model, "merges"), err) < 0)
        return -1;
    t->merge_mode = TOK_MERGE_RANKS;
    t->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
    if (kind == TOK_KIND_BPE) {
        if (pre && !json_is_null(pre) && add_pretok_step(t, pre, err) < 0)
            return -1;
        if (name_pretok(t) < 0)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    } else {
        t->add_space_prefix = any_step(norm, step_prepend_space) || any_step(pre, step_metaspace_prefix);
        t->spm_split_words = any_step(pre, step_metaspace_split);
        if (!(t->pre_name = tok_strndup("default", 7)))
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    const json_t *post = json_object_get(root, "post_processor");
    if (any_step(post, post_bos)) {
        const json_t *p = post;
        if (is_type(post, "Sequence")) {
            size_t i;
            const json_t *e;
            json_array_foreach(json_object_get(post, "processors"), i, e) if (post_bos(e)) p = e;
        }
        const json_t *first = json_array_get(json_object_get(p, "single"), 0);
        t->bos = find_text(t, jstr(json_object_get(first, "SpecialToken"), "id"));
        t->add_bos = t->bos >= 0;
    }
    return 0;
}

int plume_tokenizer_from_hf(const char *tokenizer_json, const char *tokenizer_config_json,
                            plume_tokenizer **out, plume_error *err)
{
    return plume_tokenizer_from_hf_sized(tokenizer_json, tokenizer_config_json, 0, out, err);
}

int plume_tokenizer_from_hf_sized(const char *tokenizer_json, const char *tokenizer_config_json,
                                  int64_t n_vocab, plume_tokenizer **out, plume_error *err)
{
    if (!tokenizer_json || !out)
        return plume_err(err, PLUME_ERR_INVALID, "plume_tokenizer_from_hf: NULL argument");
    *out = NULL;
    json_error_t je;
    json_t *root = json_load_file(tokenizer_json, 0, &je);
    if (!root) {
        plume_status code = je.line <= 0 ? PLUME_ERR_IO : PLUME_ERR_FORMAT;
        return plume_err(err, code, "%s: cannot read tokenizer JSON (line %d): %s",
                         tokenizer_json, je.line, je.text);
    }
    plume_tokenizer *t = NULL;
    int rc = load(&t, root, n_vocab, err);
    json_decref(root);
    if (rc < 0) {
        plume_tokenizer_free(t);
        return plume_err_prefix(err, "%s", tokenizer_json);
    }
    /* read_config's errors name tokenizer_config.json itself */
    if (tokenizer_config_json && read_config(t, tokenizer_config_json, err) < 0) {
        plume_tokenizer_free(t);
        return -1;
    }
    if (tok_finalize(t, err) < 0) {
        plume_tokenizer_free(t);
        return plume_err_prefix(err, "%s", tokenizer_json);
    }
    *out = t;
    return 0;
}
