/* pd-ipc's ucx transport, decode side (pd_ucx.h): the fetch thread's
 * transfer: connect and handshake (once per prefill worker: the endpoint is
 * kept for its next transfers, up to PD_UCX_PEERS of them), GET, the reads
 * of the blocks, GOT; every wait bounded by timeout_s. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_ucx.h"
#include "plume/clock.h"

#define PD_UCX_PEERS 8 /* prefill workers whose endpoints are kept */

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
        if (plume_clock_seconds() >= deadline)
            return 'T';
        pd_ucx_progress_or_wait(st, pd_ucx_ms_until(deadline));
    }
}

/* Flushes this fetch's endpoint: every operation posted on it has
 * completed (a get: its bytes are here; a message: delivered).  0, or the
 * io kind. */
static char flush_ep(ucx_state *st, double deadline)
{
    ucp_request_param_t p = {.op_attr_mask = 0};
    ucs_status_ptr_t r = ucp_ep_flush_nbx(st->ep, &p);
    if (r == NULL)
        return 0;
    if (UCS_PTR_IS_ERR(r))
        return 'G';
    while (ucp_request_check_status(r) == UCS_INPROGRESS && st->ep_status == UCS_OK &&
           plume_clock_seconds() < deadline)
        pd_ucx_progress_or_wait(st, pd_ucx_ms_until(deadline));
    ucs_status_t s = ucp_request_check_status(r);
    ucp_request_free(r);
    return s == UCS_OK ? 0 : s == UCS_INPROGRESS && st->ep_status == UCS_OK ? 'T' : 'G';
}

/* Reads the segment m describes (its rkeys and block ids in extra) into
 * buf, laid out [layer][k|v][block]: one ucp_get_nbx per layer, K or V and
 * run of consecutive blocks, then a flush of the endpoint.  0, or the io
 * kind ('P' for a description that does not fit); after a failure gets
 * may still be writing into buf until the endpoint is closed. */
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
    bool issued = false; /* a get went out */
    if (ucp_ep_rkey_unpack(st->ep, m->extra, &rkey[0]) != UCS_OK ||
        (g->rkey_v_len && ucp_ep_rkey_unpack(st->ep, m->extra + g->rkey_len, &rkey[1]) != UCS_OK)) {
        kind = 'P';
        goto out;
    }
    ucp_request_param_t p = {.op_attr_mask = 0};
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
                if (id0 < 0 || (int64_t)id0 + n > INT32_MAX) {
                    kind = 'P';
                    break;
                }
                uint64_t raddr = (kv ? g->raddr_v : g->raddr) + (uint64_t)l * g->layer_stride +
                                 (uint64_t)id0 * bb;
                unsigned char *dst =
                    buf + (((size_t)l * 2 + (size_t)kv) * (size_t)nb + (size_t)i) * bb;
                ucs_status_ptr_t r = ucp_get_nbx(st->ep, dst, (size_t)n * bb, raddr,
                                                 rkey[kv && rkey[1] ? 1 : 0], &p);
                if (UCS_PTR_IS_ERR(r))
                    kind = 'G';
                else if (r)
                    ucp_request_free(r); /* the flush below waits for it */
                issued = true;
            }
    if (!kind) /* every get done: the endpoint's flush completes */
        kind = flush_ep(st, deadline);
out:
    if (kind && issued) { /* gets may be outstanding: they end with the endpoint, and
                             only then may their rkeys go */
        pd_ucx_close_ep(st, st->ep, true, 5.0);
        st->ep = NULL;
    }
    for (int i = 0; i < 2; i++)
        if (rkey[i])
            ucp_rkey_destroy(rkey[i]);
    return kind;
}

/* The kept endpoint to addr, or -1. */
static int peer_find(const ucx_state *st, const char *addr)
{
    for (int k = 0; k < st->n_conns; k++)
        if (strcmp(st->conns[k].addr, addr) == 0)
            return k;
    return -1;
}

