/* plume tokenizer internals: the tokenizer object and the pieces that the
 * files in this directory share.  Nothing here is public API. */
#ifndef PLUME_TOK_INTERNAL_H
#define PLUME_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/tokenizer.h"

/* Token types as GGUF's tokenizer.ggml.token_type stores them. */
enum {
    TOK_NORMAL = 1,
    TOK_UNKNOWN = 2,
    TOK_CONTROL = 3,
    TOK_USER_DEFINED = 4,
    TOK_UNUSED = 5,
    TOK_BYTE = 6,
};

/* Which algorithm encodes a text fragment. */
typedef enum tok_kind {
    TOK_KIND_BPE, /* byte-level BPE ("gpt2") */
    TOK_KIND_SPM, /* SentencePiece-style BPE ("llama") */
} tok_kind;

/* How the merge loop ranks adjacent pairs. */
typedef enum tok_merge_mode {
    TOK_MERGE_RANKS,  /* merges list: lower rank merges first */
    TOK_MERGE_SCORES, /* SentencePiece: the pair whose concatenation has the highest score */
} tok_merge_mode;

/* ---- vocab.c: token table and text -> id map ---- */

typedef struct tok_vocab {
    int32_t n, cap;
    char *arena;          /* all token texts, back to back (not NUL-terminated) */
    size_t arena_len, arena_cap;
    uint64_t *off;        /* text of token i: arena + off[i], len[i] bytes */
    uint32_t *len;
    uint8_t *type;        /* TOK_* */
    float *score;
    int32_t *slots;       /* open-addressing hash of texts; -1 = empty */
    uint32_t n_slots;     /* power of two */
} tok_vocab;

void tok_vocab_init(tok_vocab *v);
void tok_vocab_free(tok_vocab *v);
/* Appends a token with the next id; returns that id or -1 when out of memory.
 * A text that repeats an earlier one takes over its lookup (as llama.cpp). */
int32_t tok_vocab_add(tok_vocab *v, const char *text, size_t len, int type, float score);
/* Id of the token whose text is exactly text[0..len), or -1. */
int32_t tok_vocab_find(const tok_vocab *v, const char *text, size_t len);
static inline const char *tok_vocab_text(const tok_vocab *v, int32_t id)
{
    return v->arena + v->off[id];
}

/* ---- bpe.c: merge table and the merge loop ---- */

typedef struct tok_merge_entry {
    uint64_t key;   /* (left id << 32) | right id; UINT64_MAX = empty */
    int32_t rank;
    int32_t result;
} tok_merge_entry;

typedef struct tok_merges {
    tok_merge_entry *slots;
    uint32_t n_slots; /* power of two */
    uint32_t n;
} tok_merges;

void tok_merges_init(tok_merges *m);
void tok_merges_free(tok_merges *m);
/* Records that (left, right) merges into result with the given rank; an
 * existing pair keeps its earlier (better) rank.  -1 when out of memory. */
int tok_merges_add(tok_merges *m, int32_t left, int32_t right, int32_t result, int32_t rank);
/* Rank and result of merging (left, right); false when they do not merge. */
bool tok_merges_find(const tok_merges *m, int32_t left, int32_t right, int32_t *rank,
                     int32_t *result);

typedef struct tok_sym {
    uint32_t start, len; /* span in the text being merged; len 0 = merged away */
    int32_t id;          /* token id of the span, -1 when it is not a token */
    int32_t prev, next;  /* neighbours, -1 at the ends */
} tok_sym;

typedef struct tok_cand {
    double key;      /* lower merges first */
    int32_t left, right;
    uint32_t len;    /* combined length when queued (detects stale entries) */
    int32_t result;
} tok_cand;

/* Scratch space reused across the pieces of one plume_tokenize call. */
typedef struct tok_work {
    tok_sym *syms;
    size_t n_syms, cap_syms;
    tok_cand *heap;
    size_t n_heap, cap_heap;
} tok_work;

void tok_work_free(tok_work *w);
/* Loads w->syms with one symbol per byte (per_byte) or per UTF-8 character
 * of text[0..len) (each byte of a malformed sequence alone), each with its
 * token id (byte_tok for bytes, else a vocab lookup).  -1 when out of
 * memory. */
int tok_work_load(const plume_tokenizer *t, tok_work *w, const char *text, size_t len,
                  bool per_byte);
/* Runs the merge loop over w->syms until no adjacent pair merges.  Live
 * symbols remain linked from index 0 through next.  -1 when out of memory. */
