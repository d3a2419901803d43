/* Pre-tokenization: splitting text into pieces with a sequence of regexes
 * (PCRE2, UTF + UCP), as llama.cpp does per `tokenizer.ggml.pre`. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"
#include "tokenizer/tok_internal.h"

#define RX_GPT2 \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RX_LLAMA3                                                                          \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                     \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* o200k (gpt-oss, GPT-4o): the pattern of their tokenizer.json, which
 * llama.cpp's llama-vocab.cpp quotes for LLAMA_VOCAB_PRE_TYPE_GPT4O (its own
 * regex engine needs a rewritten form; PCRE2 runs the original). */
#define RX_GPT4O                                                                                  \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"       \
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"     \
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_DIGIT "\\p{N}"

/* One of llama.cpp's groups of pre-tokenizer names (NULL-terminated) and
 * the regexes they share. */
struct pre_def {
    const char *const *names;
    const char *rx[2];
    size_t n;
    bool ignore_merges;
};

/* Pre-tokenizer names as llama.cpp's llama-vocab.cpp groups them
 * ("gpt-2" is convert_hf_to_gguf.py's name for GPT-2's own). */
static const struct pre_def PRE_DEFS[] = {
    {(const char *const[]){"default", "gpt2", "gpt-2", "mpt", "olmo", "jais", NULL},
     {RX_GPT2}, 1, false},
    {(const char *const[]){"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
                           NULL},
     {RX_DIGIT, RX_GPT2}, 2, false},
    {(const char *const[]){"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", NULL},
     {RX_LLAMA3}, 1, true},
    {(const char *const[]){"dbrx", "smaug-bpe", NULL}, {RX_LLAMA3}, 1, false},
    {(const char *const[]){"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", NULL},
     {RX_QWEN2}, 1, false},
    {(const char *const[]){"gpt-4o", "llama4", NULL}, {RX_GPT4O}, 1, false},
};

const char *const *tok_pretok_patterns(const char *name, size_t *n, bool *ignore_merges)
{
    for (size_t i = 0; i < sizeof PRE_DEFS / sizeof PRE_DEFS[0]; i++)
        for (const char *const *nm = PRE_DEFS[i].names; *nm; nm++)
            if (strcmp(*nm, name) == 0) {
                *n = PRE_DEFS[i].n;
                *ignore_merges = PRE_DEFS[i].ignore_merges;
                return PRE_DEFS[i].rx;
            }
    return NULL;
}

const char *tok_pretok_supported(void)
{
    return "default, gpt2, gpt-2, mpt, olmo, jais, smollm, starcoder, refact, command-r, "
           "codeshell, exaone, llama3, llama-v3, llama-bpe, falcon3, pixtral, dbrx, smaug-bpe, qwen2, "
           "deepseek-r1-qwen, stablelm2, megrez, gpt-4o, llama4";
}

int tok_pretok_add(tok_pretok *p, const char *pattern, plume_error *err)
{
    char **src = realloc(p->src, (p->n + 1) * sizeof *src);
    if (!src)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a pre-tokenizer regex");
    p->src = src;
    void **code = realloc(p->code, (p->n + 1) * sizeof *code);
    if (!code)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a pre-tokenizer regex");
    p->code = code;
    p->src[p->n] = tok_strndup(pattern, strlen(pattern));
    p->code[p->n] = NULL;
    if (!p->src[p->n])
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a pre-tokenizer regex");
    p->n++;
    return 0;
}

int tok_pretok_compile(tok_pretok *p, plume_error *err)
{
    for (size_t i = 0; i < p->n; i++) {
        if (p->code[i])
            continue;
        int ec;
        PCRE2_SIZE eoff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)p->src[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec,
                                       &eoff, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "pre-tokenizer regex \"%s\" does not compile with PCRE2 at offset "
                             "%zu: %s",
                             p->src[i], (size_t)eoff, (const char *)msg);
        }
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
        p->code[i] = re;
    }
    return 0;
}

void tok_pretok_free(tok_pretok *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->src[i]);
        pcre2_code_free(p->code[i]);
    }
    free(p->src);
    free(p->code);
    memset(p, 0, sizeof *p);
}

int tok_spans_push(tok_spans *s, size_t off, size_t len)
{
    tok_span *v = plume_grow(s->v, &s->cap, s->n + 1, 64, sizeof *v);
    if (!v)
        return -1;
    s->v = v;
    s->v[s->n].off = off;
    s->v[s->n].len = len;
    s->n++;
    return 0;
}

/* Splits text[off..off+len) by re into matches and gaps, appended to out;
 * reads no byte outside the span (the text need not be NUL-terminated). */
static int split_one(const pcre2_code *re, pcre2_match_data *md, const char *text, size_t off,
                     size_t len, tok_spans *out, plume_error *err)
{
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + off);
    size_t pos = 0, last = 0;
    while (pos < len) {
        int rc = pcre2_match(re, subj, len, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return plume_err(err, PLUME_ERR_INTERNAL, "pre-tokenizer regex match failed: %s",
                             (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* empty match: step over one character, never past the span */
            if (ms >= len)
                break;
            size_t step = (size_t)tok_utf8_len(subj[ms]);
            pos = ms + (step < len - ms ? step : len - ms);
            continue;
        }
        if (ms > last && tok_spans_push(out, off + last, ms - last) < 0)
            goto oom;
        if (tok_spans_push(out, off + ms, me - ms) < 0)
            goto oom;
        last = pos = me;
    }
    if (last < len && tok_spans_push(out, off + last, len - last) < 0)
        goto oom;
    return 0;
oom:
    return plume_err(err, PLUME_ERR_NOMEM, "out of memory splitting text into pieces");
}

int tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_spans *out,
                     plume_error *err)
{
    out->n = 0;
    if (len == 0)
        return 0;
    if (tok_spans_push(out, 0, len) < 0)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory splitting text into pieces");
    tok_spans next = {0};
    int rc = 0;
    for (size_t r = 0; r < p->n && rc == 0; r++) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->code[r], NULL);
        if (!md) {
            rc = plume_err(err, PLUME_ERR_NOMEM, "out of memory creating regex match data");
            break;
        }
        next.n = 0;
        for (size_t i = 0; i < out->n && rc == 0; i++)
            rc = split_one(p->code[r], md, text, out->v[i].off, out->v[i].len, &next, err);
        pcre2_match_data_free(md);
        tok_spans tmp = *out;
        *out = next;
        next = tmp;
    }
    free(next.v);
    return rc;
}
