/* bench_render [TEMPLATE...]: the render time of a 20-message conversation
 * (system, user/assistant turns, tool calls with 9-character ids as Mistral
 * wants them, tool results, reasoning) with
 * 10 tool definitions, per template: the median and the 90th percentile of
 * 200 renders (jinja_render: JSON context to values, evaluation, output),
 * and the compile time.  Prints numbers; asserts nothing about time.  With
 * no argument it uses the fetched templates of Qwen2.5, Llama 3.1, Hermes 3,
 * Mistral Small 3.2 and gpt-oss (exit 77 when they are not there). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "template/jinja.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static json_t *context(void)
{
    json_t *tools = json_array();
    for (int i = 0; i < 10; i++) {
        char name[32], desc[96];
        snprintf(name, sizeof name, "tool_%d", i);
        snprintf(desc, sizeof desc, "Tool number %d: does something useful with its inputs.", i);
        json_array_append_new(
            tools,
            json_pack("{s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:[s,s]}, s:{s:s}},"
                      " s:[s]}}}",
                      "type", "function", "function", "name", name, "description", desc,
                      "parameters", "type", "object", "properties", "query", "type", "string",
                      "description", "What to look for", "mode", "type", "string", "enum", "fast",
                      "slow", "limit", "type", "integer", "required", "query"));
    }
    json_t *msgs = json_array();
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content",
                                          "You are a helpful assistant."));
    int n = 1;
    for (int turn = 0; n < 20; turn++) {
        char text[128];
        snprintf(text, sizeof text, "Question %d: please look up something about topic %d.", turn,
                 turn);
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", text));
        n++;
        if (n >= 20)
            break;
        if (turn % 2 == 0 && n + 3 <= 20) {
            json_array_append_new(
                msgs, json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s, s:{s:s, s:{s:s, s:i}}}]}",
                                "role", "assistant", "content", "", "reasoning_content",
                                "I should call a tool.", "thinking", "I should call a tool.",
                                "tool_calls", "id", "a1b2c3d4e", "type", "function", "function",
                                "name", "tool_3", "arguments", "query", "topic", "limit", 5));
            json_array_append_new(msgs, json_pack("{s:s, s:s, s:s, s:s}", "role", "tool",
                                                  "tool_call_id", "a1b2c3d4e", "name", "tool_3",
                                                  "content", "{\"result\": \"42 items found\"}"));
            n += 2;
        }
        snprintf(text, sizeof text, "Here is what I found about topic %d: it is interesting.",
                 turn);
        json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "assistant", "content", text));
        n++;
    }
    return json_pack("{s:o, s:o, s:n, s:b, s:s, s:s}", "messages", msgs, "tools", tools,
                     "documents", "add_generation_prompt", 1, "bos_token", "<s>", "eos_token",
                     "</s>");
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

int main(int argc, char **argv)
{
    static const char *const DEFAULTS[] = {
        "Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
        "Mistral-Small-3.2-24B-Instruct-2506.jinja", "openai-gpt-oss-120b.jinja"};
    const char *root = getenv("PLUME_SOURCE_ROOT") ? getenv("PLUME_SOURCE_ROOT") : ".";
    json_t *ctx = context();
    printf("20 messages (%zu in the context), 10 tools, 200 renders each\n",
           json_array_size(json_object_get(ctx, "messages")));
    int n_files = argc > 1 ? argc - 1 : 5;
    int done = 0;
    for (int k = 0; k < n_files; k++) {
        char path[1024];
        if (argc > 1)
            snprintf(path, sizeof path, "%s", argv[k + 1]);
        else
            snprintf(path, sizeof path, "%s/models/chat-templates/llama-cpp-python-0.3.36/%s", root,
                     DEFAULTS[k]);
        size_t len;
        char *src = slurp(path, &len);
        if (!src) {
            printf("%s: not found (run scripts/fetch-templates)\n", path);
            continue;
        }
        plume_error err = {0};
        jinja_template *t = NULL;
        double c0 = now_us();
        if (jinja_compile(src, len, &t, &err)) {
            printf("%s: %s\n", path, err.msg);
            free(src);
            continue;
        }
        double compile_us = now_us() - c0;
        enum { N = 200 };
        double us[N];
        size_t out_len = 0;
        int failed = 0;
        for (int i = 0; i < N; i++) {
            char *out = NULL;
            double t0 = now_us();
            if (jinja_render(t, ctx, NULL, &out, &out_len, &err))
                failed = 1;
            us[i] = now_us() - t0;
            free(out);
        }
        qsort(us, N, sizeof us[0], cmp_d);
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        if (failed)
            printf("%-55s render failed: %s\n", base, err.msg);
        else
            printf("%-55s median %7.1f us  p90 %7.1f us  compile %7.1f us  output %zu bytes\n",
                   base, us[N / 2], us[N * 9 / 10], compile_us, out_len);
        jinja_free(t);
        free(src);
        done++;
    }
    json_decref(ctx);
    return done ? 0 : 77;
}
