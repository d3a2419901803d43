/* pd-ipc's ucx transport (pd_transport.h): across machines, on UCX's UCP
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
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

typedef struct ucx_conn { /* prefill: one decode worker's endpoint */
    ucp_ep_h ep;
    ucs_status_t failed; /* UCS_OK while alive */
} ucx_conn;

typedef struct ucx_state {
    plume_kv_connector *c;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener; /* prefill */
    int efd;
    ucx_in *in;
    int n_in, cap_in;
    ucx_conn *conns; /* prefill */
    int n_conns, cap_conns;
    ucp_mem_h pool_memh[2]; /* prefill: the KV pool's K and V, registered (NULL: */
    void *pool_rkey[2];     /*   segments are copies, registered one by one) */
    size_t pool_rkey_len[2];
    ucp_ep_h ep;           /* decode: this fetch's endpoint */
    ucs_status_t ep_status; /*   UCS_OK until its error handler runs */
} ucx_state;

/* ---- both sides ---- */

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucx_state *st = arg;
    if (ep == st->ep && st->ep_status == UCS_OK)
        st->ep_status = status;
    for (int i = 0; i < st->n_conns; i++)
        if (st->conns[i].ep == ep && st->conns[i].failed == UCS_OK)
            st->conns[i].failed = status;
}

static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    (void)header;
    (void)header_length;
    ucx_state *st = arg;
    ucx_in in = {0};
    /* every message is sent eager with its reply endpoint; anything else,
     * or a malformed one, is not ours */
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) || pd_msg_parse(data, length, &in.m))
        return UCS_OK;
    in.ep = param->reply_ep;
    in.extra_len = length - sizeof in.m;
    if (in.extra_len) {
        if (!(in.extra = malloc(in.extra_len)))
            return UCS_OK;
        memcpy(in.extra, (const unsigned char *)data + sizeof in.m, in.extra_len);
    }
    if (st->n_in == st->cap_in) {
        int cap = st->cap_in ? 2 * st->cap_in : 16;
        ucx_in *g = realloc(st->in, sizeof *g * (size_t)cap);
        if (!g) {
            free(in.extra);
            return UCS_OK;
        }
        st->in = g;
        st->cap_in = cap;
    }
    st->in[st->n_in++] = in;
    return UCS_OK;
}

static void clear_inbox(ucx_state *st)
{
    for (int i = 0; i < st->n_in; i++)
        free(st->in[i].extra);
    st->n_in = 0;
}

static void free_on_send(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    free(user_data);
    ucp_request_free(request);
}

/* Sends m (and extra bytes after it) on ep without waiting: the buffer is
 * freed when the send completes or fails (a failed endpoint's error
 * handler reports the failure).  0, or -1 when it could not be posted. */
static int send_msg(ucp_ep_h ep, const pd_msg *m, const void *extra, size_t extra_len)
{
    unsigned char *buf = malloc(sizeof *m + extra_len);
    if (!buf)
        return -1;
    memcpy(buf, m, sizeof *m);
    if (extra_len)
        memcpy(buf + sizeof *m, extra, extra_len);
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                                             UCP_OP_ATTR_FIELD_USER_DATA,
                             .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
                             .cb.send = free_on_send,
                             .user_data = buf};
    ucs_status_ptr_t r = ucp_am_send_nbx(ep, PD_AM_ID, NULL, 0, buf, sizeof *m + extra_len, &p);
    if (r == NULL) {
        free(buf);
        return 0;
    }
    if (UCS_PTR_IS_ERR(r)) {
        free(buf);
        return -1;
    }
    return 0;
}

/* Progresses the worker, or sleeps on its event fd up to ms when idle. */
static void progress_or_wait(ucx_state *st, int ms)
{
    if (ucp_worker_progress(st->worker))
        return;
    if (ucp_worker_arm(st->worker) == UCS_ERR_BUSY)
        return;
    struct pollfd p = {.fd = st->efd, .events = POLLIN};
    poll(&p, 1, ms);
}

