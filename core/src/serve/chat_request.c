/* plume serve: a chat request's conversation into a prompt (chat_request.h). */
#include "serve/chat_request.h"

#include <stdlib.h>
#include <string.h>

#include "plume/chat_parse.h"

#define MAX_MESSAGES 4096
#define MAX_TOOLS 256
#define MAX_CALLS 64

/* A JSON null counts as absent. */
static json_t *field(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return v && !json_is_null(v) ? v : NULL;
}

/* Message content: a string or a list of {"type": "text", "text": ...}, as
 * a new JSON string. */
static int content_json(json_t *c, size_t idx, json_t **out, char *msg, size_t cap)
{
    if (json_is_string(c)) {
        *out = json_incref(c);
        return 0;
    }
    if (!json_is_array(c))
        return serve_api_fail(msg, cap, 400, "messages[%zu].content must be a string or a "
                              "list of text parts", idx);
    size_t total = 1;
    for (size_t i = 0; i < json_array_size(c); i++) {
        json_t *part = json_array_get(c, i), *t = json_object_get(part, "text");
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type || strcmp(type, "text") != 0 || !json_is_string(t))
            return serve_api_fail(msg, cap, 400, "messages[%zu].content[%zu] must be "
                                  "{\"type\": \"text\", \"text\": ...}: plume serve takes text "
                                  "only", idx, i);
        total += json_string_length(t);
    }
    char *s = malloc(total);
    if (!s)
        return serve_api_fail(msg, cap, 500, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < json_array_size(c); i++) {
        json_t *t = json_object_get(json_array_get(c, i), "text");
        memcpy(s + o, json_string_value(t), json_string_length(t));
        o += json_string_length(t);
    }
    *out = json_stringn(s, o);
    free(s);
    return *out ? 0 : serve_api_fail(msg, cap, 500, "out of memory");
}

/* An assistant message's tool_calls, as the template sees them: each
 * {"id", "type": "function", "function": {"name", "arguments": object}}
 * (arguments parsed from OpenAI's JSON string, as vLLM does before
 * rendering). */
static int tool_calls_json(json_t *calls, size_t idx, json_t **out, char *msg, size_t cap)
{
    if (!json_is_array(calls) || json_array_size(calls) > MAX_CALLS)
        return serve_api_fail(msg, cap, 400, "messages[%zu].tool_calls must be a list of at "
                              "most %d calls", idx, MAX_CALLS);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < json_array_size(calls); i++) {
        json_t *c = json_array_get(calls, i), *fn = json_object_get(c, "function");
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        json_t *id = field(c, "id"), *type = field(c, "type");
        if (!json_is_object(c) || !json_is_object(fn) || !json_is_string(name) ||
            (id && !json_is_string(id)) ||
            (type && !(json_is_string(type) && !strcmp(json_string_value(type), "function")))) {
            json_decref(arr);
            return serve_api_fail(msg, cap, 400, "messages[%zu].tool_calls[%zu] must be "
                                  "{\"id\", \"type\": \"function\", \"function\": {\"name\", "
                                  "\"arguments\"}}", idx, i);
        }
        json_t *a;
        if (json_is_string(args)) {
            a = json_loads(json_string_value(args), JSON_DECODE_ANY, NULL);
            if (!a) {
                json_decref(arr);
                return serve_api_fail(msg, cap, 400, "messages[%zu].tool_calls[%zu].function."
                                      "arguments is not valid JSON text", idx, i);
            }
        } else if (json_is_object(args)) {
            a = json_incref(args);
        } else if (!args || json_is_null(args)) {
            a = json_object();
        } else {
            json_decref(arr);
            return serve_api_fail(msg, cap, 400, "messages[%zu].tool_calls[%zu].function."
                                  "arguments must be a JSON string or an object", idx, i);
        }
        json_t *call = json_pack("{s:s, s:{s:O, s:o}}", "type", "function", "function", "name",
                                 name, "arguments", a);
        if (call && id)
            json_object_set(call, "id", id);
        if (!call || json_array_append_new(arr, call)) {
            json_decref(arr);
            arr = NULL;
        }
    }
    *out = arr;
    return arr ? 0 : serve_api_fail(msg, cap, 500, "out of memory");
}

