/* libFuzzer target for the Jinja engine (core/src/template): the input is a
 * template.  It is compiled and, when it compiles, rendered over a fixed
 * conversation with tools, tool calls and reasoning, under small limits
 * (steps, output, memory, depth) so that a hang or a blow-up is a finding.
 * Invariants: compile and render either succeed or fail with one error line
 * that names the line and column; a success gives NUL-terminated output of
 * the length reported, within the output limit.  Seeds: the 70 real chat
 * templates of tests/template (corpus/jinja). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "template/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CONTEXT[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    "{\"role\": \"user\", \"content\": \"What's the weather in Paris? \\u00e9\\u6771\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"call the tool\","
    " \"thinking\": \"call the tool\", \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
    " \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": 2.5}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"name\": \"get_weather\", \"content\": \"18C\"},"
    "{\"role\": \"assistant\", \"content\": [{\"type\": \"text\", \"text\": \"It is 18C.\"}]},"
    "{\"role\": \"user\", \"content\": \"Thanks\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    " \"description\": \"Weather\", \"parameters\": {\"type\": \"object\", \"properties\":"
    " {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}],"
    " \"documents\": null, \"add_generation_prompt\": true, \"bos_token\": \"<s>\","
    " \"eos_token\": \"</s>\", \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *ctx;
    if (!ctx) {
        ctx = json_loads(CONTEXT, 0, NULL);
        FUZZ_CHECK(ctx != NULL, "the fixed context does not parse");
    }
    jinja_template *t = NULL;
    plume_error err = {0};
    if (jinja_compile((const char *)data, size, &t, &err) != 0) {
        fuzz_check_error(&err, NULL);
        FUZZ_CHECK(strstr(err.msg, "line ") != NULL, "no line in: %s", err.msg);
        FUZZ_CHECK(t == NULL, "a failed compile returned a template");
        return 0;
    }
    jinja_render_opts opts = {.limits = {.max_steps = 200000,
                                         .max_output = (size_t)1 << 20,
                                         .max_memory = (size_t)64 << 20,
                                         .max_depth = 64,
                                         .max_loop = 10000},
                              .now = 1785067200,
                              .now_utc = true};
    char *out = NULL;
    size_t len = 0;
    if (jinja_render(t, ctx, &opts, &out, &len, &err) == 0) {
        FUZZ_CHECK(out != NULL, "success without output");
        FUZZ_CHECK(strlen(out) <= len, "output longer than reported");
        FUZZ_CHECK(len <= opts.limits.max_output, "output beyond the limit: %zu", len);
        free(out);
    } else {
        fuzz_check_error(&err, NULL);
        FUZZ_CHECK(strstr(err.msg, "line ") != NULL, "no line in: %s", err.msg);
        FUZZ_CHECK(out == NULL, "a failed render returned output");
    }
    jinja_free(t);
    return 0;
}
