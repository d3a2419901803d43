/* plume serve: /metrics (metrics.h). */
#include "serve/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* vLLM's buckets, so dashboards built for it read ours. */
static const double ttft_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                     0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                                     640.0, 2560.0};
static const double itl_bounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
#define N_TTFT (sizeof ttft_bounds / sizeof ttft_bounds[0])
#define N_ITL (sizeof itl_bounds / sizeof itl_bounds[0])

typedef struct histo {
    const double *bounds;
    size_t n;
    uint64_t counts[32];   /* per bucket (not cumulative) plus +Inf */
    uint64_t count;
    double sum;
} histo;

struct serve_metrics {
    pthread_mutex_t mu;
    histo ttft, itl;
    int64_t prompt_tokens, generation_tokens;
    int64_t req_stop, req_length, req_abort, req_error;
    int64_t http_4xx, http_429, http_503;
    int64_t own_prefix_queries, own_prefix_hits;
    serve_engine_gauges g;
};

serve_metrics *serve_metrics_new(void)
{
    serve_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->ttft.bounds = ttft_bounds;
    m->ttft.n = N_TTFT;
    m->itl.bounds = itl_bounds;
    m->itl.n = N_ITL;
    return m;
}

void serve_metrics_free(serve_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(histo *h, double v)
{
    size_t i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

void serve_metrics_observe_ttft(serve_metrics *m, double s)
{
    pthread_mutex_lock(&m->mu);
    observe(&m->ttft, s);
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_observe_itl(serve_metrics *m, double s)
{
    pthread_mutex_lock(&m->mu);
    observe(&m->itl, s);
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_request_done(serve_metrics *m, plume_finish_reason why, int64_t n_prompt,
                                int64_t n_output, int64_t n_cached)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += n_prompt;
    m->generation_tokens += n_output;
    m->own_prefix_queries += n_prompt;
    m->own_prefix_hits += n_cached;
    switch (why) {
    case PLUME_FINISH_STOP: m->req_stop++; break;
    case PLUME_FINISH_LENGTH: m->req_length++; break;
    case PLUME_FINISH_ABORT: m->req_abort++; break;
    default: m->req_error++; break;
    }
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_http_error(serve_metrics *m, int status)
{
    pthread_mutex_lock(&m->mu);
    if (status == 429)
        m->http_429++;
    else if (status == 503)
        m->http_503++;
    else
        m->http_4xx++;
    pthread_mutex_unlock(&m->mu);
}

void serve_metrics_set_engine(serve_metrics *m, const serve_engine_gauges *g)
{
    pthread_mutex_lock(&m->mu);
    m->g = *g;
    pthread_mutex_unlock(&m->mu);
}

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = 2 * b->cap + (size_t)n;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void metric(sbuf *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample of a counter with one label: name{label="value"} n. */
static void labelled(sbuf *b, const char *name, const char *label, const char *value,
                     long long n)
{
    sb_printf(b, "%s{%s=\"%s\"} %lld\n", name, label, value, n);
}

static void render_histo(sbuf *b, const char *name, const char *help, const histo *h)
{
    metric(b, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->n; i++) {
        cum += h->counts[i];
        sb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    sb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    sb_printf(b, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name, (unsigned long long)h->count);
}

char *serve_metrics_render(serve_metrics *m, const char *model_name)
{
    sbuf b = {.cap = 8192};
    b.p = malloc(b.cap);
    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    pthread_mutex_lock(&m->mu);
    const serve_engine_gauges *g = &m->g;
    metric(&b, "plume:model_info", "gauge", "The served model (label model_name).");
    sb_printf(&b, "plume:model_info{model_name=\"%s\"} 1\n", model_name);
    metric(&b, "plume:num_requests_running", "gauge", "Requests in the engine's running batch.");
    sb_printf(&b, "plume:num_requests_running %d\n", g->running);
    metric(&b, "plume:num_requests_waiting", "gauge",
           "Requests waiting for the engine (the server's queue and the engine's).");
    sb_printf(&b, "plume:num_requests_waiting %d\n", g->waiting);
    if (g->have_kv) {
        metric(&b, "plume:kv_cache_usage_perc", "gauge",
               "Fraction of KV-cache blocks held by sequences (1 = full).");
        sb_printf(&b, "plume:kv_cache_usage_perc %.6g\n",
                  g->kv_blocks_total ? (double)g->kv_blocks_used / g->kv_blocks_total : 0.0);
        metric(&b, "plume:kv_cache_blocks_used", "gauge", "KV-cache blocks held by sequences.");
        sb_printf(&b, "plume:kv_cache_blocks_used %d\n", g->kv_blocks_used);
        metric(&b, "plume:kv_cache_blocks_total", "gauge", "KV-cache blocks in all.");
        sb_printf(&b, "plume:kv_cache_blocks_total %d\n", g->kv_blocks_total);
    }
    if (g->have_kv_connector) { /* docs/disaggregation.md */
        metric(&b, "plume:kv_transfer_waiting_requests", "gauge",
               "Requests waiting for their prompt KV from a prefill worker.");
        sb_printf(&b, "plume:kv_transfer_waiting_requests %d\n", g->kv_waiting_remote);
        metric(&b, "plume:kv_transfer_deferred_blocks", "gauge",
               "KV blocks of finished requests kept until their KV is sent.");
        sb_printf(&b, "plume:kv_transfer_deferred_blocks %d\n", g->kv_blocks_deferred);
        metric(&b, "plume:kv_transfer_live_segments", "gauge",
               "Transfer buffers (shared-memory segments) alive now.");
        sb_printf(&b, "plume:kv_transfer_live_segments %lld\n",
                  (long long)g->kvc.live_segments);
        metric(&b, "plume:kv_transfer_live_bytes", "gauge", "Bytes of those buffers.");
        sb_printf(&b, "plume:kv_transfer_live_bytes %lld\n", (long long)g->kvc.live_bytes);
        metric(&b, "plume:kv_transfers_total", "counter", "KV transfers by outcome.");
        sb_printf(&b, "plume:kv_transfers_total{result=\"sent\"} %lld\n", (long long)g->kvc.sent);
        sb_printf(&b, "plume:kv_transfers_total{result=\"received\"} %lld\n",
                  (long long)g->kvc.received);
        sb_printf(&b, "plume:kv_transfers_total{result=\"failed\"} %lld\n",
                  (long long)g->kvc.failed);
        sb_printf(&b, "plume:kv_transfers_total{result=\"expired\"} %lld\n",
                  (long long)g->kvc.expired);
    }
    metric(&b, "plume:prefix_cache_queries_total", "counter",
           "Prompt tokens looked up in the prefix cache.");
    sb_printf(&b, "plume:prefix_cache_queries_total %lld\n",
              (long long)(g->have_prefix ? g->prefix_queries : m->own_prefix_queries));
    metric(&b, "plume:prefix_cache_hits_total", "counter",
           "Prompt tokens found in the prefix cache.");
    sb_printf(&b, "plume:prefix_cache_hits_total %lld\n",
              (long long)(g->have_prefix ? g->prefix_hits : m->own_prefix_hits));
    metric(&b, "plume:prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
    sb_printf(&b, "plume:prompt_tokens_total %lld\n", (long long)m->prompt_tokens);
    metric(&b, "plume:generation_tokens_total", "counter", "Generated tokens of finished requests.");
    sb_printf(&b, "plume:generation_tokens_total %lld\n", (long long)m->generation_tokens);
    metric(&b, "plume:request_success_total", "counter", "Finished requests by finish reason.");
    const char *ok = "plume:request_success_total";
    labelled(&b, ok, "finished_reason", "stop", (long long)m->req_stop);
    labelled(&b, ok, "finished_reason", "length", (long long)m->req_length);
    labelled(&b, ok, "finished_reason", "abort", (long long)m->req_abort);
    labelled(&b, ok, "finished_reason", "error", (long long)m->req_error);
    metric(&b, "plume:http_request_errors_total", "counter",
           "Requests refused before the engine saw them, by status class.");
    const char *refused = "plume:http_request_errors_total";
    labelled(&b, refused, "status", "4xx", (long long)m->http_4xx);
    labelled(&b, refused, "status", "429", (long long)m->http_429);
    labelled(&b, refused, "status", "503", (long long)m->http_503);
    metric(&b, "plume:spec_decode_num_draft_tokens_total", "counter",
           "Speculative decoding: tokens drafted.");
    sb_printf(&b, "plume:spec_decode_num_draft_tokens_total %lld\n", (long long)g->spec_drafted);
    metric(&b, "plume:spec_decode_num_accepted_tokens_total", "counter",
           "Speculative decoding: drafted tokens accepted.");
    sb_printf(&b, "plume:spec_decode_num_accepted_tokens_total %lld\n",
              (long long)g->spec_accepted);
    render_histo(&b, "plume:time_to_first_token_seconds",
                 "Seconds from the request's arrival to its first generated token.", &m->ttft);
    render_histo(&b, "plume:inter_token_latency_seconds",
                 "Seconds between consecutive generated tokens of a request.", &m->itl);
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