/* One message, checked, as the template sees it. */
static int message_json(json_t *e, size_t i, json_t **out, char *msg, size_t cap)
{
    *out = NULL;
    const char *role = json_string_value(json_object_get(e, "role"));
    if (!json_is_object(e) || !role)
        return serve_api_fail(msg, cap, 400, "messages[%zu] needs a string 'role'", i);
    if (!strcmp(role, "developer"))
        role = "system";
    bool assistant = !strcmp(role, "assistant"), tool = !strcmp(role, "tool");
    if (!assistant && !tool && strcmp(role, "system") && strcmp(role, "user"))
        return serve_api_fail(msg, cap, 400, "messages[%zu].role is '%.40s'; plume serve takes "
                              "system, developer, user, assistant and tool", i, role);
    json_t *m = json_pack("{s:s}", "role", role), *v = NULL;
    int rc = m ? 0 : serve_api_fail(msg, cap, 500, "out of memory");
    json_t *calls = assistant ? field(e, "tool_calls") : NULL;
    json_t *c = field(e, "content");
    if (rc == 0 && !c && !(calls && json_array_size(calls)))
        rc = serve_api_fail(msg, cap, 400, "messages[%zu] needs 'content'%s", i,
                            assistant ? " (or 'tool_calls')" : "");
    if (rc == 0 && c && !(rc = content_json(c, i, &v, msg, cap)))
        json_object_set_new(m, "content", v);
    if (rc == 0 && !c)
        json_object_set_new(m, "content", json_null());
    if (rc == 0 && calls && !(rc = tool_calls_json(calls, i, &v, msg, cap)))
        json_object_set_new(m, "tool_calls", v);
    static const char *const strings[] = {"name", "tool_call_id", "reasoning_content"};
    for (size_t k = 0; rc == 0 && k < sizeof strings / sizeof strings[0]; k++) {
        json_t *s = field(e, strings[k]);
        if (s && !json_is_string(s))
            rc = serve_api_fail(msg, cap, 400, "messages[%zu].%s must be a string", i,
                                strings[k]);
        else if (s)
            json_object_set(m, strings[k], s);
    }
    if (rc) {
        json_decref(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* tools: [{"type": "function", "function": {"name", "description",
 * "parameters"}}], checked. */
static int check_tools(json_t *tools, char *msg, size_t cap)
{
    if (!json_is_array(tools) || json_array_size(tools) > MAX_TOOLS)
        return serve_api_fail(msg, cap, 400, "'tools' must be a list of at most %d tools",
                              MAX_TOOLS);
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i), *fn = json_object_get(t, "function");
        const char *type = json_string_value(json_object_get(t, "type"));
        json_t *name = json_object_get(fn, "name"), *params = field(fn, "parameters");
        json_t *desc = field(fn, "description");
        if (!json_is_object(t) || !type || strcmp(type, "function") || !json_is_object(fn) ||
            !json_is_string(name) || json_string_length(name) == 0 ||
            (params && !json_is_object(params)) || (desc && !json_is_string(desc)))
            return serve_api_fail(msg, cap, 400, "tools[%zu] must be {\"type\": \"function\", "
                                  "\"function\": {\"name\": a non-empty string, "
                                  "\"description\": a string, \"parameters\": a JSON schema "
                                  "object}}", i);
    }
    return 0;
}

static json_t *find_tool(json_t *tools, const char *name)
{
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function");
        if (!strcmp(json_string_value(json_object_get(fn, "name")), name))
            return fn;
    }
    return NULL;
}

