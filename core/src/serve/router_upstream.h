/* plume router: one HTTP POST to a worker on its own thread (libcurl), its
 * response readable while it arrives (status and content type first, then
 * the body bytes), cancellable, every wait bounded. */
#ifndef PLUME_SERVE_ROUTER_UPSTREAM_H
#define PLUME_SERVE_ROUTER_UPSTREAM_H

#include "serve/serve_api.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct up_call up_call;

typedef struct up_opts {
    double connect_timeout_s;  /* to open the connection */
    double idle_timeout_s;     /* the longest silence from the worker */
    double total_timeout_s;    /* the whole call (0: unbounded, for long streams) */
    const char *api_key;       /* sent as "Authorization: Bearer KEY" (NULL: none) */
} up_opts;

/* Starts POSTing body (JSON) to url.  NULL when out of memory or threads. */
PLUME_SERVE_API up_call *up_start(const char *url, const char *body, const up_opts *o);

/* Waits until the response's status is known or the call ended.  Returns
 * the HTTP status, or 0 when the call failed first (up_error says why). */
PLUME_SERVE_API long up_wait_headers(up_call *c);
/* The response's Content-Type ("" when none), once headers came. */
const char *up_content_type(up_call *c);
/* Waits for the whole response; returns its body (NUL-terminated, owned
 * by c) and length, or NULL when the call failed (up_error). */
PLUME_SERVE_API const char *up_wait_body(up_call *c, size_t *len);
/* Copies up to max new body bytes, waiting for some; 0 at the end (then
 * up_error says whether it ended badly). */
size_t up_read(up_call *c, char *dst, size_t max);
/* NULL while fine; else why the call failed (a curl error, a timeout). */
PLUME_SERVE_API const char *up_error(up_call *c);
/* True when the failure was that nothing listened at the address (the
 * worker never saw the request: safe to try another). */
bool up_refused(up_call *c);
/* Stops the call if it still runs, joins its thread and frees it. */
PLUME_SERVE_API void up_free(up_call *c);

#endif
