/* Tokenizer unit tests on tiny vocabularies written by the test: a
 * byte-level BPE tokenizer.json, a SentencePiece-style tokenizer.json and a
 * SentencePiece GGUF (scores). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include <sys/mman.h>

#include "formats/gguf.h"
#include "plume/tokenizer.h"
#include "tokenizer/gguf_vocab.h"
#include "tok_test_util.h"
#include "tokenizer/tok_internal.h"

#define SP "\xe2\x96\x81" /* U+2581 */

static const char SMOL_TEMPLATE[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

/* ---------------------------------------------------------------- */
/* byte-level BPE tokenizer.json                                     */

enum { ID_BC = 256, ID_AB, ID_HE, ID_LL, ID_HELL, ID_HELLO, ID_GW, ID_AA, ID_GG, ID_12,
       ID_IM_START, ID_IM_END, ID_THINK, ID_EOT };

static json_t *added(int id, const char *content, bool special)
{
    return json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", content,
                     "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special",
                     special);
}

/* Writes tokenizer.json + tokenizer_config.json (cfg may be NULL) and loads
 * them; returns the loader's status, the tokenizer in *out and the error in
 * *err.  Takes the references to tok and cfg. */
static int load_json_rc(json_t *tok, json_t *cfg, plume_tokenizer **out, plume_error *err)
{
    char *a = json_dumps(tok, JSON_COMPACT), *b = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
    char pa[256], pb[256];
    assert_int_equal(tt_write_temp(".json", a, strlen(a), pa, sizeof pa), 0);
    if (b)
        assert_int_equal(tt_write_temp(".json", b, strlen(b), pb, sizeof pb), 0);
    *out = NULL;
    int rc = plume_tokenizer_from_hf(pa, b ? pb : NULL, out, err);
    unlink(pa);
    if (b)
        unlink(pb);
    free(a);
    free(b);
    json_decref(tok);
    json_decref(cfg);
    return rc;
}

/* Writes tokenizer.json + tokenizer_config.json and loads them. */
static plume_tokenizer *load_json(json_t *tok, json_t *cfg)
{
    plume_tokenizer *t = NULL;
    plume_error err = {0};
    if (load_json_rc(tok, cfg, &t, &err) != 0)
        fail_msg("loading tokenizer.json failed: %s", err.msg);
    return t;
}

/* The byte-level test tokenizer's tokenizer.json and, in *cfg, its
 * tokenizer_config.json; chat_template may be NULL. */
static json_t *byte_level_json(const char *chat_template, json_t **cfg)
{
    json_t *vocab = json_object();
    for (int c = 0; c < 256; c++) {
        char s[3];
        tt_gpt2_char((uint8_t)c, s);
        json_object_set_new(vocab, s, json_integer(c));
    }
    static const char *const extra[] = {"bc", "ab", "he", "ll", "hell", "hello", "\xc4\xa0w",
                                        "aa", "\xc4\xa0\xc4\xa0", "12"};
    for (int i = 0; i < 10; i++)
        json_object_set_new(vocab, extra[i], json_integer(256 + i));
    static const char *const merges[] = {"b c", "a b", "h e", "l l", "he ll", "hell o",
                                         "\xc4\xa0 w", "a a", "\xc4\xa0 \xc4\xa0", "1 2"};
    json_t *mj = json_array();
    for (int i = 0; i < 10; i++)
        json_array_append_new(mj, json_string(merges[i]));
    json_t *add = json_array();
    json_array_append_new(add, added(ID_IM_START, "<|im_start|>", true));
    json_array_append_new(add, added(ID_IM_END, "<|im_end|>", true));
    json_array_append_new(add, added(ID_THINK, "<think>", false));
    json_array_append_new(add, added(ID_EOT, "<|endoftext|>", true));
    json_t *tok = json_pack(
        "{s:o, s:n, s:{s:s, s:[{s:s, s:b}, {s:s, s:b, s:b, s:b}]}, s:{s:s}, "
        "s:{s:s, s:o, s:o, s:b, s:b}}",
        "added_tokens", add, "normalizer", "pre_tokenizer", "type", "Sequence", "pretokenizers",
        "type", "Digits", "individual_digits", 1, "type", "ByteLevel", "add_prefix_space", 0,
        "trim_offsets", 1, "use_regex", 1, "decoder", "type", "ByteLevel", "model", "type", "BPE",
        "vocab", vocab, "merges", mj, "ignore_merges", 0, "byte_fallback", 0);
    assert_non_null(tok);
    *cfg = json_pack("{s:s, s:s, s:b}", "bos_token", "<|im_start|>", "eos_token",
                     "<|im_end|>", "add_bos_token", 0);
    if (chat_template)
        json_object_set_new(*cfg, "chat_template", json_string(chat_template));
    return tok;
}

/* The byte-level test tokenizer; chat_template may be NULL. */
static plume_tokenizer *byte_level_tok(const char *chat_template)
{
    json_t *cfg;
    json_t *tok = byte_level_json(chat_template, &cfg);
    return load_json(tok, cfg);
}