/* Forgets kept endpoint k, closing it (force) unless it is closed already. */
static void peer_drop(ucx_state *st, int k, bool closed)
{
    if (!closed)
        pd_ucx_close_ep(st, st->conns[k].ep, true, 5.0);
    st->conns[k] = st->conns[--st->n_conns];
}

/* Connects to the prefill worker at addr and shakes hands (identities):
 * 0 with the endpoint kept at *k, or -1 with j->msg set. */
static int peer_connect(ucx_state *st, plume_kv_connector *c, pd_job *j,
                        const struct sockaddr_storage *sa, socklen_t len, double deadline, int *k)
{
    const char *addr = j->xp.remote_addr;
    if (st->n_conns == PD_UCX_PEERS)
        peer_drop(st, 0, false);
    if (st->n_conns == st->cap_conns) {
        ucx_conn *g = realloc(st->conns, sizeof *g * PD_UCX_PEERS);
        if (!g) {
            snprintf(j->msg, sizeof j->msg, "out of memory connecting to %.200s", addr);
            return -1;
        }
        st->conns = g;
        st->cap_conns = PD_UCX_PEERS;
    }
    ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                       UCP_EP_PARAM_FIELD_ERR_HANDLER,
                         .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
                         .sockaddr = {.addr = (const struct sockaddr *)sa, .addrlen = len},
                         .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                         .err_handler = {.cb = pd_ucx_on_ep_error, .arg = st}};
    st->ep_status = UCS_OK;
    ucs_status_t s = ucp_ep_create(st->worker, &p, &st->ep);
    if (s != UCS_OK) {
        st->ep = NULL;
        snprintf(j->msg, sizeof j->msg,
                 "cannot reach the prefill worker at %.200s (%s); is it running?", addr,
                 ucs_status_string(s));
        return -1;
    }
    ucx_in m = {0};
    pd_msg hello = pd_msg_new(PD_HELLO);
    hello.ident = c->ident;
    char kind = pd_ucx_send_msg(st->ep, &hello, NULL, 0) ? 'G' : wait_msg(st, deadline, &m);
    int rc = -1;
    if (kind == 'G') /* nothing came back: the connection itself failed */
        snprintf(j->msg, sizeof j->msg,
                 "cannot reach the prefill worker at %.200s (%s); is it running?", addr,
                 ucs_status_string(st->ep_status != UCS_OK ? st->ep_status : UCS_ERR_IO_ERROR));
    else if (kind)
        pd_consumer_io_fail(c, j, "handshake", kind);
    else
        rc = pd_consumer_hello_reply(c, j, &m.m);
    free(m.extra);
    if (rc) {
        pd_ucx_close_ep(st, st->ep, true, 5.0);
        st->ep = NULL;
        return -1;
    }
    *k = st->n_conns++;
    st->conns[*k] = (ucx_conn){st->ep, UCS_OK, "", false};
    snprintf(st->conns[*k].addr, sizeof st->conns[*k].addr, "%s", addr);
    return 0;
}

/* Tells the prefill worker that segment id (a transfer id) is done with;
 * an endpoint on which that fails is closed (the prefill worker then drops
 * what it holds for it). */
static void send_got(ucx_state *st, const char *id, double deadline)
{
    pd_msg got = pd_msg_new(PD_GOT);
    memcpy(got.id, id, sizeof got.id);
    if (pd_ucx_send_msg(st->ep, &got, NULL, 0) || flush_ep(st, deadline)) {
        pd_ucx_close_ep(st, st->ep, true, 5.0);
        st->ep = NULL;
    }
}

/* GET, the reads, GOT on st->ep: 0 with j->map, j->bytes and j's seg_*
 * fields set, or -1 with j->msg set and *kind the io kind of a transport
 * failure (0: the prefill worker refused, the endpoint is fine).  An
 * endpoint that failed is closed (st->ep NULL) before buffers go. */
