/* Parsing one JSONL request line of `plume generate --prompts-file`. */
#include "cli/jsonl_request.h"

#include <string.h>

#include "sample/structured_request.h"

/* Reads a number field of a JSONL request if present; false on a wrong type. */
static bool field_num(json_t *o, const char *k, double *v)
{
    json_t *x = json_object_get(o, k);
    if (!x)
        return true;
    if (!json_is_number(x))
        return false;
    *v = json_number_value(x);
    return true;
}

/* Name of a JSON value's type for error messages ("an array", ...). */
static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Fills r from the object r->obj; -1 with err naming the field. */
static int fill(cli_jsonl_request *r, const char *path, int line, const cli_jsonl_defaults *d,
                plume_error *err)
{
    json_t *obj = r->obj;
    json_t *jp = json_object_get(obj, "prompt");
    if (!json_is_string(jp))
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d: each line needs a string \"prompt\"",
                         path, line);
    r->prompt = json_string_value(jp);
    plume_request_params rp = d->rp;
    rp.sampling.seed = d->rp.sampling.seed + (uint64_t)line; /* distinct streams per line */
    double v[7] = {rp.max_tokens, rp.sampling.temperature, rp.sampling.top_k, rp.sampling.top_p,
                   rp.sampling.min_p, rp.sampling.repetition_penalty, (double)rp.sampling.seed};
    static const char *keys[7] = {"max_tokens", "temperature", "top_k", "top_p",
                                  "min_p", "repeat_penalty", "seed"};
    for (int i = 0; i < 7; i++)
        if (!field_num(obj, keys[i], &v[i]))
            return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"%s\" must be a number", path,
                             line, keys[i]);
    /* ranges first: a double outside an integer type's range is undefined to cast */
    static const double lo[7] = {1, 0, 0, 1e-6, 0, 1e-3, 0};
    static const double hi[7] = {1 << 24, 100, 1 << 30, 1, 0.999999, 100, 9.007199254740992e15};
    for (int i = 0; i < 7; i++)
        if (!(v[i] >= lo[i] && v[i] <= hi[i]))
            return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"%s\" must be in [%g, %g], got %g",
                             path, line, keys[i], lo[i], hi[i], v[i]);
    rp.max_tokens = (int32_t)v[0];
    rp.sampling.temperature = (float)v[1];
    rp.sampling.top_k = (int32_t)v[2];
    rp.sampling.top_p = (float)v[3];
    rp.sampling.min_p = (float)v[4];
    rp.sampling.repetition_penalty = (float)v[5];
    rp.sampling.seed = (uint64_t)v[6];
    size_t n_stop = 0;
    json_t *js = json_object_get(obj, "stop");
    if (js) {
        if (!json_is_array(js) || json_array_size(js) > CLI_JSONL_MAX_STOP)
            return plume_err(err, PLUME_ERR_INVALID,
                             "%s:%d: \"stop\" must be a list of at most %d strings", path, line,
                             CLI_JSONL_MAX_STOP);
        for (size_t i = 0; i < json_array_size(js); i++) {
            json_t *s = json_array_get(js, i);
            if (!json_is_string(s))
                return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"stop\" entries must be strings",
                                 path, line);
            r->stops[n_stop++] = json_string_value(s);
        }
    } else {
        for (size_t i = 0; i < d->n_stop && i < CLI_JSONL_MAX_STOP; i++)
            r->stops[n_stop++] = d->stop[i];
    }
    rp.stop = r->stops;
    rp.n_stop = n_stop;
    /* speculation per request: "speculative": false, "num_speculative_tokens": K */
    json_t *jspec = json_object_get(obj, "speculative");
    if (jspec && !json_is_null(jspec)) {
        if (!json_is_boolean(jspec))
            return plume_err(err, PLUME_ERR_INVALID,
                             "%s:%d: \"speculative\" must be true or false (false: no speculative "
                             "decoding for this request)",
                             path, line);
        rp.no_speculation = !json_is_true(jspec);
    }
    json_t *jk = json_object_get(obj, "num_speculative_tokens");
    if (jk && !json_is_null(jk)) {
        if (!json_is_integer(jk) || json_integer_value(jk) < -1 || json_integer_value(jk) > 64)
            return plume_err(err, PLUME_ERR_INVALID,
                             "%s:%d: \"num_speculative_tokens\" must be an integer: -1 (the "
                             "pipeline's k), 0 (no speculation) or 1..k (at most that many "
                             "drafted tokens a step)",
                             path, line);
        rp.num_speculative_tokens = (int32_t)json_integer_value(jk);
    }
    r->rp = rp;
    json_t *jc = json_object_get(obj, "chat"), *jsys = json_object_get(obj, "system");
    if (json_is_null(jc))
        jc = NULL; /* null: the command line's setting */
    if (json_is_null(jsys))
        jsys = NULL;
    if (jc && !json_is_boolean(jc))
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"chat\" must be true or false", path,
                         line);
    if (jsys && !json_is_string(jsys))
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"system\" must be a string", path,
                         line);
    r->chat = jc ? json_is_true(jc) : d->chat;
    r->system = jsys ? json_string_value(jsys) : d->system;
    if (plume_structured_from_json(obj, &r->constraint, err))
        return plume_err_prefix(err, "%s:%d", path, line);
    return 0;
}

int cli_jsonl_parse(const char *line, size_t len, const char *path, int lineno,
                    const cli_jsonl_defaults *d, cli_jsonl_request *out, plume_error *err)
{
    memset(out, 0, sizeof *out);
    size_t blank = 0;
    while (blank < len && strchr(" \t\r\n", line[blank]) && line[blank])
        blank++;
    if (blank == len)
        return 1;
    json_error_t je;
    json_t *obj = json_loadb(line, len, JSON_DECODE_ANY, &je);
    if (!obj)
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d:%d: not valid JSON: %s", path, lineno,
                         je.column, je.text);
    if (!json_is_object(obj)) {
        plume_err(err, PLUME_ERR_INVALID,
                  "%s:%d: each line must be a JSON object such as {\"prompt\": \"...\"}, "
                  "found %s",
                  path, lineno, json_type_name(obj));
        json_decref(obj);
        return -1;
    }
    out->obj = obj;
    if (fill(out, path, lineno, d, err) < 0) {
        cli_jsonl_request_free(out);
        return -1;
    }
    return 0;
}

void cli_jsonl_request_free(cli_jsonl_request *r)
{
    plume_settings_free(r->constraint);
    json_decref(r->obj);
    memset(r, 0, sizeof *r);
}
