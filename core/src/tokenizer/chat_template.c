/* Chat templates: the model's Jinja template compiled by the engine in
 * src/template and rendered over OpenAI-style messages, as transformers'
 * apply_chat_template renders it.  Families are still recognised by
 * substrings (as llama.cpp's llm_chat_detect_template does), but only to
 * name them (plume info) and to pick a format for models without one. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/family_templates.h"
#include "template/jinja.h"
#include "tokenizer/tok_internal.h"

static bool has(const char *s, const char *needle)
{
    return strstr(s, needle) != NULL;
}

/* The family name for template text tmpl, or NULL when unrecognised. */
static const char *detect_family(const char *tmpl)
{
    if (has(tmpl, "<|im_start|>") && has(tmpl, "</think>") && has(tmpl, "last_query_index"))
        return "qwen3";
    if (has(tmpl, "<|im_start|>"))
        return "chatml";
    if (strncmp(tmpl, "mistral", 7) == 0 || has(tmpl, "[INST]")) {
        if (has(tmpl, "[SYSTEM_PROMPT]"))
            return "mistral-v7";
        if (has(tmpl, "' [INST] ' + system_message") || has(tmpl, "[AVAILABLE_TOOLS]")) {
            if (has(tmpl, " [INST]"))
                return "mistral-v1";
            if (has(tmpl, "\"[INST]\""))
                return "mistral-v3-tekken";
            return "mistral-v3";
        }
        if (has(tmpl, "content.strip()"))
            return "llama2-sys-strip";
        if (has(tmpl, "bos_token + '[INST]"))
            return "llama2-sys-bos";
        if (has(tmpl, "<<SYS>>"))
            return "llama2-sys";
        return "llama2";
    }
    if (has(tmpl, "<|assistant|>") && has(tmpl, "<|end|>"))
        return "phi3";
    if (has(tmpl, "<|user|>"))
        return "zephyr";
    if (has(tmpl, "<start_of_turn>"))
        return "gemma";
    if (has(tmpl, "<|start_header_id|>") && has(tmpl, "<|end_header_id|>"))
        return has(tmpl, "Cutting Knowledge Date") ? (has(tmpl, "strftime_now") ? "llama3.2"
                                                                                : "llama3.1")
                                                   : "llama3";
    return NULL;
}

void tok_chat_free(plume_tokenizer *t)
{
    jinja_free(t->chat_jinja);
    t->chat_jinja = NULL;
    free(t->chat_error);
    t->chat_error = NULL;
    for (size_t i = 0; i < t->n_chat_variants; i++) {
        free(t->chat_variant_names[i]);
        free(t->chat_variant_texts[i]);
    }
    free(t->chat_variant_names);
    free(t->chat_variant_texts);
    t->chat_variant_names = t->chat_variant_texts = NULL;
    t->n_chat_variants = 0;
    free(t->arch);
    t->arch = NULL;
}

int tok_chat_detect(plume_tokenizer *t)
{
    jinja_free(t->chat_jinja);
    t->chat_jinja = NULL;
    free(t->chat_error);
    t->chat_error = NULL;
    t->chat_family = NULL;
    plume_error err = {0};
    if (t->chat_template) {
        t->chat_source = "model";
        t->chat_family = detect_family(t->chat_template);
        if (!t->chat_family)
            t->chat_family = "unknown";
        if (jinja_compile(t->chat_template, strlen(t->chat_template), &t->chat_jinja, &err)) {
            if (err.code == PLUME_ERR_NOMEM)
                return -1;
            if (!(t->chat_error = tok_strndup(err.msg, strlen(err.msg))))
                return -1;
        }
        return 0;
    }
    const char *fam = jinja_family_of(t->arch, t->pre_name);
    t->chat_source = fam ? "family" : "chatml";
    if (fam && strcmp(fam, "chatml") != 0)
        fprintf(stderr, "plume: the model carries no chat template; using the %s turn format of "
                        "its family (%s)\n",
                fam, t->arch ? t->arch : t->pre_name);
    if (jinja_compile(jinja_family_template(fam), strlen(jinja_family_template(fam)),
                      &t->chat_jinja, &err))
        return -1; /* the built-in formats compile; only memory can fail */
    return 0;
}

const char *plume_chat_template_name(const plume_tokenizer *t)
{
    return t->chat_family;
}

const char *plume_chat_template_source(const plume_tokenizer *t)
{
    return t->chat_source ? t->chat_source : "chatml";
}

struct plume_chat_template {
    jinja_template *j;
    char *text; /* the Jinja source, for plume_chat_template_text */
};

