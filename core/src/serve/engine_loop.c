/* plume serve: the engine thread (engine_loop.h). */
#include "serve/engine_loop.h"
#include "plume/clock.h"

#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plume/grow.h"

struct serve_loop {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_req *head, *tail;          /* FIFO, under mu */
    int n_queued;
    bool stopping, abort_all, exited; /* under mu */
    plume_engine *engine;
    int max_queue, max_running;
    serve_metrics *metrics;
    bool kv_connector;
    pthread_t thread;
    /* engine thread only */
    serve_req **running;
    int n_running;
};

serve_req *serve_req_new(int32_t *prompt, size_t n_prompt, const plume_request_params *rp,
                         char **stop, size_t n_stop)
{
    serve_req *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->prompt = prompt;
    r->n_prompt = n_prompt;
    r->rp = *rp;
    r->stop = stop;
    r->n_stop = n_stop;
    r->rp.stop = (const char *const *)stop;
    r->rp.n_stop = n_stop;
    if (rp->kv_transfer) {
        r->kv_in = *rp->kv_transfer;
        r->rp.kv_transfer = &r->kv_in;
    }
    r->t_arrival = plume_clock_seconds();
    atomic_init(&r->aborted, false);
    r->engine_id = -1;
    return r;
}

void serve_req_ref(serve_req *r)
{
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
}

void serve_req_unref(serve_req *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left)
        return;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->prompt);
    for (size_t i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    free(r->toks);
    free(r->text);
    plume_settings_free(r->sampler_settings);
    free(r);
}

