/* quantization_config / quantize_config.json -> settings for a linear
 * method (formats.md §1.6). */
#include "formats/hf_quant_config.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Synonyms of the fields methods read, mapped to one canonical name. */
static const char *const k_synonyms[][2] = {
    {"method", "quant_method"},     /* GPTQModel's canonical name */
    {"format", "checkpoint_format"},
    {"w_bit", "bits"},              /* AutoAWQ */
    {"q_group_size", "group_size"},
};

static const char *canonical(const char *key)
{
    for (size_t i = 0; i < sizeof k_synonyms / sizeof k_synonyms[0]; i++)
        if (strcmp(key, k_synonyms[i][0]) == 0)
            return k_synonyms[i][1];
    return key;
}

/* The JSON object holding the config and where it came from (where is
 * "DIR/config.json quantization_config" or the file); NULL when absent.
 * *root gets the parsed document to free. */
static int find_config(const char *dir, json_t **root, json_t **obj, char *where, size_t cap,
                       plume_error *err)
{
    static const char *const files[] = {"quantize_config.json", "quant_config.json"};
    char p[4096];
    json_error_t je;
    struct stat sb;
    *root = *obj = NULL;
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (stat(p, &sb) == 0) {
        json_t *r = json_load_file(p, 0, &je);
        if (!r)
            return plume_err(err, PLUME_ERR_FORMAT, "%s:%d: %s", p, je.line, je.text);
        json_t *qc = json_object_get(r, "quantization_config");
        if (qc && !json_is_null(qc)) {
            if (!json_is_object(qc)) {
                json_decref(r);
                return plume_err(err, PLUME_ERR_FORMAT,
                                 "%s: quantization_config must be an object", p);
            }
            *root = r;
            *obj = qc;
            snprintf(where, cap, "%s quantization_config", p);
            return 0;
        }
        json_decref(r);
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (stat(p, &sb) != 0)
            continue;
        json_t *r = json_load_file(p, 0, &je);
        if (!r)
            return plume_err(err, PLUME_ERR_FORMAT, "%s:%d: %s", p, je.line, je.text);
        if (!json_is_object(r)) {
            json_decref(r);
            return plume_err(err, PLUME_ERR_FORMAT, "%s must hold a JSON object", p);
        }
        *root = *obj = r;
        snprintf(where, cap, "%s", p);
        return 0;
    }
    return 0;
}

/* A scalar as the text plume_settings_set parses (numbers and booleans
 * unquoted, strings as they are).  False for objects, arrays and null. */
static bool scalar_text(json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v))
        snprintf(buf, cap, "%s", json_string_value(v));
    else if (json_is_true(v) || json_is_false(v))
        snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_integer(v))
        snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, cap, "%.17g", json_real_value(v));
    else
        return false;
    return true;
}

/* The string field key of qc, or else its synonym alt; NULL when neither is
 * a string. */
static const char *string_field(json_t *qc, const char *key, const char *alt)
{
    json_t *v = json_object_get(qc, key);
    if (!json_is_string(v))
        v = json_object_get(qc, alt);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Refuses what no method here implements, naming the field. */
static int check_fields(json_t *qc, const char *where, plume_error *err)
{
    json_t *dyn = json_object_get(qc, "dynamic");
    if (dyn && !json_is_null(dyn) && !(json_is_object(dyn) && json_object_size(dyn) == 0))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: dynamic (per-module quantization overrides) is not supported; "
                         "quantize every layer with one config",
                         where);
    if (json_is_true(json_object_get(qc, "is_marlin_format")))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: is_marlin_format true: marlin-repacked checkpoints are not supported "
                         "(use the plain gptq format)",
                         where);
    return 0;
}

int plume_hf_quant_config(const char *dir, plume_settings **out, char *method, size_t cap,
                          plume_error *err)
{
    *out = NULL;
    if (cap == 0)
        return plume_err(err, PLUME_ERR_INVALID, "plume_hf_quant_config: no room for the method");
    method[0] = 0;
    json_t *root, *qc;
    char where[4200];
    if (find_config(dir, &root, &qc, where, sizeof where, err))
        return -1;
    if (!qc)
        return 0;
    int rc = -1;
    plume_settings *s = NULL;
    char file[4200], *sp = strstr(where, " quantization_config");
    snprintf(file, sizeof file, "%.*s", sp ? (int)(sp - where) : (int)strlen(where), where);
    if (check_fields(qc, where, err) ||
        plume_settings_new_in(file, sp ? "quantization_config" : "", &s, err))
        goto done;
    const char *key;
    json_t *v;
    char text[512];
    json_object_foreach(qc, key, v) {
        const char *k = canonical(key);
        if (!scalar_text(v, text, sizeof text))
            continue;
        /* the canonical field wins over its synonym when both are written */
        if (k != key && json_object_get(qc, k))
            continue;
        if (plume_settings_set(s, k, text, err)) {
            plume_err_prefix(err, "%s", where);
            goto done;
        }
    }
    const char *m = string_field(qc, "quant_method", "method");
    if (!m && json_object_get(qc, "version") && json_object_get(qc, "w_bit"))
        m = "awq"; /* AutoAWQ's quant_config.json (formats.md §1.6) */
    if (!m || !*m) {
        plume_err(err, PLUME_ERR_FORMAT,
                  "%s: no quant_method; plume needs it to pick the linear method (e.g. \"gptq\")",
                  where);
        goto done;
    }
    size_t i = 0;
    for (; m[i] && i + 1 < cap; i++)
        method[i] = (char)tolower((unsigned char)m[i]);
    method[i] = 0;
    const char *fmt = string_field(qc, "checkpoint_format", "format");
    if (fmt && strcasecmp(fmt, "marlin") == 0) {
        plume_err(err, PLUME_ERR_UNSUPPORTED,
                  "%s: checkpoint_format \"marlin\" is not supported (use the plain gptq format)",
                  where);
        goto done;
    }
    *out = s;
    s = NULL;
    rc = 0;
done:
    plume_settings_free(s);
    json_decref(root);
    return rc;
}
