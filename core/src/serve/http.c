/* plume serve: HTTP on libmicrohttpd (http.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP */
#endif
#include "serve/http.h"
#include "serve/http_body.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/sse.h"

struct serve_http {
    struct MHD_Daemon *d;
    serve_http_opts o;
    pthread_mutex_t mu;
    uint64_t next_id;                /* under mu */
};

typedef struct conn_ctx {
    serve_body b;
    serve_req *req;                  /* a reference while a generation runs */
} conn_ctx;

typedef struct stream_ctx {
    serve_http *h;
    serve_req *r;
    serve_gen_request g;             /* g.prompt borrowed from r */
    char id[48];
    int64_t created;
    int fd;
    sse_buf out;
    size_t tok_read;
    bool role_sent, done;
} stream_ctx;

/* True when the peer closed or reset the connection. */
static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

static enum MHD_Result queue_text(struct MHD_Connection *c, unsigned status, char *text,
                                  const char *type)
{
    if (!text)
        return MHD_NO;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    if (status == 405)
        MHD_add_response_header(resp, "Allow", "GET, POST");
    if (status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result queue_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        s = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                   "\"code\":500}}");
    return queue_text(c, s ? status : 500, s, "application/json");
}

static enum MHD_Result queue_error(serve_http *h, struct MHD_Connection *c, unsigned status,
                                   const char *msg)
{
    serve_metrics_http_error(h->o.metrics, (int)status);
    return queue_json(c, status, serve_api_error((int)status, msg));
}

static void make_id(serve_http *h, const char *prefix, char *out, size_t cap)
{
    pthread_mutex_lock(&h->mu);
    uint64_t n = h->next_id++;
    pthread_mutex_unlock(&h->mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, cap, "%s-%llx%08llx", prefix, (unsigned long long)ts.tv_sec,
             (unsigned long long)n);
}

static void timed_wait(serve_req *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

static void abort_req(serve_http *h, serve_req *r)
{
    atomic_store(&r->aborted, true);
    serve_loop_wake(h->o.loop);
}

/* Waits (r->mu held) until done(r) or the client leaves: false then. */
static bool wait_until(serve_http *h, serve_req *r, int fd, bool (*done)(const serve_req *))
{
    while (!done(r)) {
        timed_wait(r);
        if (!done(r) && client_gone(fd)) {
            abort_req(h, r);
            return false;
        }
    }
    return true;
}

static bool is_admitted(const serve_req *r) { return r->admitted || r->finished; }
static bool is_finished(const serve_req *r) { return r->finished; }

/* Streaming: fills s->out with the chunks of what the engine produced. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_ctx *s = cls;
    serve_req *r = s->r;
    for (;;) {
        if (s->out.len > s->out.off)
            return (ssize_t)sse_take(&s->out, buf, max);
        if (s->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        bool ok = true;
        pthread_mutex_lock(&r->mu);
        while (s->tok_read == r->n_toks && !r->finished) {
            timed_wait(r);
            if (s->tok_read == r->n_toks && !r->finished && client_gone(s->fd)) {
                pthread_mutex_unlock(&r->mu);
                abort_req(s->h, r);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        /* the role's delta goes out with the first token (after the
         * prompt was computed, as vLLM sends it), so that a client's time
         * to first token means the model's */
        if (s->g.kind == SERVE_API_CHAT && !s->role_sent) {
            s->role_sent = true;
            ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id, s->created, NULL,
                                                    NULL, true, NULL, NULL));
        }
        for (; ok && s->tok_read < r->n_toks; s->tok_read++) {
            const serve_token *t = &r->toks[s->tok_read];
            if (t->text_len == 0 && !(t->has_logprobs && s->g.logprobs >= 0) &&
                !s->g.return_token_ids)
                continue; /* a token that completes no character yet */
            ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id, s->created, t,
                                                    r->text + t->text_off, false, NULL, NULL));
        }
        if (ok && r->finished && s->tok_read == r->n_toks) {
            if (r->failed) {
                ok = sse_event(&s->out, serve_api_error(500, r->error));
            } else {
                const char *fin = serve_api_finish_name(r->finish);
                ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id, s->created,
                                                        NULL, NULL, false, fin ? fin : "abort",
                                                        NULL));
                if (ok && s->g.include_usage) {
                    int64_t u[3] = {r->usage_prompt, r->usage_completion, r->usage_cached};
                    ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id,
                                                            s->created, NULL, NULL, false, NULL,
                                                            u));
                }
            }
            ok = ok && sse_done(&s->out);
            s->done = true;
        }
        pthread_mutex_unlock(&r->mu);
        if (!ok)
            break;
    }
    abort_req(s->h, r); /* out of memory */
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls)
{
    stream_ctx *s = cls;
    sse_free(&s->out);
    s->g.prompt = NULL; /* r's */
    serve_gen_request_free(&s->g);
    serve_req_unref(s->r);
    free(s);
}

