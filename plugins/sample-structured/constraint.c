/* sample-structured: compiling constraints and caching them (constraint.h). */
#include "constraint.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "gbnf.h"
#include "json_schema.h"
#include "regex.h"
#include "tool_calls.h"

const char *ss_kind_name(ss_kind k)
{
    static const char *const names[] = {"json_schema", "json_object", "regex", "choice", "grammar",
                                        "tool_calls"};
    return k < SS_KIND_COUNT ? names[k] : "?";
}

/* choice: a JSON list of strings -> their literal set */
static int32_t compile_choice(ss_grammar *g, const char *text, size_t len)
{
    json_error_t je;
    json_t *list = json_loadb(text, len, 0, &je);
    if (!json_is_array(list)) {
        json_decref(list);
        return plume_err(g->err, PLUME_ERR_INVALID,
                         "choice must be a JSON list of strings such as [\"yes\", \"no\"]");
    }
    size_t n = json_array_size(list);
    const char **s = calloc(n ? n : 1, sizeof *s);
    size_t *l = calloc(n ? n : 1, sizeof *l);
    int32_t r = -1;
    if (!s || !l) {
        plume_err(g->err, PLUME_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(list, i);
        if (!json_is_string(x)) {
            plume_err(g->err, PLUME_ERR_INVALID, "choice entry %zu is not a string", i);
            goto out;
        }
        s[i] = json_string_value(x);
        l[i] = json_string_length(x);
    }
    r = g_literals(g, s, l, n);
out:
    free(s);
    free(l);
    json_decref(list);
    return r;
}

int ss_compile(ss_kind kind, const char *text, size_t len, ss_compiled **out, plume_error *err)
{
    ss_compiled *c = calloc(1, sizeof *c);
    if (!c || !(c->text = malloc(len + 1))) {
        free(c);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory compiling the constraint");
    }
    memcpy(c->text, text, len);
    c->text[len] = 0;
    c->len = len;
    c->kind = kind;
    g_init(&c->g, &c->gerr);
    int32_t root = -1;
    switch (kind) {
    case SS_JSON_SCHEMA: root = ss_json_schema_compile(&c->g, text, len); break;
    case SS_JSON_OBJECT: root = ss_json_any_object(&c->g); break;
    case SS_REGEX: root = ss_regex_compile(&c->g, text, len, false); break;
    case SS_CHOICE: root = compile_choice(&c->g, text, len); break;
    case SS_GRAMMAR: root = ss_gbnf_compile(&c->g, text, len); break;
    case SS_TOOL_CALLS: root = ss_tool_calls_compile(&c->g, text, len); break;
    default: plume_err(&c->gerr, PLUME_ERR_INVALID, "unknown constraint kind");
    }
    if (root < 0 || g_finish(&c->g, root) || ss_pda_init(&c->pda, &c->g, &c->gerr)) {
        if (err) {
            err->code = c->gerr.code ? c->gerr.code : PLUME_ERR_INVALID;
            memcpy(err->msg, c->gerr.msg, sizeof err->msg);
            if (!err->msg[0])
                plume_err(err, PLUME_ERR_INVALID, "the %s constraint could not be compiled",
                          ss_kind_name(kind));
        }
        g_free(&c->g);
        free(c->text);
        free(c);
        return -1;
    }
    c->pda.g = &c->g;
    /* the start state must exist: a grammar whose start already fails is refused now */
    if (ss_pda_start(&c->pda) < 0) {
        if (err)
            *err = c->pda.err;
        ss_compiled_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void ss_compiled_free(ss_compiled *c)
{
    if (!c)
        return;
    ss_pda_free(&c->pda);
    g_free(&c->g);
    free(c->text);
    free(c);
}

int ss_cache_get(ss_cache *c, ss_kind kind, const char *text, size_t len, ss_compiled **out,
                 plume_error *err)
{
    c->clock++;
    for (int i = 0; i < c->n; i++) {
        ss_compiled *e = c->e[i];
        if (e->kind == kind && e->len == len && !memcmp(e->text, text, len)) {
            e->refs++;
            e->last_use = c->clock;
            c->hits++;
            *out = e;
            return 0;
        }
    }
    c->misses++;
    ss_compiled *e;
    if (ss_compile(kind, text, len, &e, err))
        return -1;
    e->refs = 1;
    e->last_use = c->clock;
    if (c->n == SS_CACHE_MAX) {
        int victim = -1;
        for (int i = 0; i < c->n; i++)
            if (c->e[i]->refs == 0 && (victim < 0 || c->e[i]->last_use < c->e[victim]->last_use))
                victim = i;
        if (victim < 0) {
            e->last_use = UINT64_MAX; /* uncached: freed when its last holder releases it */
            *out = e;
            return 0;
        }
        ss_compiled_free(c->e[victim]);
        c->e[victim] = c->e[--c->n];
    }
    c->e[c->n++] = e;
    *out = e;
    return 0;
}

void ss_cache_release(ss_cache *c, ss_compiled *e)
{
    if (!e)
        return;
    e->refs--;
    if (e->last_use == UINT64_MAX && e->refs == 0) {
        bool cached = false;
        for (int i = 0; i < c->n; i++)
            cached |= c->e[i] == e;
        if (!cached)
            ss_compiled_free(e);
    }
}

void ss_cache_free(ss_cache *c)
{
    for (int i = 0; i < c->n; i++)
        ss_compiled_free(c->e[i]);
    c->n = 0;
}