static int ms_until(double deadline)
{
    double left = deadline - pd_now();
    return left <= 0 ? 0 : left > 0.1 ? 100 : (int)(left * 1000) + 1;
}

/* Closes ep (force: pending operations fail at once), waiting at most
 * seconds for the close to finish.  0 when it did. */
static int close_ep(ucx_state *st, ucp_ep_h ep, bool force, double seconds)
{
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (r == NULL || UCS_PTR_IS_ERR(r))
        return 0;
    double deadline = pd_now() + seconds;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && pd_now() < deadline)
        progress_or_wait(st, ms_until(deadline));
    bool done = ucp_request_check_status(r) != UCS_INPROGRESS;
    ucp_request_free(r);
    return done ? 0 : -1;
}

/* Splits "HOST:PORT" ("[V6]:PORT" too) and resolves it.  0, or -1 with
 * why in msg. */
static int resolve(const char *addr, bool passive, struct sockaddr_storage *out, socklen_t *len,
                   char *msg, size_t cap)
{
    char host[PLUME_KV_XFER_ADDR_MAX];
    snprintf(host, sizeof host, "%s", addr);
    char *colon = strrchr(host, ':');
    if (!colon || colon == host || !colon[1]) {
        snprintf(msg, cap, "'%.200s' is not HOST:PORT", addr);
        return -1;
    }
    *colon = '\0';
    const char *port = colon + 1, *h = host;
    if (host[0] == '[' && colon[-1] == ']') {
        colon[-1] = '\0';
        h = host + 1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
    struct addrinfo *res = NULL;
    int e = getaddrinfo(h, port, &hints, &res);
    if (e || !res) {
        snprintf(msg, cap, "cannot resolve '%.200s': %s", addr, gai_strerror(e));
        return -1;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* A context and a single-threaded worker with our active message handler. */
static int state_new(plume_kv_connector *c, ucx_state **out, char *msg, size_t cap)
{
    ucx_state *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    st->c = c;
    st->efd = -1;
    ucp_config_t *cfg = NULL;
    ucs_status_t s = ucp_config_read(NULL, NULL, &cfg);
    const char *what = "reading its configuration (UCX_* environment variables)";
    if (s == UCS_OK) {
        ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                          .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP};
        s = ucp_init(&p, cfg, &st->ctx);
        ucp_config_release(cfg);
        what = "initializing (no usable transport? check UCX_TLS)";
    }
    if (s == UCS_OK) {
        ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                  .thread_mode = UCS_THREAD_MODE_SINGLE};
        s = ucp_worker_create(st->ctx, &wp, &st->worker);
        what = "creating a worker";
    }
    if (s == UCS_OK) {
        s = ucp_worker_get_efd(st->worker, &st->efd);
        what = "getting the worker's event descriptor";
    }
    if (s == UCS_OK) {
        ucp_am_handler_param_t ap = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                          UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
            .id = PD_AM_ID,
            .flags = UCP_AM_FLAG_WHOLE_MSG,
            .cb = on_am,
            .arg = st};
        s = ucp_worker_set_am_recv_handler(st->worker, &ap);
        what = "setting the active message handler";
    }
    if (s != UCS_OK) {
        snprintf(msg, cap, "UCX failed %s: %s", what, ucs_status_string(s));
        if (st->worker)
            ucp_worker_destroy(st->worker);
        if (st->ctx)
            ucp_cleanup(st->ctx);
        free(st);
        return -1;
    }
    *out = st;
    return 0;
}

static void state_free(ucx_state *st)
{
    if (!st)
        return;
    clear_inbox(st);
    free(st->in);
    free(st->conns);
    if (st->worker)
        ucp_worker_destroy(st->worker);
    if (st->ctx)
        ucp_cleanup(st->ctx);
    free(st);
}

/* ---- prefill ---- */