int tok_bpe_merge(const plume_tokenizer *t, tok_work *w, const char *text, tok_merge_mode mode);

/* ---- byte_level.c: GPT-2 bytes <-> unicode ---- */

/* Writes the UTF-8 of the character GPT-2 uses for byte b; returns its length (1 or 2). */
int tok_byte_to_unicode(uint8_t b, char out[4]);
/* Byte for GPT-2 code point cp, or -1 when cp stands for no byte. */
int tok_unicode_to_byte(uint32_t cp);

/* ---- utf8.c ---- */

/* Length of the UTF-8 sequence that lead byte c starts (1 for invalid leads). */
int tok_utf8_len(uint8_t c);
/* Decodes one well-formed UTF-8 character at s (n bytes available): returns
 * its length and stores the code point; 0 when malformed or truncated. */
int tok_utf8_decode(const char *s, size_t n, uint32_t *cp);
/* Length of the longest prefix of s[0..n) that is a truncated but so-far
 * valid UTF-8 sequence reaching the end of s (0..3). */
size_t tok_utf8_incomplete_tail(const char *s, size_t n);
/* Whether s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code
 * points above U+10FFFF, nothing truncated). */
bool tok_utf8_valid(const char *s, size_t n);
/* Appends s[0..n) to out as valid UTF-8, replacing each maximal invalid
 * subsequence with U+FFFD (as Rust's from_utf8_lossy).  Returns the bytes
 * written, or the bytes needed when more than cap. */
size_t tok_utf8_lossy(const char *s, size_t n, char *out, size_t cap);

/* ---- pretokenize.c ---- */

typedef struct tok_pretok {
    size_t n;
    char **src;   /* pattern sources */
    void **code;  /* pcre2_code_8 * */
} tok_pretok;

/* The regex sequence llama.cpp uses for pre-tokenizer `name` of a BPE
 * vocabulary; NULL for an unknown name.  *ignore_merges tells whether whole
 * words found in the vocabulary skip the merges (Llama 3). */
const char *const *tok_pretok_patterns(const char *name, size_t *n, bool *ignore_merges);
/* tok_pretok_patterns, and *add_bos: whether llama.cpp adds BOS to this
 * pre-tokenizer's prompts when the file does not say (Llama 3, tekken). */
const char *const *tok_pretok_lookup(const char *name, size_t *n, bool *ignore_merges,
                                     bool *add_bos);
/* Comma-separated list of the supported pre-tokenizer names. */
const char *tok_pretok_supported(void);
/* Appends a pattern to the sequence (compiled later). */
int tok_pretok_add(tok_pretok *p, const char *pattern, plume_error *err);
/* Compiles every pattern (UTF + UCP, JIT where available). */
int tok_pretok_compile(tok_pretok *p, plume_error *err);
void tok_pretok_free(tok_pretok *p);

typedef struct tok_span {
    size_t off, len;
} tok_span;

typedef struct tok_spans {
    tok_span *v;
    size_t n, cap;
} tok_spans;

int tok_spans_push(tok_spans *s, size_t off, size_t len);
/* Splits text[0..len) by the regex sequence: each regex splits every piece
 * the previous one produced, keeping matches and the gaps between them.
 * The pieces replace out's contents.  -1 on error. */
int tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_spans *out,
                     plume_error *err);

/* ---- special.c ---- */

typedef struct tok_fragment {
    size_t off, len; /* raw text span when id < 0 */
    int32_t id;      /* a special token matched whole */
} tok_fragment;

typedef struct tok_fragments {
    tok_fragment *v;
    size_t n, cap;
} tok_fragments;

/* Builds the lookup of texts matched whole in the input (CONTROL, UNKNOWN,
 * USER_DEFINED).  -1 when out of memory. */
int tok_special_build(plume_tokenizer *t);
void tok_special_free(plume_tokenizer *t);
/* Splits text into raw spans and special tokens, leftmost-longest.
 * USER_DEFINED texts always match; CONTROL/UNKNOWN only with parse_special. */
int tok_special_split(const plume_tokenizer *t, const char *text, size_t len, bool parse_special,
                      tok_fragments *out);

/* ---- spm.c ---- */

/* Encodes one raw fragment SentencePiece-style, appending ids.  prefix_space
 * asks for the add_space_prefix space.  -1 on error. */
