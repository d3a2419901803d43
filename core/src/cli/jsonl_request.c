/* Parsing one JSONL request line of `plume generate --prompts-file`. */
#include "cli/jsonl_request.h"

#include <string.h>

#include "plume/structured_request.h"

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
    /* max_tokens and seed, then the sampling parameters of the one table
     * (plume/sampler.h); JSONL names repetition_penalty repeat_penalty, as
     * plume generate's --repeat-penalty does */
    double mt = rp.max_tokens, seed = (double)rp.sampling.seed;
    if (!field_num(obj, "max_tokens", &mt))
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"max_tokens\" must be a number", path,
                         line);
    if (!field_num(obj, "seed", &seed))
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"seed\" must be a number", path, line);
    /* ranges first: a double outside an integer type's range is undefined to cast */
    if (!(mt >= 1 && mt <= 1 << 24))
        return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"max_tokens\" must be in [1, %d], got %g",
                         path, line, 1 << 24, mt);
    if (!(seed >= 0 && seed <= 9.007199254740992e15))
        return plume_err(err, PLUME_ERR_INVALID,
                         "%s:%d: \"seed\" must be in [0, 9.0072e+15], got %g", path, line, seed);
    rp.max_tokens = (int32_t)mt;
    rp.sampling.seed = (uint64_t)seed;
    size_t n_params;
    const plume_sampling_param *table = plume_sampling_param_list(&n_params);
    for (size_t i = 0; i < n_params; i++) {
        const plume_sampling_param *f = &table[i];
        const char *key = strcmp(f->name, "repetition_penalty") == 0 ? "repeat_penalty" : f->name;
        double v = plume_sampling_param_load(&rp.sampling, f);
        if (!field_num(obj, key, &v))
            return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"%s\" must be a number", path,
                             line, key);
        if (!plume_sampling_param_ok(f, v)) {
            char range[64];
            plume_sampling_param_range(f, range, sizeof range);
            return plume_err(err, PLUME_ERR_INVALID, "%s:%d: \"%s\" must be in %s (%s), got %g",
                             path, line, key, range, f->neutral, v);
        }
        plume_sampling_param_store(&rp.sampling, f, v);
    }
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