static int ucx_seg_create(plume_kv_connector *c, pd_seg *seg, size_t bytes, unsigned char **map,
                          plume_error *err)
{
    (void)c;
    void *buf = NULL;
    if (bytes && posix_memalign(&buf, 4096, bytes))
        return plume_err(err, PLUME_ERR_NOMEM, "cannot allocate a %zu-byte KV segment", bytes);
    seg->buf = buf;
    seg->bytes = bytes;
    *map = buf;
    return 0;
}

static int ucx_seg_in_place(plume_kv_connector *c, pd_seg *seg, const int32_t *block_ids,
                            int32_t n_blocks)
{
    ucx_state *st = c->tp_state;
    if (!st || !st->pool_memh[0])
        return 0;
    seg->block_ids = malloc(sizeof *block_ids * (size_t)(n_blocks ? n_blocks : 1));
    if (!seg->block_ids)
        return -1;
    memcpy(seg->block_ids, block_ids, sizeof *block_ids * (size_t)n_blocks);
    return 1;
}

static void ucx_seg_filled(pd_seg *seg, unsigned char *map)
{
    (void)seg;
    (void)map;
}

static void ucx_seg_free(plume_kv_connector *c, pd_seg *seg)
{
    ucx_state *st = c->tp_state;
    if (seg->rkey)
        ucp_rkey_buffer_release(seg->rkey);
    if (seg->memh)
        ucp_mem_unmap(st->ctx, seg->memh);
    free(seg->buf);
    seg->rkey = seg->memh = seg->buf = NULL;
}

static void on_conn(ucp_conn_request_h req, void *arg)
{
    ucx_state *st = arg;
    if (st->n_conns == st->cap_conns) {
        int cap = st->cap_conns ? 2 * st->cap_conns : 8;
        ucx_conn *g = realloc(st->conns, sizeof *g * (size_t)cap);
        if (!g) {
            ucp_listener_reject(st->listener, req);
            return;
        }
        st->conns = g;
        st->cap_conns = cap;
    }
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER,
                         .conn_request = req,
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = on_ep_error, .arg = st}};
    ucp_ep_h ep;
    if (ucp_ep_create(st->worker, &p, &ep) == UCS_OK)
        st->conns[st->n_conns++] = (ucx_conn){ep, UCS_OK};
}

static bool conn_alive(ucx_state *st, ucp_ep_h ep)
{
    for (int i = 0; i < st->n_conns; i++)
        if (st->conns[i].ep == ep)
            return st->conns[i].failed == UCS_OK;
    return false;
}

static void reply_err(ucp_ep_h ep, const char *text)
{
    pd_msg r = pd_msg_new(PD_ERR);
    snprintf(r.text, sizeof r.text, "%s", text);
    send_msg(ep, &r, NULL, 0);
}

/* Registers a copied segment (once).  UCS_OK, or why not. */
static ucs_status_t seg_register(ucx_state *st, pd_seg *seg)
{
    if (!seg->bytes || seg->memh)
        return UCS_OK;
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                                             UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = seg->buf,
                               .length = seg->bytes};
    ucs_status_t s = ucp_mem_map(st->ctx, &mp, (ucp_mem_h *)&seg->memh);
    if (s == UCS_OK)
        s = ucp_rkey_pack(st->ctx, seg->memh, &seg->rkey, &seg->rkey_len);
    return s;
}

/* GET: answers where the segment's blocks are (in the pool, or in the
 * copy, registered now), their rkeys and block ids. */
