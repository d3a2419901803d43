/* plume router: the two requests a client's generation request becomes
 * (docs/disaggregation.md), as pure functions on JSON. */
#ifndef PLUME_SERVE_ROUTER_REWRITE_H
#define PLUME_SERVE_ROUTER_REWRITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The client's body as a JSON object (a new reference) and whether it asks
 * for a stream; NULL when it is not a JSON object, with why in msg (one
 * line). */
json_t *router_parse_request(const char *body, size_t len, bool *stream, char *msg, size_t cap);

/* Hop 1, for the prefill worker: a copy of req that computes the prompt and
 * one token, not streamed, and keeps its KV for a decode worker:
 * max_tokens 1, no max_completion_tokens, stream false, no stream_options,
 * kv_transfer_params {"do_remote_decode": true}.  Every other field (the
 * prompt or messages, sampling parameters) is kept, so the prefill worker
 * tokenizes exactly what the decode worker will.  req is not changed.
 * NULL when out of memory. */
json_t *router_prefill_request(const json_t *req);

/* Hop 2, for the decode worker: a copy of req (the client's, unchanged)
 * with the kv_transfer_params of the prefill worker's answer (a parsed
 * response body).  NULL when that answer has no kv_transfer_params object
 * (the worker runs without a prefill kv_connector) or out of memory. */
json_t *router_decode_request(const json_t *req, const json_t *prefill_answer);

/* The end of a stream whose decode worker failed after the status line went
 * out: an SSE event with the OpenAI error body (status 502, naming the
 * worker's url and the failure) then "data: [DONE]", into buf (cut to cap,
 * NUL-terminated).  Returns its length. */
size_t router_stream_error_tail(const char *worker_url, const char *failure, char *buf,
                                size_t cap);

#endif