static enum MHD_Result handle_generate(serve_http *h, struct MHD_Connection *c, conn_ctx *cc,
                                       serve_api_kind kind)
{
    char msg[1024];
    serve_gen_request g;
    if (serve_loop_stopping(h->o.loop))
        return queue_error(h, c, 503, "the server is shutting down; send the request to "
                                      "another server or retry after it restarts");
    int st = serve_api_parse_gen(h->o.env, kind, cc->b.data ? cc->b.data : "", cc->b.len, &g, msg,
                                 sizeof msg);
    if (st)
        return queue_error(h, c, (unsigned)st, msg);
    serve_req *r = serve_req_new(g.prompt, g.n_prompt, &g.rp, g.stop, g.n_stop);
    if (!r) {
        serve_gen_request_free(&g);
        return queue_error(h, c, 500, "out of memory; retry later");
    }
    g.stop = NULL;
    g.n_stop = 0; /* r owns prompt and stop strings now */
    serve_submit_rc sr = serve_loop_submit(h->o.loop, r);
    if (sr != SERVE_SUBMIT_OK) {
        serve_req_unref(r);
        return sr == SERVE_SUBMIT_FULL
                   ? queue_error(h, c, 429, "the request queue is full (--max-queue); retry "
                                            "later")
                   : queue_error(h, c, 503, "the server is shutting down; send the request "
                                            "to another server or retry after it restarts");
    }
    cc->req = r;
    int fd = conn_fd(c);
    pthread_mutex_lock(&r->mu);
    bool here = wait_until(h, r, fd, is_admitted);
    bool refused = here && r->failed && !r->admitted;
    if (refused) {
        snprintf(msg, sizeof msg, "%s", r->error);
        pthread_mutex_unlock(&r->mu);
        return queue_error(h, c, 400, msg);
    }
    if (here && !g.stream)
        here = wait_until(h, r, fd, is_finished);
    pthread_mutex_unlock(&r->mu);
    if (!here)
        return MHD_NO; /* the client left: close the connection */
    char id[48];
    make_id(h, kind == SERVE_API_CHAT ? "chatcmpl" : "cmpl", id, sizeof id);
    int64_t created = (int64_t)time(NULL);
    if (!g.stream) {
        pthread_mutex_lock(&r->mu);
        bool failed = r->failed;
        snprintf(msg, sizeof msg, "%s", r->error);
        pthread_mutex_unlock(&r->mu);
        if (failed)
            return queue_error(h, c, 500, msg);
        return queue_json(c, 200, serve_api_response(h->o.env, &g, id, created, r));
    }
    stream_ctx *s = calloc(1, sizeof *s);
    if (!s)
        return MHD_NO;
    s->h = h;
    s->r = r;
    serve_req_ref(r);
    s->g = g;
    s->g.prompt = r->prompt;
    snprintf(s->id, sizeof s->id, "%s", id);
    s->created = created;
    s->fd = fd;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_free);
    if (!resp) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    return rc;
}

static bool authorized(serve_http *h, struct MHD_Connection *c)
{
    if (!h->o.api_key)
        return true;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!auth || strncmp(auth, "Bearer ", 7) != 0)
        return false;
    /* constant time in the key's length */
    const char *k = h->o.api_key, *g = auth + 7;
    size_t kl = strlen(k), gl = strlen(g);
    unsigned diff = (unsigned)(kl ^ gl);
    for (size_t i = 0; i < kl; i++)
        diff |= (unsigned)(k[i] ^ (i < gl ? g[i] : 0));
    return diff == 0;
}