static void serve_get(ucx_state *st, const ucx_in *in)
{
    plume_kv_connector *c = st->c;
    pd_msg r;
    unsigned char *extra = NULL;
    size_t extra_len = 0;
    pthread_mutex_lock(&c->mu);
    int32_t at = pd_producer_find(c, in->m.id, &r);
    if (at >= 0) {
        pd_seg *seg = &c->segs[at];
        const plume_kv_pool *p = c->kv.pool;
        size_t bb = pd_block_bytes(&c->ident);
        ucs_status_t s = seg->block_ids ? UCS_OK : seg_register(st, seg);
        r = pd_producer_seg_msg(seg);
        if (seg->block_ids) { /* in place: the pool's K and V */
            r.raddr = (uint64_t)(uintptr_t)c->kv.bvt->host_ptr(c->kv.b, p->k);
            r.raddr_v = (uint64_t)(uintptr_t)c->kv.bvt->host_ptr(c->kv.b, p->v);
            r.layer_stride = p->layer_stride;
            r.rkey_len = (uint32_t)st->pool_rkey_len[0];
            r.rkey_v_len = (uint32_t)st->pool_rkey_len[1];
        } else { /* the copy, [layer][k|v][block]: one rkey, blocks 0 .. n-1 */
            r.raddr = (uint64_t)(uintptr_t)seg->buf;
            r.raddr_v = r.raddr + (uint64_t)seg->n_blocks * bb;
            r.layer_stride = 2 * (uint64_t)seg->n_blocks * bb;
            r.rkey_len = (uint32_t)seg->rkey_len;
            r.rkey_v_len = 0;
        }
        extra_len = (size_t)r.rkey_len + r.rkey_v_len + sizeof(int32_t) * (size_t)seg->n_blocks;
        if (s == UCS_OK && extra_len && !(extra = malloc(extra_len)))
            s = UCS_ERR_NO_MEMORY;
        if (s != UCS_OK) {
            r = pd_msg_new(PD_ERR);
            snprintf(r.text, sizeof r.text,
                     "the prefill worker could not register transfer %.64s's memory with UCX "
                     "(%s)",
                     seg->id, ucs_status_string(s));
            extra_len = 0;
        } else if (extra_len) {
            unsigned char *e = extra;
            memcpy(e, seg->block_ids ? st->pool_rkey[0] : seg->rkey, r.rkey_len);
            e += r.rkey_len;
            if (r.rkey_v_len)
                memcpy(e, st->pool_rkey[1], r.rkey_v_len);
            e += r.rkey_v_len;
            for (int32_t i = 0; i < seg->n_blocks; i++, e += sizeof(int32_t)) {
                int32_t id = seg->block_ids ? seg->block_ids[i] : i;
                memcpy(e, &id, sizeof id);
            }
            seg->claimed_by = in->ep;
            seg->t_claimed = pd_now();
        }
    }
    pthread_mutex_unlock(&c->mu);
    send_msg(in->ep, &r, extra, extra_len);
    free(extra);
}

/* GOT: the decode worker has read the segment. */
static void serve_done(ucx_state *st, const ucx_in *in)
{
    plume_kv_connector *c = st->c;
    pthread_mutex_lock(&c->mu);
    for (int32_t i = 0; i < c->n_segs; i++)
        if (c->segs[i].claimed_by == in->ep && strcmp(c->segs[i].id, in->m.id) == 0) {
            pd_producer_drop(c, i);
            c->st.sent++;
            break;
        }
    pthread_mutex_unlock(&c->mu);
}

static void serve_inbox(ucx_state *st)
{
    for (int i = 0; i < st->n_in; i++) {
        const ucx_in *in = &st->in[i];
        pd_msg r;
        if (in->m.type == PD_GOT) { /* (its endpoint may be closing already: the read is done) */
            serve_done(st, in);
            continue;
        }
        if (!conn_alive(st, in->ep))
            continue; /* no answer to a failed endpoint */
        if (in->m.type == PD_HELLO) {
            pd_producer_hello(st->c, &in->m, &r);
            send_msg(in->ep, &r, NULL, 0);
        } else if (in->m.type == PD_GET) {
            serve_get(st, in);
        } else {
            reply_err(in->ep, "unexpected message: only HELLO, GET and GOT go to a prefill worker");
        }
    }
    clear_inbox(st);
}

/* Closes the endpoint of conn i (force) and drops the segments it was
 * reading: no remote get can touch them after the close. */
