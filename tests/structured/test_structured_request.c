/* The request -> structured-sampler settings translation
 * (plume/structured_request.h): OpenAI's response_format, vLLM's guided_*
 * and plume's own keys, and one clear error per malformed shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plume/structured_request.h"

/* The single constraint key of the settings read from body, and its text. */
static void expect(const char *body, const char *key, const char *text)
{
    json_error_t je;
    json_t *req = json_loads(body, 0, &je);
    assert_non_null(req);
    plume_settings *s = NULL;
    plume_error err = {0};
    assert_int_equal(plume_structured_from_json(req, &s, &err), 0);
    if (!key) {
        assert_null(s);
    } else {
        assert_non_null(s);
        assert_int_equal(plume_settings_count(s), 1);
        assert_string_equal(plume_settings_key(s, 0), key);
        const char *v = NULL;
        assert_int_equal(plume_settings_string(s, key, NULL, &v, &err), 0);
        assert_string_equal(v, text);
    }
    plume_settings_free(s);
    json_decref(req);
}

static void expect_error(const char *body, const char *needle)
{
    json_error_t je;
    json_t *req = json_loads(body, 0, &je);
    assert_non_null(req);
    plume_settings *s = NULL;
    plume_error err = {0};
    assert_int_equal(plume_structured_from_json(req, &s, &err), -1);
    assert_null(s);
    if (!strstr(err.msg, needle))
        fail_msg("expected '%s' in '%s'", needle, err.msg);
    json_decref(req);
}

static void test_shapes(void **state)
{
    (void)state;
    expect("{\"prompt\": \"x\"}", NULL, NULL);
    expect("{\"response_format\": {\"type\": \"text\"}}", NULL, NULL);
    expect("{\"response_format\": null}", NULL, NULL);
    expect("{\"response_format\": {\"type\": \"json_object\"}}", "json_object", "true");
    expect("{\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"p\", "
           "\"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"a\": "
           "{\"type\": \"integer\"}}}}}}",
           "json_schema", "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
    expect("{\"guided_json\": {\"type\": \"string\"}}", "json_schema", "{\"type\":\"string\"}");
    expect("{\"guided_json\": \"{\\\"type\\\": \\\"string\\\"}\"}", "json_schema",
           "{\"type\": \"string\"}");
    expect("{\"json_schema\": {\"enum\": [1, 2]}}", "json_schema", "{\"enum\":[1,2]}");
    expect("{\"guided_regex\": \"\\\\d+\"}", "regex", "\\d+");
    expect("{\"regex\": \"a|b\"}", "regex", "a|b");
    expect("{\"guided_choice\": [\"yes\", \"no\"]}", "choice", "[\"yes\",\"no\"]");
    expect("{\"choice\": [\"x\"]}", "choice", "[\"x\"]");
    expect("{\"guided_grammar\": \"root ::= \\\"a\\\"\"}", "grammar", "root ::= \"a\"");
    expect("{\"grammar\": \"root ::= [0-9]+\"}", "grammar", "root ::= [0-9]+");
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("{\"response_format\": \"json\"}", "must be an object");
    expect_error("{\"response_format\": {}}", "needs a \"type\"");
    expect_error("{\"response_format\": {\"type\": \"xml\"}}", "\"xml\" is unknown");
    expect_error("{\"response_format\": {\"type\": \"json_schema\"}}", "needs \"json_schema\"");
    expect_error("{\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": "
                 "{}, \"strict\": 1}}}",
                 "strict");
    expect_error("{\"guided_json\": 5}", "\"guided_json\" must be a JSON schema");
    expect_error("{\"guided_regex\": [\"a\"]}", "\"guided_regex\" must be a string");
    expect_error("{\"guided_choice\": []}", "non-empty list of strings");
    expect_error("{\"guided_choice\": [\"a\", 1]}", "non-empty list of strings");
    expect_error("{\"guided_regex\": \"a\", \"guided_choice\": [\"a\"]}",
                 "\"guided_regex\" and \"guided_choice\" both constrain");
    expect_error("{\"response_format\": {\"type\": \"json_object\"}, \"regex\": \"a\"}",
                 "\"response_format\" and \"regex\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