static enum MHD_Result route(serve_http *h, struct MHD_Connection *c, conn_ctx *cc,
                             const char *url, const char *method)
{
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    static const struct { const char *path; bool post; } routes[] = {
        {"/v1/completions", true}, {"/v1/chat/completions", true}, {"/tokenize", true},
        {"/detokenize", true}, {"/v1/models", false}, {"/health", false}, {"/metrics", false},
    };
    int which = -1;
    for (int i = 0; i < (int)(sizeof routes / sizeof routes[0]); i++)
        if (strcmp(url, routes[i].path) == 0)
            which = i;
    char msg[512];
    if (which < 0) {
        snprintf(msg, sizeof msg, "there is no endpoint %.200s; plume serve has POST "
                 "/v1/completions, /v1/chat/completions, /tokenize, /detokenize and GET "
                 "/v1/models, /health, /metrics", url);
        return queue_error(h, c, 404, msg);
    }
    if (routes[which].post ? !post : !(get || strcmp(method, "HEAD") == 0)) {
        snprintf(msg, sizeof msg, "%s takes %s, not %.20s", url, routes[which].post ? "POST" : "GET",
                 method);
        return queue_error(h, c, 405, msg);
    }
    bool open = which >= 5; /* /health and /metrics need no key */
    if (!open && !authorized(h, c))
        return queue_error(h, c, 401, "missing or wrong API key: send the header "
                                      "'Authorization: Bearer KEY' with the server's --api-key");
    if (cc->b.too_big) {
        snprintf(msg, sizeof msg, "the body is larger than %zu bytes (--max-body); send a "
                 "smaller request", h->o.max_body);
        return queue_error(h, c, 413, msg);
    }
    const serve_api_env *env = h->o.env;
    if (which == 0 || which == 1)
        return handle_generate(h, c, cc, which == 0 ? SERVE_API_COMPLETIONS : SERVE_API_CHAT);
    if (which == 2 || which == 3) {
        int st = 0;
        char em[1024];
        json_t *j = which == 2 ? serve_api_tokenize(env, cc->b.data ? cc->b.data : "", cc->b.len, &st,
                                                    em, sizeof em)
                               : serve_api_detokenize(env, cc->b.data ? cc->b.data : "", cc->b.len,
                                                      &st, em, sizeof em);
        return j ? queue_json(c, 200, j) : queue_error(h, c, (unsigned)(st ? st : 500), em);
    }
    if (which == 4)
        return queue_json(c, 200, serve_api_models(env, (int64_t)time(NULL)));
    if (which == 5) {
        if (serve_loop_stopping(h->o.loop))
            return queue_error(h, c, 503, "the server is shutting down");
        return queue_json(c, 200, json_pack("{s:s}", "status", "ok"));
    }
    char *text = serve_metrics_render(h->o.metrics, env->model_name);
    return text ? queue_text(c, 200, text, "text/plain; version=0.0.4; charset=utf-8")
                : queue_error(h, c, 500, "out of memory rendering the metrics");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    serve_http *h = cls;
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
        return serve_body_append(&cc->b, upload_data, n, h->o.max_body) ? MHD_NO : MHD_YES;
    }
    return route(h, c, cc, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    serve_http *h = cls;
    conn_ctx *cc = *con_cls;
    if (!cc)
        return;
    if (cc->req) {
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
            abort_req(h, cc->req);
        serve_req_unref(cc->req);
    }
    serve_body_free(&cc->b);
    free(cc);
    *con_cls = NULL;
}

int serve_http_start(const serve_http_opts *o, serve_http **out, int *port_out, char *msg,
                     size_t cap)
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
        snprintf(msg, cap, "--host %s is not an IPv4 or IPv6 address (use e.g. 127.0.0.1 or "
                 "0.0.0.0)", o->host);
        return -1;
    }
    serve_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    h->o = *o;
    pthread_mutex_init(&h->mu, NULL);
    h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
                            MHD_OPTION_END);
    if (!h->d) {
        snprintf(msg, cap, "cannot listen on %s port %d (%s); pick another --port or --host",
                 o->host, o->port, errno ? strerror(errno) : "libmicrohttpd failed to start");
        pthread_mutex_destroy(&h->mu);
        free(h);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : o->port;
    *out = h;
    return 0;
}

void serve_http_quiesce(serve_http *h)
{
    MHD_socket fd = MHD_quiesce_daemon(h->d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void serve_http_stop(serve_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
