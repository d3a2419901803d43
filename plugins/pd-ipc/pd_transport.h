/* pd-ipc's transports: how a prefill worker holds a saved prompt's KV
 * segment and serves it, and how a decode worker fetches it.  Everything
 * else (the segment layout, the handshake's identity check, transfer ids,
 * expiry, failure messages, the copies between segments and KV blocks,
 * leak accounting) is shared, in pd_producer.c and pd_consumer.c.
 *   memfd (pd_memfd.c): one machine; the segment is a memfd, its
 *     descriptor goes over a Unix socket (SCM_RIGHTS).
 *   ucx (pd_ucx.c, when built with UCX): across machines; the segment is
 *     host memory registered with ucp_mem_map, the decode worker reads it
 *     with ucp_get_nbx, the messages are UCX active messages. */
#ifndef PD_TRANSPORT_H
#define PD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"

typedef struct plume_kv_connector plume_kv_connector;
typedef struct pd_seg pd_seg;
typedef struct pd_job pd_job;

typedef struct pd_transport {
    const char *name; /* the kv_connector.transport value */

    /* prefill, engine thread: a new segment of bytes for save to fill
     * through *map (seg->fd or seg->buf set).  0, or -1 with err. */
    int (*seg_create)(plume_kv_connector *c, pd_seg *seg, size_t bytes, unsigned char **map,
                      plume_error *err);
    /* prefill, engine thread, optional: 1 when the transport serves the
     * request's KV from its blocks in the pool, in place (it fills
     * seg->block_ids; the engine keeps the blocks until the segment is
     * dropped), 0 to copy it into a segment (seg_create), -1 out of memory. */
    int (*seg_in_place)(plume_kv_connector *c, pd_seg *seg, const int32_t *block_ids,
                        int32_t n_blocks);
    /* prefill: save is done writing through map. */
    void (*seg_filled)(pd_seg *seg, unsigned char *map);
    /* prefill, under mu: frees the segment's memory (the transport's thread
     * or, after serve_stop, anyone). */
    void (*seg_free)(plume_kv_connector *c, pd_seg *seg);
    /* prefill: starts serving decode workers on the transport's own thread
     * (c->thread) and sets c->advertised; serve_stop (after the thread was
     * joined) frees what it holds; the caller drops the segments left after
     * it. */
    int (*serve_start)(plume_kv_connector *c, plume_error *err);
    void (*serve_stop)(plume_kv_connector *c);

    /* decode, fetch thread: fetches job j's segment from its prefill worker
     * (j->xp.remote_addr), every wait bounded by c->timeout_s.  0 with
     * j->map, j->bytes and j's seg_* fields set, or -1 with j->msg set. */
    int (*fetch)(plume_kv_connector *c, pd_job *j);
    /* decode: frees a fetched job's bytes (any thread). */
    void (*job_free)(pd_job *j);
    /* decode, fetch thread, optional: the thread ends (free its state). */
    void (*fetch_end)(plume_kv_connector *c);
} pd_transport;

extern const pd_transport pd_memfd_transport;
#ifdef PD_HAVE_UCX
extern const pd_transport pd_ucx_transport;
#endif

#endif
