/* plume router's request rewrite (serve/router_rewrite.h) and the API key
 * check (serve/api_key.h), written from their headers' promises: what the
 * prefill worker is sent, what the decode worker is sent, what a client
 * sees when its stream breaks, and which Authorization values pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "serve/api_key.h"
#include "serve/router_rewrite.h"

static json_t *parse(const char *s)
{
    bool stream = false;
    char msg[256];
    json_t *j = router_parse_request(s, strlen(s), &stream, msg, sizeof msg);
    if (!j)
        fail_msg("router_parse_request(%s): %s", s, msg);
    return j;
}

static void test_parse_rejects_non_objects(void **state)
{
    (void)state;
    const char *bad[] = {"", "[1,2]", "\"text\"", "{\"prompt\": ", "null"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool stream = true;
        char msg[256] = "";
        json_t *j = router_parse_request(bad[i], strlen(bad[i]), &stream, msg, sizeof msg);
        assert_null(j);
        assert_non_null(strstr(msg, "the body must be a JSON object"));
    }
}

static void test_parse_reads_stream(void **state)
{
    (void)state;
    const char *cases[][2] = {{"{\"stream\": true}", "1"}, {"{\"stream\": false}", "0"},
                              {"{}", "0"}, {"{\"stream\": 1}", "0"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool stream = false;
        char msg[64];
        json_t *j = router_parse_request(cases[i][0], strlen(cases[i][0]), &stream, msg, sizeof msg);
        assert_non_null(j);
        assert_int_equal(stream, cases[i][1][0] == '1');
        json_decref(j);
    }
}

static void test_prefill_request(void **state)
{
    (void)state;
    json_t *req = parse("{\"model\": \"m\", \"prompt\": \"Hello\", \"max_tokens\": 50, "
                        "\"max_completion_tokens\": 40, \"stream\": true, "
                        "\"stream_options\": {\"include_usage\": true}, \"temperature\": 0.7, "
                        "\"kv_transfer_params\": {\"do_remote_prefill\": true}}");
    char *before = json_dumps(req, JSON_SORT_KEYS);
    json_t *pre = router_prefill_request(req);
    assert_non_null(pre);
    /* one token, not streamed, KV kept for a decode worker */
    assert_int_equal(json_integer_value(json_object_get(pre, "max_tokens")), 1);
    assert_true(json_is_false(json_object_get(pre, "stream")));
    assert_null(json_object_get(pre, "max_completion_tokens"));
    assert_null(json_object_get(pre, "stream_options"));
    json_t *kx = json_object_get(pre, "kv_transfer_params");
    assert_true(json_is_object(kx));
    assert_int_equal(json_object_size(kx), 1);
    assert_true(json_is_true(json_object_get(kx, "do_remote_decode")));
    /* what decides the prompt's tokens and the sampling is kept */
    assert_string_equal(json_string_value(json_object_get(pre, "prompt")), "Hello");
    assert_string_equal(json_string_value(json_object_get(pre, "model")), "m");
    assert_true(json_real_value(json_object_get(pre, "temperature")) == 0.7);
    /* the client's request is not touched */
    char *after = json_dumps(req, JSON_SORT_KEYS);
    assert_string_equal(before, after);
    free(before);
    free(after);
    json_decref(pre);
    json_decref(req);
}

static void test_prefill_request_chat(void **state)
{
    (void)state;
    json_t *req = parse("{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}");
    json_t *pre = router_prefill_request(req);
    assert_non_null(pre);
    assert_true(json_equal(json_object_get(pre, "messages"), json_object_get(req, "messages")));
    assert_int_equal(json_integer_value(json_object_get(pre, "max_tokens")), 1);
    json_decref(pre);
    json_decref(req);
}

