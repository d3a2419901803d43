/* plume serve: the engine thread and the per-request channels.
 *
 * The engine (plume/engine.h) is not thread-safe, so one thread owns it.
 * HTTP threads build a serve_req (prompt ids and request parameters),
 * submit it to a FIFO bounded by --max-queue, and wait on the request's
 * own mutex and condition variable for what the engine thread pushes:
 * admission (or the engine's reason for refusing it), token events and
 * the end with usage.  A client that goes away marks its request aborted;
 * the engine thread then calls plume_engine_abort and releases it. */
#ifndef PLUME_SERVE_ENGINE_LOOP_H
#define PLUME_SERVE_ENGINE_LOOP_H

#include "serve/serve_api.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/engine.h"
#include "plume/settings.h"
#include "serve/metrics.h"

typedef struct serve_token {
    int32_t id;
    size_t text_off, text_len;       /* into serve_req.text */
    bool has_logprobs;
    plume_token_logprobs lp;
} serve_token;

typedef struct serve_req {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;                        /* under mu */
    /* input, fixed at submit */
    int32_t *prompt;
    size_t n_prompt;
    plume_request_params rp;         /* rp.stop points into stop[] */
    char **stop;
    size_t n_stop;
    double t_arrival;
    plume_kv_transfer_params kv_in;  /* rp.kv_transfer points here when given */
    plume_settings *sampler_settings; /* rp.sampler_settings when owned here (freed with it) */
    atomic_bool aborted;             /* set by the HTTP side when the client left */
    /* produced by the engine thread, under mu */
    bool admitted, failed, finished;
    char error[512];                 /* when failed */
    serve_token *toks;
    size_t n_toks, cap_toks;
    char *text;
    size_t text_len, text_cap;
    plume_finish_reason finish;
    bool has_kv_out;                 /* prefill worker: where the prompt's KV waits */
    plume_kv_transfer_params kv_out;
    int64_t usage_prompt, usage_completion, usage_cached;
    /* engine thread only */
    struct serve_req *next;          /* FIFO link */
    void *slot;                      /* the engine callback's user pointer */
    int64_t engine_id;
    bool ended;                      /* the engine's final event came */
    plume_finish_reason end_reason;
    double t_last;
    size_t n_events;
} serve_req;

/* A request holding one reference (the caller's); prompt and stop are taken
 * over (freed with it).  NULL when out of memory. */
serve_req *serve_req_new(int32_t *prompt, size_t n_prompt, const plume_request_params *rp,
                         char **stop, size_t n_stop);
void serve_req_ref(serve_req *r);
void serve_req_unref(serve_req *r);

typedef struct serve_loop serve_loop;

typedef struct serve_loop_opts {
    plume_engine *engine;            /* owned by the loop's thread while it runs */
    int max_queue;                   /* requests waiting for admission, at most */
    int max_running;                 /* requests handed to the engine at once */
    serve_metrics *metrics;
    bool kv_connector;               /* the engine has one: /metrics shows its counts */
} serve_loop_opts;

PLUME_SERVE_API int serve_loop_start(const serve_loop_opts *o, serve_loop **out);
typedef enum { SERVE_SUBMIT_OK, SERVE_SUBMIT_FULL, SERVE_SUBMIT_STOPPING } serve_submit_rc;
/* Queues r (the loop takes its own reference). */
serve_submit_rc serve_loop_submit(serve_loop *l, serve_req *r);
/* Wakes the engine thread (after setting a request's aborted flag). */
void serve_loop_wake(serve_loop *l);
/* Stops accepting; with abort_all, aborts every request in flight.  The
 * engine thread exits once nothing is left. */
PLUME_SERVE_API void serve_loop_stop(serve_loop *l, bool abort_all);
bool serve_loop_stopping(serve_loop *l);
/* True once the engine thread has finished everything and exited. */
PLUME_SERVE_API bool serve_loop_stopped(serve_loop *l);
/* Joins the engine thread (after serve_loop_stop) and frees the loop. */
PLUME_SERVE_API void serve_loop_join(serve_loop *l);

#endif