/* Encodes s and compares with the expected ids (terminated by -1). */
static void expect_ids(const plume_tokenizer *t, const char *s, size_t len, bool special,
                       const int32_t *want)
{
    int32_t *ids = NULL;
    size_t n = 0;
    plume_error err = {0};
    assert_int_equal(plume_tokenize(t, s, len, false, special, &ids, &n, &err), 0);
    size_t nw = 0;
    while (want[nw] >= 0)
        nw++;
    bool same = n == nw;
    for (size_t i = 0; same && i < n; i++)
        same = ids[i] == want[i];
    if (!same) {
        char got[1024] = "";
        for (size_t i = 0; i < n && strlen(got) < 1000; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%d ", (int)ids[i]);
        free(ids);
        fail_msg("encoding \"%s\" gave [%s], %zu ids expected", s, got, nw);
    }
    free(ids);
}
#define EXPECT(t, s, special, ...)                                         \
    do {                                                                   \
        static const int32_t want_[] = {__VA_ARGS__, -1};                  \
        expect_ids((t), (s), strlen(s), (special), want_);                 \
    } while (0)

static void test_bpe_merge_order(void **state)
{
    (void)state;
    plume_tokenizer *t = byte_level_tok(NULL);
    assert_string_equal(plume_tokenizer_model(t), "gpt2");
    assert_string_equal(plume_tokenizer_pre(t), "smollm");
    assert_int_equal(plume_tokenizer_n_vocab(t), 270);
    EXPECT(t, "abc", false, 'a', ID_BC);   /* "b c" has the better rank */
    EXPECT(t, "abd", false, ID_AB, 'd');
    EXPECT(t, "hello", false, ID_HELLO);
    EXPECT(t, "aaa", false, ID_AA, 'a');   /* equal ranks: leftmost first */
    EXPECT(t, "aaaa", false, ID_AA, ID_AA);
    EXPECT(t, "hello world", false, ID_HELLO, ID_GW, 'o', 'r', 'l', 'd');
    EXPECT(t, "x12", false, 'x', '1', '2'); /* digits split one by one first */
    EXPECT(t, "x  ", false, 'x', ID_GG);   /* trailing spaces stay one piece */
    EXPECT(t, "a\n", false, 'a', '\n');
    plume_tokenizer_free(t);
}

static void test_special_tokens(void **state)
{
    (void)state;
    plume_tokenizer *t = byte_level_tok(NULL);
    const char *s = "<|im_start|>user\nhi<|im_end|>";
    EXPECT(t, s, true, ID_IM_START, 'u', 's', 'e', 'r', '\n', 'h', 'i', ID_IM_END);
    int32_t *ids;
    size_t n;
    assert_int_equal(plume_tokenize(t, s, strlen(s), false, false, &ids, &n, NULL), 0);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] < 256 || ids[i] == ID_AB || ids[i] == ID_BC);
    free(ids);
    /* a user-defined token is matched even without parse_special */
    EXPECT(t, "a<think>b", false, 'a', ID_THINK, 'b');
    /* longest match: <|im_start|> is not cut by a shorter prefix */
    EXPECT(t, "<|endoftext|><|im_end|>", true, ID_EOT, ID_IM_END);
    /* add_bos prepends the BOS id */
    assert_int_equal(plume_tokenizer_bos(t), ID_IM_START);
    assert_int_equal(plume_tokenizer_eos(t), ID_IM_END);
    assert_false(plume_tokenizer_add_bos(t));
    assert_int_equal(plume_tokenize(t, "ab", 2, true, false, &ids, &n, NULL), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], ID_IM_START);
    assert_int_equal(ids[1], ID_AB);
    free(ids);
    assert_true(plume_tokenizer_is_eog(t, ID_IM_END));
    assert_true(plume_tokenizer_is_eog(t, ID_EOT));
    assert_false(plume_tokenizer_is_eog(t, ID_IM_START));
    assert_false(plume_tokenizer_is_eog(t, 'a'));
    assert_true(plume_tokenizer_is_special(t, ID_IM_START));
    assert_false(plume_tokenizer_is_special(t, ID_THINK));
    /* special texts render only with render_special */
    char buf[64];
    assert_int_equal(plume_token_bytes(t, ID_IM_END, false, buf, sizeof buf), 0);
    assert_int_equal(plume_token_bytes(t, ID_IM_END, true, buf, sizeof buf), 10);
    assert_memory_equal(buf, "<|im_end|>", 10);
    assert_int_equal(plume_token_bytes(t, 270, true, buf, sizeof buf), -1);
    plume_tokenizer_free(t);
}

/* gpt-oss's o200k_harmony: with <|return|> and <|call|> in the vocabulary,
 * those end generation and <|end|> (which closes one message of a reply)
 * does not, as llama.cpp's vocabulary loader decides; without them <|end|>
 * (Phi-3's end of turn) still does. */
static void test_harmony_eog(void **state)
{
    (void)state;
    for (int harmony = 0; harmony < 2; harmony++) {
        json_t *cfg, *tok = byte_level_json(NULL, &cfg);
        json_t *add = json_object_get(tok, "added_tokens");
        json_array_append_new(add, added(ID_EOT + 1, "<|end|>", true));
        if (harmony) {
            json_array_append_new(add, added(ID_EOT + 2, "<|return|>", true));
            json_array_append_new(add, added(ID_EOT + 3, "<|call|>", true));
        }
        plume_tokenizer *t = load_json(tok, cfg);
        assert_int_equal(plume_tokenizer_is_eog(t, ID_EOT + 1), !harmony);
        if (harmony) {
            assert_true(plume_tokenizer_is_eog(t, ID_EOT + 2));
            assert_true(plume_tokenizer_is_eog(t, ID_EOT + 3));
        }
        assert_true(plume_tokenizer_is_eog(t, ID_IM_END));
        /* a rendered <|end|> is text for the harmony reader */
        char buf[16];
        assert_int_equal(plume_token_bytes(t, ID_EOT + 1, true, buf, sizeof buf), 7);
        plume_tokenizer_free(t);
    }
}

/* decode(encode(s)) == s */
static void round_trip(const plume_tokenizer *t, const char *s, size_t len, bool special)
{
    int32_t *ids;
    size_t n;
    plume_error err = {0};
    assert_int_equal(plume_tokenize(t, s, len, false, special, &ids, &n, &err), 0);
    char *out;
    assert_int_equal(plume_detokenize(t, ids, n, special, &out, &err), 0);
    if (strlen(out) != len || memcmp(out, s, len) != 0)
        fail_msg("round trip of \"%s\" gave \"%s\"", s, out);
    free(out);
    free(ids);
}

static const char *const ROUND_TRIP[] = {
    "",
    "a",
    "Hello, world!",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n\n\n",
    "digits 0123456789 and 3.14159, -42, 1e10",
    "punctuation !@#$%^&*()_+-=[]{};':\",./<>?`~|\\",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xe2\x9d\xa4\xef\xb8\x8f",
    "CJK \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe3\x81\x93\xe3\x82\x93\xe3\x81\xab"
    "\xe3\x81\xa1\xe3\x81\xaf \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
    "accents caf\xc3\xa9 na\xc3\xafve \xc3\x85ngstr\xc3\xb6m",
    "it's we'll they've I'm you'd she's don't",
    "mixed123abc456   \t  x",
    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d",
    "   ",
    "\n",
};

static void test_round_trip_byte_level(void **state)
{
    (void)state;
    plume_tokenizer *t = byte_level_tok(NULL);
    for (size_t i = 0; i < sizeof ROUND_TRIP / sizeof ROUND_TRIP[0]; i++) {
        round_trip(t, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), false);
        round_trip(t, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), true);
    }
    round_trip(t, "<|im_start|>user\nhi<|im_end|>\n", 30, true);
    round_trip(t, "<|im_start|>user\nhi<|im_end|>\n", 30, false);
    /* a NUL byte is ordinary text */
    int32_t *ids;
    size_t n;
    assert_int_equal(plume_tokenize(t, "nul\0inside", 10, false, false, &ids, &n, NULL), 0);
    char raw[32];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)plume_token_bytes(t, ids[i], false, raw + k, sizeof raw - k);
    assert_int_equal(k, 10);
    assert_memory_equal(raw, "nul\0inside", 10);
    free(ids);
    plume_tokenizer_free(t);
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    plume_tokenizer *t = byte_level_tok(NULL);
    const char s[] = "\xff\xfe" "abc\xc3(\xe4\xb8";
    size_t len = sizeof s - 1;
    int32_t *ids;
    size_t n;
    assert_int_equal(plume_tokenize(t, s, len, false, false, &ids, &n, NULL), 0);
    /* each maximal invalid sequence became U+FFFD before encoding (as
     * llama.cpp; HF tokenizers only ever sees valid text) */
    static const char lossy[] = "\xef\xbf\xbd\xef\xbf\xbd" "abc\xef\xbf\xbd(\xef\xbf\xbd";
    char raw[64];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)plume_token_bytes(t, ids[i], false, raw + k, sizeof raw - k);
    assert_int_equal(k, sizeof lossy - 1);
    assert_memory_equal(raw, lossy, k);
    char *out;
    assert_int_equal(plume_detokenize(t, ids, n, false, &out, NULL), 0);
    assert_string_equal(out, "\xef\xbf\xbd\xef\xbf\xbd" "abc\xef\xbf\xbd(\xef\xbf\xbd");
    free(out);
    free(ids);
    plume_tokenizer_free(t);
}

