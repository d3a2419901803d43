/* plume router: the OpenAI-compatible front of a prefill/decode split
 * (docs/disaggregation.md).  POST /v1/completions and /v1/chat/completions
 * go first to a prefill worker with max_tokens 1, not streamed, and
 * kv_transfer_params {do_remote_decode: true}; the kv_transfer_params it
 * answers with go with the original request to a decode worker, whose
 * response (streamed or not) is passed to the client.  Workers are taken
 * round robin; one that refuses the connection is skipped for the next.
 * A worker that fails or goes silent for timeout_s ends the request with a
 * clear error (502); nothing waits forever.  GET /v1/models comes from a
 * decode worker; GET /health and /metrics are the router's own.  It runs on
 * the same HTTP daemon as plume serve (http_daemon.h: the key checked before
 * routing, in constant time; errors in the server's shape), calls workers
 * with the one client (http_client.h), and builds the two hops' requests
 * with router_rewrite.h. */
#ifndef PLUME_SERVE_ROUTER_H
#define PLUME_SERVE_ROUTER_H

#include "serve/serve_api.h"

#include <stddef.h>

typedef struct router_opts {
    const char *host;
    int port;                        /* 0: the kernel picks */
    const char *const *prefill;      /* base URLs, e.g. http://127.0.0.1:8100 */
    int n_prefill;
    const char *const *decode;
    int n_decode;
    double timeout_s;                /* a worker's longest silence; a prefill's whole call */
    size_t max_body;
    const char *api_key;             /* NULL: none; else clients must send it (as to plume
                                        serve) and the router sends it to the workers */
} router_opts;

typedef struct router router;

/* Binds and serves; *port_out is the bound port.  -1 with msg on failure. */
PLUME_SERVE_API int router_start(const router_opts *o, router **out, int *port_out, char *msg, size_t cap);
PLUME_SERVE_API void router_stop(router *r);

#endif
