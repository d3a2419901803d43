/* plume router: the two-hop flow on the one HTTP daemon (router.h). */
#include "serve/router.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/http_client.h"
#include "serve/http_daemon.h"
#include "serve/openai_api.h"
#include "serve/router_rewrite.h"

struct router {
    http_daemon *d;
    router_opts o;
    atomic_uint rr_prefill, rr_decode;
    atomic_llong n_ok, n_prefill_failed, n_decode_failed, n_bad;
};

/* A streamed decode response being passed through. */
typedef struct relay {
    http_call *up;
    char url[512];
    bool tail_sent;
    char tail[1024];
    size_t tail_len, tail_off;
} relay;

/* POSTs body to workers[(start + k) % n] + path, trying the next worker
 * while one refuses the connection.  *which: the worker used. */
static http_call *call_any(const char *const *workers, int n, unsigned start, const char *path,
                         const char *body, const http_call_opts *uo, bool wait_headers, int *which)
{
    http_call *up = NULL;
    for (int k = 0; k < n; k++) {
        int i = (int)((start + (unsigned)k) % (unsigned)n);
        char url[512];
        snprintf(url, sizeof url, "%s%s", workers[i], path);
        http_call_free(up);
        up = http_call_start(url, body, uo);
        *which = i;
        if (!up)
            return NULL;
        if (wait_headers)
            http_call_wait_headers(up);
        else {
            size_t len;
            http_call_wait_body(up, &len);
        }
        if (!http_call_refused(up))
            break;
    }
    return up;
}

static ssize_t relay_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    relay *r = cls;
    if (!r->tail_sent) {
        size_t n = http_call_read(r->up, buf, max);
        if (n > 0)
            return (ssize_t)n;
        r->tail_sent = true;
        const char *e = http_call_error(r->up);
        if (!e)
            return MHD_CONTENT_READER_END_OF_STREAM;
        /* the decode worker died or went silent mid-stream: say so in the
         * stream (the status line went out long ago) */
        r->tail_len = router_stream_error_tail(r->url, e, r->tail, sizeof r->tail);
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
    http_call_free(r->up); /* a client that left cancels the decode call: the worker aborts it */
    free(r);
}

/* Answers 502 for the call up to the role worker at url that failed, counts
 * it in *failed and frees up. */
static enum MHD_Result worker_failed(http_exchange *x, const char *role, const char *url,
                                     http_call *up, atomic_llong *failed)
{
    enum MHD_Result rc = http_send_error(x, 502,
                                         "the %s worker at %s failed: %s; the request was not "
                                         "served (retry it)",
                                         role, url, http_call_error(up));
    atomic_fetch_add(failed, 1);
    http_call_free(up);
    return rc;
}

static enum MHD_Result generate(void *user, http_exchange *x)
{
    router *rt = user;
    char msg[512];
    bool stream = false;
    json_t *req = router_parse_request(x->body, x->body_len, &stream, msg, sizeof msg);
    if (!req) {
        atomic_fetch_add(&rt->n_bad, 1);
        return http_send_error(x, 400, "%s", msg);
    }
    /* hop 1: the prefill worker computes the prompt and keeps its KV */
    json_t *pre = router_prefill_request(req);
    char *pre_body = pre ? json_dumps(pre, JSON_COMPACT) : NULL;
    json_decref(pre);
    http_call_opts po = {5, rt->o.timeout_s, rt->o.timeout_s, rt->o.api_key,
                         "the router's --timeout", 0};
    int wp = 0;
    http_call *up = pre_body ? call_any(rt->o.prefill, rt->o.n_prefill,
                                        atomic_fetch_add(&rt->rr_prefill, 1), x->url, pre_body,
                                        &po, false, &wp)
                             : NULL;
    free(pre_body);
    if (!up) {
        json_decref(req);
        return http_send_error(x, 500, "out of memory in the router");
    }
    size_t len = 0;
    const char *body = http_call_wait_body(up, &len);
    long st = http_call_wait_headers(up);
    if (!body) {
        json_decref(req);
        return worker_failed(x, "prefill", rt->o.prefill[wp], up, &rt->n_prefill_failed);
    }
    if (st != 200) { /* its own answer (a bad request, ...): passed on as it is */
        enum MHD_Result rc = http_send_text(x, (unsigned)st, "application/json", body, len);
        atomic_fetch_add(&rt->n_prefill_failed, 1);
        http_call_free(up);
        json_decref(req);
        return rc;
    }
    /* hop 2: the decode worker loads the KV and generates */
    json_t *pr = json_loadb(body, len, 0, NULL);
    json_t *dec = router_decode_request(req, pr);
    json_decref(pr);
    json_decref(req);
    http_call_free(up);
    if (!dec) {
        atomic_fetch_add(&rt->n_prefill_failed, 1);
        return http_send_error(x, 502,
                               "the prefill worker at %s answered without kv_transfer_params: is "
                               "it running with a kv_connector of role prefill "
                               "(configs/pd-prefill.yaml)?",
                               rt->o.prefill[wp]);
    }
    char *dec_body = json_dumps(dec, JSON_COMPACT);
    json_decref(dec);
    http_call_opts dopt = {5, rt->o.timeout_s, 0, rt->o.api_key, "the router's --timeout", 0};
    int wd = 0;
    up = dec_body ? call_any(rt->o.decode, rt->o.n_decode, atomic_fetch_add(&rt->rr_decode, 1),
                             x->url, dec_body, &dopt, true, &wd)
                  : NULL;
    free(dec_body);
    if (!up)
        return http_send_error(x, 500, "out of memory in the router");
    st = http_call_wait_headers(up);
    if (st == 0) {
        return worker_failed(x, "decode", rt->o.decode[wd], up, &rt->n_decode_failed);
    }
    if (!stream || st != 200) {
        body = http_call_wait_body(up, &len);
        enum MHD_Result rc;
        if (!body) {
            rc = http_send_error(x, 502, "the decode worker at %s failed: %s", rt->o.decode[wd],
                                 http_call_error(up));
            atomic_fetch_add(&rt->n_decode_failed, 1);
        } else {
            const char *type = http_call_content_type(up);
            rc = http_send_text(x, (unsigned)st, type[0] ? type : "application/json", body, len);
            atomic_fetch_add(st == 200 ? &rt->n_ok : &rt->n_decode_failed, 1);
        }
        http_call_free(up);
        return rc;
    }
    relay *r = calloc(1, sizeof *r);
    if (!r) {
        http_call_free(up);
        return http_send_error(x, 500, "out of memory in the router");
    }
    r->up = up;
    snprintf(r->url, sizeof r->url, "%s", rt->o.decode[wd]);
    atomic_fetch_add(&rt->n_ok, 1);
    return http_send_stream(x, "text/event-stream", 16384, relay_read, r, relay_free);
}

