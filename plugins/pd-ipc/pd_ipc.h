/* pd-ipc: the connector instance shared by its files.  A prefill worker
 * (producer, pd_producer.c) copies each finished prompt's KV blocks into a
 * fresh memfd segment and serves it, once, to the decode worker that asks
 * for its transfer id on the Unix socket; a decode worker (consumer,
 * pd_consumer.c) fetches segments on a background thread and copies them
 * into its blocks on the engine thread.  A segment lives until its decode
 * worker has copied it, or, unclaimed, until timeout_s. */
#ifndef PD_IPC_H
#define PD_IPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pd_wire.h"
#include "plume/kv_connector.h"

/* A prefill worker's segment waiting for its decode worker. */
typedef struct pd_seg {
    char id[PLUME_KV_XFER_ID_MAX];
    int fd;
    size_t bytes;
    int32_t n_tokens, n_blocks;
    uint64_t tokens_hash;
    double t_created;
} pd_seg;

typedef enum pd_job_state { PD_QUEUED, PD_FETCHING, PD_STAGED, PD_DONE, PD_FAILED } pd_job_state;

/* A decode worker's load of one request. */
typedef struct pd_job {
    int64_t req_id;
    plume_kv_transfer_params xp;
    int32_t n_tokens;          /* positions wanted */
    pd_job_state state;
    bool cancelled;            /* the request went away while fetching */
    void *map;                 /* STAGED: the segment, mapped read-only */
    size_t bytes;
    int32_t seg_blocks;        /* blocks per layer in the segment */
    int32_t seg_tokens;        /*   the prompt positions it holds */
    uint64_t seg_hash;         /*   and the hash of their token ids */
    char msg[480];             /* FAILED: why */
} pd_job;

struct plume_kv_connector {
    plume_kv_role role;
    double timeout_s;
    char sock_path[PLUME_KV_XFER_ADDR_MAX];
    char nonce[32];
    plume_kv_layout kv;
    pd_ident ident;
    bool registered;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;                        /* under mu */
    int listen_fd;                        /* producer */
    pd_seg *segs;                         /* producer, under mu */
    int32_t n_segs, cap_segs;
    pd_job **jobs;                        /* consumer, under mu */
    int32_t n_jobs, cap_jobs;
    int64_t *sent, *received, *failed;    /* reported by the next get_finished */
    int32_t n_sent, n_received, n_failed, cap_sent, cap_received, cap_failed;
    char **failed_msg;
    /* get_finished's storage (valid until the next call) */
    int64_t *out_sent, *out_received, *out_failed;
    char **out_failed_msg;
    int32_t out_cap;
    plume_kv_connector_stats st;          /* under mu */
};

/* Seconds on a monotonic clock. */
double pd_now(void);

/* Appends v to the id list *a (n, cap); -1 when out of memory. */
int pd_push_id(int64_t **a, int32_t *n, int32_t *cap, int64_t v);

/* producer (pd_producer.c) */
int pd_producer_start(plume_kv_connector *c, plume_error *err);
int pd_producer_save(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err);
void pd_producer_stop(plume_kv_connector *c);

/* consumer (pd_consumer.c) */
int pd_consumer_start(plume_kv_connector *c, plume_error *err);
int pd_consumer_enqueue(plume_kv_connector *c, int64_t req_id,
                        const plume_kv_transfer_params *xp, int32_t n_tokens, plume_error *err);
int pd_consumer_load(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err);
void pd_consumer_cancel(plume_kv_connector *c, int64_t req_id);
void pd_consumer_stop(plume_kv_connector *c);

#endif