const char *plume_chat_template_text(const plume_tokenizer *t, const plume_chat_template *tmpl)
{
    if (tmpl)
        return tmpl->text;
    if (t->chat_template)
        return t->chat_template;
    return jinja_family_template(jinja_family_of(t->arch, t->pre_name));
}

int plume_chat_template_compile(const char *text, size_t len, plume_chat_template **out,
                                plume_error *err)
{
    if (!text || !out)
        return plume_err(err, PLUME_ERR_INVALID, "plume_chat_template_compile: NULL argument");
    *out = NULL;
    plume_chat_template *ct = calloc(1, sizeof *ct);
    if (!ct)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    if (!(ct->text = tok_strndup(text, len))) {
        free(ct);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    if (jinja_compile(text, len, &ct->j, err)) {
        free(ct->text);
        free(ct);
        return -1;
    }
    *out = ct;
    return 0;
}

int tok_read_template_file(const char *path, bool missing_ok, char **out, size_t *len,
                           plume_error *err)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return missing_ok ? 1
                          : plume_err(err, PLUME_ERR_IO,
                                      "cannot open the chat template %s; check the path", path);
    const size_t max = (size_t)16 << 20;
    size_t cap = 65536, n = 0, r;
    char *buf = malloc(cap + 1);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n < cap)
            continue;
        if (cap >= max) {
            free(buf);
            fclose(f);
            return plume_err(err, PLUME_ERR_RANGE, "the chat template %s is larger than 16 MiB",
                             path);
        }
        char *nb = realloc(buf, (cap *= 2) + 1);
        if (!nb)
            free(buf);
        buf = nb;
    }
    fclose(f);
    if (!buf)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading %s", path);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 0;
}

int plume_chat_template_load(const char *path, plume_chat_template **out, plume_error *err)
{
    if (!path || !out)
        return plume_err(err, PLUME_ERR_INVALID, "plume_chat_template_load: NULL argument");
    *out = NULL;
    char *buf;
    size_t n;
    if (tok_read_template_file(path, false, &buf, &n, err))
        return -1;
    int rc = plume_chat_template_compile(buf, n, out, err);
    free(buf);
    if (rc)
        return plume_err_prefix(err, "%s", path);
    return 0;
}

void plume_chat_template_free(plume_chat_template *ct)
{
    if (!ct)
        return;
    jinja_free(ct->j);
    free(ct->text);
    free(ct);
}

/* The text of token id (special tokens rendered), or "" when there is none. */
static json_t *token_text(const plume_tokenizer *t, int32_t id)
{
    char buf[256];
    int n = id >= 0 ? plume_token_bytes(t, id, true, buf, sizeof buf) : -1;
    if (n < 0 || n > (int)sizeof buf)
        return json_string("");
    json_t *s = json_stringn(buf, (size_t)n);
    return s ? s : json_string("");
}

/* transformers' _alias_reasoning_fields: a message's reasoning under
 * reasoning_content, thinking or reasoning is given to the template as
 * both thinking and reasoning_content. */
static void alias_reasoning(json_t *messages)
{
    static const char *const FIELDS[] = {"reasoning_content", "thinking", "reasoning"};
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m)
    {
        if (!json_is_object(m))
            continue;
        json_t *r = NULL;
        for (size_t k = 0; k < 3 && !r; k++) {
            json_t *v = json_object_get(m, FIELDS[k]);
            if (v && !json_is_null(v))
                r = v;
        }
        if (!r)
            continue;
        json_incref(r);
        if (!json_object_get(m, "thinking")) {
            /* {"thinking": r, **message}: thinking comes first */
            json_t *copy = json_object();
            json_object_set(copy, "thinking", r);
            json_object_update(copy, m);
            json_object_clear(m);
            json_object_update(m, copy);
            json_decref(copy);
        }
        json_object_set(m, "reasoning_content", r);
        json_decref(r);
    }
}

static const jinja_template *pick_template(const plume_tokenizer *t, const plume_chat_request *req,
                                           jinja_template **owned, plume_error *err)
{
    *owned = NULL;
    if (req->tmpl)
        return req->tmpl->j;
    if (req->template_name && strcmp(req->template_name, "default") != 0) {
        for (size_t i = 0; i < t->n_chat_variants; i++)
            if (!strcmp(t->chat_variant_names[i], req->template_name)) {
                const char *txt = t->chat_variant_texts[i];
                if (jinja_compile(txt, strlen(txt), owned, err))
                    return NULL;
                return *owned;
            }
        char names[512] = "";
        for (size_t i = 0; i < t->n_chat_variants; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, t->chat_variant_names[i], sizeof names - strlen(names) - 1);
        }
        plume_err(err, PLUME_ERR_INVALID, "the model has no chat template named '%s' (it has: %s)",
                  req->template_name, t->n_chat_variants ? names : "only the default");
        return NULL;
    }
    if (t->chat_error) {
        plume_err(err, PLUME_ERR_UNSUPPORTED,
                  "the model's chat template cannot be used: %s; pass one that works with "
                  "--chat-template FILE",
                  t->chat_error);
        return NULL;
    }
    return t->chat_jinja;
}

