/* Tokenizer on the project's SmolLM2-135M-Instruct GGUF: metadata, known
 * ids, round trips, end-of-generation tokens, the ChatML template with its
 * default system prompt, and throughput.  Skips when the model is absent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "plume/clock.h"
#include "plume/tokenizer.h"
#include "tokenizer/gguf_vocab.h"
#include "../smollm2_path.h"

typedef struct fixture {
    gguf_file *f;
    plume_tokenizer *t;
} fixture;

static int setup(void **state)
{
    char path[4096];
    fixture *fx = calloc(1, sizeof *fx);
    *state = fx;
    if (!fx || !smollm2_path(path, sizeof path))
        return -1; /* main checked; the file went away since */
    plume_error err = {0};
    if (gguf_open(path, &fx->f, &err) != 0 || plume_tokenizer_from_gguf(fx->f, &fx->t, &err) != 0) {
        fprintf(stderr, "loading %s: %s\n", path, err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    plume_tokenizer_free(fx->t);
    gguf_close(fx->f);
    free(fx);
    return 0;
}

static plume_tokenizer *tok(void **state)
{
    fixture *fx = *state;
    assert_non_null(fx->t);
    return fx->t;
}

static void test_metadata(void **state)
{
    plume_tokenizer *t = tok(state);
    assert_int_equal(plume_tokenizer_n_vocab(t), 49152);
    assert_string_equal(plume_tokenizer_model(t), "gpt2");
    assert_string_equal(plume_tokenizer_pre(t), "smollm");
    assert_int_equal(plume_tokenizer_bos(t), 1);
    assert_int_equal(plume_tokenizer_eos(t), 2);
    assert_false(plume_tokenizer_add_bos(t)); /* the GGUF says add_bos_token = false */
    assert_true(plume_tokenizer_is_eog(t, 2));  /* <|im_end|> */
    assert_true(plume_tokenizer_is_eog(t, 0));  /* <|endoftext|> */
    assert_false(plume_tokenizer_is_eog(t, 1)); /* <|im_start|> */
    assert_false(plume_tokenizer_is_eog(t, 19556));
    assert_true(plume_tokenizer_is_special(t, 1));
    assert_false(plume_tokenizer_is_special(t, 19556));
}

static void expect(const plume_tokenizer *t, const char *s, bool special, const int32_t *want,
                   size_t nw)
{
    int32_t *ids;
    size_t n;
    plume_error err = {0};
    assert_int_equal(plume_tokenize(t, s, strlen(s), false, special, &ids, &n, &err), 0);
    assert_int_equal(n, nw);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
    free(ids);
}

static void test_known_ids(void **state)
{
    plume_tokenizer *t = tok(state);
    static const int32_t hello[] = {19556, 905};
    expect(t, "Hello world", false, hello, 2);
    static const int32_t chat[] = {1, 4093, 198, 6004, 2};
    expect(t, "<|im_start|>user\nhi<|im_end|>", true, chat, 5);
    /* digits one by one */
    static const int32_t digits[] = {33, 34, 35};
    expect(t, "123", false, digits, 3);
}

static void test_round_trips(void **state)
{
    plume_tokenizer *t = tok(state);
    static const char *const S[] = {
        "Hello world",
        "  The quick brown fox jumps over the lazy dog.  ",
        "int main(void) {\n\treturn 0;\n}\n",
        "Prices: $1,234.56 (2024-01-31), 99% off!!!",
        "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd family "
        "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
        "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 "
        "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf",
        "caf\xc3\xa9 na\xc3\xafve \xc3\x85ngstr\xc3\xb6m \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
        "it's we'll they've I'm you'd DON'T",
        "\n\n\n   \t\t  \r\n",
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    };
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++)
        for (int special = 0; special < 2; special++) {
            int32_t *ids;
            size_t n;
            assert_int_equal(plume_tokenize(t, S[i], strlen(S[i]), false, special, &ids, &n, NULL), 0);
            char *out;
            assert_int_equal(plume_detokenize(t, ids, n, special, &out, NULL), 0);
            if (strcmp(out, S[i]) != 0)
                fail_msg("round trip of \"%s\" (special=%d) gave \"%s\"", S[i], special, out);
            free(out);
            free(ids);
        }
}

static void test_chat_template(void **state)
{
    plume_tokenizer *t = tok(state);
    assert_string_equal(plume_chat_template_name(t), "chatml");
    plume_chat_msg msgs[] = {{"user", "What is the capital of France?"},
                             {"assistant", "Paris."},
                             {"user", "And of Italy?"}};
    char *s = NULL;
    plume_error err = {0};
    assert_int_equal(plume_chat_apply(t, msgs, 3, true, &s, &err), 0);
    assert_string_equal(s, "<|im_start|>system\n"
                           "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
                           "<|im_end|>\n"
                           "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                           "<|im_start|>assistant\nParis.<|im_end|>\n"
                           "<|im_start|>user\nAnd of Italy?<|im_end|>\n"
                           "<|im_start|>assistant\n");
    free(s);
    plume_chat_msg sys[] = {{"system", "Be terse."}, {"user", "Hi"}};
    assert_int_equal(plume_chat_apply(t, sys, 2, false, &s, &err), 0);
    assert_string_equal(s, "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    free(s);
}

static void test_throughput(void **state)
{
    plume_tokenizer *t = tok(state);
    const char *para = "The tokenizer must be fast: 49,152 tokens and 48,900 merges, "
                       "\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 supercalifragilisticexpialidocious "
                       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1234567890\n";
    size_t pl = strlen(para), reps = 4000;
    char *big = malloc(pl * reps + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(big + i * pl, para, pl);
    big[pl * reps] = '\0';
    double a = plume_clock_seconds();
    int32_t *ids;
    size_t n;
    assert_int_equal(plume_tokenize(t, big, pl * reps, false, true, &ids, &n, NULL), 0);
    double secs = plume_clock_seconds() - a;
    printf("tokenized %zu bytes into %zu tokens in %.3f s (%.1f MB/s)\n", pl * reps, n, secs,
           (double)(pl * reps) / secs / 1e6);
    char *out;
    assert_int_equal(plume_detokenize(t, ids, n, false, &out, NULL), 0);
    assert_string_equal(out, big);
    free(out);
    free(ids);
    free(big);
}

int main(void)
{
    char path[4096];
    if (!smollm2_path(path, sizeof path))
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_known_ids),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_chat_template),
        cmocka_unit_test(test_throughput),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
