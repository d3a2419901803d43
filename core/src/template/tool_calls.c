/* Streaming tool-call parsers (plume/chat_parse.h): text outside the calls
 * passes through as content as soon as it cannot be the start of a marker;
 * a call is emitted whole once its markup and JSON are complete. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plume/chat_parse.h"
#include "template/reply_scan.h"

struct plume_tool_parser {
    plume_tool_format f;
    uint64_t seed, n_ids;
    reply_buf b; /* undecided text */
    bool started;    /* content or a call has been emitted (Llama's whole-reply JSON is only at the start) */
    bool whole_json; /* Llama: the reply began with '{': held until final */
};

static const char *marker_of(plume_tool_format f)
{
    switch (f) {
    case PLUME_TOOLS_HERMES: return "<tool_call>";
    case PLUME_TOOLS_MISTRAL: return "[TOOL_CALLS]";
    case PLUME_TOOLS_LLAMA3: return "<|python_tag|>";
    default: return NULL;
    }
}

plume_tool_format plume_tool_format_of_template(const char *t)
{
    if (!t)
        return PLUME_TOOLS_NONE;
    if (plume_template_is_harmony(t))
        return PLUME_TOOLS_HARMONY;
    if (strstr(t, "<tool_call>"))
        return PLUME_TOOLS_HERMES;
    if (strstr(t, "[TOOL_CALLS]"))
        return PLUME_TOOLS_MISTRAL;
    if (strstr(t, "<|python_tag|>") ||
        (strstr(t, "<|start_header_id|>") && strstr(t, "parameters") && strstr(t, "tools")))
        return PLUME_TOOLS_LLAMA3;
    return PLUME_TOOLS_NONE;
}

const char *plume_tool_format_name(plume_tool_format f)
{
    switch (f) {
    case PLUME_TOOLS_HERMES: return "hermes";
    case PLUME_TOOLS_LLAMA3: return "llama3";
    case PLUME_TOOLS_MISTRAL: return "mistral";
    case PLUME_TOOLS_HARMONY: return "harmony";
    default: return "none";
    }
}

plume_tool_parser *plume_tool_parser_new(plume_tool_format f, uint64_t seed)
{
    if (f == PLUME_TOOLS_NONE || f == PLUME_TOOLS_HARMONY)
        return NULL;
    plume_tool_parser *p = calloc(1, sizeof *p);
    if (p) {
        p->f = f;
        p->seed = seed;
    }
    return p;
}

void plume_tool_parser_free(plume_tool_parser *p)
{
    if (!p)
        return;
    free(p->b.p);
    free(p);
}

void plume_tool_calls_free(plume_tool_call *calls, size_t n)
{
    for (size_t i = 0; calls && i < n; i++) {
        free(calls[i].id);
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

/* The end (one past) of the JSON value starting at s[0] ('{' or '['), or 0
 * when s[0..n) does not hold all of it. */
static size_t json_end(const char *s, size_t n)
{
    int depth = 0;
    bool str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                str = false;
        } else if (c == '"')
            str = true;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (--depth == 0)
                return i + 1;
            if (depth < 0)
                return 0;
        }
    }
    return 0;
}

typedef struct out {
    char *content;
    plume_tool_call *calls;
    size_t n_calls;
    bool oom;
} out;

static void put_content(out *o, const char *s, size_t n)
{
    if (!o->oom && reply_append(&o->content, s, n))
        o->oom = true;
}

/* Adds the call described by JSON object obj ({"name", "arguments" or
 * "parameters", "id"}); name overrides obj's name when given.  False when
 * obj is not a call. */
static bool add_call(plume_tool_parser *p, out *o, json_t *obj, const char *name)
{
    if (!json_is_object(obj))
        return false;
    if (!name) {
        json_t *fn = json_object_get(obj, "function"); /* {"type": "function", "function": {...}} */
        if (json_is_object(fn))
            obj = fn;
        name = json_string_value(json_object_get(obj, "name"));
    }
    json_t *args = json_object_get(obj, "arguments");
    if (!args)
        args = json_object_get(obj, "parameters");
    if (!name || !args || !(json_is_object(args) || json_is_string(args)))
        return false;
    char *a = json_is_string(args) ? reply_dup(json_string_value(args), json_string_length(args))
                                   : json_dumps(args, 0);
    const char *mid = json_string_value(json_object_get(obj, "id"));
    plume_tool_call c = {.id = mid ? reply_dup(mid, strlen(mid)) : reply_call_id(p->seed, &p->n_ids),
                         .name = reply_dup(name, strlen(name)),
                         .arguments = a};
    if (reply_push_call(&o->calls, &o->n_calls, c))
        o->oom = true;
    return true;
}

/* Parses s[0..n) as calls: one JSON object, or an array of them, or
 * objects separated by ';' (Llama).  Adds nothing and returns false when
 * any part is not a call. */