static void conn_close(ucx_state *st, int i, const char *why)
{
    plume_kv_connector *c = st->c;
    ucp_ep_h ep = st->conns[i].ep;
    close_ep(st, ep, true, 1.0);
    pthread_mutex_lock(&c->mu);
    for (int32_t k = c->n_segs - 1; k >= 0; k--)
        if (c->segs[k].claimed_by == ep) {
            fprintf(stderr, "plume pd-ipc: the decode worker reading transfer %s %s; its KV is "
                            "dropped\n",
                    c->segs[k].id, why);
            pd_producer_drop(c, k);
            c->st.expired++;
        }
    pthread_mutex_unlock(&c->mu);
    st->conns[i] = st->conns[--st->n_conns];
}

/* Closes failed endpoints, and those still reading a segment claimed
 * more than timeout_s ago. */
static void reap_conns(ucx_state *st)
{
    plume_kv_connector *c = st->c;
    double now = pd_now();
    for (int i = st->n_conns - 1; i >= 0; i--) {
        bool late = false;
        pthread_mutex_lock(&c->mu);
        for (int32_t k = 0; k < c->n_segs; k++)
            if (c->segs[k].claimed_by == st->conns[i].ep &&
                now - c->segs[k].t_claimed > c->timeout_s)
                late = true;
        pthread_mutex_unlock(&c->mu);
        if (st->conns[i].failed != UCS_OK)
            conn_close(st, i, "went away");
        else if (late)
            conn_close(st, i, "did not finish within timeout_s");
    }
}

static void pool_unmap(ucx_state *st)
{
    for (int i = 0; i < 2; i++) {
        if (st->pool_rkey[i])
            ucp_rkey_buffer_release(st->pool_rkey[i]);
        if (st->pool_memh[i])
            ucp_mem_unmap(st->ctx, st->pool_memh[i]);
        st->pool_rkey[i] = NULL;
        st->pool_memh[i] = NULL;
    }
}

static void *ucx_listener(void *arg)
{
    plume_kv_connector *c = arg;
    ucx_state *st = c->tp_state;
    while (!pd_stopping(c)) {
        while (ucp_worker_progress(st->worker))
            ;
        serve_inbox(st);
        reap_conns(st);
        pd_producer_expire(c);
        if (ucp_worker_arm(st->worker) == UCS_ERR_BUSY)
            continue;
        struct pollfd p = {.fd = st->efd, .events = POLLIN};
        poll(&p, 1, 200);
    }
    return NULL;
}

