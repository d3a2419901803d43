/* plume serve's routes (http.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POLLRDHUP */
#endif
#include "serve/http.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/http_daemon.h"
#include "serve/sse.h"

struct serve_http {
    http_daemon *d;
    serve_http_opts o;
    pthread_mutex_t mu;
    uint64_t next_id;                /* under mu */
};

/* A generation's request, held by its connection until the connection ends. */
typedef struct conn_req {
    serve_http *h;
    serve_req *req;
} conn_req;

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
    chat_reply *reply;               /* a chat reply read as it streams, or NULL */
} stream_ctx;

/* True when the peer closed or reset the connection. */
static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
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
                                                    NULL, NULL, true, NULL, NULL));
        }
        for (; ok && s->tok_read < r->n_toks; s->tok_read++) {
            const serve_token *t = &r->toks[s->tok_read];
            bool extra = (t->has_logprobs && s->g.logprobs >= 0) || s->g.return_token_ids;
            if (s->reply) {
                chat_delta d;
                if (chat_reply_feed(s->reply, r->text + t->text_off, t->text_len, false, &d)) {
                    ok = false;
                    break;
                }
                if (!chat_delta_empty(&d) || extra)
                    ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id,
                                                            s->created, t, NULL, &d, false, NULL,
                                                            NULL));
                chat_delta_clear(&d);
                continue;
            }
            if (t->text_len == 0 && !extra)
                continue; /* a token that completes no character yet */
            ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id, s->created, t,
                                                    r->text + t->text_off, NULL, false, NULL,
                                                    NULL));
        }
        if (ok && r->finished && s->tok_read == r->n_toks) {
            if (r->failed) {
                ok = sse_event(&s->out, serve_api_error(500, r->error));
            } else {
                const char *fin = serve_api_finish_name(r->finish);
                if (s->reply) { /* what the reader held back, then how it ended */
                    chat_delta d;
                    ok = chat_reply_feed(s->reply, "", 0, true, &d) == 0;
                    if (ok && !chat_delta_empty(&d))
                        ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id,
                                                                s->created, NULL, NULL, &d, false,
                                                                NULL, NULL));
                    chat_delta_clear(&d);
                    if (chat_reply_n_calls(s->reply) && r->finish == PLUME_FINISH_STOP)
                        fin = "tool_calls";
                }
                ok = ok && sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id,
                                                              s->created, NULL, NULL, NULL, false,
                                                              fin ? fin : "abort", NULL));
                if (ok && s->g.include_usage) {
                    int64_t u[3] = {r->usage_prompt, r->usage_completion, r->usage_cached};
                    ok = sse_event(&s->out, serve_api_chunk(s->h->o.env, &s->g, s->id,
                                                            s->created, NULL, NULL, NULL, false,
                                                            NULL, u));
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
    chat_reply_free(s->reply);
    s->g.prompt = NULL; /* r's */
    serve_gen_request_free(&s->g);
    serve_req_unref(s->r);
    free(s);
}

/* The connection ended: a generation it still holds is aborted unless the
 * response went out whole. */
static void conn_req_done(void *state, bool completed)
{
    conn_req *cr = state;
    if (!completed)
        abort_req(cr->h, cr->req);
    serve_req_unref(cr->req);
    free(cr);
}

