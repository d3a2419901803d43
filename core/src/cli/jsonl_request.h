/* One line of `plume generate --prompts-file`: a JSON object with a string
 * "prompt" and optional per-request settings, parsed and range-checked
 * without a model or an engine (so that a fuzz harness can call it). */
#ifndef PLUME_CLI_JSONL_REQUEST_H
#define PLUME_CLI_JSONL_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "plume/engine.h"
#include "plume/error.h"
#include "plume/settings.h"

#define CLI_JSONL_MAX_STOP 16

/* What a line leaves out comes from here (the command line). */
typedef struct cli_jsonl_defaults {
    plume_request_params rp;    /* sampling, max_tokens, ignore_eos; stop ignored */
    const char *const *stop;    /* the command line's --stop strings */
    size_t n_stop;
    bool chat;
    const char *system;
} cli_jsonl_defaults;

/* A parsed line.  The strings point into `obj`, which the request owns. */
typedef struct cli_jsonl_request {
    json_t *obj;
    const char *prompt;
    const char *system; /* the line's "system", else the default (may be NULL) */
    bool chat;
    plume_request_params rp; /* rp.stop points at stops[] */
    const char *stops[CLI_JSONL_MAX_STOP];
    /* the line's structured-output constraint ("response_format",
     * "json_schema", "regex", "choice", "grammar", vLLM's "guided_*"): the
     * settings of the structured sampler (plume/structured_request.h), or
     * NULL; owned by the request */
    plume_settings *constraint;
} cli_jsonl_request;

/* Parses line[0..len) (line number lineno of file path).  Returns 1 for a
 * blank line (nothing filled), 0 with *out filled (release it with
 * cli_jsonl_request_free), or -1 with err set to one line
 * "<path>:<line>[:<column>]: ..." naming the offending field.  Numbers are
 * range-checked before any cast; rp.sampling.seed defaults to the default
 * seed + lineno. */
int cli_jsonl_parse(const char *line, size_t len, const char *path, int lineno,
                    const cli_jsonl_defaults *d, cli_jsonl_request *out, plume_error *err);

/* Releases what cli_jsonl_parse filled; a zeroed request is a no-op. */
void cli_jsonl_request_free(cli_jsonl_request *r);

#endif
