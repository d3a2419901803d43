/* The streaming reasoning splitter and tool-call parsers
 * (plume/chat_parse.h): each reply is fed whole, one byte at a time and in
 * pieces of 2, 3, 5 and 7 bytes, and every way must give the expected
 * reasoning, content and calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/chat_parse.h"

static void cat(char **acc, char *piece)
{
    if (!piece)
        return;
    size_t a = *acc ? strlen(*acc) : 0, b = strlen(piece);
    char *n = realloc(*acc, a + b + 1);
    assert_non_null(n);
    memcpy(n + a, piece, b + 1);
    *acc = n;
    free(piece);
}

static const size_t CHUNKS[] = {0, 1, 2, 3, 5, 7}; /* 0: whole */

static void check_reasoning(const char *reply, bool inside, const char *want_r, const char *want_c)
{
    for (size_t k = 0; k < sizeof CHUNKS / sizeof CHUNKS[0]; k++) {
        plume_reasoning *r = plume_reasoning_new(inside);
        assert_non_null(r);
        char *acc_r = NULL, *acc_c = NULL, *pr, *pc;
        size_t n = strlen(reply), step = CHUNKS[k] ? CHUNKS[k] : n;
        for (size_t i = 0; i < n; i += step) {
            size_t len = n - i < step ? n - i : step;
            assert_int_equal(plume_reasoning_feed(r, reply + i, len, false, &pr, &pc, NULL), 0);
            cat(&acc_r, pr);
            cat(&acc_c, pc);
        }
        assert_int_equal(plume_reasoning_feed(r, "", 0, true, &pr, &pc, NULL), 0);
        cat(&acc_r, pr);
        cat(&acc_c, pc);
        if (strcmp(acc_r ? acc_r : "", want_r) || strcmp(acc_c ? acc_c : "", want_c))
            fail_msg("reply %s in pieces of %zu: reasoning [%s] content [%s], want [%s] [%s]",
                     reply, CHUNKS[k], acc_r ? acc_r : "", acc_c ? acc_c : "", want_r, want_c);
        free(acc_r);
        free(acc_c);
        plume_reasoning_free(r);
    }
}

static void test_reasoning(void **state)
{
    (void)state;
    check_reasoning("<think>\nLet me see.\n</think>\n\nParis.", false, "\nLet me see.\n", "Paris.");
    check_reasoning("  <think>a</think>b", false, "a", "b");
    check_reasoning("No thinking here.", false, "", "No thinking here.");
    check_reasoning("Text <think>not at start</think>", false, "",
                    "Text <think>not at start</think>");
    check_reasoning("<thi", false, "", "<thi"); /* an unfinished tag is text at the end */
    check_reasoning("<think>unfinished", false, "unfinished", "");
    check_reasoning("reason</think>answer", true, "reason", "answer");
    check_reasoning("only reasoning </thin", true, "only reasoning </thin", "");
    check_reasoning("a < b </think>\n\n x", true, "a < b ", "x");
    check_reasoning("", false, "", "");
}

typedef struct want_call {
    const char *name, *args, *id; /* id NULL: a generated one */
} want_call;

/* Reads reply with the tool-call parser of format f, or with the harmony
 * reader (f PLUME_TOOLS_HARMONY; calls_on says whether it reads calls), in
 * every chunking, and compares reasoning, content and calls. */
static void check_reply(plume_tool_format f, bool calls_on, const char *reply,
                        const char *want_r, const char *want_c, const want_call *want,
                        size_t n_want)
{
    for (size_t k = 0; k < sizeof CHUNKS / sizeof CHUNKS[0]; k++) {
        bool harmony = f == PLUME_TOOLS_HARMONY;
        plume_tool_parser *p = harmony ? NULL : plume_tool_parser_new(f, 42);
        plume_harmony *h = harmony ? plume_harmony_new(calls_on, 42) : NULL;
        assert_true(p || h);
        char *acc_r = NULL, *acc_c = NULL, *r = NULL, *c;
        plume_tool_call *all = NULL, *calls;
        size_t n_all = 0, nc;
        size_t n = strlen(reply), step = CHUNKS[k] ? CHUNKS[k] : n;
        for (size_t i = 0; i <= n; i += step) {
            size_t len = n - i < step ? n - i : step;
            bool final = i + len >= n;
            assert_int_equal(h ? plume_harmony_feed(h, reply + i, len, final, &r, &c, &calls, &nc,
                                                    NULL)
                               : plume_tool_parser_feed(p, reply + i, len, final, &c, &calls,
                                                        &nc, NULL),
                             0);
            cat(&acc_r, r);
            cat(&acc_c, c);
            all = realloc(all, (n_all + nc + 1) * sizeof *all);
            if (nc)
                memcpy(all + n_all, calls, nc * sizeof *calls);
            n_all += nc;
            free(calls);
            if (final)
                break;
        }
        if (strcmp(acc_r ? acc_r : "", want_r) || strcmp(acc_c ? acc_c : "", want_c))
            fail_msg("%s in pieces of %zu: reasoning [%s] content [%s], want [%s] [%s]", reply,
                     CHUNKS[k], acc_r ? acc_r : "", acc_c ? acc_c : "", want_r, want_c);
        if (n_all != n_want)
            fail_msg("%s in pieces of %zu: %zu calls, want %zu", reply, CHUNKS[k], n_all,
                     n_want);
        for (size_t i = 0; i < n_want; i++) {
            assert_string_equal(all[i].name, want[i].name);
            assert_string_equal(all[i].arguments, want[i].args);
            if (want[i].id)
                assert_string_equal(all[i].id, want[i].id);
            else {
                assert_int_equal(strlen(all[i].id), 14);
                assert_memory_equal(all[i].id, "call_", 5);
            }
        }
        if (n_want == 2 && !want[0].id && !want[1].id)
            assert_string_not_equal(all[0].id, all[1].id);
        free(acc_r);
        free(acc_c);
        plume_tool_calls_free(all, n_all);
        plume_tool_parser_free(p);
        plume_harmony_free(h);
    }
}