int tok_spm_encode(const plume_tokenizer *t, tok_work *w, const char *text, size_t len,
                   bool prefix_space, int32_t **ids, size_t *n, size_t *cap, plume_error *err);

/* ---- chat_template.c ---- */

/* Compiles t->chat_template with the Jinja engine (or, when the model has
 * none, its family's format from t->arch and the pre-tokenizer, else
 * ChatML, saying so once on stderr) and names its family for
 * plume_chat_template_name.  A template that does not compile is kept as
 * t->chat_error, reported when the template is used.  -1 on OOM. */
int tok_chat_detect(plume_tokenizer *t);
/* Frees what tok_chat_detect and the loaders attached to t. */
void tok_chat_free(plume_tokenizer *t);

/* ---- tokenizer.c ---- */

/* A new empty tokenizer of the given kind (model name "gpt2" or "llama"). */
plume_tokenizer *tok_new(tok_kind kind);
/* Completes a tokenizer whose vocab, merges, ids and patterns the loader
 * filled: derives byte tokens, decoded texts, special-token lookup and
 * compiles the pre-tokenizer.  -1 with err on failure. */
int tok_finalize(plume_tokenizer *t, plume_error *err);
/* The token for text that no token (nor byte-fallback token) covers: the
 * unknown token when the vocabulary declares one of type UNKNOWN, else -1,
 * meaning the text is dropped (as HF tokenizers with no unk and llama.cpp's
 * BPE do).  Text never becomes a control token this way. */
int32_t tok_text_unk(const plume_tokenizer *t);
/* Appends id to a growing array. */
int tok_ids_push(int32_t **ids, size_t *n, size_t *cap, int32_t id);
/* Duplicates s[0..n) as a NUL-terminated string (NULL on OOM). */
char *tok_strndup(const char *s, size_t n);
/* Adds the named chat template variant name[0..name_len) with text
 * text[0..text_len) to t.  0, or -1 on OOM (t then has it not). */
int tok_add_chat_variant(plume_tokenizer *t, const char *name, size_t name_len, const char *text,
                         size_t text_len);

/* Reads the chat template file at path (at most 16 MiB) into a malloc'd,
 * NUL-terminated *out of *len bytes.  1 when it cannot be opened and
 * missing_ok (an optional file); otherwise -1 with err naming path (cannot
 * open, larger than 16 MiB, out of memory). */
int tok_read_template_file(const char *path, bool missing_ok, char **out, size_t *len,
                           plume_error *err);

struct tok_special_entry {
    const char *text;
    uint32_t len;
    int32_t id;
    bool always; /* USER_DEFINED: matched even without parse_special */
};

struct plume_tokenizer {
    tok_kind kind;
    tok_merge_mode merge_mode;
    char model_name[16];
    char *pre_name;

    tok_vocab vocab;
    tok_merges merges;
    tok_pretok pretok;
    bool ignore_merges;

    /* decoded bytes of each token (what plume_token_bytes returns) */
    char *dec_arena;
    uint64_t *dec_off;
    uint32_t *dec_len;
    uint32_t max_token_bytes;

    int32_t byte_tok[256]; /* token for each byte: GPT-2 char or <0xNN>; -1 when none */

    /* special texts matched whole, grouped by first byte, longest first */
    struct tok_special_entry *specials;
    size_t n_specials;
    uint32_t special_first[257]; /* specials with first byte b: [first[b], first[b+1]) */

    int32_t bos, eos, unk, pad, eot, eom;
    /* o200k_harmony (gpt-oss): the id of "<|end|>" when the vocabulary also
     * has "<|return|>" and "<|call|>"; -1 otherwise.  That <|end|> closes one
     * message of a reply (reasoning, then the answer), not the reply. */
    int32_t harmony_end;
    bool add_bos;
    bool add_space_prefix; /* SPM: prepend a space to text at the start / after specials */
    bool spm_split_words;  /* SPM from tokenizer.json Metaspace(split=true) */

    char *chat_template;
    const char *chat_family; /* static string or NULL */
    /* GGUF tokenizer.chat_template.<name> variants (name, text) */
    char **chat_variant_names, **chat_variant_texts;
    size_t n_chat_variants;
    char *arch;                       /* GGUF general.architecture, or NULL */
    struct jinja_template *chat_jinja; /* the template that renders: the model's or its family's */
    char *chat_error;                 /* why the model's template did not compile, or NULL */
    const char *chat_source;          /* "model", "family" or "chatml" */
};

#endif
