/* plume router: HTTP front and the two-hop flow (router_http.h). */
#include "serve/router.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve/http_client.h"
#include "serve/router_upstream.h"
#include "serve/http_body.h"

struct router {
    struct MHD_Daemon *d;
    router_opts o;
    atomic_uint rr_prefill, rr_decode;
    atomic_llong n_ok, n_prefill_failed, n_decode_failed, n_bad;
};

typedef struct conn {
    serve_body b;
} conn;

/* A streamed decode response being passed through. */
typedef struct relay {
    up_call *up;
    char url[512];
    bool tail_sent;
    char tail[1024];
    size_t tail_len, tail_off;
} relay;

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
                                 const char *text, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", type);
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return MHD_NO;
    enum MHD_Result rc = send_text(c, status, "application/json", s, strlen(s));
    free(s);
    return rc;
}

static json_t *error_json(int status, const char *msg)
{
    return json_pack("{s:{s:s,s:s,s:i}}", "error", "message", msg, "type",
                     status >= 500 ? "server_error" : "invalid_request_error", "code", status);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(c, status, error_json((int)status, msg));
}

/* POSTs body to workers[(start + k) % n] + path, trying the next worker
 * while one refuses the connection.  *which: the worker used. */
static up_call *call_any(const char *const *workers, int n, unsigned start, const char *path,
                         const char *body, const up_opts *uo, bool wait_headers, int *which)
{
    up_call *up = NULL;
    for (int k = 0; k < n; k++) {
        int i = (int)((start + (unsigned)k) % (unsigned)n);
        char url[512];
        snprintf(url, sizeof url, "%s%s", workers[i], path);
        up_free(up);
        up = up_start(url, body, uo);
        *which = i;
        if (!up)
            return NULL;
        if (wait_headers)
            up_wait_headers(up);
        else {
            size_t len;
            up_wait_body(up, &len);
        }
        if (!up_refused(up))
            break;
    }
    return up;
}

static ssize_t relay_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    relay *r = cls;
    if (!r->tail_sent) {
        size_t n = up_read(r->up, buf, max);
        if (n > 0)
            return (ssize_t)n;
        r->tail_sent = true;
        const char *e = up_error(r->up);
        if (!e)
            return MHD_CONTENT_READER_END_OF_STREAM;
        /* the decode worker died or went silent mid-stream: say so in the
         * stream (the status line went out long ago) */
        char msg[700];
        snprintf(msg, sizeof msg,
                 "the decode worker at %s failed while streaming: %s; the response is "
                 "incomplete",
                 r->url, e);
        json_t *j = error_json(502, msg);
        char *s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        r->tail_len = (size_t)snprintf(r->tail, sizeof r->tail, "data: %s\n\ndata: [DONE]\n\n",
                                       s ? s : "{}");
        if (r->tail_len >= sizeof r->tail)
            r->tail_len = sizeof r->tail - 1;
        free(s);
    }
    if (r->tail_off < r->tail_len) {
        size_t n = r->tail_len - r->tail_off < max ? r->tail_len - r->tail_off : max;
        memcpy(buf, r->tail + r->tail_off, n);
        r->tail_off += n;
        return (ssize_t)n;
    }
    return MHD_CONTENT_READER_END_OF_STREAM;
}

static void relay_free(void *cls)
{
    relay *r = cls;
    up_free(r->up); /* a client that left cancels the decode call: the worker aborts it */
    free(r);
}

