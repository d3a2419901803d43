/* The one HTTP client of plume (libcurl), for plume router and plume bench
 * serve.  Every request is set up the same way (http_client.c): JSON body,
 * "Authorization: Bearer KEY" when a key is given, no proxy from the
 * environment (a proxy in the path would be measured and trusted), no
 * signals, bounded connect and total time.  Two ways to run requests:
 *  - http_call: one request on its own thread, its response readable while
 *    it arrives (status and content type, then body bytes), cancellable,
 *    every wait bounded (the router's calls to its workers; http_get);
 *  - http_multi: many streamed POSTs in flight from one thread, their
 *    responses parsed as server-sent events as the bytes arrive, each
 *    event's data handed to a callback with the time its last byte was
 *    received (plume bench serve; http_client_sse.c). */
#ifndef PLUME_SERVE_HTTP_CLIENT_H
#define PLUME_SERVE_HTTP_CLIENT_H

#include "serve/serve_api.h"

#include <stdbool.h>
#include <stddef.h>

/* One SSE event's data (its "data:" lines, one leading space dropped from
 * each, joined with '\n'; NUL-terminated, len bytes), received at time t
 * (plume_clock_seconds()).  Returns 0 to go on; anything else aborts the transfer, which
 * then fails with the message the callback wrote into err. */
typedef int (*http_sse_fn)(void *user, const char *data, size_t len, double t, char *err,
                           size_t errsize);

typedef struct http_multi http_multi;
typedef struct http_transfer http_transfer;

/* curl_global_init / cleanup: once per process, around everything else.
 * http_init returns false with a message in err on failure. */
PLUME_SERVE_API bool http_init(char *err, size_t errsize);
PLUME_SERVE_API void http_cleanup(void);

/* ---- one request on its own thread ---- */

typedef struct http_call http_call;

typedef struct http_call_opts {
    double connect_timeout_s;  /* to open the connection */
    double idle_timeout_s;     /* the longest silence from the server */
    double total_timeout_s;    /* the whole call (0: unbounded, for long streams) */
    const char *api_key;       /* sent as "Authorization: Bearer KEY" (NULL: none) */
    const char *timeout_name;  /* what set the timeouts, for messages ("the router's
                                  --timeout"); NULL: "the timeout" */
    size_t max_body;           /* a longer response fails the call (0: no limit) */
} http_call_opts;

/* Starts POSTing body (JSON; NULL: a GET) to url.  The strings are copied.
 * NULL when out of memory or threads. */
PLUME_SERVE_API http_call *http_call_start(const char *url, const char *body,
                                           const http_call_opts *o);
/* Waits until the response's status is known or the call ended.  Returns
 * the HTTP status, or 0 when the call failed first (http_call_error says why). */
PLUME_SERVE_API long http_call_wait_headers(http_call *c);
/* The response's Content-Type ("" when none), once headers came. */
const char *http_call_content_type(http_call *c);
/* Waits for the whole response; returns its body (NUL-terminated, owned
 * by c) and length, or NULL when the call failed (http_call_error). */
PLUME_SERVE_API const char *http_call_wait_body(http_call *c, size_t *len);
/* Copies up to max new body bytes, waiting for some; 0 at the end (then
 * http_call_error says whether it ended badly). */
size_t http_call_read(http_call *c, char *dst, size_t max);
/* NULL while fine; else why the call failed (a curl error, a timeout). */
PLUME_SERVE_API const char *http_call_error(http_call *c);
/* True when the failure was that nothing listened at the address (the
 * server never saw the request: safe to try another). */
bool http_call_refused(http_call *c);
/* Stops the call if it still runs, joins its thread and frees it (NULL: nothing). */
PLUME_SERVE_API void http_call_free(http_call *c);

/* A blocking GET: the body (NUL-terminated, at most 1 MiB; free it) of a
 * 200 answer, else NULL with the reason in err. */
PLUME_SERVE_API char *http_get(const char *url, const char *api_key, double timeout_s, char *err,
                               size_t errsize);

/* ---- many streamed POSTs from one thread (server-sent events) ---- */

PLUME_SERVE_API http_multi *http_multi_new(void);
PLUME_SERVE_API void http_multi_free(http_multi *m); /* transfers still in it are freed too */

/* Starts POSTing body (JSON) to url, with "Authorization: Bearer api_key"
 * when api_key is set, and a limit of timeout_s seconds on the whole
 * transfer (0: none).  The body is copied.  Returns NULL when out of
 * memory or when curl refuses the options (err says which). */
PLUME_SERVE_API http_transfer *http_post_sse(http_multi *m, const char *url, const char *api_key,
                             const char *body, double timeout_s, http_sse_fn fn, void *user,
                             char *err, size_t errsize);

/* Moves every transfer forward, waiting at most timeout_ms for network
 * activity first. */
PLUME_SERVE_API void http_multi_wait(http_multi *m, int timeout_ms);

/* A transfer that has finished (removed from m; the caller frees it), or
 * NULL when none has. */
PLUME_SERVE_API http_transfer *http_multi_next_done(http_multi *m);

/* After it finished: NULL when the server answered 200 and the stream ended
 * normally, else why not (the transport's error, "HTTP 500: <body>", an
 * aborting callback's message, an SSE error event). */
PLUME_SERVE_API const char *http_transfer_error(const http_transfer *t);
/* The first bytes of the response body (for messages). */
PLUME_SERVE_API const char *http_transfer_snippet(const http_transfer *t);
PLUME_SERVE_API void *http_transfer_user(const http_transfer *t);
PLUME_SERVE_API void http_transfer_free(http_transfer *t);

#endif
