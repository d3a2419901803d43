/* Reading a request's structured-output constraint (structured_request.h). */
#include "plume/structured_request.h"

#include <stdlib.h>
#include <string.h>

/* key and its text form, to become one setting */
typedef struct found {
    const char *from;   /* the request key it came from */
    const char *key;    /* the setting */
    char *text;         /* malloc'd */
} found;

static int dump(const json_t *v, char **out, plume_error *err, const char *key)
{
    *out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!*out)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading \"%s\"", key);
    return 0;
}

static int copy_str(const json_t *v, char **out, plume_error *err, const char *key)
{
    *out = strdup(json_string_value(v));
    if (!*out)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading \"%s\"", key);
    return 0;
}

/* A schema given as an object, or as the text of one. */
static int schema_text(const json_t *v, const char *key, char **out, plume_error *err)
{
    if (json_is_object(v) || json_is_boolean(v))
        return dump(v, out, err, key);
    if (json_is_string(v))
        return copy_str(v, out, err, key);
    return plume_err(err, PLUME_ERR_INVALID,
                     "\"%s\" must be a JSON schema (an object, or its text as a string)", key);
}

static int response_format(const json_t *rf, found *f, plume_error *err)
{
    if (!json_is_object(rf))
        return plume_err(err, PLUME_ERR_INVALID,
                         "\"response_format\" must be an object such as {\"type\": "
                         "\"json_object\"}");
    const json_t *type = json_object_get(rf, "type");
    const char *t = json_string_value(type);
    if (!t)
        return plume_err(err, PLUME_ERR_INVALID,
                         "\"response_format\" needs a \"type\": \"text\", \"json_object\" or "
                         "\"json_schema\"");
    if (!strcmp(t, "text"))
        return 0;
    if (!strcmp(t, "json_object")) {
        f->key = "json_object";
        f->text = strdup("true");
        return f->text ? 0 : plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    if (!strcmp(t, "json_schema")) {
        const json_t *js = json_object_get(rf, "json_schema");
        const json_t *schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
        if (!schema)
            return plume_err(err, PLUME_ERR_INVALID,
                             "\"response_format\" of type json_schema needs \"json_schema\": "
                             "{\"name\": ..., \"schema\": {...}}");
        const json_t *strict = json_object_get(js, "strict");
        if (strict && !json_is_boolean(strict) && !json_is_null(strict))
            return plume_err(err, PLUME_ERR_INVALID,
                             "\"response_format.json_schema.strict\" must be true or false");
        f->key = "json_schema";
        return schema_text(schema, "response_format.json_schema.schema", &f->text, err);
    }
    return plume_err(err, PLUME_ERR_INVALID,
                     "\"response_format\" type \"%s\" is unknown; use \"text\", \"json_object\" "
                     "or \"json_schema\"",
                     t);
}

int plume_structured_from_json(const json_t *req, plume_settings **out, plume_error *err)
{
    static const struct {
        const char *from, *key;
        int shape; /* 0 schema, 1 string, 2 list of strings */
    } keys[] = {
        {"guided_json", "json_schema", 0}, {"json_schema", "json_schema", 0},
        {"guided_regex", "regex", 1},      {"regex", "regex", 1},
        {"guided_choice", "choice", 2},    {"choice", "choice", 2},
        {"guided_grammar", "grammar", 1},  {"grammar", "grammar", 1},
    };
    *out = NULL;
    if (!json_is_object(req))
        return 0;
    found f = {NULL, NULL, NULL};
    int rc = 0;
    const json_t *rf = json_object_get(req, "response_format");
    if (rf && !json_is_null(rf)) {
        f.from = "response_format";
        if (response_format(rf, &f, err))
            goto fail;
        if (!f.key)
            f.from = NULL; /* type text */
    }
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const json_t *v = json_object_get(req, keys[i].from);
        if (!v || json_is_null(v))
            continue;
        if (f.from) {
            plume_err(err, PLUME_ERR_INVALID,
                      "\"%s\" and \"%s\" both constrain the output; give one of them", f.from,
                      keys[i].from);
            goto fail;
        }
        f.from = keys[i].from;
        f.key = keys[i].key;
        if (keys[i].shape == 0) {
            if (schema_text(v, keys[i].from, &f.text, err))
                goto fail;
        } else if (keys[i].shape == 1) {
            if (!json_is_string(v)) {
                plume_err(err, PLUME_ERR_INVALID, "\"%s\" must be a string", keys[i].from);
                goto fail;
            }
            if (copy_str(v, &f.text, err, keys[i].from))
                goto fail;
        } else {
            bool ok = json_is_array(v) && json_array_size(v) > 0;
            for (size_t k = 0; ok && k < json_array_size(v); k++)
                ok = json_is_string(json_array_get(v, k));
            if (!ok) {
                plume_err(err, PLUME_ERR_INVALID,
                          "\"%s\" must be a non-empty list of strings such as [\"yes\", \"no\"]",
                          keys[i].from);
                goto fail;
            }
            if (dump(v, &f.text, err, keys[i].from))
                goto fail;
        }
    }
    if (!f.key)
        return 0;
    plume_settings *s;
    if (plume_settings_new("sampling", &s, err))
        goto fail;
    if (plume_settings_set(s, f.key, f.text, err)) {
        plume_settings_free(s);
        goto fail;
    }
    free(f.text);
    *out = s;
    return rc;
fail:
    free(f.text);
    return -1;
}