static void check_tools(plume_tool_format f, const char *reply, const char *want_c,
                        const want_call *want, size_t n_want)
{
    check_reply(f, true, reply, "", want_c, want, n_want);
}

static void test_hermes(void **state)
{
    (void)state;
    want_call w1[] = {{"get_weather", "{\"city\": \"Paris\"}", NULL}};
    check_tools(PLUME_TOOLS_HERMES,
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                "</tool_call>",
                "", w1, 1);
    want_call w2[] = {{"a", "{\"x\": 1}", NULL}, {"b", "{}", NULL}};
    check_tools(PLUME_TOOLS_HERMES,
                "Let me check. <tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call>\n"
                "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
                "Let me check. \n", w2, 2);
    check_tools(PLUME_TOOLS_HERMES, "Plain answer with < and <tool", "Plain answer with < and <tool",
                NULL, 0);
    /* unparseable or unfinished calls come back as text */
    check_tools(PLUME_TOOLS_HERMES, "<tool_call>{not json}</tool_call>",
                "<tool_call>{not json}</tool_call>", NULL, 0);
    check_tools(PLUME_TOOLS_HERMES, "x<tool_call>{\"name\": \"a\"", "x<tool_call>{\"name\": \"a\"",
                NULL, 0);
    want_call w3[] = {{"s", "{\"q\": \"}{\\\"\"}", NULL}};
    check_tools(PLUME_TOOLS_HERMES,
                "<tool_call>{\"name\": \"s\", \"arguments\": {\"q\": \"}{\\\"\"}}</tool_call>", "",
                w3, 1);
}

static void test_llama3(void **state)
{
    (void)state;
    want_call w1[] = {{"get_weather", "{\"city\": \"Paris\"}", NULL}};
    check_tools(PLUME_TOOLS_LLAMA3,
                "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", w1, 1);
    check_tools(PLUME_TOOLS_LLAMA3,
                "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
                "", w1, 1);
    want_call w2[] = {{"a", "{}", NULL}, {"b", "{\"k\": true}", NULL}};
    check_tools(PLUME_TOOLS_LLAMA3,
                "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": true}}",
                "", w2, 2);
    check_tools(PLUME_TOOLS_LLAMA3, "The answer is {x}.", "The answer is {x}.", NULL, 0);
    check_tools(PLUME_TOOLS_LLAMA3, "{\"not\": \"a call\"}", "{\"not\": \"a call\"}", NULL, 0);
}

static void test_mistral(void **state)
{
    (void)state;
    want_call w1[] = {{"get_weather", "{\"city\": \"Paris\"}", "a1b2c3d4e"}};
    check_tools(PLUME_TOOLS_MISTRAL,
                "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
                "\"id\": \"a1b2c3d4e\"}]",
                "", w1, 1);
    want_call w2[] = {{"get_weather", "{\"city\": \"Paris\"}", NULL}, {"s", "{}", NULL}};
    check_tools(PLUME_TOOLS_MISTRAL,
                "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]s[ARGS]{}", "", w2,
                2);
    check_tools(PLUME_TOOLS_MISTRAL, "Sure [TOOL", "Sure [TOOL", NULL, 0);
    /* a marker whose arguments are not an object is text, and a call after
     * it is still read (whole or in pieces alike: a fuzz finding) */
    want_call w3[] = {{"b", "{}", NULL}};
    check_tools(PLUME_TOOLS_MISTRAL, "[TOOL_CALLS]a[ARGS]x [TOOL_CALLS]b[ARGS]{}",
                "[TOOL_CALLS]a[ARGS]x ", w3, 1);
}

static void check_harmony(const char *reply, bool calls_on, const char *want_r,
                          const char *want_c, const want_call *want, size_t n_want)
{
    check_reply(PLUME_TOOLS_HARMONY, calls_on, reply, want_r, want_c, want, n_want);
}

