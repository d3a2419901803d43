/* pd-ipc's ucx transport, prefill side (pd_ucx.h): registering the KV
 * pool (or copied segments), the listener thread that answers decode
 * workers' active messages, and closing their endpoints before the memory
 * they read goes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_ucx.h"
#include "plume/clock.h"

int pd_ucx_seg_create(plume_kv_connector *c, pd_seg *seg, size_t bytes, unsigned char **map,
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

int pd_ucx_seg_in_place(plume_kv_connector *c, pd_seg *seg, const int32_t *block_ids,
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

void pd_ucx_seg_filled(pd_seg *seg, unsigned char *map)
{
    (void)seg;
    (void)map;
}

void pd_ucx_seg_free(plume_kv_connector *c, pd_seg *seg)
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
                         .err_handler = {.cb = pd_ucx_on_ep_error, .arg = st}};
    ucp_ep_h ep;
    if (ucp_ep_create(st->worker, &p, &ep) == UCS_OK)
        st->conns[st->n_conns++] = (ucx_conn){ep, UCS_OK, "", false};
}

static bool conn_alive(ucx_state *st, ucp_ep_h ep)
{
    for (int i = 0; i < st->n_conns; i++)
        if (st->conns[i].ep == ep)
            return st->conns[i].failed == UCS_OK;
    return false;
}

/* The kept connection of ep, or NULL. */
static ucx_conn *conn_of(ucx_state *st, ucp_ep_h ep)
{
    for (int i = 0; i < st->n_conns; i++)
        if (st->conns[i].ep == ep)
            return &st->conns[i];
    return NULL;
}

static void reply_err(ucp_ep_h ep, const char *text)
{
    pd_msg r = pd_msg_new(PD_ERR);
    snprintf(r.text, sizeof r.text, "%s", text);
    pd_ucx_send_msg(ep, &r, NULL, 0);
}

/* Registers a copied segment (once).  UCS_OK, or why not. */
static ucs_status_t seg_register(ucx_state *st, pd_seg *seg)
{
    if (!seg->bytes || seg->memh)
        return UCS_OK;
    ucp_mem_map_params_t mp = {.field_mask =
                                   UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
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
            seg->t_claimed = plume_clock_seconds();
        }
    }
    pthread_mutex_unlock(&c->mu);
    pd_ucx_send_msg(in->ep, &r, extra, extra_len);
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
            const int bad = pd_producer_hello(st->c, &in->m, &r);
            ucx_conn *cn = conn_of(st, in->ep);
            if (cn)
                cn->greeted = !bad;
            pd_ucx_send_msg(in->ep, &r, NULL, 0);
        } else if (in->m.type == PD_GET) {
            const ucx_conn *cn = conn_of(st, in->ep);
            if (!cn || !cn->greeted) /* the identity check gates every read */
                reply_err(in->ep, "GET before an accepted HELLO: the decode worker must shake "
                                  "hands (same model, dtype, block size, layers) first");
            else
                serve_get(st, in);
        } else {
            reply_err(in->ep, "unexpected message: only HELLO, GET and GOT go to a prefill worker");
        }
    }
    pd_ucx_clear_inbox(st);
}

/* Closes the endpoint of conn i (force) and drops the segments it was
 * reading: no remote get can touch them after the close. */
static void conn_close(ucx_state *st, int i, const char *why)
{
    plume_kv_connector *c = st->c;
    ucp_ep_h ep = st->conns[i].ep;
    pd_ucx_close_ep(st, ep, true, 1.0);
    pthread_mutex_lock(&c->mu);
    for (int32_t k = c->n_segs - 1; k >= 0; k--)
        if (c->segs[k].claimed_by == ep) {
            fprintf(stderr,
                    "plume pd-ipc: the decode worker reading transfer %s %s; its KV is "
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
    double now = plume_clock_seconds();
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
        /* bounded, so that a flood of messages cannot starve serving,
         * reaping, expiry and the stop check */
        for (int spins = 0; spins < 4096 && ucp_worker_progress(st->worker); spins++)
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

int pd_ucx_serve_start(plume_kv_connector *c, plume_error *err)
{
    char msg[400];
    struct sockaddr_storage sa;
    socklen_t len;
    if (pd_ucx_resolve(c->address, true, &sa, &len, msg, sizeof msg))
        return plume_err(err, PLUME_ERR_INVALID, "kv_connector.address: %s", msg);
    /* a restarted prefill worker must listen on its port again at once,
     * while its predecessor's connections linger in TIME_WAIT: UCX's TCP
     * connection manager reads this when the worker is created (not through
     * ucp_config_modify).  At start-up, before the server's threads; a value
     * the user set wins. */
    setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    ucx_state *st;
    if (pd_ucx_state_new(c, &st, msg, sizeof msg))
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
        pd_ucx_state_free(st);
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
        pd_ucx_state_free(st);
        c->tp_state = NULL;
        return plume_err(err, PLUME_ERR_NOMEM, "cannot start the pd-ipc ucx listener thread");
    }
    c->thread_started = true;
    fprintf(stderr, "plume pd-ipc: ucx transport listening on %s\n",
            c->advertised + strlen(PD_UCX_SCHEME));
    return 0;
}

void pd_ucx_serve_stop(plume_kv_connector *c)
{
    ucx_state *st = c->tp_state;
    if (!st)
        return;
    pd_ucx_clear_inbox(st);
    ucp_listener_destroy(st->listener);
    while (st->n_conns > 0) /* drops the segments they were reading */
        conn_close(st, st->n_conns - 1, "was cut off: the prefill worker stops");
    pthread_mutex_lock(&c->mu); /* the rest, while the context that registered them lives */
    while (c->n_segs > 0)
        pd_producer_drop(c, c->n_segs - 1);
    pthread_mutex_unlock(&c->mu);
    pool_unmap(st);
    pd_ucx_state_free(st);
    c->tp_state = NULL;
}