/* Appends one token's event (engine thread, called from inside a step). */
static void push_token(serve_req *r, int32_t token, const char *text, size_t len,
                       const plume_token_logprobs *lp)
{
    pthread_mutex_lock(&r->mu);
    serve_token *toks = plume_grow(r->toks, &r->cap_toks, r->n_toks + 1, 32, sizeof *toks);
    if (toks)
        r->toks = toks;
    char *txt = toks ? plume_grow(r->text, &r->text_cap, r->text_len + len + 1, 256, 1) : NULL;
    if (txt)
        r->text = txt;
    if (toks && txt) {
        memcpy(r->text + r->text_len, text, len);
        serve_token *t = &r->toks[r->n_toks++];
        t->id = token;
        t->text_off = r->text_len;
        t->text_len = len;
        t->has_logprobs = lp != NULL;
        if (lp)
            t->lp = *lp;
        r->text_len += len;
        r->text[r->text_len] = '\0';
    } else {
        /* out of memory: the request ends here rather than lose tokens silently */
        atomic_store(&r->aborted, true);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void on_event_common(serve_loop *l, serve_req *r, int32_t token, const char *text,
                            size_t len, plume_finish_reason reason,
                            const plume_token_logprobs *lp)
{
    (void)l;
    if (token < 0) {
        r->ended = true;
        r->end_reason = reason;
        return;
    }
    double t = plume_clock_seconds();
    if (r->n_events++ == 0)
        serve_metrics_observe_ttft(l->metrics, t - r->t_arrival);
    else
        serve_metrics_observe_itl(l->metrics, t - r->t_last);
    r->t_last = t;
    push_token(r, token, text, len, lp);
}

/* The request's user pointer is the loop's slot for it: a small pair. */
typedef struct req_slot {
    serve_loop *loop;
    serve_req *req;
} req_slot;

static void on_event(void *user, int64_t id, const plume_token_event *ev)
{
    (void)id;
    req_slot *s = user;
    on_event_common(s->loop, s->req, ev->token, ev->text, ev->text_len, ev->reason,
                    ev->logprobs);
}

/* Ends r for its HTTP side: failed (error set) or finished with usage. */
static void finish_req(serve_req *r, bool failed, const char *error, plume_finish_reason why,
                       int64_t n_prompt, int64_t n_output, int64_t n_cached)
{
    pthread_mutex_lock(&r->mu);
    if (failed) {
        r->failed = true;
        size_t n = strlen(error) < sizeof r->error - 1 ? strlen(error) : sizeof r->error - 1;
        memcpy(r->error, error, n);
        r->error[n] = '\0';
    }
    r->finished = true;
    r->finish = why;
    r->usage_prompt = n_prompt;
    r->usage_completion = n_output;
    r->usage_cached = n_cached;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void admit(serve_loop *l, serve_req *r)
{
    if (atomic_load(&r->aborted)) {
        finish_req(r, true, "the client went away before the request started",
                   PLUME_FINISH_ABORT, 0, 0, 0);
        serve_req_unref(r);
        return;
    }
    req_slot *slot = malloc(sizeof *slot);
    if (!slot) {
        finish_req(r, true, "out of memory admitting the request; retry later",
                   PLUME_FINISH_ERROR, 0, 0, 0);
        serve_req_unref(r);
        return;
    }
    *slot = (req_slot){l, r};
    plume_request_params rp = r->rp;
    rp.user = slot;
    rp.on_token = NULL;
    rp.on_event = on_event;
    plume_error err = {0};
    int64_t id = plume_engine_add_tokens(l->engine, r->prompt, r->n_prompt, &rp, &err);
    if (id < 0) {
        free(slot);
        finish_req(r, true, err.msg[0] ? err.msg : "the engine refused the request",
                   PLUME_FINISH_ERROR, 0, 0, 0);
        serve_req_unref(r);
        return;
    }
    r->engine_id = id;
    r->slot = slot;
    l->running[l->n_running++] = r;
    pthread_mutex_lock(&r->mu);
    r->admitted = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Collects every request whose end came: usage, metrics, release. */
static void reap(serve_loop *l)
{
    for (int i = 0; i < l->n_running;) {
        serve_req *r = l->running[i];
        if (!r->ended) {
            i++;
            continue;
        }
        plume_request_result res;
        memset(&res, 0, sizeof res);
        bool have = plume_engine_result(l->engine, r->engine_id, &res) == 0;
        int64_t np = have ? (int64_t)res.n_prompt : (int64_t)r->n_prompt;
        int64_t no = have ? (int64_t)res.n_output : (int64_t)r->n_events;
        int64_t nc = have ? res.n_cached_prompt : 0;
        bool failed = r->end_reason == PLUME_FINISH_ERROR;
        char msg[512];
        snprintf(msg, sizeof msg, "%s",
                 have && res.error ? res.error : "the engine failed the request");
        serve_metrics_request_done(l->metrics, r->end_reason, np, no, nc);
        if (have && res.kv_transfer) { /* read by the HTTP side once finished (under mu) */
            r->kv_out = *res.kv_transfer;
            r->has_kv_out = true;
        }
        plume_engine_release(l->engine, r->engine_id);
        free(r->slot);
        r->slot = NULL;
        finish_req(r, failed, msg, r->end_reason, np, no, nc);
        serve_req_unref(r);
        l->running[i] = l->running[--l->n_running];
    }
}

static void snapshot(serve_loop *l, int n_queued)
{
    plume_engine_stats st = plume_engine_get_stats(l->engine);
    serve_engine_gauges g = {.running = l->n_running, .waiting = n_queued,
                             .spec_drafted = st.spec_drafted,
                             .spec_accepted = st.spec_accepted};
    plume_engine_load ld = plume_engine_get_load(l->engine);
    g.running = ld.running;
    g.waiting = ld.waiting + n_queued;
    g.have_kv = true;
    g.kv_blocks_total = ld.kv_blocks_total;
    g.kv_blocks_used = ld.kv_blocks_used;
    g.have_prefix = true;
    g.prefix_queries = ld.prefix_queries;
    g.prefix_hits = ld.prefix_hits;
    g.have_kv_connector = l->kv_connector;
    g.kv_waiting_remote = ld.kv_waiting_remote;
    g.kv_blocks_deferred = ld.kv_blocks_deferred;
    g.kvc = ld.kv;
    serve_metrics_set_engine(l->metrics, &g);
}

static void *engine_main(void *arg)
{
    serve_loop *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (!l->head && l->n_running == 0 && !l->stopping) {
            if (!l->kv_connector) {
                pthread_cond_wait(&l->cv, &l->mu);
                continue;
            }
            /* a KV connector's transfers go on while the engine is idle
             * (a decode worker claims a segment, one expires): wake up now
             * and then so that /metrics shows them */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 250000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
                break;
        }
        if (l->stopping && !l->head && l->n_running == 0) {
            l->exited = true;
            pthread_mutex_unlock(&l->mu);
            break;
        }
        bool abort_all = l->abort_all;
        serve_req *take = NULL, **tail = &take;
        for (int room = l->max_running - l->n_running; l->head && room > 0; room--) {
            serve_req *r = l->head;
            l->head = r->next;
            if (!l->head)
                l->tail = NULL;
            l->n_queued--;
            r->next = NULL;
            *tail = r;
            tail = &r->next;
        }
        int n_queued = l->n_queued;
        pthread_mutex_unlock(&l->mu);
        while (take) {
            serve_req *r = take;
            take = r->next;
            r->next = NULL;
            if (abort_all)
                atomic_store(&r->aborted, true);
            admit(l, r);
        }
        for (int i = 0; i < l->n_running; i++) {
            serve_req *r = l->running[i];
            if (abort_all)
                atomic_store(&r->aborted, true);
            if (!r->ended && atomic_load(&r->aborted))
                plume_engine_abort(l->engine, r->engine_id);
        }
        reap(l);
        if (plume_engine_has_work(l->engine)) {
            plume_error err = {0};
            if (plume_engine_step(l->engine, &err) < 0) {
                /* the forward failed: every request in the engine ends with the reason */
                for (int i = 0; i < l->n_running; i++) {
                    serve_req *r = l->running[i];
                    if (!r->ended)
                        plume_engine_abort(l->engine, r->engine_id);
                    r->ended = true;
                    r->end_reason = PLUME_FINISH_ERROR;
                }
            }
        }
        reap(l);
        snapshot(l, n_queued);
    }
    return NULL;
}

int serve_loop_start(const serve_loop_opts *o, serve_loop **out)
{
    serve_loop *l = calloc(1, sizeof *l);
    if (!l)
        return -1;
    l->engine = o->engine;
    l->max_queue = o->max_queue;
    l->max_running = o->max_running > 0 ? o->max_running : 1;
    l->kv_connector = o->kv_connector;
    l->metrics = o->metrics;
    l->running = calloc((size_t)l->max_running, sizeof *l->running);
    if (!l->running) {
        free(l);
        return -1;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    /* the gauges exist from the start: /metrics may be read before the
     * engine thread's first step */
    if (l->metrics)
        snapshot(l, 0);
    if (pthread_create(&l->thread, NULL, engine_main, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
        free(l->running);
        free(l);
        return -1;
    }
    *out = l;
    return 0;
}

serve_submit_rc serve_loop_submit(serve_loop *l, serve_req *r)
{
    pthread_mutex_lock(&l->mu);
    serve_submit_rc rc = SERVE_SUBMIT_OK;
    if (l->stopping)
        rc = SERVE_SUBMIT_STOPPING;
    else if (l->n_queued >= l->max_queue)
        rc = SERVE_SUBMIT_FULL;
    if (rc == SERVE_SUBMIT_OK) {
        serve_req_ref(r);
        r->next = NULL;
        if (l->tail)
            l->tail->next = r;
        else
            l->head = r;
        l->tail = r;
        l->n_queued++;
        pthread_cond_signal(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

void serve_loop_wake(serve_loop *l)
{
    pthread_mutex_lock(&l->mu);
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void serve_loop_stop(serve_loop *l, bool abort_all)
{
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    l->abort_all = l->abort_all || abort_all;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* *flag, one of l's, read under l's lock. */
static bool read_locked(serve_loop *l, const bool *flag)
{
    pthread_mutex_lock(&l->mu);
    bool v = *flag;
    pthread_mutex_unlock(&l->mu);
    return v;
}

bool serve_loop_stopping(serve_loop *l) { return read_locked(l, &l->stopping); }

bool serve_loop_stopped(serve_loop *l) { return read_locked(l, &l->exited); }

void serve_loop_join(serve_loop *l)
{
    if (!l)
        return;
    pthread_join(l->thread, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->running);
    free(l);
}