/* tool_choice (absent: auto with tools, off without). */
static int parse_choice(json_t *o, json_t *tools, serve_tool_choice *out, const char **named,
                        char *msg, size_t cap)
{
    json_t *v = field(o, "tool_choice");
    *named = NULL;
    *out = tools && json_array_size(tools) ? SERVE_TOOLS_AUTO : SERVE_TOOLS_OFF;
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (s && !strcmp(s, "none")) {
        *out = SERVE_TOOLS_OFF;
        return 0;
    }
    if (!tools || !json_array_size(tools))
        return serve_api_fail(msg, cap, 400, "'tool_choice' other than \"none\" needs 'tools'");
    if (s && !strcmp(s, "auto"))
        *out = SERVE_TOOLS_AUTO;
    else if (s && !strcmp(s, "required"))
        *out = SERVE_TOOLS_REQUIRED;
    else if (json_is_object(v)) {
        json_t *fn = json_object_get(v, "function");
        const char *type = json_string_value(json_object_get(v, "type"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (!type || strcmp(type, "function") || !name)
            return serve_api_fail(msg, cap, 400, "'tool_choice' must be \"none\", \"auto\", "
                                  "\"required\" or {\"type\": \"function\", \"function\": "
                                  "{\"name\": ...}}");
        if (!find_tool(tools, name))
            return serve_api_fail(msg, cap, 400, "'tool_choice' names the function '%.100s', "
                                  "which is not in 'tools'", name);
        *out = SERVE_TOOLS_NAMED;
        *named = name;
    } else {
        return serve_api_fail(msg, cap, 400, "'tool_choice' must be \"none\", \"auto\", "
                              "\"required\" or {\"type\": \"function\", \"function\": "
                              "{\"name\": ...}}");
    }
    return 0;
}

/* The structured sampler's tool_calls constraint for REQUIRED / NAMED. */
static char *tool_constraint(json_t *tools, const char *named, plume_tool_format f, bool parallel)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < json_array_size(tools); i++) {
        json_t *fn = json_object_get(json_array_get(tools, i), "function");
        const char *name = json_string_value(json_object_get(fn, "name"));
        if (named && strcmp(name, named))
            continue;
        json_t *params = field(fn, "parameters");
        json_array_append_new(list, json_pack("{s:s, s:o}", "name", name, "parameters",
                                              params ? json_incref(params) : json_object()));
    }
    json_t *c = list ? json_pack("{s:s, s:b, s:o}", "format", plume_tool_format_name(f),
                                 "parallel", parallel && !named, "tools", list)
                     : NULL;
    char *s = c ? json_dumps(c, JSON_COMPACT) : NULL;
    json_decref(c);
    return s;
}

/* gpt-oss's template reads an assistant's reasoning from "thinking" and
 * refuses both it and content beside tool calls: reasoning_content becomes
 * thinking and, with calls, replaces the content (as llama.cpp's server
 * does). */
static void harmony_messages(json_t *arr)
{
    size_t i;
    json_t *m;
    json_array_foreach(arr, i, m) {
        json_t *r = json_object_get(m, "reasoning_content");
        if (!r)
            continue;
        json_object_set(m, "thinking", r);
        if (json_array_size(json_object_get(m, "tool_calls")))
            json_object_del(m, "content");
    }
}

/* True when text, less trailing white space, ends with "<think>". */
static bool ends_in_think(const char *text)
{
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\n' || text[n - 1] == '\r' ||
                 text[n - 1] == '\t'))
        n--;
    return n >= 7 && !memcmp(text + n - 7, "<think>", 7);
}