static int transfer(ucx_state *st, plume_kv_connector *c, pd_job *j, double deadline, char *kind)
{
    ucx_in m = {0};
    void *buf = NULL;
    int rc = -1;
    size_t want;
    pd_msg get = pd_msg_new(PD_GET);
    snprintf(get.id, sizeof get.id, "%s", j->xp.transfer_id);
    *kind = pd_ucx_send_msg(st->ep, &get, NULL, 0) ? 'G' : wait_msg(st, deadline, &m);
    if (*kind)
        goto io;
    if (pd_consumer_seg_reply(c, j, &m.m, &want))
        goto refuse;
    if (want && posix_memalign(&buf, 4096, want)) {
        buf = NULL;
        snprintf(j->msg, sizeof j->msg, "cannot allocate %zu bytes for transfer %s", want,
                 j->xp.transfer_id);
        goto refuse;
    }
    if (want && (*kind = get_blocks(st, c, buf, &m, deadline)))
        goto io;
    /* the bytes are here whatever becomes of GOT: if it is lost the prefill
     * worker lets the blocks go when it sees the endpoint closed, or after
     * timeout_s */
    send_got(st, m.m.id, deadline);
    j->map = buf;
    j->bytes = want;
    buf = NULL;
    rc = 0;
    goto out;
refuse:
    /* a segment the prefill worker claimed for this endpoint and that will not
     * be read: let it go now, not after timeout_s (when the endpoint's reaping
     * would also drop the next transfer's) */
    if (m.m.type == PD_SEG)
        send_got(st, m.m.id, deadline);
    goto out;
io:
    pd_consumer_io_fail(c, j, "transfer", *kind);
    pd_ucx_close_ep(st, st->ep, true, 5.0); /* reads into buf end here */
    st->ep = NULL;
out:
    free(m.extra);
    free(buf);
    return rc;
}

int pd_ucx_fetch(plume_kv_connector *c, pd_job *j)
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
    if (pd_ucx_resolve(addr + sl, false, &sa, &len, why, sizeof why)) {
        snprintf(j->msg, sizeof j->msg, "remote_addr: %s", why);
        return -1;
    }
    ucx_state *st = c->tp_state;
    if (!st) {
        if (pd_ucx_state_new(c, &st, why, sizeof why)) {
            snprintf(j->msg, sizeof j->msg, "the ucx transport cannot start: %s", why);
            return -1;
        }
        c->tp_state = st;
    }
    double deadline = plume_clock_seconds() + c->timeout_s;
    int rc = -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        pd_ucx_clear_inbox(st);
        int k = peer_find(st, addr);
        if (k >= 0 && st->conns[k].failed != UCS_OK) {
            peer_drop(st, k, false);
            k = -1;
        }
        bool reused = k >= 0;
        if (k < 0 && peer_connect(st, c, j, &sa, len, deadline, &k))
            break;
        st->ep = st->conns[k].ep;
        st->ep_status = UCS_OK;
        char kind = 0;
        rc = transfer(st, c, j, deadline, &kind);
        if (!st->ep)
            peer_drop(st, k, true);
        st->ep = NULL;
        /* a kept endpoint that failed at once: the prefill worker restarted
         * or went away since; connect afresh to find out */
        if (rc == 0 || !(kind == 'G' && reused))
            break;
    }
    pd_ucx_clear_inbox(st);
    return rc;
}

void pd_ucx_job_free(pd_job *j)
{
    free(j->map);
    j->map = NULL;
}

void pd_ucx_fetch_end(plume_kv_connector *c)
{
    ucx_state *st = c->tp_state;
    while (st && st->n_conns > 0) {
        pd_ucx_close_ep(st, st->conns[st->n_conns - 1].ep, false, 1.0);
        st->n_conns--;
    }
    pd_ucx_state_free(c->tp_state);
    c->tp_state = NULL;
}
