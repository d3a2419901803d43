/* A streaming HTTP client for plume bench serve on libcurl's multi
 * interface: many POSTs in flight from one thread, their responses parsed
 * as server-sent events as the bytes arrive, each event's data handed to a
 * callback with the time its last byte was received. */
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

/* A blocking GET: the body (NUL-terminated, at most 1 MiB; free it) of a
 * 200 answer, else NULL with the reason in err. */
PLUME_SERVE_API char *http_get(const char *url, const char *api_key, double timeout_s, char *err,
               size_t errsize);

#endif
