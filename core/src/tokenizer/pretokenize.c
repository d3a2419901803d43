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
/* Mistral's tekken (Mistral-Nemo, Mistral-Small 3): its tokenizer.json's
 * pattern, which llama.cpp quotes for LLAMA_VOCAB_PRE_TYPE_TEKKEN. */
#define RX_TEKKEN                                                                                 \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"      \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?"  \
    "[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_DIGIT "\\p{N}"
/* the CJK runs llama.cpp's DeepSeek pre-tokenizers split out */
#define RX_DEEPSEEK_CJK "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{4e00}\\x{ac00}-\\x{d7ff}]+"
/* deepseek-llm's letters (llama.cpp's class, code points as PCRE2 escapes) */
#define RX_DEEPSEEK_LETTERS \
    "\\s?[A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"\
    "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}"\
    "\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-"\
    "\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}"\
    "\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-"\
    "\\x{1d77}\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}"\
    "\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"\
    "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}"\
    "\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}\\x{1ff6}-"\
    "\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}\\x{2124}"\
    "\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}"\
    "\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}"\
    "\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-"\
    "\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}"\
    "\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}"\
    "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}"\
    "\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+"
#define RX_DEEPSEEK_PUNCT "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3000}-"\
    "\\x{3002}]+"

/* One of llama.cpp's groups of pre-tokenizer names (NULL-terminated), the
 * regexes they share (applied in turn, each splitting the pieces of the
 * last), and the flags llama.cpp sets for them. */
struct pre_def {
    const char *const *names;
    const char *rx[6];
    size_t n;
    bool ignore_merges;
    bool add_bos; /* BOS by default (the file's add_bos_token decides when present) */
};

/* Pre-tokenizer names and regexes as llama.cpp's llama-vocab.cpp groups
 * them (the llama.cpp that the llama-cpp-python 0.3.36 sdist vendors;
 * "gpt-2" is convert_hf_to_gguf.py's name for GPT-2's own).  "default" is
 * llama.cpp's fallback for a file without tokenizer.ggml.pre. */
static const struct pre_def PRE_DEFS[] = {
    {(const char *const[]){"default", NULL},
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 4, false, false},
    {(const char *const[]){"gpt2", "gpt-2", "mpt", "olmo", "jais", "phi-2", "a.x-4.0", "mellum",
                           "exaone4", "trillion", NULL},
     {RX_GPT2}, 1, false, false},
    {(const char *const[]){"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone",
                           "minerva-7b", NULL},
     {RX_DIGIT, RX_GPT2}, 2, false, false},
    {(const char *const[]){"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                           "midm-2.0", "lfm2", NULL},
     {RX_LLAMA3}, 1, true, true},
    {(const char *const[]){"dbrx", "smaug-bpe", NULL}, {RX_LLAMA3}, 1, false, false},
    {(const char *const[]){"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", NULL},
     {RX_QWEN2}, 1, false, false},
    {(const char *const[]){"gpt-4o", "llama4", NULL}, {RX_GPT4O}, 1, false, false},
    {(const char *const[]){"tekken", NULL}, {RX_TEKKEN}, 1, true, true},
    {(const char *const[]){"falcon", NULL},
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"}, 3, false, false},
    {(const char *const[]){"deepseek-llm", NULL},
     {"[\\r\\n]", RX_DEEPSEEK_LETTERS, RX_DEEPSEEK_PUNCT, "\\s+$", RX_DEEPSEEK_CJK, "\\p{N}+"},
     6, false, false},
    {(const char *const[]){"deepseek-coder", NULL},
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_DEEPSEEK_CJK, "\\p{N}"}, 5, false, false},
    {(const char *const[]){"deepseek-v3", NULL},
     {"\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     3, false, false},
};

const char *const *tok_pretok_patterns(const char *name, size_t *n, bool *ignore_merges)
{
    bool add_bos;
    return tok_pretok_lookup(name, n, ignore_merges, &add_bos);
}

const char *const *tok_pretok_lookup(const char *name, size_t *n, bool *ignore_merges,
                                     bool *add_bos)
{
    for (size_t i = 0; i < sizeof PRE_DEFS / sizeof PRE_DEFS[0]; i++)
        for (const char *const *nm = PRE_DEFS[i].names; *nm; nm++)
            if (strcmp(*nm, name) == 0) {
                *n = PRE_DEFS[i].n;
                *ignore_merges = PRE_DEFS[i].ignore_merges;
                *add_bos = PRE_DEFS[i].add_bos;
                return PRE_DEFS[i].rx;
            }
    return NULL;
}

const char *tok_pretok_supported(void)
{
    return "default, gpt2, gpt-2, mpt, olmo, jais, phi-2, a.x-4.0, mellum, exaone4, trillion, "
           "smollm, starcoder, refact, command-r, codeshell, exaone, minerva-7b, llama3, llama-v3, "
           "llama-bpe, falcon3, falcon-h1, pixtral, midm-2.0, lfm2, dbrx, smaug-bpe, qwen2, "
           "deepseek-r1-qwen, stablelm2, megrez, gpt-4o, llama4, tekken, falcon, deepseek-llm, "
           "deepseek-coder, deepseek-v3";
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
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                                       &ec,
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