static enum MHD_Result handle_generate(serve_http *h, http_exchange *x, serve_api_kind kind)
{
    char msg[1024];
    serve_gen_request g;
    if (serve_loop_stopping(h->o.loop))
        return http_send_error(x, 503, "the server is shutting down; send the request to "
                                       "another server or retry after it restarts");
    int st = serve_api_parse_gen(h->o.env, kind, x->body, x->body_len, &g, msg, sizeof msg);
    if (st)
        return http_send_error(x, (unsigned)st, "%s", msg);
    conn_req *cr = calloc(1, sizeof *cr);
    serve_req *r = cr ? serve_req_new(g.prompt, g.n_prompt, &g.rp, g.stop, g.n_stop) : NULL;
    if (!r) {
        free(cr);
        serve_gen_request_free(&g);
        return http_send_error(x, 500, "out of memory; retry later");
    }
    g.stop = NULL;
    g.n_stop = 0; /* r owns prompt, stop strings and the sampler's settings now */
    r->sampler_settings = g.sampler_settings;
    g.sampler_settings = NULL;
    serve_submit_rc sr = serve_loop_submit(h->o.loop, r);
    if (sr != SERVE_SUBMIT_OK) {
        serve_req_unref(r);
        free(cr);
        return sr == SERVE_SUBMIT_FULL
                   ? http_send_error(x, 429, "the request queue is full (--max-queue); retry "
                                             "later")
                   : http_send_error(x, 503, "the server is shutting down; send the request "
                                             "to another server or retry after it restarts");
    }
    cr->h = h;
    cr->req = r;
    x->state = cr;
    x->done = conn_req_done;
    int fd = http_exchange_fd(x);
    pthread_mutex_lock(&r->mu);
    bool here = wait_until(h, r, fd, is_admitted);
    bool refused = here && r->failed && !r->admitted;
    if (refused) {
        snprintf(msg, sizeof msg, "%s", r->error);
        pthread_mutex_unlock(&r->mu);
        return http_send_error(x, 400, "%s", msg);
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
            return http_send_error(x, 500, "%s", msg);
        return http_send_json(x, 200, serve_api_response(h->o.env, &g, id, created, r));
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
    if (kind == SERVE_API_CHAT && chat_reply_active(&g.reply) &&
        !(s->reply = chat_reply_new(&g.reply))) {
        stream_free(s);
        return MHD_NO;
    }
    return http_send_stream(x, "text/event-stream", 4096, stream_read, s, stream_free);
}

static enum MHD_Result on_completions(void *user, http_exchange *x)
{
    return handle_generate(user, x, SERVE_API_COMPLETIONS);
}

static enum MHD_Result on_chat(void *user, http_exchange *x)
{
    return handle_generate(user, x, SERVE_API_CHAT);
}

/* /tokenize and /detokenize: the body to JSON by one of openai_api.h's converters. */
static enum MHD_Result convert(serve_http *h, http_exchange *x,
                               json_t *(*fn)(const serve_api_env *, const char *, size_t, int *,
                                             char *, size_t))
{
    int st = 0;
    char em[1024];
    json_t *j = fn(h->o.env, x->body, x->body_len, &st, em, sizeof em);
    return j ? http_send_json(x, 200, j) : http_send_error(x, (unsigned)(st ? st : 500), "%s", em);
}

static enum MHD_Result on_tokenize(void *user, http_exchange *x)
{
    return convert(user, x, serve_api_tokenize);
}

static enum MHD_Result on_detokenize(void *user, http_exchange *x)
{
    return convert(user, x, serve_api_detokenize);
}

static enum MHD_Result on_models(void *user, http_exchange *x)
{
    serve_http *h = user;
    return http_send_json(x, 200, serve_api_models(h->o.env, (int64_t)time(NULL)));
}

/* GET /v1/models/{id}: the model when id names it (OpenAI's models.retrieve). */
static enum MHD_Result on_model(void *user, http_exchange *x)
{
    serve_http *h = user;
    const char *id = x->url + strlen("/v1/models/");
    if (strcmp(id, h->o.env->model_name) != 0)
        return http_send_error(x, 404, "the model '%.200s' does not exist; this server serves '%s'",
                               id, h->o.env->model_name);
    return http_send_json(x, 200, serve_api_model(h->o.env, (int64_t)time(NULL)));
}

static enum MHD_Result on_health(void *user, http_exchange *x)
{
    serve_http *h = user;
    if (serve_loop_stopping(h->o.loop))
        return http_send_error(x, 503, "the server is shutting down");
    return http_send_json(x, 200, json_pack("{s:s}", "status", "ok"));
}

static enum MHD_Result on_metrics(void *user, http_exchange *x)
{
    serve_http *h = user;
    char *text = serve_metrics_render(h->o.metrics, h->o.env->model_name);
    if (!text)
        return http_send_error(x, 500, "out of memory rendering the metrics");
    return http_send_owned(x, 200, "text/plain; version=0.0.4; charset=utf-8", text);
}

static const http_route routes[] = {
    {"/v1/completions", true, false, on_completions},
    {"/v1/chat/completions", true, false, on_chat},
    {"/tokenize", true, false, on_tokenize},
    {"/detokenize", true, false, on_detokenize},
    {"/v1/models", false, false, on_models},
    {"/v1/models/", false, false, on_model},
    {"/health", false, true, on_health},
    {"/metrics", false, true, on_metrics},
};

static void count_error(void *user, int status)
{
    serve_http *h = user;
    serve_metrics_http_error(h->o.metrics, status);
}

int serve_http_start(const serve_http_opts *o, serve_http **out, int *port_out, char *msg,
                     size_t cap)
{
    serve_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    h->o = *o;
    pthread_mutex_init(&h->mu, NULL);
    http_daemon_opts d = {.who = "plume serve", .host = o->host, .port = o->port,
                          .api_key = o->api_key, .max_body = o->max_body,
                          .max_body_option = "--max-body", .limits = http_default_limits(),
                          .routes = routes, .n_routes = (int)(sizeof routes / sizeof routes[0]),
                          .user = h, .on_error = count_error};
    if (http_daemon_start(&d, &h->d, port_out, msg, cap)) {
        pthread_mutex_destroy(&h->mu);
        free(h);
        return -1;
    }
    *out = h;
    return 0;
}

void serve_http_quiesce(serve_http *h) { http_daemon_quiesce(h->d); }

void serve_http_stop(serve_http *h)
{
    if (!h)
        return;
    http_daemon_stop(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