static int ucx_serve_start(plume_kv_connector *c, plume_error *err)
{
    char msg[400];
    struct sockaddr_storage sa;
    socklen_t len;
    if (resolve(c->address, true, &sa, &len, msg, sizeof msg))
        return plume_err(err, PLUME_ERR_INVALID, "kv_connector.address: %s", msg);
    /* a restarted prefill worker must listen on its port again at once,
     * while its predecessor's connections linger in TIME_WAIT: UCX's TCP
     * connection manager reads this when the worker is created (not through
     * ucp_config_modify).  At start-up, before the server's threads; a value
     * the user set wins. */
    setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    ucx_state *st;
    if (state_new(c, &st, msg, sizeof msg))
        return plume_err(err, PLUME_ERR_IO, "the ucx transport cannot start: %s", msg);
    /* the KV pool itself, where it is host memory (the cpu backend) and
     * read_in_place: decode workers then read a prompt's blocks where the
     * engine computed them, no copy (else each saved prompt is copied into
     * a segment) */
    const plume_kv_pool *pool = c->kv.pool;
    bool host = c->read_in_place && c->kv.bvt->host_ptr;
    void *kv_base[2] = {host ? c->kv.bvt->host_ptr(c->kv.b, pool->k) : NULL,
                        host ? c->kv.bvt->host_ptr(c->kv.b, pool->v) : NULL};
    for (int i = 0; i < 2 && kv_base[0] && kv_base[1]; i++) {
        ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                                                 UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                   .address = kv_base[i],
                                   .length = (size_t)pool->n_layer * pool->layer_stride};
        if (ucp_mem_map(st->ctx, &mp, &st->pool_memh[i]) != UCS_OK ||
            ucp_rkey_pack(st->ctx, st->pool_memh[i], &st->pool_rkey[i], &st->pool_rkey_len[i]) !=
                UCS_OK) {
            fprintf(stderr, "plume pd-ipc: UCX could not register the KV pool; each prompt's KV "
                            "is copied into a registered segment instead\n");
            pool_unmap(st);
            break;
        }
    }
    ucp_listener_params_t lp = {.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
                                              UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = len},
                                .conn_handler = {.cb = on_conn, .arg = st}};
    ucs_status_t s = ucp_listener_create(st->worker, &lp, &st->listener);
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if (s == UCS_OK)
        s = ucp_listener_query(st->listener, &la);
    if (s != UCS_OK) {
        if (st->listener)
            ucp_listener_destroy(st->listener);
        pool_unmap(st);
        state_free(st);
        return plume_err(err, PLUME_ERR_IO,
                         "the ucx transport cannot listen on %s (%s); is the address this "
                         "machine's and the port free?",
                         c->address, ucs_status_string(s));
    }
    /* the address as given, with the port the listener got (PORT 0) */
    int port = la.sockaddr.ss_family == AF_INET6
                   ? ntohs(((struct sockaddr_in6 *)&la.sockaddr)->sin6_port)
                   : ntohs(((struct sockaddr_in *)&la.sockaddr)->sin_port);
    const char *colon = strrchr(c->address, ':');
    snprintf(c->advertised, sizeof c->advertised, "%s%.*s:%d", PD_UCX_SCHEME,
             (int)(colon - c->address), c->address, port);
    c->tp_state = st;
    if (pthread_create(&c->thread, NULL, ucx_listener, c)) {
        ucp_listener_destroy(st->listener);
        pool_unmap(st);
        state_free(st);
        c->tp_state = NULL;
        return plume_err(err, PLUME_ERR_NOMEM, "cannot start the pd-ipc ucx listener thread");
    }
    c->thread_started = true;
    fprintf(stderr, "plume pd-ipc: ucx transport listening on %s\n", c->advertised + strlen(PD_UCX_SCHEME));
    return 0;
}

static void ucx_serve_stop(plume_kv_connector *c)
{
    ucx_state *st = c->tp_state;
    if (!st)
        return;
    clear_inbox(st);
    ucp_listener_destroy(st->listener);
    while (st->n_conns > 0) /* drops the segments they were reading */
        conn_close(st, st->n_conns - 1, "was cut off: the prefill worker stops");
    pthread_mutex_lock(&c->mu); /* the rest, while the context that registered them lives */
    while (c->n_segs > 0)
        pd_producer_drop(c, c->n_segs - 1);
    pthread_mutex_unlock(&c->mu);
    pool_unmap(st);
    state_free(st);
    c->tp_state = NULL;
}

/* ---- decode ---- */

/* Waits until a message arrives on this fetch's endpoint: 0 with *out
 * (its extra bytes then belong to the caller), or the io kind: 'T' timed out,
 * 'G' the endpoint failed. */
static char wait_msg(ucx_state *st, double deadline, ucx_in *out)
{
    for (;;) {
        for (int i = 0; i < st->n_in; i++)
            if (st->in[i].ep == st->ep) {
                *out = st->in[i];
                st->in[i] = st->in[--st->n_in];
                return 0;
            }
        if (st->ep_status != UCS_OK)
            return 'G';
        if (pd_now() >= deadline)
            return 'T';
        progress_or_wait(st, ms_until(deadline));
    }
}

/* Reads the segment m describes (its rkeys and block ids in extra) into
 * buf, laid out [layer][k|v][block]: one ucp_get_nbx per layer, K or V and
 * run of consecutive blocks, then a flush of the endpoint.  0, or the io
 * kind ('P' for a description that does not fit). */