/* Random byte strings (mostly invalid UTF-8) with the byte-level and the
 * SentencePiece tokenizers: the token bytes always give back the input with
 * each invalid sequence replaced by U+FFFD, and streaming detokenization
 * equals whole-sequence detokenization. */
static void fuzz_bytes(const plume_tokenizer *t, bool spm)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int iter = 0; iter < 300; iter++) {
        char s[80];
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t len = (size_t)(x >> 58); /* 0..63 */
        for (size_t i = 0; i < len; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            unsigned r = (unsigned)(x >> 56);
            /* bias towards spaces, ASCII and UTF-8 lead/continuation bytes */
            s[i] = (char)(r < 40 ? ' ' : r < 120 ? 'a' + r % 26 : r);
        }
        int32_t *ids;
        size_t n;
        assert_int_equal(plume_tokenize(t, s, len, false, true, &ids, &n, NULL), 0);
        char raw[256], want[256];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            k += (size_t)plume_token_bytes(t, ids[i], false, raw + k, sizeof raw - k);
        size_t wl = tok_utf8_lossy(s, len, want, sizeof want);
        size_t skip = spm && len ? 1 : 0; /* the SentencePiece prefix space */
        assert_int_equal(k, wl + skip);
        assert_memory_equal(raw + skip, want, wl);
        char *whole;
        assert_int_equal(plume_detokenize(t, ids, n, false, &whole, NULL), 0);
        plume_detok d;
        plume_detok_init(&d, t, false);
        char streamed[1024], piece[512];
        size_t sl = 0;
        for (size_t i = 0; i <= n; i++) {
            int w = i < n ? plume_detok_push(&d, ids[i], piece, sizeof piece)
                          : plume_detok_flush(&d, piece, sizeof piece);
            assert_true(w >= 0);
            memcpy(streamed + sl, piece, (size_t)w);
            sl += (size_t)w;
        }
        streamed[sl] = '\0';
        assert_string_equal(streamed, whole);
        free(whole);
        free(ids);
    }
}

static void test_fuzz_bytes(void **state)
{
    (void)state;
    plume_tokenizer *t = byte_level_tok(NULL);
    fuzz_bytes(t, false);
    plume_tokenizer_free(t);
}

