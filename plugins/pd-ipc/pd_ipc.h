/* pd-ipc: the connector instance shared by its files.  A prefill worker
 * (producer, pd_producer.c) copies each finished prompt's KV blocks into a
 * fresh segment and serves it, once, to the decode worker that asks for its
 * transfer id; a decode worker (consumer, pd_consumer.c) fetches segments
 * on a background thread and copies them into its blocks on the engine
 * thread.  A segment lives until its decode worker has it, or, unclaimed,
 * until timeout_s.  How segments are held and moved is the transport's
 * (pd_transport.h): memfd + a Unix socket on one machine (pd_memfd.c), UCX
 * across machines (pd_ucx.c). */
#ifndef PD_IPC_H
#define PD_IPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pd_transport.h"
#include "pd_wire.h"
#include "plume/kv_connector.h"

/* A prefill worker's segment waiting for its decode worker. */
typedef struct pd_seg {
    char id[PLUME_KV_XFER_ID_MAX];
    int fd;                    /* memfd: the segment's memfd */
    void *buf;                 /* ucx: the segment's bytes */
    void *memh;                /* ucx: their registration (NULL until the first claim) */
    void *rkey;                /* ucx: the packed remote key (with memh) */
    size_t rkey_len;
    void *claimed_by;          /* ucx: the endpoint fetching it (NULL: unclaimed) */
    int64_t req_id;            /* the request whose KV it holds */
    int32_t *block_ids;        /* in place (ucx): the request's blocks in the pool, kept by
                                  the engine until the segment is dropped; else NULL */
    size_t bytes;
    int32_t n_tokens, n_blocks;
    uint64_t tokens_hash;
    double t_created;
    double t_claimed;          /* ucx: when claimed_by was set */
} pd_seg;

typedef enum pd_job_state { PD_QUEUED, PD_FETCHING, PD_STAGED, PD_DONE, PD_FAILED } pd_job_state;

/* A decode worker's load of one request. */
typedef struct pd_job {
    int64_t req_id;
    plume_kv_transfer_params xp;
    int32_t n_tokens;          /* positions wanted */
    pd_job_state state;
    bool cancelled;            /* the request went away while fetching */
    void *map;                 /* STAGED: the segment's bytes (transport-owned) */
    size_t bytes;
    int32_t seg_blocks;        /* blocks per layer in the segment */
    int32_t seg_tokens;        /*   the prompt positions it holds */
    uint64_t seg_hash;         /*   and the hash of their token ids */
    double fetch_s;            /* STAGED: how long the fetch took (log_transfers) */
    char msg[480];             /* FAILED: why */
} pd_job;

struct plume_kv_connector {
    plume_kv_role role;
    const pd_transport *tp;
    void *tp_state;                       /* the transport's (its threads' only) */
    double timeout_s;
    bool log_transfers;                   /* decode: one stderr line per transfer, timed */
    bool read_in_place;                   /* ucx, prefill: serve blocks from the pool */
    char sock_path[PLUME_KV_XFER_ADDR_MAX];   /* memfd, prefill: where it listens */
    char address[PLUME_KV_XFER_ADDR_MAX];     /* ucx, prefill: host:port it listens on */
    char advertised[PLUME_KV_XFER_ADDR_MAX];  /* prefill: the remote_addr decode workers get */
    char nonce[32];
    plume_kv_layout kv;
    pd_ident ident;
    bool registered;
    pthread_t thread;                     /* the transport's listener (prefill) or the fetcher */
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


/* Appends v to the id list *a (n, cap); -1 when out of memory. */
int pd_push_id(int64_t **a, int32_t *n, int32_t *cap, int64_t v);

/* True once stop asked the connector's thread to end. */
bool pd_stopping(plume_kv_connector *c);

/* producer (pd_producer.c) */
int pd_producer_start(plume_kv_connector *c, plume_error *err);
int pd_producer_save(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err);
void pd_producer_stop(plume_kv_connector *c);
/* For the transports' listener threads: */
/* Answers a decode worker's HELLO: 0 with *reply HELLO_OK when the
 * identities match, else -1 with *reply an ERR saying what differs (logged). */
int pd_producer_hello(plume_kv_connector *c, const pd_msg *hello, pd_msg *reply);
/* The index of segment id (under mu), or -1 with *reply an ERR that says
 * the KV is gone and what to do. */
int32_t pd_producer_find(plume_kv_connector *c, const char *id, pd_msg *reply);
/* The SEG message describing segment seg. */
pd_msg pd_producer_seg_msg(const pd_seg *seg);
/* Removes segment i (under mu), freeing it through the transport; an
 * in-place one reports its request sent (the engine frees the blocks). */
void pd_producer_drop(plume_kv_connector *c, int32_t i);
/* Drops segments nobody claimed within timeout_s (takes mu; a claimed
 * one is the transport's to expire). */
void pd_producer_expire(plume_kv_connector *c);

/* consumer (pd_consumer.c) */
int pd_consumer_start(plume_kv_connector *c, plume_error *err);
int pd_consumer_enqueue(plume_kv_connector *c, int64_t req_id,
                        const plume_kv_transfer_params *xp, int32_t n_tokens, plume_error *err);
int pd_consumer_load(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err);
/* For the transports' fetch functions (on the fetch thread): */
/* Checks the prefill worker's answer m to HELLO: 0, or -1 with j->msg set. */
int pd_consumer_hello_reply(plume_kv_connector *c, pd_job *j, const pd_msg *m);
/* Checks its answer m to GET: 0 with j's seg_* fields set and *bytes the
 * segment's size, or -1 with j->msg set. */
int pd_consumer_seg_reply(plume_kv_connector *c, pd_job *j, const pd_msg *m, size_t *bytes);
/* Sets j->msg for a transport failure during step ("handshake" or
 * "transfer"): kind 'T' timed out, 'P' malformed message, else gone. */
void pd_consumer_io_fail(plume_kv_connector *c, pd_job *j, const char *step, char kind);
void pd_consumer_cancel(plume_kv_connector *c, int64_t req_id);
void pd_consumer_stop(plume_kv_connector *c);

#endif