static char get_blocks(ucx_state *st, const plume_kv_connector *c, unsigned char *buf,
                       const ucx_in *m, double deadline)
{
    const pd_msg *g = &m->m;
    int32_t nb = g->n_blocks;
    size_t bb = pd_block_bytes(&c->ident);
    if (m->extra_len != (size_t)g->rkey_len + g->rkey_v_len + sizeof(int32_t) * (size_t)nb ||
        !g->rkey_len)
        return 'P';
    ucp_rkey_h rkey[2] = {NULL, NULL};
    const unsigned char *ids_at = m->extra + g->rkey_len + g->rkey_v_len;
    char kind = 0;
    if (ucp_ep_rkey_unpack(st->ep, m->extra, &rkey[0]) != UCS_OK ||
        (g->rkey_v_len &&
         ucp_ep_rkey_unpack(st->ep, m->extra + g->rkey_len, &rkey[1]) != UCS_OK)) {
        kind = 'P';
        goto out;
    }
    ucp_request_param_t p = {.op_attr_mask = 0};
    bool posted = false;
    for (int32_t l = 0; l < c->kv.pool->n_layer && !kind; l++)
        for (int kv = 0; kv < 2 && !kind; kv++)
            for (int32_t i = 0, n; i < nb && !kind; i += n) {
                int32_t id0, id;
                memcpy(&id0, ids_at + sizeof id0 * (size_t)i, sizeof id0);
                for (n = 1; i + n < nb; n++) { /* a run of consecutive blocks */
                    memcpy(&id, ids_at + sizeof id * (size_t)(i + n), sizeof id);
                    if (id != id0 + n)
                        break;
                }
                if (id0 < 0) {
                    kind = 'P';
                    break;
                }
                uint64_t raddr = (kv ? g->raddr_v : g->raddr) + (uint64_t)l * g->layer_stride +
                                 (uint64_t)id0 * bb;
                unsigned char *dst = buf + (((size_t)l * 2 + (size_t)kv) * (size_t)nb + (size_t)i) * bb;
                ucs_status_ptr_t r = ucp_get_nbx(st->ep, dst, (size_t)n * bb, raddr,
                                                 rkey[kv && rkey[1] ? 1 : 0], &p);
                posted = true;
                if (UCS_PTR_IS_ERR(r))
                    kind = 'G';
                else if (r)
                    ucp_request_free(r); /* the flush below waits for it */
            }
    if (!kind) { /* every get done: the endpoint's flush completes */
        ucs_status_ptr_t r = ucp_ep_flush_nbx(st->ep, &p);
        if (UCS_PTR_IS_ERR(r)) {
            kind = 'G';
        } else if (r) {
            while (ucp_request_check_status(r) == UCS_INPROGRESS && st->ep_status == UCS_OK &&
                   pd_now() < deadline)
                progress_or_wait(st, ms_until(deadline));
            ucs_status_t s = ucp_request_check_status(r);
            if (s == UCS_INPROGRESS)
                kind = st->ep_status != UCS_OK ? 'G' : 'T';
            else if (s != UCS_OK)
                kind = 'G';
            ucp_request_free(r);
        }
    }
    if (kind && posted) { /* gets may be in flight: nothing may write buf after we return */
        close_ep(st, st->ep, true, 5.0);
        st->ep = NULL;
    }
out:
    for (int i = 0; i < 2; i++)
        if (rkey[i])
            ucp_rkey_destroy(rkey[i]);
    return kind;
}