int serve_chat_parse(const serve_api_env *env, json_t *o, uint64_t seed, bool add_gen,
                     serve_chat *out, char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    json_t *msgs = field(o, "messages"), *tools = field(o, "tools");
    json_t *kw = field(o, "chat_template_kwargs");
    if (!msgs)
        return serve_api_fail(msg, cap, 400, "'messages' is required");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return serve_api_fail(msg, cap, 400, "'messages' must be a non-empty list of "
                              "{\"role\", \"content\"} objects");
    if (json_array_size(msgs) > MAX_MESSAGES)
        return serve_api_fail(msg, cap, 400, "'messages' has %zu messages; at most %d",
                              json_array_size(msgs), MAX_MESSAGES);
    if (kw && !json_is_object(kw))
        return serve_api_fail(msg, cap, 400, "'chat_template_kwargs' must be an object of "
                              "template variables, e.g. {\"enable_thinking\": false}");
    int rc = tools ? check_tools(tools, msg, cap) : 0;
    const char *named = NULL;
    bool parallel = true;
    json_t *pv = field(o, "parallel_tool_calls");
    if (rc == 0 && pv && !json_is_boolean(pv))
        rc = serve_api_fail(msg, cap, 400, "'parallel_tool_calls' must be true or false");
    if (pv)
        parallel = json_is_true(pv);
    if (rc == 0)
        rc = parse_choice(o, tools, &out->choice, &named, msg, cap);
    if (rc)
        return rc;

    const char *ttext = plume_chat_template_text(env->tok, env->chat_template);
    plume_tool_format f = PLUME_TOOLS_NONE;
    if (out->choice != SERVE_TOOLS_OFF) {
        f = plume_tool_format_of_template(ttext);
        if (f == PLUME_TOOLS_NONE)
            return serve_api_fail(msg, cap, 400, "the chat template has no tool-call format "
                                  "(plume reads Hermes/Qwen <tool_call>, Llama 3.1 JSON, "
                                  "Mistral [TOOL_CALLS] and gpt-oss harmony), so 'tools' cannot "
                                  "be used with this model; start plume serve with "
                                  "--chat-template FILE for a template that has one, or leave "
                                  "'tools' out");
        if (f == PLUME_TOOLS_HARMONY &&
            (out->choice == SERVE_TOOLS_REQUIRED || out->choice == SERVE_TOOLS_NAMED))
            return serve_api_fail(msg, cap, 400, "'tool_choice' \"%s\" constrains decoding to "
                                  "the template's call format, and plume's constraint does not "
                                  "write gpt-oss's harmony calls yet; use \"auto\" with this "
                                  "model", out->choice == SERVE_TOOLS_NAMED ? "function"
                                                                            : "required");
    }
    bool harmony = plume_template_is_harmony(ttext);
    json_t *arr = json_array();
    for (size_t i = 0; rc == 0 && arr && i < json_array_size(msgs); i++) {
        json_t *m;
        if (!(rc = message_json(json_array_get(msgs, i), i, &m, msg, cap)))
            json_array_append_new(arr, m);
    }
    if (rc == 0 && !arr)
        rc = serve_api_fail(msg, cap, 500, "out of memory");
    if (rc == 0 && harmony)
        harmony_messages(arr);
    char *mj = rc == 0 ? json_dumps(arr, JSON_COMPACT) : NULL;
    char *tj = rc == 0 && out->choice != SERVE_TOOLS_OFF ? json_dumps(tools, JSON_COMPACT) : NULL;
    char *kj = rc == 0 && kw ? json_dumps(kw, JSON_COMPACT) : NULL;
    json_decref(arr);
    if (rc == 0 && (!mj || (out->choice != SERVE_TOOLS_OFF && !tj) || (kw && !kj)))
        rc = serve_api_fail(msg, cap, 400, "the messages or tools are not valid UTF-8");
    plume_error err = {0};
    plume_chat_request creq = {.messages_json = mj, .tools_json = tj, .kwargs_json = kj,
                               .add_generation_prompt = add_gen, .tmpl = env->chat_template};
    if (rc == 0 && plume_chat_render(env->tok, &creq, &out->prompt, &err))
        rc = serve_api_fail(msg, cap, 400, "the chat template could not render the messages: %s",
                            err.msg);
    free(mj);
    free(tj);
    free(kj);
    if (rc == 0) {
        out->reply = (chat_reply_opts){.harmony = harmony,
                                       .reasoning = !harmony && strstr(ttext, "<think>"),
                                       .starts_inside = ends_in_think(out->prompt),
                                       .tools = f,
                                       .parallel = parallel,
                                       .seed = seed};
        out->render_special = harmony || f == PLUME_TOOLS_MISTRAL || f == PLUME_TOOLS_LLAMA3;
        if ((out->choice == SERVE_TOOLS_REQUIRED || out->choice == SERVE_TOOLS_NAMED) &&
            !(out->tool_constraint = tool_constraint(tools, named, f, parallel)))
            rc = serve_api_fail(msg, cap, 500, "out of memory");
    }
    if (rc)
        serve_chat_free(out);
    return rc;
}

void serve_chat_free(serve_chat *c)
{
    free(c->prompt);
    free(c->tool_constraint);
    memset(c, 0, sizeof *c);
}
