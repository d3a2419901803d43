/* A request's structured-output constraint, read from the JSON shapes
 * clients send, as the settings of the "structured" sampler provider
 * (plugins/sample-structured).  For `plume generate`'s JSONL lines now and
 * for the server's /v1/chat/completions and /v1/completions bodies (the
 * same function, called on the request object).
 *
 * Recognised keys (at most one of them per request):
 *   response_format   OpenAI: {"type": "text"} (no constraint),
 *                     {"type": "json_object"},
 *                     {"type": "json_schema", "json_schema": {"name": ...,
 *                      "schema": {...}, "strict": true}}
 *   guided_json       vLLM: a schema object or its text
 *   guided_regex      vLLM: a pattern
 *   guided_choice     vLLM: a list of strings
 *   guided_grammar    vLLM: a GBNF grammar
 *   json_schema, regex, choice, grammar   plume's own names for the same */
#ifndef PLUME_STRUCTURED_REQUEST_H
#define PLUME_STRUCTURED_REQUEST_H

#include <jansson.h>

#include "plume/api.h"
#include "plume/error.h"
#include "plume/settings.h"

/* The provider these settings are for. */
#define PLUME_STRUCTURED_SAMPLER "structured"
/* The plugin that registers it. */
#define PLUME_STRUCTURED_PLUGIN "sample-structured"

/* Reads the constraint of request object req.  Returns 0 with *out = NULL
 * when it asks for none, 0 with *out = new settings (free them with
 * plume_settings_free) holding exactly one of json_schema, json_object,
 * regex, choice or grammar, or -1 with err naming the key and what it
 * should have been (a shape error, two constraints at once).  The schema or
 * pattern itself is checked by the provider when the request is added. */
PLUME_API int plume_structured_from_json(const json_t *req, plume_settings **out, plume_error *err);

#endif
