/* pd-ipc's ucx transport (pd_transport.h), shared by pd_ucx.c (both
 * sides), pd_ucx_prefill.c and pd_ucx_decode.c: across machines, on UCX's UCP
 * API (any transport UCX finds: TCP, RDMA verbs, shared memory; the tests
 * run UCX_TLS=tcp on loopback).
 *
 * Where the KV pool is host memory (the cpu backend) the prefill worker
 * registers the pool's K and V once (ucp_mem_map) and a saved prompt stays
 * in its blocks, which the engine keeps until the decode worker has read
 * them (reported sent then).  Elsewhere a prompt's blocks are copied into
 * a page-aligned segment, registered at its first GET.  The answer to GET
 * says where the blocks are (K and V bases, layer stride, block ids: the
 * pool layout of plume/backend.h) with the packed remote keys; the decode
 * worker reads them with one ucp_get_nbx per layer, K or V and run of
 * consecutive blocks (one-sided: the prefill worker's engine is not
 * involved), flushes, then sends GOT and the prefill worker lets the
 * blocks (or the copy) go.  The messages (pd_wire.h's pd_msg, then the
 * rkeys and block ids) are UCX active messages, eager, with the reply
 * endpoint attached.
 *
 * Each side has one UCP worker driven by one thread (UCS_THREAD_MODE_SINGLE):
 * the prefill worker's listener thread (accepting endpoints, answering
 * messages, expiring segments), the decode worker's fetch thread (one
 * endpoint per fetch).  Every wait is bounded by timeout_s; a peer that
 * fails is seen through the endpoint's error handler (UCP_ERR_HANDLING_MODE_PEER).
 * Memory a remote get may still read is freed only after its endpoint is
 * closed. */
#ifndef PD_UCX_H
#define PD_UCX_H

#include <stdbool.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include "pd_ipc.h"

#define PD_AM_ID 0x5d

typedef struct ucx_in { /* a received message, handled after progress */
    ucp_ep_h ep;        /* its reply endpoint */
    pd_msg m;
    unsigned char *extra; /* SEG: the bytes after the message (malloc'd) */
    size_t extra_len;
} ucx_in;

typedef struct ucx_conn { /* prefill: a decode worker's endpoint; decode: a prefill worker's */
    ucp_ep_h ep;
    ucs_status_t failed;                    /* UCS_OK while alive */
    char addr[PLUME_KV_XFER_ADDR_MAX];      /* decode: its remote_addr */
    bool greeted;                           /* prefill: its HELLO was accepted */
} ucx_conn;

typedef struct ucx_state {
    plume_kv_connector *c;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener; /* prefill */
    int efd;
    ucx_in *in;
    int n_in, cap_in;
    ucx_conn *conns; /* prefill: connected decode workers; decode: endpoints kept */
    int n_conns, cap_conns;
    ucp_mem_h pool_memh[2]; /* prefill: the KV pool's K and V, registered (NULL: */
    void *pool_rkey[2];     /*   segments are copies, registered one by one) */
    size_t pool_rkey_len[2];
    ucp_ep_h ep;            /* decode: this fetch's endpoint */
    ucs_status_t ep_status; /*   UCS_OK until its error handler runs */
} ucx_state;

/* ---- both sides (pd_ucx.c) ---- */

/* An endpoint's error handler (arg: the state): marks the decode side's
 * fetch endpoint or the prefill side's connection failed. */
void pd_ucx_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
/* Frees the received messages not handled yet. */
void pd_ucx_clear_inbox(ucx_state *st);
/* Sends m (and extra bytes after it) on ep as an eager active message with
 * the reply endpoint, without waiting: the copy it sends is freed when the
 * send completes or fails.  0, or -1 when it could not be posted. */
int pd_ucx_send_msg(ucp_ep_h ep, const pd_msg *m, const void *extra, size_t extra_len);
/* Progresses the worker, or sleeps on its event fd up to ms when idle. */
void pd_ucx_progress_or_wait(ucx_state *st, int ms);
/* Milliseconds to sleep at most before deadline (0 .. 100). */
int pd_ucx_ms_until(double deadline);
/* Closes ep (force: pending operations fail at once), waiting at most
 * seconds for the close to finish.  0 when it did. */
int pd_ucx_close_ep(ucx_state *st, ucp_ep_h ep, bool force, double seconds);
/* Resolves "HOST:PORT" ("[V6]:PORT" too).  0, or -1 with why in msg. */
int pd_ucx_resolve(const char *addr, bool passive, struct sockaddr_storage *out, socklen_t *len,
                   char *msg, size_t cap);
/* A context and a single-threaded worker with the active message handler
 * (pd_msg messages into st->in).  0, or -1 with why in msg. */
int pd_ucx_state_new(plume_kv_connector *c, ucx_state **out, char *msg, size_t cap);
void pd_ucx_state_free(ucx_state *st);

/* ---- the transport's slots (pd_transport.h) ---- */

/* prefill (pd_ucx_prefill.c) */
int pd_ucx_seg_create(plume_kv_connector *c, pd_seg *seg, size_t bytes, unsigned char **map,
                      plume_error *err);
int pd_ucx_seg_in_place(plume_kv_connector *c, pd_seg *seg, const int32_t *block_ids,
                        int32_t n_blocks);
void pd_ucx_seg_filled(pd_seg *seg, unsigned char *map);
void pd_ucx_seg_free(plume_kv_connector *c, pd_seg *seg);
int pd_ucx_serve_start(plume_kv_connector *c, plume_error *err);
void pd_ucx_serve_stop(plume_kv_connector *c);
/* decode (pd_ucx_decode.c) */
int pd_ucx_fetch(plume_kv_connector *c, pd_job *j);
void pd_ucx_job_free(pd_job *j);
void pd_ucx_fetch_end(plume_kv_connector *c);

#endif
