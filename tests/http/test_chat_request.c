/* What a chat request asks of generation (serve/openai_api.h,
 * serve/chat_request.h), on SmolLM2's tokenizer with small templates of
 * each tool-call format written here: which requests render special
 * tokens as text (the reply reader must see Mistral's [TOOL_CALLS] and
 * Llama 3.1's <|python_tag|>, which those vocabularies hold as control
 * tokens), and that a constrained reply on a prompt that opens a think
 * block starts after the block is closed.
 * Usage: test_chat_request SMOLLM2.gguf (skips, 77, when it is missing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "formats/gguf.h"
#include "plume/tokenizer.h"
#include "serve/openai_api.h"
#include "structured.h"
#include "tokenizer/gguf_vocab.h"

static plume_tokenizer *tok;

/* A chat template: the messages as ChatML, then head (the tool-call
 * format's markup, so that the format is recognized) when tools are given,
 * and the assistant's turn opened with tail. */
static plume_chat_template *template_of(const char *head, const char *tail)
{
    char text[1024];
    snprintf(text, sizeof text,
             "{%%- if tools %%}<|im_start|>system\nCall tools as %s<|im_end|>\n{%% endif %%}"
             "{%%- for m in messages %%}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
             "{%%- endfor %%}<|im_start|>assistant\n%s",
             head, tail);
    plume_chat_template *t = NULL;
    plume_error err = {0};
    if (plume_chat_template_compile(text, strlen(text), &t, &err))
        fail_msg("template: %s", err.msg);
    return t;
}

static const char TOOLS[] =
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {}}}}]";

/* serve_api_parse_gen of a chat body on template t: 0 and the request in *g. */
static int parse(plume_chat_template *t, const char *extra, serve_gen_request *g)
{
    serve_api_env env = {.tok = tok, .model_name = "m", .n_ctx = 2048,
                         .sampling = plume_sampling_defaults(), .chat_template = t,
                         .structured = ss_structured_sampler()};
    char body[1024], msg[512] = "";
    snprintf(body, sizeof body,
             "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]%s%s}",
             extra[0] ? ", " : "", extra);
    int rc = serve_api_parse_gen(&env, SERVE_API_CHAT, body, strlen(body), g, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "parse: %d %s\n", rc, msg);
    return rc;
}

static void test_render_special(void **state)
{
    (void)state;
    static const struct {
        const char *head;
        bool with_tools; /* render_special when the request has tools */
    } cases[] = {
        {"[TOOL_CALLS][{\"name\": ..., \"arguments\": ...}]", true},      /* Mistral */
        {"<|python_tag|>{\"name\": ..., \"parameters\": ...}", true},    /* Llama 3.1 */
        {"<tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>", false}, /* Hermes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        plume_chat_template *t = template_of(cases[i].head, "");
        serve_gen_request g;
        assert_int_equal(parse(t, TOOLS, &g), 0);
        if (g.rp.render_special != cases[i].with_tools)
            fail_msg("%s with tools: render_special %d", cases[i].head, g.rp.render_special);
        serve_gen_request_free(&g);
        /* without tools the reply is plain text: control tokens stay hidden */
        assert_int_equal(parse(t, "", &g), 0);
        assert_false(g.rp.render_special);
        serve_gen_request_free(&g);
        plume_chat_template_free(t);
    }
}

/* The prompt's text (the request's ids detokenized with specials). */
static char *prompt_text(const serve_gen_request *g)
{
    char *text = NULL;
    plume_error err = {0};
    if (plume_detokenize(tok, g->prompt, g->n_prompt, true, &text, &err))
        fail_msg("decode: %s", err.msg);
    return text;
}

static void test_constrained_reply_closes_think(void **state)
{
    (void)state;
    plume_chat_template *t =
        template_of("<tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>", "<think>\n");
    serve_gen_request g;
    /* unconstrained: the reply starts inside the block */
    assert_int_equal(parse(t, "", &g), 0);
    char *p = prompt_text(&g);
    assert_non_null(strstr(p, "<|im_start|>assistant\n<think>"));
    assert_null(strstr(p, "</think>"));
    assert_true(g.reply.starts_inside);
    free(p);
    serve_gen_request_free(&g);
    /* a required tool call: closed empty first, the reply starts after it */
    char extra[512];
    snprintf(extra, sizeof extra, "%s, \"tool_choice\": \"required\"", TOOLS);
    assert_int_equal(parse(t, extra, &g), 0);
    p = prompt_text(&g);
    const char *want = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    const size_t n = strlen(p), w = strlen(want);
    if (n < w || strcmp(p + n - w, want) != 0)
        fail_msg("the prompt does not end with the closed block: ...%s", n > 80 ? p + n - 80 : p);
    assert_false(g.reply.starts_inside);
    free(p);
    serve_gen_request_free(&g);
    plume_chat_template_free(t);
}

int main(int argc, char **argv)
{
    if (argc < 2 || access(argv[1], R_OK) != 0) {
        printf("SKIP: %s not found (scripts/fetch-model)\n", argc > 1 ? argv[1] : "SMOLLM2.gguf");
        return 77;
    }
    gguf_file *f = NULL;
    plume_error err = {0};
    if (gguf_open(argv[1], &f, &err) || plume_tokenizer_from_gguf(f, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err.msg);
        return 1;
    }
    gguf_close(f);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_special),
        cmocka_unit_test(test_constrained_reply_closes_think),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    plume_tokenizer_free(tok);
    return rc;
}