static enum MHD_Result generate(router *rt, struct MHD_Connection *c, conn *cc, const char *path)
{
    json_error_t je;
    json_t *req = json_loadb(cc->b.data ? cc->b.data : "", cc->b.len, 0, &je);
    if (!json_is_object(req)) {
        json_decref(req);
        atomic_fetch_add(&rt->n_bad, 1);
        return send_error(c, 400, "the body must be a JSON object (%s)", je.text);
    }
    bool stream = json_is_true(json_object_get(req, "stream"));
    /* hop 1: the prefill worker computes the prompt and keeps its KV */
    json_t *pre = json_deep_copy(req);
    json_object_set_new(pre, "max_tokens", json_integer(1));
    json_object_del(pre, "max_completion_tokens");
    json_object_set_new(pre, "stream", json_false());
    json_object_del(pre, "stream_options");
    json_object_set_new(pre, "kv_transfer_params", json_pack("{s:b}", "do_remote_decode", 1));
    char *pre_body = json_dumps(pre, JSON_COMPACT);
    json_decref(pre);
    up_opts po = {5, rt->o.timeout_s, rt->o.timeout_s, rt->o.api_key};
    int wp = 0;
    up_call *up = pre_body ? call_any(rt->o.prefill, rt->o.n_prefill,
                                      atomic_fetch_add(&rt->rr_prefill, 1), path, pre_body, &po,
                                      false, &wp)
                           : NULL;
    free(pre_body);
    if (!up) {
        json_decref(req);
        return send_error(c, 500, "out of memory in the router");
    }
    size_t len = 0;
    const char *body = up_wait_body(up, &len);
    long st = up_wait_headers(up);
    if (!body) {
        enum MHD_Result rc =
            send_error(c, 502, "the prefill worker at %s failed: %s; the request was not served "
                               "(retry it)",
                       rt->o.prefill[wp], up_error(up));
        atomic_fetch_add(&rt->n_prefill_failed, 1);
        up_free(up);
        json_decref(req);
        return rc;
    }
    if (st != 200) { /* its own answer (a bad request, ...): passed on as it is */
        enum MHD_Result rc = send_text(c, (unsigned)st, "application/json", body, len);
        atomic_fetch_add(&rt->n_prefill_failed, 1);
        up_free(up);
        json_decref(req);
        return rc;
    }
    json_t *pr = json_loadb(body, len, 0, &je);
    json_t *kx = json_object_get(pr, "kv_transfer_params");
    if (!json_is_object(kx)) {
        json_decref(pr);
        json_decref(req);
        up_free(up);
        atomic_fetch_add(&rt->n_prefill_failed, 1);
        return send_error(c, 502,
                          "the prefill worker at %s answered without kv_transfer_params: is it "
                          "running with a kv_connector of role prefill (configs/pd-prefill.yaml)?",
                          rt->o.prefill[wp]);
    }
    /* hop 2: the decode worker loads the KV and generates */
    json_object_set(req, "kv_transfer_params", kx);
    json_decref(pr);
    up_free(up);
    char *dec_body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    up_opts dopt = {5, rt->o.timeout_s, 0, rt->o.api_key};
    int wd = 0;
    up = dec_body ? call_any(rt->o.decode, rt->o.n_decode, atomic_fetch_add(&rt->rr_decode, 1),
                             path, dec_body, &dopt, true, &wd)
                  : NULL;
    free(dec_body);
    if (!up)
        return send_error(c, 500, "out of memory in the router");
    st = up_wait_headers(up);
    if (st == 0) {
        enum MHD_Result rc =
            send_error(c, 502, "the decode worker at %s failed: %s; the request was not served "
                               "(retry it)",
                       rt->o.decode[wd], up_error(up));
        atomic_fetch_add(&rt->n_decode_failed, 1);
        up_free(up);
        return rc;
    }
    if (!stream || st != 200) {
        body = up_wait_body(up, &len);
        enum MHD_Result rc;
        if (!body) {
            rc = send_error(c, 502, "the decode worker at %s failed: %s", rt->o.decode[wd],
                            up_error(up));
            atomic_fetch_add(&rt->n_decode_failed, 1);
        } else {
            rc = send_text(c, (unsigned)st,
                           up_content_type(up)[0] ? up_content_type(up) : "application/json",
                           body, len);
            atomic_fetch_add(st == 200 ? &rt->n_ok : &rt->n_decode_failed, 1);
        }
        up_free(up);
        return rc;
    }
    relay *r = calloc(1, sizeof *r);
    if (!r) {
        up_free(up);
        return send_error(c, 500, "out of memory in the router");
    }
    r->up = up;
    snprintf(r->url, sizeof r->url, "%s", rt->o.decode[wd]);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, relay_read, r, relay_free);
    if (!resp) {
        relay_free(r);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    atomic_fetch_add(&rt->n_ok, 1);
    return rc;
}