static void test_decode_request(void **state)
{
    (void)state;
    json_t *req = parse("{\"prompt\": \"Hello\", \"max_tokens\": 50, \"stream\": true, "
                        "\"stream_options\": {\"include_usage\": true}}");
    json_t *answer = parse("{\"id\": \"cmpl-1\", \"choices\": [{\"text\": \",\"}], "
                           "\"kv_transfer_params\": {\"do_remote_prefill\": true, "
                           "\"transfer_id\": \"t-7\", \"remote_addr\": \"/tmp/p.sock\"}}");
    json_t *dec = router_decode_request(req, answer);
    assert_non_null(dec);
    /* the client's request as it was, plus the prefill worker's transfer */
    assert_int_equal(json_integer_value(json_object_get(dec, "max_tokens")), 50);
    assert_true(json_is_true(json_object_get(dec, "stream")));
    assert_non_null(json_object_get(dec, "stream_options"));
    assert_true(json_equal(json_object_get(dec, "kv_transfer_params"),
                           json_object_get(answer, "kv_transfer_params")));
    assert_null(json_object_get(req, "kv_transfer_params"));
    assert_int_equal(json_object_size(dec), json_object_size(req) + 1);
    json_decref(dec);
    json_decref(answer);
    json_decref(req);
}

static void test_decode_request_needs_transfer(void **state)
{
    (void)state;
    json_t *req = parse("{\"prompt\": \"Hello\"}");
    const char *answers[] = {"{\"choices\": []}", "{\"kv_transfer_params\": null}",
                             "{\"kv_transfer_params\": \"x\"}"};
    for (size_t i = 0; i < sizeof answers / sizeof answers[0]; i++) {
        json_t *a = parse(answers[i]);
        assert_null(router_decode_request(req, a));
        json_decref(a);
    }
    assert_null(router_decode_request(req, NULL)); /* an answer that was not JSON */
    json_decref(req);
}

static void test_stream_error_tail(void **state)
{
    (void)state;
    char buf[1024];
    size_t n = router_stream_error_tail("http://127.0.0.1:8200", "Operation timed out", buf,
                                        sizeof buf);
    assert_int_equal(n, strlen(buf));
    assert_memory_equal(buf, "data: ", 6);
    const char *end = "\n\ndata: [DONE]\n\n";
    assert_string_equal(buf + n - strlen(end), end);
    /* the event is the server's error shape, naming the worker and the failure */
    char *ev = strndup(buf + 6, n - 6 - strlen(end));
    json_t *j = json_loads(ev, 0, NULL);
    free(ev);
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_null(json_object_get(e, "code"))); /* OpenAI's: a string or null */
    assert_true(json_is_null(json_object_get(e, "param")));
    assert_string_equal(json_string_value(json_object_get(e, "type")), "server_error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    assert_non_null(strstr(msg, "http://127.0.0.1:8200"));
    assert_non_null(strstr(msg, "Operation timed out"));
    json_decref(j);
    /* a small buffer: cut, still NUL-terminated */
    char small[16];
    n = router_stream_error_tail("u", "f", small, sizeof small);
    assert_int_equal(n, sizeof small - 1);
    assert_int_equal(small[n], '\0');
}

static void test_api_key(void **state)
{
    (void)state;
    assert_true(api_key_matches("Bearer s3cret", "s3cret"));
    const char *refused[] = {NULL, "", "s3cret", "Bearer", "Bearer ", "bearer s3cret",
                             "Bearer s3cre", "Bearer s3cretX", "Bearer S3cret", "Bearer  s3cret",
                             "Basic s3cret", "Bearer x3cret"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (api_key_matches(refused[i], "s3cret"))
            fail_msg("'%s' passed for key s3cret", refused[i] ? refused[i] : "(no header)");
    /* a key with a NUL-free prefix of the other: lengths must match too */
    assert_false(api_key_matches("Bearer ab", "abc"));
    assert_false(api_key_matches("Bearer abcd", "abc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_rejects_non_objects),
        cmocka_unit_test(test_parse_reads_stream),
        cmocka_unit_test(test_prefill_request),
        cmocka_unit_test(test_prefill_request_chat),
        cmocka_unit_test(test_decode_request),
        cmocka_unit_test(test_decode_request_needs_transfer),
        cmocka_unit_test(test_stream_error_tail),
        cmocka_unit_test(test_api_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