static json_t *parse_json(const char *text, const char *what, plume_error *err)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j)
        plume_err(err, PLUME_ERR_INVALID, "%s is not valid JSON (line %d: %s)", what, je.line,
                  je.text);
    return j;
}

int plume_chat_render(const plume_tokenizer *t, const plume_chat_request *req, char **out,
                      plume_error *err)
{
    if (!t || !req || !out || !req->messages_json)
        return plume_err(err, PLUME_ERR_INVALID,
                         "plume_chat_render: tokenizer, request, messages and output must not "
                         "be NULL");
    *out = NULL;
    json_t *ctx = json_object(), *msgs = NULL, *tools = NULL, *kw = NULL;
    int rc = -1;
    if (!ctx) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!(msgs = parse_json(req->messages_json, "the messages", err)))
        goto done;
    if (!json_is_array(msgs)) {
        plume_err(err, PLUME_ERR_INVALID, "the messages must be a JSON array of objects");
        goto done;
    }
    if (req->tools_json) {
        if (!(tools = parse_json(req->tools_json, "the tools", err)))
            goto done;
        if (!json_is_array(tools) && !json_is_null(tools)) {
            plume_err(err, PLUME_ERR_INVALID, "the tools must be a JSON array");
            goto done;
        }
    }
    if (req->kwargs_json) {
        if (!(kw = parse_json(req->kwargs_json, "chat_template_kwargs", err)))
            goto done;
        if (!json_is_object(kw)) {
            plume_err(err, PLUME_ERR_INVALID, "chat_template_kwargs must be a JSON object");
            goto done;
        }
        json_object_update(ctx, kw);
    }
    alias_reasoning(msgs);
    json_object_set(ctx, "messages", msgs);
    json_object_set(ctx, "tools", tools ? tools : json_null());
    json_object_set_new(ctx, "documents", json_null());
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(req->add_generation_prompt));
    json_t *bos = token_text(t, t->bos);
    if (!json_object_get(ctx, "bos_token"))
        json_object_set(ctx, "bos_token", bos);
    if (!json_object_get(ctx, "eos_token"))
        json_object_set_new(ctx, "eos_token", token_text(t, t->eos));
    jinja_template *owned = NULL;
    const jinja_template *j = pick_template(t, req, &owned, err);
    if (j) {
        size_t len = 0;
        rc = jinja_render(j, ctx, NULL, out, &len, err);
        const char *b = json_string_value(bos);
        size_t bl = json_string_length(bos);
        if (rc == 0 && t->add_bos && bl && len >= bl && !memcmp(*out, b, bl))
            memmove(*out, *out + bl, len - bl + 1);
    }
    jinja_free(owned);
    json_decref(bos);
done:
    json_decref(ctx);
    json_decref(msgs);
    json_decref(tools);
    json_decref(kw);
    return rc;
}

int plume_chat_apply(const plume_tokenizer *t, const plume_chat_msg *msgs, size_t n,
                     bool add_generation_prompt, char **out, plume_error *err)
{
    if (!t || !out || (!msgs && n))
        return plume_err(err, PLUME_ERR_INVALID,
                         "plume_chat_apply: tokenizer, messages and output must not be NULL");
    *out = NULL;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            json_decref(arr);
            return plume_err(err, PLUME_ERR_INVALID, "chat message %zu has no role or no content",
                             i);
        }
        json_t *m = json_pack("{s:s, s:s}", "role", msgs[i].role, "content", msgs[i].content);
        if (!m) {
            json_decref(arr);
            return plume_err(err, PLUME_ERR_INVALID,
                             "chat message %zu is not valid UTF-8; send UTF-8 text", i);
        }
        json_array_append_new(arr, m);
    }
    char *text = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    if (!text)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    plume_chat_request req = {.messages_json = text, .add_generation_prompt = add_generation_prompt};
    int rc = plume_chat_render(t, &req, out, err);
    free(text);
    return rc;
}