/* The model list of the first decode worker that answers. */
static enum MHD_Result models(router *rt, struct MHD_Connection *c)
{
    char err[512] = "";
    for (int i = 0; i < rt->o.n_decode; i++) {
        char url[512];
        snprintf(url, sizeof url, "%s/v1/models", rt->o.decode[i]);
        char *body = http_get(url, rt->o.api_key, rt->o.timeout_s < 10 ? rt->o.timeout_s : 10, err,
                              sizeof err);
        if (body) {
            enum MHD_Result rc = send_text(c, 200, "application/json", body, strlen(body));
            free(body);
            return rc;
        }
    }
    return send_error(c, 502, "no decode worker answered GET /v1/models (last error: %s)", err);
}

static enum MHD_Result metrics(router *rt, struct MHD_Connection *c)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf,
                     "# HELP plume_router:requests_total Requests by outcome.\n"
                     "# TYPE plume_router:requests_total counter\n"
                     "plume_router:requests_total{result=\"ok\"} %lld\n"
                     "plume_router:requests_total{result=\"prefill_failed\"} %lld\n"
                     "plume_router:requests_total{result=\"decode_failed\"} %lld\n"
                     "plume_router:requests_total{result=\"bad_request\"} %lld\n",
                     (long long)atomic_load(&rt->n_ok), (long long)atomic_load(&rt->n_prefill_failed),
                     (long long)atomic_load(&rt->n_decode_failed), (long long)atomic_load(&rt->n_bad));
    return send_text(c, 200, "text/plain; version=0.0.4", buf, (size_t)n);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    router *rt = cls;
    conn *cc = *con_cls;
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
        return serve_body_append(&cc->b, upload_data, n, rt->o.max_body) ? MHD_NO : MHD_YES;
    }
    bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
    if (cc->b.too_big)
        return send_error(c, 413, "the body is larger than %zu bytes", rt->o.max_body);
    if (rt->o.api_key && strncmp(url, "/v1/", 4) == 0) {
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (!h || strncmp(h, "Bearer ", 7) != 0 || strcmp(h + 7, rt->o.api_key) != 0)
            return send_error(c, 401, "a valid API key is needed: send 'Authorization: Bearer "
                                      "KEY' with the router's --api-key");
    }
    if (post && (strcmp(url, "/v1/completions") == 0 || strcmp(url, "/v1/chat/completions") == 0))
        return generate(rt, c, cc, url);
    if (get && strcmp(url, "/health") == 0)
        return send_text(c, 200, "application/json", "{\"status\":\"ok\"}", 15);
    if (get && strcmp(url, "/metrics") == 0)
        return metrics(rt, c);
    if (get && strcmp(url, "/v1/models") == 0)
        return models(rt, c);
    return send_error(c, 404,
                      "the router serves POST /v1/completions, /v1/chat/completions and GET "
                      "/v1/models, /health, /metrics; %s %s is not one of them",
                      method, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    conn *cc = *con_cls;
    if (!cc)
        return;
    serve_body_free(&cc->b);
    free(cc);
    *con_cls = NULL;
}

int router_start(const router_opts *o, router **out, int *port_out, char *msg, size_t cap)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    const struct sockaddr *sa;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
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
        snprintf(msg, cap, "--host %s is not an IPv4 or IPv6 address", o->host);
        return -1;
    }
    router *rt = calloc(1, sizeof *rt);
    if (!rt) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    rt->o = *o;
    rt->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, rt,
                             MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                             rt, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024, MHD_OPTION_END);
    if (!rt->d) {
        snprintf(msg, cap, "cannot listen on %s port %d (%s); pick another --port or --host",
                 o->host, o->port, errno ? strerror(errno) : "libmicrohttpd failed to start");
        free(rt);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(rt->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : o->port;
    *out = rt;
    return 0;
}

void router_stop(router *r)
{
    if (!r)
        return;
    MHD_stop_daemon(r->d);
    free(r);
}