static void test_streaming_detok(void **state)
{
    (void)state;
    plume_tokenizer *t = byte_level_tok(NULL);
    plume_detok d;
    char out[256];
    /* U+4F60 (e4 bd a0) arrives as three byte tokens */
    plume_detok_init(&d, t, false);
    assert_int_equal(plume_detok_push(&d, 'a', out, sizeof out), 1);
    assert_string_equal(out, "a");
    assert_int_equal(plume_detok_push(&d, 0xe4, out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_int_equal(plume_detok_push(&d, 0xbd, out, sizeof out), 0);
    assert_int_equal(plume_detok_push(&d, 0xa0, out, sizeof out), 3);
    assert_string_equal(out, "\xe4\xbd\xa0");
    assert_int_equal(plume_detok_push(&d, ID_HELLO, out, sizeof out), 5);
    assert_string_equal(out, "hello");
    assert_int_equal(plume_detok_flush(&d, out, sizeof out), 0);
    /* a dangling partial character is flushed as U+FFFD */
    assert_int_equal(plume_detok_push(&d, 0xf0, out, sizeof out), 0);
    assert_int_equal(plume_detok_push(&d, 0x9f, out, sizeof out), 0);
    assert_int_equal(plume_detok_flush(&d, out, sizeof out), 3);
    assert_string_equal(out, "\xef\xbf\xbd");
    /* an interrupted sequence is replaced and the interrupting text kept */
    assert_int_equal(plume_detok_push(&d, 0xe4, out, sizeof out), 0);
    assert_int_equal(plume_detok_push(&d, 'x', out, sizeof out), 4);
    assert_string_equal(out, "\xef\xbf\xbdx");
    /* special tokens: hidden unless render_special */
    assert_int_equal(plume_detok_push(&d, ID_IM_END, out, sizeof out), 0);
    plume_detok_init(&d, t, true);
    assert_int_equal(plume_detok_push(&d, ID_IM_END, out, sizeof out), 10);
    assert_string_equal(out, "<|im_end|>");
    /* too small a buffer: -1 and nothing consumed */
    assert_int_equal(plume_detok_push(&d, ID_HELLO, out, 3), -1);
    assert_int_equal(plume_detok_push(&d, ID_HELLO, out, sizeof out), 5);
    plume_tokenizer_free(t);
}

/* ---------------------------------------------------------------- */
/* chat templates                                                    */

/* Renders the n messages m (with the generation prompt when gen) and
 * expects the text want. */
static void expect_chat(const plume_tokenizer *t, const plume_chat_msg *m, size_t n, bool gen,
                        const char *want)
{
    char *out = NULL;
    plume_error err = {0};
    if (plume_chat_apply(t, m, n, gen, &out, &err) != 0)
        fail_msg("chat template: %s", err.msg);
    assert_string_equal(out, want);
    free(out);
}

/* Renders and expects an error whose message holds want. */
static void expect_chat_error(const plume_tokenizer *t, const plume_chat_msg *m, size_t n,
                              const char *want)
{
    char *out = NULL;
    plume_error err = {0};
    assert_int_equal(plume_chat_apply(t, m, n, true, &out, &err), -1);
    assert_null(out);
    if (!strstr(err.msg, want))
        fail_msg("expected an error with \"%s\", got: %s", want, err.msg);
    assert_null(strchr(err.msg, '\n'));
}

/* Templates run as Jinja (tests/template compares the engine with jinja2 on
 * real templates); here: the family names, what each template text renders
 * to, and that a broken template is an error naming line and column. */
static void test_chat_templates(void **state)
{
    (void)state;
    plume_chat_msg user[] = {{"user", "Hello"}};
    plume_chat_msg conv[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hey."},
                             {"user", " Again "}};

    plume_tokenizer *t = byte_level_tok(SMOL_TEMPLATE);
    assert_string_equal(plume_chat_template_name(t), "chatml");
    assert_string_equal(plume_chat_template_source(t), "model");
    expect_chat(t, user, 1, true,
                "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                "trained by Hugging Face<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                "<|im_start|>assistant\n");
    expect_chat(t, conv, 2, false,
                "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    plume_tokenizer_free(t);

    /* only what the template says: this one renders the system turn alone */
    t = byte_level_tok("{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
                       "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- "
                       "'<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}{%- endif %}");
    assert_string_equal(plume_chat_template_name(t), "chatml");
    expect_chat(t, user, 1, false, "<|im_start|>system\nYou are Qwen.<|im_end|>\n");
    expect_chat(t, conv, 4, false, "<|im_start|>system\nBe brief.<|im_end|>\n");
    plume_tokenizer_free(t);

    /* recognised as Qwen3, but an unclosed {% if %} is an error at use */
    t = byte_level_tok("{%- set ns = namespace(multi_step_tool=true, last_query_index="
                       "messages|length - 1) %}<|im_start|>{%- if '</think>' in content %}");
    assert_string_equal(plume_chat_template_name(t), "qwen3");
    expect_chat_error(t, user, 1, "line 1, column");
    expect_chat_error(t, user, 1, "endif");
    plume_tokenizer_free(t);

    t = byte_level_tok("{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = "
                       "\"26 Jul 2024\" %}{%- endif %}{{- \"<|start_header_id|>system"
                       "<|end_header_id|>\\n\\n\" }}{{- \"Cutting Knowledge Date: December 2023"
                       "\\n\" }}{{- \"Today Date: \" + date_string }}");
    assert_string_equal(plume_chat_template_name(t), "llama3.1");
    /* bos_token is the vocabulary's BOS text (this test vocabulary's is <|im_start|>) */
    expect_chat(t, conv, 4, true,
                "<|im_start|><|start_header_id|>system<|end_header_id|>\n\nCutting "
                "Knowledge Date: December 2023\nToday Date: 26 Jul 2024");
    plume_tokenizer_free(t);

    /* no template: the family's format; this vocabulary's pre-tokenizer
     * (smollm) is a ChatML family */
    t = byte_level_tok(NULL);
    assert_null(plume_chat_template_name(t));
    assert_string_equal(plume_chat_template_source(t), "family");
    expect_chat(t, user, 1, true, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
    plume_tokenizer_free(t);

    t = byte_level_tok("{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + "
                       "m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + "
                       "'<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
                       "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}");
    assert_string_equal(plume_chat_template_name(t), "llama3");
    expect_chat(t, conv, 4, true,
                "<|im_start|><|start_header_id|>system<|end_header_id|>\n\nBe brief."
                "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHey.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
    plume_tokenizer_free(t);

    /* an undefined variable used with + is jinja2's UndefinedError */
    t = byte_level_tok("{{ '<start_of_turn>' + role + '\\n' }}");
    assert_string_equal(plume_chat_template_name(t), "gemma");
    expect_chat_error(t, conv, 4, "'role' is undefined");
    plume_tokenizer_free(t);

    t = byte_level_tok("{% if messages[0]['role'] == 'system' %}<<SYS>>{% endif %}[INST] ");
    assert_string_equal(plume_chat_template_name(t), "llama2-sys");
    expect_chat(t, conv, 4, true, "<<SYS>>[INST] ");
    plume_tokenizer_free(t);

    /* a template of no known family still renders */
    t = byte_level_tok("{{ 'User: ' + messages[0].content }}{{ raise_exception('stop') if "
                       "messages|length > 1 }}");
    assert_string_equal(plume_chat_template_name(t), "unknown");
    expect_chat(t, user, 1, true, "User: Hello");
    expect_chat_error(t, conv, 4, "the template raised an error: stop");
    plume_tokenizer_free(t);
}

/* plume_chat_render: tools, tool calls, reasoning and kwargs reach the
 * template; a template given by the caller replaces the model's. */
static void test_chat_render(void **state)
{
    (void)state;
    plume_tokenizer *t = byte_level_tok(SMOL_TEMPLATE);
    plume_chat_template *ct = NULL;
    plume_error err = {0};
    static const char TMPL[] =
        "{% for m in messages %}[{{ m.role }}|{{ m.content }}"
        "{% if m.tool_calls %}{% for c in m.tool_calls %}<{{ c.function.name }} "
        "{{ c.function.arguments|tojson }}>{% endfor %}{% endif %}"
        "{% if m.reasoning_content %}(r:{{ m.reasoning_content }}/{{ m.thinking }}){% endif %}]"
        "{% endfor %}{% if tools %}T={{ tools|map(attribute='function.name')|join(',') }}"
        "{% endif %}{{ 'K' if enable_thinking is defined and not enable_thinking }}"
        "{{ '>' if add_generation_prompt }}";
    assert_int_equal(plume_chat_template_compile(TMPL, strlen(TMPL), &ct, &err), 0);
    plume_chat_request req = {
        .messages_json = "[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\","
                         "\"content\":null,\"reasoning\":\"think\",\"tool_calls\":[{\"id\":\"1\","
                         "\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":"
                         "{\"city\":\"Paris\"}}}]},{\"role\":\"tool\",\"content\":\"18C\"}]",
        .tools_json = "[{\"type\":\"function\",\"function\":{\"name\":\"get\"}},"
                      "{\"type\":\"function\",\"function\":{\"name\":\"put\"}}]",
        .kwargs_json = "{\"enable_thinking\": false}",
        .add_generation_prompt = true,
        .tmpl = ct};
    char *s = NULL;
    if (plume_chat_render(t, &req, &s, &err))
        fail_msg("render: %s", err.msg);
    assert_string_equal(s, "[user|w?][assistant|None<get {\"city\": \"Paris\"}>(r:think/think)]"
                           "[tool|18C]T=get,putK>");
    free(s);
    req.messages_json = "[{\"role\": 1";
    assert_int_equal(plume_chat_render(t, &req, &s, &err), -1);
    assert_non_null(strstr(err.msg, "not valid JSON"));
    req.messages_json = "[]";
    req.tmpl = NULL;
    req.template_name = "tool_use";
    assert_int_equal(plume_chat_render(t, &req, &s, &err), -1);
    assert_non_null(strstr(err.msg, "no chat template named 'tool_use'"));
    plume_chat_template_free(ct);
    plume_tokenizer_free(t);

    /* tokenizer_config.json's list of named templates: "default" renders,
     * the others are variants */
    json_t *cfg;
    json_t *tj = byte_level_json(NULL, &cfg);
    json_object_set_new(cfg, "chat_template",
                        json_pack("[{s:s, s:s}, {s:s, s:s}]", "name", "tool_use", "template",
                                  "TOOLS{{ tools|length }}", "name", "default", "template",
                                  "DEFAULT"));
    t = load_json(tj, cfg);
    req = (plume_chat_request){.messages_json = "[]", .tools_json = "[{}, {}]"};
    assert_int_equal(plume_chat_render(t, &req, &s, &err), 0);
    assert_string_equal(s, "DEFAULT");
    free(s);
    req.template_name = "tool_use";
    assert_int_equal(plume_chat_render(t, &req, &s, &err), 0);
    assert_string_equal(s, "TOOLS2");
    free(s);
    static const char BAD[] = "{% for x in y %}\n  {{ x + }}";
    assert_int_equal(plume_chat_template_compile(BAD, strlen(BAD), &ct, &err), -1);
    assert_non_null(strstr(err.msg, "line 2, column"));
    plume_tokenizer_free(t);
}

/* ---------------------------------------------------------------- */
/* SentencePiece-style tokenizer.json (merge ranks, byte fallback)  */

enum { S_UNK = 0, S_BOS, S_EOS, S_BYTE0, S_SP = 259, S_H, S_E, S_L, S_O, S_W, S_SPH, S_EL,
       S_SPHEL, S_LO, S_SPHELLO };

static plume_tokenizer *spm_json_tok(void)
{
    json_t *vocab = json_object();
    json_object_set_new(vocab, "<unk>", json_integer(S_UNK));
    json_object_set_new(vocab, "<s>", json_integer(S_BOS));
    json_object_set_new(vocab, "</s>", json_integer(S_EOS));
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        json_object_set_new(vocab, s, json_integer(S_BYTE0 + b));
    }
    static const char *const pieces[] = {SP, "h", "e", "l", "o", "w", SP "h", "el", SP "hel",
                                         "lo", SP "hello"};
    for (int i = 0; i < 11; i++)
        json_object_set_new(vocab, pieces[i], json_integer(S_SP + i));
    json_t *merges = json_pack("[s,s,s,s,s]", SP " h", "e l", SP "h el", "l o", SP "hel lo");
    json_t *add = json_array();
    json_array_append_new(add, added(S_UNK, "<unk>", true));
    json_array_append_new(add, added(S_BOS, "<s>", true));
    json_array_append_new(add, added(S_EOS, "</s>", true));
    json_t *tok = json_pack(
        "{s:o, s:{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}, s:n, "
        "s:{s:s, s:[{s:{s:s}}, {s:{s:s, s:i}}]}, "
        "s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}, "
        "s:{s:s, s:o, s:o, s:b, s:s}}",
        "added_tokens", add, "normalizer", "type", "Sequence", "normalizers", "type", "Prepend",
        "prepend", SP, "type", "Replace", "pattern", "String", " ", "content", SP,
        "pre_tokenizer", "post_processor", "type", "TemplateProcessing", "single",
        "SpecialToken", "id", "<s>", "Sequence", "id", "A", "type_id", 0, "decoder", "type",
        "Sequence", "decoders", "type", "Replace", "pattern", "String", SP, "content", " ",
        "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1,
        "stop", 0, "model", "type", "BPE", "vocab", vocab, "merges", merges, "byte_fallback", 1,
        "unk_token", "<unk>");
    assert_non_null(tok);
    return load_json(tok, NULL);
}

static void test_spm_json(void **state)
{
    (void)state;
    plume_tokenizer *t = spm_json_tok();
    assert_string_equal(plume_tokenizer_model(t), "llama");
    assert_true(plume_tokenizer_add_bos(t));
    assert_int_equal(plume_tokenizer_bos(t), S_BOS);
    EXPECT(t, "hello", false, S_SPHELLO);
    /* 'é' is not in the vocabulary: byte fallback */
    EXPECT(t, "h\xc3\xa9", false, S_SPH, S_BYTE0 + 0xc3, S_BYTE0 + 0xa9);
    EXPECT(t, "hello wo", false, S_SPHELLO, S_SP, S_W, S_O);
    EXPECT(t, "<s>hello", true, S_BOS, S_SPHELLO);
    for (size_t i = 0; i < sizeof ROUND_TRIP / sizeof ROUND_TRIP[0]; i++)
        round_trip(t, ROUND_TRIP[i], strlen(ROUND_TRIP[i]), false);
    /* the detokenizer drops the prefix space of the first token */
    plume_detok d;
    char out[64];
    plume_detok_init(&d, t, false);
    assert_int_equal(plume_detok_push(&d, S_BOS, out, sizeof out), 0);
    assert_int_equal(plume_detok_push(&d, S_SPHELLO, out, sizeof out), 5);
    assert_string_equal(out, "hello");
    assert_int_equal(plume_detok_push(&d, S_SPHELLO, out, sizeof out), 6);
    assert_string_equal(out, " hello");
    assert_int_equal(plume_detok_push(&d, S_BYTE0 + 0xc3, out, sizeof out), 0);
    assert_int_equal(plume_detok_push(&d, S_BYTE0 + 0xa9, out, sizeof out), 2);
    assert_string_equal(out, "\xc3\xa9");
    fuzz_bytes(t, true);
    plume_tokenizer_free(t);
}

/* ---------------------------------------------------------------- */
/* GGUF: SentencePiece with scores, and error reporting              */

enum { G_UNK = 0, G_BOS, G_EOS, G_BYTE0, G_SP = 259, G_A, G_B, G_C, G_AB, G_BC, G_SPA, G_ENDT,
       G_N };

static gguf_file *write_gguf(gw_buf *b, char *path, size_t cap)
{
    assert_int_equal(tt_write_temp(".gguf", b->p, b->n, path, cap), 0);
    free(b->p);
    gguf_file *f = NULL;
    plume_error err = {0};
    if (gguf_open(path, &f, &err) != 0)
        fail_msg("gguf_open: %s", err.msg);
    return f;
}

/* The tokenizer of the GGUF b holds, written to a temporary file (its name
 * in path, the open file in *f); fails the test when it does not load. */
static plume_tokenizer *tokenizer_of(gw_buf *b, char *path, size_t cap, gguf_file **f)
{
    *f = write_gguf(b, path, cap);
    plume_tokenizer *t = NULL;
    plume_error err = {0};
    if (plume_tokenizer_from_gguf(*f, &t, &err) != 0)
        fail_msg("from_gguf: %s", err.msg);
    return t;
}

/* Frees t, closes f and removes its file. */
static void drop_tokenizer(plume_tokenizer *t, gguf_file *f, const char *path)
{
    plume_tokenizer_free(t);
    gguf_close(f);
    unlink(path);
}

static void spm_gguf_vocab(gw_buf *b, const char *model)
{
    char bytes[256][8];
    const char *toks[G_N];
    int32_t types[G_N];
    float scores[G_N];
    toks[G_UNK] = "<unk>";
    toks[G_BOS] = "<s>";
    toks[G_EOS] = "</s>";
    types[G_UNK] = 2;
    types[G_BOS] = types[G_EOS] = 3;
    for (int i = 0; i < 256; i++) {
        snprintf(bytes[i], sizeof bytes[i], "<0x%02X>", i);
        toks[G_BYTE0 + i] = bytes[i];
        types[G_BYTE0 + i] = 6;
    }
    static const char *const rest[] = {SP, "a", "b", "c", "ab", "bc", SP "a", "<end_of_turn>"};
    for (int i = 0; i < 8; i++) {
        toks[G_SP + i] = rest[i];
        types[G_SP + i] = 1;
    }
    types[G_ENDT] = 3;
    for (int i = 0; i < G_N; i++)
        scores[i] = 0.0f;
    scores[G_AB] = -2.0f;
    scores[G_BC] = -1.0f;
    scores[G_SPA] = -3.0f;
    gw_kv_str(b, "tokenizer.ggml.model", model);
    tt_kv_strs(b, "tokenizer.ggml.tokens", toks, G_N);
    tt_kv_i32s(b, "tokenizer.ggml.token_type", types, G_N);
    tt_kv_f32s(b, "tokenizer.ggml.scores", scores, G_N);
}

/* A GGUF whose n_kv key/values are the SentencePiece vocabulary of model
 * (four keys) and what the caller adds to b. */
static gw_buf spm_gguf(int n_kv, const char *model)
{
    gw_buf b = {0};
    tt_gguf_header(&b, n_kv);
    spm_gguf_vocab(&b, model);
    return b;
}

static void test_spm_gguf(void **state)
{
    (void)state;
    gw_buf b = spm_gguf(5, "llama");
    gw_kv_str(&b, "tokenizer.chat_template", "<start_of_turn>user");
    char path[256];
    gguf_file *f;
    plume_tokenizer *t = tokenizer_of(&b, path, sizeof path, &f);
    assert_string_equal(plume_tokenizer_model(t), "llama");
    assert_int_equal(plume_tokenizer_bos(t), G_BOS); /* llama.cpp defaults */
    assert_int_equal(plume_tokenizer_eos(t), G_EOS);
    assert_true(plume_tokenizer_add_bos(t));
    /* "▁abc": bc (-1) beats ab (-2), then ▁a (-3) */
    EXPECT(t, "abc", false, G_SPA, G_BC);
    EXPECT(t, "ab", false, G_SP, G_AB);
    EXPECT(t, "cab c", false, G_SP, G_C, G_AB, G_SP, G_C);
    EXPECT(t, "a\xc3\xa9", false, G_SPA, G_BYTE0 + 0xc3, G_BYTE0 + 0xa9);
    EXPECT(t, "<s>a", true, G_BOS, G_SPA); /* prefix space again after a special */
    round_trip(t, "abc cab", 7, false);
    round_trip(t, "x y  z\n\xe4\xbd\xa0", 10, false);
    assert_true(plume_tokenizer_is_eog(t, G_EOS));
    assert_true(plume_tokenizer_is_eog(t, G_ENDT));
    assert_false(plume_tokenizer_is_eog(t, G_BOS));
    assert_string_equal(plume_chat_template_name(t), "gemma");
    drop_tokenizer(t, f, path);
}

/* A BPE GGUF with pre-tokenizer pre (and add_bos_token when add_bos is 0
 * or 1): whether its prompts start with BOS. */
static bool bpe_gguf_adds_bos(const char *pre, int add_bos)
{
    gw_buf b = spm_gguf(add_bos >= 0 ? 9 : 8, "gpt2");
    gw_kv_str(&b, "tokenizer.ggml.pre", pre);
    const char *merges[] = {"a b"};
    tt_kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    gw_kv_u32(&b, "tokenizer.ggml.bos_token_id", G_BOS);
    gw_kv_u32(&b, "tokenizer.ggml.eos_token_id", G_EOS);
    if (add_bos >= 0) {
        gw_key(&b, "tokenizer.ggml.add_bos_token", 7);
        gw_u8(&b, (uint8_t)add_bos);
    }
    char path[256];
    gguf_file *f;
    plume_tokenizer *t = tokenizer_of(&b, path, sizeof path, &f);
    bool r = plume_tokenizer_add_bos(t);
    drop_tokenizer(t, f, path);
    return r;
}

/* As llama.cpp: Llama 3's and tekken's pre-tokenizers add BOS unless the
 * file says otherwise; the others only when it says so. */
static void test_gguf_bpe_bos_default(void **state)
{
    (void)state;
    assert_true(bpe_gguf_adds_bos("llama-bpe", -1));
    assert_true(bpe_gguf_adds_bos("tekken", -1));
    assert_false(bpe_gguf_adds_bos("llama-bpe", 0));
    assert_false(bpe_gguf_adds_bos("qwen2", -1));
    assert_true(bpe_gguf_adds_bos("qwen2", 1));
}

/* A GGUF without a chat template renders its family's turns (Gemma's, from
 * general.architecture), not ChatML; named variants are selectable. */
static void test_gguf_family_template(void **state)
{
    (void)state;
    gw_buf b = spm_gguf(6, "llama");
    gw_kv_str(&b, "general.architecture", "gemma3");
    gw_kv_str(&b, "tokenizer.chat_template.tool_use", "T{{ messages|length }}");
    char path[256];
    gguf_file *f;
    plume_tokenizer *t = tokenizer_of(&b, path, sizeof path, &f);
    assert_null(plume_chat_template_name(t));
    assert_string_equal(plume_chat_template_source(t), "family");
    plume_chat_msg conv[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hey."}};
    /* BOS is left out: the tokenizer adds it (add_bos) */
    expect_chat(t, conv, 3, true,
                "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                "<start_of_turn>model\nHey.<end_of_turn>\n<start_of_turn>model\n");
    plume_chat_request req = {.messages_json = "[{\"role\":\"user\",\"content\":\"x\"}]",
                              .template_name = "tool_use"};
    plume_error err = {0};
    char *s;
    assert_int_equal(plume_chat_render(t, &req, &s, &err), 0);
    assert_string_equal(s, "T1");
    free(s);
    drop_tokenizer(t, f, path);
}

/* A load of what that returned rc, t and the error msg failed, with a
 * message that contains every one of the NULL-terminated needles in ap. */
static void expect_refused(int rc, plume_tokenizer *t, const char *msg, const char *what,
                           va_list ap)
{
    if (rc == 0) {
        plume_tokenizer_free(t);
        fail_msg("%s loaded", what);
    }
    assert_null(t);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(msg, needle))
            fail_msg("the error \"%s\" does not mention \"%s\"", msg, needle);
}

/* Loading the tokenizer of the GGUF b fails, and the message contains every
 * one of the NULL-terminated needles. */
static void expect_gguf_error(gw_buf *b, ...)
{
    char path[256];
    gguf_file *f = write_gguf(b, path, sizeof path);
    plume_tokenizer *t = NULL;
    plume_error err = {0};
    int rc = plume_tokenizer_from_gguf(f, &t, &err);
    gguf_close(f);
    unlink(path);
    va_list ap;
    va_start(ap, b);
    expect_refused(rc, t, err.msg, "a malformed GGUF tokenizer", ap);
    va_end(ap);
    assert_int_equal(rc, -1);
}

static void test_gguf_errors(void **state)
{
    (void)state;
    /* an unknown pre-tokenizer is named, with the supported ones */
    gw_buf b = spm_gguf(5, "gpt2");
    gw_kv_str(&b, "tokenizer.ggml.pre", "nonsense-pre");
    expect_gguf_error(&b, "nonsense-pre", "smollm", NULL);

    /* an unknown model */
    b = spm_gguf(4, "rwkv");
    expect_gguf_error(&b, "rwkv", "gpt2", NULL);

    /* gpt2 without merges */
    b = spm_gguf(5, "gpt2");
    gw_kv_str(&b, "tokenizer.ggml.pre", "smollm");
    expect_gguf_error(&b, "merges", NULL);

    /* a missing tokenizer.json */
    plume_tokenizer *t = NULL;
    plume_error err = {0};
    assert_int_equal(plume_tokenizer_from_hf("/nonexistent/tokenizer.json", NULL, &t, &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/tokenizer.json"));
}

/* ---------------------------------------------------------------- */
/* hostile tokenizer files and text (issue #20)                      */

/* Loading tok (+ cfg) fails, and the message contains every one of the
 * NULL-terminated needles. */
static void expect_load_error(json_t *tok, json_t *cfg, ...)
{
    plume_tokenizer *t = NULL;
    plume_error err = {0};
    int rc = load_json_rc(tok, cfg, &t, &err);
    va_list ap;
    va_start(ap, cfg);
    expect_refused(rc, t, err.msg, "a hostile tokenizer.json", ap);
    va_end(ap);
    assert_null(strchr(err.msg, '\n'));
}

/* An id near 2^31 is an error naming the entry, before any per-id array is
 * allocated (it used to allocate tens of GB and run for minutes). */
static void test_hostile_vocab_ids(void **state)
{
    (void)state;
    json_t *cfg;
    json_t *tok = byte_level_json(NULL, &cfg);
    json_object_set_new(json_object_get(json_object_get(tok, "model"), "vocab"), "zz",
                        json_integer(2147483000));
    expect_load_error(tok, cfg, "\"zz\"", "2147483000", "model.vocab", NULL);

    tok = byte_level_json(NULL, &cfg);
    json_t *add = json_object_get(tok, "added_tokens");
    json_object_set_new(json_array_get(add, 1), "id", json_integer(2147483000));
    expect_load_error(tok, cfg, "added_tokens[1]", "<|im_end|>", "2147483000", NULL);

    /* a gap past the number of entries is the same error at a small scale */
    tok = byte_level_json(NULL, &cfg);
    json_object_set_new(json_array_get(json_object_get(tok, "added_tokens"), 3), "id",
                        json_integer(ID_EOT + 40));
    expect_load_error(tok, cfg, "added_tokens[3]", NULL);
}

/* A merge with an empty side is an error naming it (it used to pass a NULL
 * pointer to memcpy). */
static void test_hostile_merges(void **state)
{
    (void)state;
    json_t *cfg;
    json_t *tok = byte_level_json(NULL, &cfg);
    json_array_append_new(json_object_get(json_object_get(tok, "model"), "merges"),
                          json_pack("[s, s]", "", ""));
    expect_load_error(tok, cfg, "merges[10]", "empty", NULL);
    tok = byte_level_json(NULL, &cfg);
    json_array_insert_new(json_object_get(json_object_get(tok, "model"), "merges"), 0,
                          json_string("a "));
    expect_load_error(tok, cfg, "merges[0]", "empty", NULL);
}

/* A chat_template that is not a string (or a list of named templates) is an
 * error, not a silent fallback to a built-in template. */
static void test_hostile_chat_template(void **state)
{
    (void)state;
    json_t *cfg;
    json_t *tok = byte_level_json(NULL, &cfg);
    json_object_set_new(cfg, "chat_template", json_integer(42));
    expect_load_error(tok, cfg, "chat_template", NULL);
    tok = byte_level_json(NULL, &cfg);
    json_object_set_new(cfg, "chat_template", json_pack("[{s:s, s:i}]", "name", "default",
                                                        "template", 42));
    expect_load_error(tok, cfg, "chat_template[0]", NULL);
    /* null means "none" */
    tok = byte_level_json(NULL, &cfg);
    json_object_set_new(cfg, "chat_template", json_null());
    plume_tokenizer *t = load_json(tok, cfg);
    assert_null(plume_chat_template_name(t));
    plume_tokenizer_free(t);
}

/* Other malformed tokenizer_config.json fields are errors too, not
 * silently ignored. */
static void test_hostile_config_fields(void **state)
{
    (void)state;
    json_t *cfg;
    json_t *tok = byte_level_json(NULL, &cfg);
    json_object_set_new(cfg, "bos_token", json_integer(42));
    expect_load_error(tok, cfg, "bos_token", NULL);
    tok = byte_level_json(NULL, &cfg);
    json_object_set_new(cfg, "eos_token", json_pack("{s:i}", "content", 7));
    expect_load_error(tok, cfg, "eos_token", NULL);
    tok = byte_level_json(NULL, &cfg);
    json_object_set_new(cfg, "add_bos_token", json_string("yes"));
    expect_load_error(tok, cfg, "add_bos_token", NULL);
    tok = byte_level_json(NULL, &cfg);
    json_decref(cfg);
    expect_load_error(tok, json_array(), "not a JSON object", NULL);
}

/* A GGUF tokenizer.chat_template that is not a string is an error naming
 * the key, not a silent fallback to a built-in template; so is a token id
 * beyond int32. */
static void test_hostile_gguf_fields(void **state)
{
    (void)state;
    gw_buf b = spm_gguf(5, "llama");
    gw_kv_u32(&b, "tokenizer.chat_template", 42);
    expect_gguf_error(&b, "tokenizer.chat_template", NULL);

    b = spm_gguf(5, "llama");
    gw_kv_u32(&b, "tokenizer.ggml.bos_token_id", 4000000000u);
    expect_gguf_error(&b, "tokenizer.ggml.bos_token_id", "4000000000", NULL);
}

/* Text that ends where a readable page ends: the split must not read the
 * byte after a span when a regex matches empty at its very end. */
static void test_pretok_span_end(void **state)
{
    (void)state;
    json_t *cfg;
    json_t *tok = byte_level_json(NULL, &cfg);
    json_object_set_new(tok, "pre_tokenizer",
                        json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type",
                                  "Sequence", "pretokenizers", "type", "Split", "pattern",
                                  "Regex", "$", "behavior", "Isolated", "invert", 0, "type",
                                  "ByteLevel", "add_prefix_space", 0, "use_regex", 0));
    plume_tokenizer *t = load_json(tok, cfg);
    long page = sysconf(_SC_PAGESIZE);
    char *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + page, (size_t)page, PROT_NONE), 0);
    char *text = map + page - 2;
    memcpy(text, "ab", 2);
    int32_t *ids;
    size_t n;
    assert_int_equal(plume_tokenize(t, text, 2, false, false, &ids, &n, NULL), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], ID_AB);
    free(ids);
    munmap(map, (size_t)page * 2);
    plume_tokenizer_free(t);
}

/* The pieces that llama.cpp's pre-tokenizer `name` cuts text into, joined
 * by '|' into out. */
static void pretok_pieces(const char *name, const char *text, char *out, size_t cap)
{
    size_t np = 0;
    bool im = false, bos = false;
    const char *const *pats = tok_pretok_lookup(name, &np, &im, &bos);
    if (!pats)
        fail_msg("no pre-tokenizer %s", name);
    tok_pretok p = {0};
    plume_error err = {0};
    for (size_t i = 0; i < np; i++)
        assert_int_equal(tok_pretok_add(&p, pats[i], &err), 0);
    if (tok_pretok_compile(&p, &err))
        fail_msg("%s: %s", name, err.msg);
    tok_spans sp = {0};
    assert_int_equal(tok_pretok_split(&p, text, strlen(text), &sp, &err), 0);
    size_t n = 0;
    out[0] = 0;
    for (size_t i = 0; i < sp.n; i++)
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%.*s", i ? "|" : "",
                              (int)sp.v[i].len, text + sp.v[i].off);
    free(sp.v);
    tok_pretok_free(&p);
}

/* Every supported pre-tokenizer name compiles and splits, and the ones
 * with several regexes or their own rules cut text as llama.cpp does
 * (llama-vocab.cpp of the llama.cpp the llama-cpp-python 0.3.36 sdist
 * vendors: each regex splits the pieces of the last; what no match covers
 * stays a piece). */
static void test_pretok_tables(void **state)
{
    (void)state;
    char names[2048], got[512];
    snprintf(names, sizeof names, "%s", tok_pretok_supported());
    size_t n_names = 0;
    for (char *save = NULL, *nm = strtok_r(names, ", ", &save); nm; nm = strtok_r(NULL, ", ", &save)) {
        pretok_pieces(nm, "Hello World, 1234 \xe4\xb8\xad\xe6\x96\x87!\n", got, sizeof got);
        assert_true(strlen(got) > 0);
        n_names++;
    }
    assert_true(n_names >= 38);
    static const char *const cases[][3] = {
        /* llama.cpp's fallback: punctuation runs, GPT-2's regex, digit runs, then threes */
        {"default", "a+b 1234", "a|+|b| |123|4"},
        /* tekken: case changes split words, digits one by one */
        {"tekken", "HelloWorld 42", "Hello|World| |4|2"},
        {"deepseek-coder", "ab12\n", "ab|1|2|\n"},
        {"deepseek-llm", "Hi \xe4\xb8\xad\xe6\x96\x87", "Hi| |\xe4\xb8\xad\xe6\x96\x87"},
        {"deepseek-v3", "x 12345", "x| |123|45"},
        {"gpt2", "a+b 1234", "a|+|b| 1234"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pretok_pieces(cases[i][0], cases[i][1], got, sizeof got);
        if (strcmp(got, cases[i][2]) != 0)
            fail_msg("%s cuts \"%s\" into \"%s\", not \"%s\"", cases[i][0], cases[i][1], got,
                     cases[i][2]);
    }
    /* BOS by default where llama.cpp sets it (the file's add_bos_token overrides) */
    size_t np;
    bool im, bos;
    assert_non_null(tok_pretok_lookup("llama-bpe", &np, &im, &bos));
    assert_true(bos && im);
    assert_non_null(tok_pretok_lookup("tekken", &np, &im, &bos));
    assert_true(bos && im);
    assert_non_null(tok_pretok_lookup("qwen2", &np, &im, &bos));
    assert_false(bos);
}

/* A byte the vocabulary cannot map never becomes a special token: invalid
 * UTF-8 becomes U+FFFD, a byte with no token is dropped (here the GPT-2
 * character of 0x04 is missing and the unknown token is <|endoftext|>, as in
 * SmolLM2's GGUF). */
static void test_unmappable_bytes(void **state)
{
    (void)state;
    json_t *cfg;
    json_t *tok = byte_level_json(NULL, &cfg);
    json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    char c4[3];
    tt_gpt2_char(4, c4);
    json_object_del(vocab, c4);
    json_object_set_new(vocab, "zz", json_integer(4));
    json_object_set_new(cfg, "unk_token", json_string("<|endoftext|>"));
    plume_tokenizer *t = load_json(tok, cfg);
    for (int special = 0; special <= 1; special++) {
        EXPECT(t, "\x04", special, -1);
        EXPECT(t, "a\x04" "b", special, 'a', 'b');
        EXPECT(t, "\xc0", special, 0xef, 0xbf, 0xbd);
        EXPECT(t, "a\xff" "b", special, 'a', 0xef, 0xbf, 0xbd, 'b');
        EXPECT(t, "\xe2\x82", special, 0xef, 0xbf, 0xbd); /* one maximal invalid subpart */
        EXPECT(t, "\xed\xa0\x80", special, 0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd, 0xef, 0xbf,
               0xbd); /* a surrogate: three */
        for (int b = 0; b < 256; b++) {
            char s[3] = {'x', (char)b, 'y'};
            int32_t *ids;
            size_t n;
            assert_int_equal(plume_tokenize(t, s, 3, false, special, &ids, &n, NULL), 0);
            for (size_t i = 0; i < n; i++)
                if (plume_tokenizer_is_special(t, ids[i]) || ids[i] >= 256)
                    fail_msg("byte 0x%02x became token %d", b, (int)ids[i]);
            free(ids);
        }
    }
    plume_tokenizer_free(t);
}

/* SentencePiece: a control byte uses its byte-fallback token, invalid UTF-8
 * the byte tokens of U+FFFD. */
static void test_unmappable_bytes_spm(void **state)
{
    (void)state;
    plume_tokenizer *t = spm_json_tok();
    EXPECT(t, "\x04", false, S_SP, S_BYTE0 + 4);
    EXPECT(t, "\xff", false, S_SP, S_BYTE0 + 0xef, S_BYTE0 + 0xbf, S_BYTE0 + 0xbd);
    plume_tokenizer_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_merge_order),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_harmony_eog),
        cmocka_unit_test(test_round_trip_byte_level),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_fuzz_bytes),
        cmocka_unit_test(test_streaming_detok),
        cmocka_unit_test(test_chat_templates),
        cmocka_unit_test(test_chat_render),
        cmocka_unit_test(test_gguf_family_template),
        cmocka_unit_test(test_spm_json),
        cmocka_unit_test(test_spm_gguf),
        cmocka_unit_test(test_gguf_errors),
        cmocka_unit_test(test_hostile_vocab_ids),
        cmocka_unit_test(test_hostile_merges),
        cmocka_unit_test(test_hostile_chat_template),
        cmocka_unit_test(test_hostile_config_fields),
        cmocka_unit_test(test_hostile_gguf_fields),
        cmocka_unit_test(test_pretok_span_end),
        cmocka_unit_test(test_pretok_tables),
        cmocka_unit_test(test_gguf_bpe_bos_default),
        cmocka_unit_test(test_unmappable_bytes),
        cmocka_unit_test(test_unmappable_bytes_spm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
