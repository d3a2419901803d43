/* The HTTP server of plume serve and plume router (http_daemon.h). */
#include "serve/http_daemon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/api_key.h"
#include "serve/http_body.h"
#include "serve/openai_api.h"

struct http_daemon {
    struct MHD_Daemon *mhd;
    http_daemon_opts o;
    char endpoints[512]; /* "POST /a, /b and GET /c, /d", for 404 messages */
};

/* What libmicrohttpd keeps per connection. */
typedef struct conn_ctx {
    serve_body b;
    http_exchange x;
} conn_ctx;

http_limits http_default_limits(void)
{
    return (http_limits){.max_connections = 1024, .max_connections_per_ip = 256,
                         .idle_timeout_s = 60};
}

int http_exchange_fd(http_exchange *x)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

enum MHD_Result http_send_text(http_exchange *x, unsigned status, const char *type,
                               const char *text, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    if (status == 405)
        MHD_add_response_header(resp, "Allow", "GET, POST");
    if (status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(x->conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result http_send_owned(http_exchange *x, unsigned status, const char *type, char *text)
{
    enum MHD_Result rc = http_send_text(x, status, type, text, strlen(text));
    free(text);
    return rc;
}

enum MHD_Result http_send_json(http_exchange *x, unsigned status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) {
        static const char oom[] =
            "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":500}}";
        return http_send_text(x, 500, "application/json", oom, sizeof oom - 1);
    }
    return http_send_owned(x, status, "application/json", s);
}

enum MHD_Result http_send_error(http_exchange *x, unsigned status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (x->d->o.on_error)
        x->d->o.on_error(x->d->o.user, (int)status);
    return http_send_json(x, status, serve_api_error((int)status, msg));
}

enum MHD_Result http_send_stream(http_exchange *x, const char *type, size_t block,
                                 ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max),
                                 void *cls, void (*free_cls)(void *cls))
{
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block, read, cls, free_cls);
    if (!resp) {
        free_cls(cls);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(x->conn, 200, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* 404, 405, 401, 413 in that order, then the route's handler. */
static enum MHD_Result dispatch(http_daemon *d, http_exchange *x, const serve_body *b)
{
    const http_route *r = NULL;
    for (int i = 0; i < d->o.n_routes && !r; i++) {
        const char *p = d->o.routes[i].path;
        const size_t n = strlen(p);
        if (n && p[n - 1] == '/' ? strncmp(x->url, p, n) == 0 && x->url[n] : strcmp(x->url, p) == 0)
            r = &d->o.routes[i];
    }
    if (!r)
        return http_send_error(x, 404, "there is no endpoint %.200s; %s has %s", x->url,
                               d->o.who, d->endpoints);
    bool get = strcmp(x->method, "GET") == 0 || strcmp(x->method, "HEAD") == 0;
    if (r->post ? strcmp(x->method, "POST") != 0 : !get)
        return http_send_error(x, 405, "%s takes %s, not %.20s", x->url, r->post ? "POST" : "GET",
                               x->method);
    if (!r->open && d->o.api_key &&
        !api_key_matches(MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, "Authorization"),
                         d->o.api_key))
        return http_send_error(x, 401, "missing or wrong API key: send the header "
                                       "'Authorization: Bearer KEY' with %s's --api-key",
                               d->o.who);
    if (b->too_big)
        return http_send_error(x, 413, "the body is larger than %zu bytes%s%s%s; send a smaller "
                                       "request",
                               d->o.max_body, d->o.max_body_option ? " (" : "",
                               d->o.max_body_option ? d->o.max_body_option : "",
                               d->o.max_body_option ? ")" : "");
    x->body = b->data ? b->data : "";
    x->body_len = b->len;
    return r->fn(d->o.user, x);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    http_daemon *d = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        if (!cc)
            return MHD_NO;
        *con_cls = cc;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return serve_body_append(&cc->b, upload_data, n, d->o.max_body) ? MHD_NO : MHD_YES;
    }
    cc->x = (http_exchange){.d = d, .conn = c, .url = url, .method = method};
    return dispatch(d, &cc->x, &cc->b);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c;
    conn_ctx *cc = *con_cls;
    if (!cc)
        return;
    if (cc->x.done)
        cc->x.done(cc->x.state, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    serve_body_free(&cc->b);
    free(cc);
    *con_cls = NULL;
}

/* "POST /a, /b and GET /c, /d" from the route table. */
static void list_endpoints(http_daemon *d)
{
    size_t n = 0, cap = sizeof d->endpoints;
    for (int pass = 0; pass < 2; pass++) {
        bool first = true;
        for (int i = 0; i < d->o.n_routes; i++) {
            if (d->o.routes[i].post != (pass == 0))
                continue;
            const char *lead = first ? (pass == 0 ? "POST " : n ? " and GET " : "GET ") : ", ";
            n += (size_t)snprintf(d->endpoints + n, n < cap ? cap - n : 0, "%s%s", lead,
                                  d->o.routes[i].path);
            first = false;
            if (n >= cap)
                return;
        }
    }
}

int http_daemon_start(const http_daemon_opts *o, http_daemon **out, int *port_out, char *msg,
                      size_t cap)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    const struct sockaddr *sa;
    /* poll(), not select(): a connection's descriptor may pass FD_SETSIZE */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, o->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)o->port);
        sa = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, o->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)o->port);
        sa = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(msg, cap, "--host %s is not an IPv4 or IPv6 address (use e.g. 127.0.0.1 or "
                 "0.0.0.0)", o->host);
        return -1;
    }
    http_daemon *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    d->o = *o;
    list_endpoints(d);
    d->mhd = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, d,
                              MHD_OPTION_SOCK_ADDR, sa,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, d,
                              MHD_OPTION_CONNECTION_LIMIT, o->limits.max_connections,
                              MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->limits.max_connections_per_ip,
                              MHD_OPTION_CONNECTION_TIMEOUT, o->limits.idle_timeout_s,
                              MHD_OPTION_END);
    if (!d->mhd) {
        snprintf(msg, cap, "cannot listen on %s port %d (%s); pick another --port or --host",
                 o->host, o->port, errno ? strerror(errno) : "libmicrohttpd failed to start");
        free(d);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : o->port;
    *out = d;
    return 0;
}

void http_daemon_quiesce(http_daemon *d)
{
    MHD_socket fd = MHD_quiesce_daemon(d->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void http_daemon_stop(http_daemon *d)
{
    if (!d)
        return;
    MHD_stop_daemon(d->mhd);
    free(d);
}