static int ucx_fetch(plume_kv_connector *c, pd_job *j)
{
    const char *addr = j->xp.remote_addr;
    size_t sl = strlen(PD_UCX_SCHEME);
    if (strncmp(addr, PD_UCX_SCHEME, sl) != 0) {
        snprintf(j->msg, sizeof j->msg,
                 "remote_addr '%.200s' is not a ucx:// address: the prefill worker uses the "
                 "memfd transport; set the same kv_connector.transport in both workers",
                 addr);
        return -1;
    }
    struct sockaddr_storage sa;
    socklen_t len;
    char why[400];
    if (resolve(addr + sl, false, &sa, &len, why, sizeof why)) {
        snprintf(j->msg, sizeof j->msg, "remote_addr: %s", why);
        return -1;
    }
    ucx_state *st = c->tp_state;
    if (!st) {
        if (state_new(c, &st, why, sizeof why)) {
            snprintf(j->msg, sizeof j->msg, "the ucx transport cannot start: %s", why);
            return -1;
        }
        c->tp_state = st;
    }
    double deadline = pd_now() + c->timeout_s;
    clear_inbox(st);
    st->ep_status = UCS_OK;
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER,
                         .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
                         .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = len},
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = on_ep_error, .arg = st}};
    ucs_status_t s = ucp_ep_create(st->worker, &p, &st->ep);
    if (s != UCS_OK) {
        st->ep = NULL;
        snprintf(j->msg, sizeof j->msg,
                 "cannot reach the prefill worker at %.200s (%s); is it running?", addr,
                 ucs_status_string(s));
        return -1;
    }
    int rc = -1;
    void *buf = NULL;
    ucx_in m = {0};
    const char *step = "handshake";
    char kind = 0;
    pd_msg hello = pd_msg_new(PD_HELLO);
    hello.ident = c->ident;
    if (send_msg(st->ep, &hello, NULL, 0)) {
        kind = 'G';
        goto io;
    }
    if ((kind = wait_msg(st, deadline, &m))) {
        if (kind == 'G') { /* nothing came back: the connection itself failed */
            snprintf(j->msg, sizeof j->msg,
                     "cannot reach the prefill worker at %.200s (%s); is it running?", addr,
                     ucs_status_string(st->ep_status));
            goto out;
        }
        goto io;
    }
    if (pd_consumer_hello_reply(c, j, &m.m))
        goto out;
    step = "transfer";
    pd_msg get = pd_msg_new(PD_GET);
    snprintf(get.id, sizeof get.id, "%s", j->xp.transfer_id);
    if (send_msg(st->ep, &get, NULL, 0)) {
        kind = 'G';
        goto io;
    }
    free(m.extra);
    m = (ucx_in){0};
    if ((kind = wait_msg(st, deadline, &m)))
        goto io;
    size_t want;
    if (pd_consumer_seg_reply(c, j, &m.m, &want))
        goto out;
    if (want && posix_memalign(&buf, 4096, want)) {
        buf = NULL;
        snprintf(j->msg, sizeof j->msg, "cannot allocate %zu bytes for transfer %s", want,
                 j->xp.transfer_id);
        goto out;
    }
    if (want && (kind = get_blocks(st, c, buf, &m, deadline)))
        goto io;
    pd_msg done = pd_msg_new(PD_GOT);
    memcpy(done.id, m.m.id, sizeof done.id);
    send_msg(st->ep, &done, NULL, 0); /* the close below flushes it */
    j->map = buf;
    j->bytes = want;
    buf = NULL;
    rc = 0;
    goto out;
io:
    pd_consumer_io_fail(c, j, step, kind);
out:
    free(m.extra);
    /* graceful after a transfer (flushes GOT), force after a failure; a
     * close that does not finish in time goes on in the background (no
     * buffer of ours is in use by then) */
    if (st->ep)
        close_ep(st, st->ep, rc != 0, rc ? 5.0 : c->timeout_s);
    st->ep = NULL;
    free(buf); /* the endpoint is closed: nothing writes into it any more */
    clear_inbox(st);
    return rc;
}

static void ucx_job_free(pd_job *j)
{
    free(j->map);
    j->map = NULL;
}

static void ucx_fetch_end(plume_kv_connector *c)
{
    state_free(c->tp_state);
    c->tp_state = NULL;
}

const pd_transport pd_ucx_transport = {
    .name = "ucx",
    .seg_in_place = ucx_seg_in_place,
    .seg_create = ucx_seg_create,
    .seg_filled = ucx_seg_filled,
    .seg_free = ucx_seg_free,
    .serve_start = ucx_serve_start,
    .serve_stop = ucx_serve_stop,
    .fetch = ucx_fetch,
    .job_free = ucx_job_free,
    .fetch_end = ucx_fetch_end,
};