static void test_harmony(void **state)
{
    (void)state;
    /* reasoning, then the answer in a second message */
    check_harmony("<|channel|>analysis<|message|>User asks the capital.<|end|>"
                  "<|start|>assistant<|channel|>final<|message|>Paris.",
                  true, "User asks the capital.", "Paris.", NULL, 0);
    /* a call named in the channel part, with a constraint; <|call|> ended
     * generation so it is not in the text */
    want_call w1[] = {{"get_weather", "{\"city\": \"Paris\"}", NULL}};
    check_harmony("<|channel|>analysis<|message|>Need the weather.<|end|>"
                  "<|start|>assistant<|channel|>commentary to=functions.get_weather "
                  "<|constrain|>json<|message|>{\"city\":\"Paris\"}",
                  true, "Need the weather.", "", w1, 1);
    /* named in the role part, and ended by <|call|> when it is rendered */
    want_call w2[] = {{"f", "{}", NULL}};
    check_harmony("<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.f"
                  "<|channel|>commentary json<|message|>{}<|call|>",
                  true, "x", "", w2, 1);
    /* the first message named in the role part: the prompt ended with
     * "<|start|>assistant", so the reply opens with " to=" (a review finding) */
    check_harmony(" to=functions.f<|channel|>commentary json<|message|>{\"a\": [1, 2]}", true,
                  "", "", (want_call[]){{"f", "{\"a\": [1, 2]}", NULL}}, 1);
    /* a long call body, fed in pieces, is searched once (and still whole) */
    {
        char big[8192] = "<|channel|>commentary to=functions.g<|message|>{\"s\": \"";
        size_t k = strlen(big);
        memset(big + k, 'x', 6000);
        strcpy(big + k + 6000, "\"}<|call|>");
        char want[8192] = "{\"s\": \"";
        memset(want + strlen(want), 'x', 6000);
        strcat(want, "\"}");
        check_harmony(big, true, "", "", (want_call[]){{"g", want, NULL}}, 1);
    }
    /* a preamble on commentary is answer text; two calls in a row */
    want_call w3[] = {{"a", "{\"k\": 1}", NULL}, {"b", "{}", NULL}};
    check_harmony("<|channel|>commentary<|message|>Let me look.<|end|>"
                  "<|start|>assistant<|channel|>commentary to=functions.a<|message|>{\"k\": 1}"
                  "<|end|><|start|>assistant<|channel|>commentary to=functions.b<|message|>{}",
                  true, "", "Let me look.", w3, 2);
    /* without tools a call's body is answer text */
    check_harmony("<|channel|>commentary to=functions.f<|message|>{\"a\": 2}", false, "",
                  "{\"a\": 2}", NULL, 0);
    /* arguments that are not a JSON object are answer text */
    check_harmony("<|channel|>commentary to=functions.f<|message|>{oops", true, "", "{oops",
                  NULL, 0);
    /* other recipients keep their name */
    want_call w4[] = {{"browser.search", "{\"q\": \"x\"}", NULL}};
    check_harmony("<|channel|>analysis to=browser.search<|message|>{\"q\": \"x\"}", true, "", "",
                  w4, 1);
    /* text that is not harmony, an unfinished reasoning, a stray "<|" */
    check_harmony("Just text.", true, "", "Just text.", NULL, 0);
    check_harmony("<|channel|>analysis<|message|>thinking...", true, "thinking...", "", NULL, 0);
    check_harmony("<|channel|>final<|message|>a <| b <|en", true, "", "a <| b <|en", NULL, 0);
    check_harmony("<|channel|>final<|message|>Done.<|return|>", true, "", "Done.", NULL, 0);
    check_harmony("<|chan", true, "", "<|chan", NULL, 0);
    check_harmony("", true, "", "", NULL, 0);
}

static void test_format_of_template(void **state)
{
    (void)state;
    assert_int_equal(plume_tool_format_of_template("{{ '<tool_call>' }}"), PLUME_TOOLS_HERMES);
    assert_int_equal(plume_tool_format_of_template("[TOOL_CALLS]"), PLUME_TOOLS_MISTRAL);
    assert_int_equal(plume_tool_format_of_template("<|python_tag|>"), PLUME_TOOLS_LLAMA3);
    assert_int_equal(plume_tool_format_of_template("<|im_start|>"), PLUME_TOOLS_NONE);
    assert_int_equal(plume_tool_format_of_template("<|start|>assistant<|channel|>final<|message|>"),
                     PLUME_TOOLS_HARMONY);
    assert_string_equal(plume_tool_format_name(PLUME_TOOLS_HARMONY), "harmony");
    assert_null(plume_tool_parser_new(PLUME_TOOLS_HARMONY, 1));
    assert_true(plume_template_is_harmony("<|channel|>x<|message|>"));
    assert_false(plume_template_is_harmony("<|im_start|>"));
    assert_false(plume_template_is_harmony(NULL));
    assert_null(plume_tool_parser_new(PLUME_TOOLS_NONE, 1));
    assert_string_equal(plume_tool_format_name(PLUME_TOOLS_HERMES), "hermes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reasoning),
        cmocka_unit_test(test_hermes),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_harmony),
        cmocka_unit_test(test_format_of_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