static bool parse_calls(plume_tool_parser *p, out *o, const char *s, size_t n)
{
    size_t before = o->n_calls;
    size_t i = 0;
    bool any = false;
    while (i < n) {
        while (i < n && (reply_is_ws(s[i]) || s[i] == ';'))
            i++;
        if (i >= n)
            break;
        size_t e = (s[i] == '{' || s[i] == '[') ? json_end(s + i, n - i) : 0;
        json_t *j = e ? json_loadb(s + i, e, 0, NULL) : NULL;
        bool ok = j != NULL;
        if (ok && json_is_array(j)) {
            size_t k;
            json_t *item;
            json_array_foreach(j, k, item) ok = ok && add_call(p, o, item, NULL);
            ok = ok && json_array_size(j) > 0;
        } else if (ok)
            ok = add_call(p, o, j, NULL);
        json_decref(j);
        if (!ok) {
            for (size_t k = before; k < o->n_calls; k++) {
                free(o->calls[k].id);
                free(o->calls[k].name);
                free(o->calls[k].arguments);
            }
            o->n_calls = before;
            return false;
        }
        any = true;
        i += e;
    }
    return any;
}

/* Consumes what it can of p->b; returns the bytes consumed. */
static size_t step(plume_tool_parser *p, out *o, bool final)
{
    const char *b = p->b.p;
    size_t n = p->b.n;
    if (p->f == PLUME_TOOLS_LLAMA3 && !p->started) {
        size_t j = 0;
        while (j < n && reply_is_ws(b[j]))
            j++;
        if (j < n && b[j] == '{')
            p->whole_json = true;
        else if (j == n && !final)
            return 0; /* only whitespace so far */
        p->started = true;
    }
    if (p->whole_json) {
        if (!final)
            return 0;
        if (!parse_calls(p, o, b, n))
            put_content(o, b, n);
        return n;
    }
    const char *marker = marker_of(p->f);
    const char *m = reply_find(b, n, marker);
    if (!m) {
        size_t part = final ? 0 : reply_partial_tag(b, n, marker);
        put_content(o, b, n - part);
        if (n - part)
            p->started = true;
        return n - part;
    }
    if (m > b) {
        put_content(o, b, (size_t)(m - b));
        p->started = true;
        return (size_t)(m - b);
    }
    /* b starts with the marker */
    size_t ml = strlen(marker);
    const char *body = b + ml;
    size_t left = n - ml;
    if (p->f == PLUME_TOOLS_HERMES) {
        const char *end = reply_find(body, left, "</tool_call>");
        if (!end) {
            if (final)
                put_content(o, b, n);
            return final ? n : 0;
        }
        size_t used = (size_t)(end - b) + strlen("</tool_call>");
        if (!parse_calls(p, o, body, (size_t)(end - body)))
            put_content(o, b, used);
        p->started = true;
        return used;
    }
    if (p->f == PLUME_TOOLS_LLAMA3) { /* <|python_tag|>: the rest of the reply */
        if (!final)
            return 0;
        if (!parse_calls(p, o, body, left))
            put_content(o, b, n);
        return n;
    }
    /* Mistral */
    size_t j = 0;
    while (j < left && reply_is_ws(body[j]))
        j++;
    if (j == left) {
        if (final)
            put_content(o, b, n);
        return final ? n : 0;
    }
    if (body[j] == '[' || body[j] == '{') {
        size_t e = json_end(body + j, left - j);
        if (!e) {
            if (final)
                put_content(o, b, n);
            return final ? n : 0;
        }
        size_t used = ml + j + e;
        if (!parse_calls(p, o, body + j, e))
            put_content(o, b, used);
        p->started = true;
        return used;
    }
    /* name[ARGS]{...} */
    const char *args = reply_find(body, left, "[ARGS]");
    if (!args) {
        if (final)
            put_content(o, b, n);
        return final ? n : 0;
    }
    const char *js = args + 6;
    size_t jl = n - (size_t)(js - b);
    size_t k = 0;
    while (k < jl && reply_is_ws(js[k]))
        k++;
    if (k < jl && js[k] != '{') { /* not a call: the marker is text, and the scan goes on */
        put_content(o, b, ml);
        p->started = true;
        return ml;
    }
    size_t e = k < jl ? json_end(js + k, jl - k) : 0;
    if (!e) {
        if (final)
            put_content(o, b, n);
        return final ? n : 0;
    }
    size_t used = (size_t)(js - b) + k + e;
    char *name = reply_dup(body + j, (size_t)(args - (body + j)));
    json_t *a = json_loadb(js + k, e, 0, NULL);
    json_t *obj = a ? json_pack("{s:o}", "arguments", a) : NULL;
    if (!name || !obj || !add_call(p, o, obj, name))
        put_content(o, b, used);
    json_decref(obj);
    free(name);
    p->started = true;
    return used;
}

int plume_tool_parser_feed(plume_tool_parser *p, const char *text, size_t len, bool final,
                           char **content, plume_tool_call **calls, size_t *n_calls,
                           plume_error *err)
{
    *content = NULL;
    *calls = NULL;
    *n_calls = 0;
    if (reply_buf_add(&p->b, text, len))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory parsing tool calls");
    out o = {0};
    for (;;) {
        size_t used = p->b.n ? step(p, &o, final) : 0;
        if (!used)
            break;
        reply_buf_drop(&p->b, used);
    }
    if (o.oom) {
        free(o.content);
        plume_tool_calls_free(o.calls, o.n_calls);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory parsing tool calls");
    }
    if (!o.n_calls) { /* a call parsed and then rolled back leaves an empty array */
        free(o.calls);
        o.calls = NULL;
    }
    *content = o.content;
    *calls = o.calls;
    *n_calls = o.n_calls;
    return 0;
}