/* The first decode worker's GET /v1/models body (free it), or NULL with err. */
static char *worker_models(router *rt, char *err, size_t cap)
{
    for (int i = 0; i < rt->o.n_decode; i++) {
        char url[512];
        snprintf(url, sizeof url, "%s/v1/models", rt->o.decode[i]);
        char *body = http_get(url, rt->o.api_key, rt->o.timeout_s < 10 ? rt->o.timeout_s : 10, err,
                              cap);
        if (body)
            return body;
    }
    return NULL;
}

/* GET /v1/models: the model list of the first decode worker that answers. */
static enum MHD_Result models(void *user, http_exchange *x)
{
    char err[512] = "";
    char *body = worker_models(user, err, sizeof err);
    if (body)
        return http_send_owned(x, 200, "application/json", body);
    return http_send_error(x, 502, "no decode worker answered GET /v1/models (last error: %s)",
                           err);
}

/* GET /v1/models/{id}: the decode workers' model of that id, as plume serve
 * answers it. */
static enum MHD_Result model(void *user, http_exchange *x)
{
    const char *id = x->url + strlen("/v1/models/");
    char err[512] = "";
    char *body = worker_models(user, err, sizeof err);
    if (!body)
        return http_send_error(x, 502, "no decode worker answered GET /v1/models (last error: %s)",
                               err);
    json_t *list = json_loads(body, 0, NULL), *found = NULL, *m;
    free(body);
    size_t i;
    json_array_foreach(json_object_get(list, "data"), i, m)
    {
        const char *mid = json_string_value(json_object_get(m, "id"));
        if (!found && mid && strcmp(mid, id) == 0)
            found = json_incref(m);
    }
    json_decref(list);
    if (!found)
        return http_send_error(x, 404, "the model '%.200s' does not exist; GET /v1/models lists "
                                       "the served ones",
                               id);
    return http_send_json(x, 200, found);
}

static enum MHD_Result metrics(void *user, http_exchange *x)
{
    router *rt = user;
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
    return http_send_text(x, 200, "text/plain; version=0.0.4", buf, (size_t)n);
}

static enum MHD_Result health(void *user, http_exchange *x)
{
    (void)user;
    return http_send_json(x, 200, json_pack("{s:s}", "status", "ok"));
}

static const http_route routes[] = {
    {"/v1/completions", true, false, generate},
    {"/v1/chat/completions", true, false, generate},
    {"/v1/models", false, false, models},
    {"/v1/models/", false, false, model},
    {"/health", false, true, health},
    {"/metrics", false, true, metrics},
};

int router_start(const router_opts *o, router **out, int *port_out, char *msg, size_t cap)
{
    router *rt = calloc(1, sizeof *rt);
    if (!rt) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    rt->o = *o;
    http_daemon_opts d = {.who = "plume router", .host = o->host, .port = o->port,
                          .api_key = o->api_key, .max_body = o->max_body,
                          .limits = http_default_limits(), .routes = routes,
                          .n_routes = (int)(sizeof routes / sizeof routes[0]), .user = rt};
    if (http_daemon_start(&d, &rt->d, port_out, msg, cap)) {
        free(rt);
        return -1;
    }
    *out = rt;
    return 0;
}

void router_stop(router *r)
{
    if (!r)
        return;
    http_daemon_stop(r->d);
    free(r);
}
