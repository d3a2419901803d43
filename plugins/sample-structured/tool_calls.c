/* sample-structured: a required tool call's grammar (tool_calls.h). */
#include "tool_calls.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema.h"

/* lit(prefix) ARGS lit("}") for one function: prefix is the call's opening
 * up to its arguments, e.g. {"name": "f", "arguments": */
static int32_t one_call(ss_grammar *g, const char *name_json, const char *args_key,
                        const char *schema, const char *open, const char *close)
{
    size_t n = strlen(open) + strlen(name_json) + strlen(args_key) + 32;
    char *head = malloc(n);
    if (!head)
        return plume_err(g->err, PLUME_ERR_NOMEM, "out of memory");
    int k = snprintf(head, n, "%s{\"name\": %s, \"%s\": ", open, name_json, args_key);
    int32_t parts[3] = {g_lit(g, head, (size_t)k), ss_json_schema_compile(g, schema, strlen(schema)),
                        -1};
    free(head);
    if (parts[0] < 0 || parts[1] < 0)
        return -1;
    char tail[64];
    k = snprintf(tail, sizeof tail, "}%s", close);
    parts[2] = g_lit(g, tail, (size_t)k);
    return parts[2] < 0 ? -1 : g_seq(g, parts, 3);
}

int32_t ss_tool_calls_compile(ss_grammar *g, const char *text, size_t len)
{
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    json_t *tools = json_object_get(o, "tools");
    const char *fmt = json_string_value(json_object_get(o, "format"));
    bool parallel = json_is_true(json_object_get(o, "parallel"));
    int32_t root = -1;
    if (!json_is_object(o) || !fmt || !json_is_array(tools) || json_array_size(tools) == 0) {
        plume_err(g->err, PLUME_ERR_INVALID, "tool_calls must be {\"format\": \"hermes\" | "
                  "\"llama3\" | \"mistral\", \"parallel\": bool, \"tools\": [{\"name\", "
                  "\"parameters\"}, ...]} with at least one tool");
        goto out;
    }
    bool hermes = !strcmp(fmt, "hermes"), llama = !strcmp(fmt, "llama3"),
         mistral = !strcmp(fmt, "mistral");
    if (!hermes && !llama && !mistral) {
        plume_err(g->err, PLUME_ERR_INVALID, "tool_calls format \"%.40s\" is unknown; use "
                  "hermes, llama3 or mistral", fmt);
        goto out;
    }
    size_t n = json_array_size(tools);
    int32_t *alts = calloc(n, sizeof *alts);
    if (!alts) {
        plume_err(g->err, PLUME_ERR_NOMEM, "out of memory");
        goto out;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *t = json_array_get(tools, i), *name = json_object_get(t, "name");
        json_t *params = json_object_get(t, "parameters");
        if (!json_is_string(name) || (params && !json_is_object(params))) {
            plume_err(g->err, PLUME_ERR_INVALID, "tool_calls tools[%zu] needs a string \"name\" "
                      "and an object \"parameters\"", i);
            ok = false;
            break;
        }
        char *nj = json_dumps(name, JSON_ENCODE_ANY);
        json_t *empty = params ? NULL : json_object();
        char *sj = json_dumps(params ? params : empty, JSON_COMPACT);
        json_decref(empty);
        ok = nj && sj;
        if (!ok)
            plume_err(g->err, PLUME_ERR_NOMEM, "out of memory");
        else
            alts[i] = hermes  ? one_call(g, nj, "arguments", sj, "<tool_call>\n", "\n</tool_call>")
                      : llama ? one_call(g, nj, "parameters", sj, "", "")
                              : one_call(g, nj, "arguments", sj, "", "");
        ok = ok && alts[i] >= 0;
        free(nj);
        free(sj);
    }
    int32_t call = ok ? g_alts(g, alts, n) : -1;
    free(alts);
    if (call < 0)
        goto out;
    if (llama || (!parallel && hermes)) {
        root = call;
    } else if (hermes) { /* call ("\n" call){0,MAX-1} */
        int32_t nl = g_lit(g, "\n", 1);
        int32_t more[2] = {nl, call};
        int32_t rest = nl < 0 ? -1 : g_repeat(g, g_seq(g, more, 2), 0, SS_TOOL_CALLS_MAX - 1);
        int32_t all[2] = {call, rest};
        root = rest < 0 ? -1 : g_seq(g, all, 2);
    } else { /* [TOOL_CALLS][call(, call)*] */
        int32_t comma = g_lit(g, ", ", 2);
        int32_t more[2] = {comma, call};
        int32_t rest = comma < 0 ? -1
                                 : g_repeat(g, g_seq(g, more, 2), 0,
                                            parallel ? SS_TOOL_CALLS_MAX - 1 : 0);
        int32_t parts[4] = {g_lit(g, "[TOOL_CALLS][", 13), call, rest, g_lit(g, "]", 1)};
        root = parts[0] < 0 || rest < 0 || parts[3] < 0 ? -1 : g_seq(g, parts, 4);
    }
out:
    json_decref(o);
    return root;
}
