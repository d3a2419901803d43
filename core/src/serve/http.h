/* plume serve's routes on the one HTTP daemon (http_daemon.h, which binds,
 * limits connections, checks the API key and answers routing errors):
 * generation (waiting on a request's channel, non-streamed JSON and
 * streamed SSE responses, noticing clients that go away), tokenize,
 * detokenize, models, health and metrics. */
#ifndef PLUME_SERVE_HTTP_H
#define PLUME_SERVE_HTTP_H

#include "serve/serve_api.h"

#include <stddef.h>

#include "serve/engine_loop.h"
#include "serve/metrics.h"
#include "serve/openai_api.h"

typedef struct serve_http_opts {
    const char *host;                /* an IPv4 or IPv6 address */
    int port;                        /* 0: the kernel picks a free one */
    const char *api_key;             /* NULL: no key needed */
    size_t max_body;                 /* bytes; larger bodies get 413 */
    const serve_api_env *env;
    serve_loop *loop;
    serve_metrics *metrics;
} serve_http_opts;

typedef struct serve_http serve_http;

/* Binds and starts serving; *port_out is the bound port.  On failure writes
 * why to msg and returns -1. */
PLUME_SERVE_API int serve_http_start(const serve_http_opts *o, serve_http **out, int *port_out, char *msg,
                     size_t cap);
/* Stops accepting new connections (open ones keep being served). */
PLUME_SERVE_API void serve_http_quiesce(serve_http *h);
/* Closes every connection and frees the server. */
PLUME_SERVE_API void serve_http_stop(serve_http *h);

#endif
