/* pd-ipc's ucx transport, both sides (pd_ucx.h): the UCP context and
 * worker, active messages, bounded waits, endpoint closing, addresses; and
 * the transport's vtable. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_ucx.h"
#include "plume/clock.h"

void pd_ucx_on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucx_state *st = arg;
    if (ep == st->ep && st->ep_status == UCS_OK)
        st->ep_status = status;
    for (int i = 0; i < st->n_conns; i++)
        if (st->conns[i].ep == ep && st->conns[i].failed == UCS_OK)
            st->conns[i].failed = status;
}

static ucs_status_t pd_ucx_on_am(void *arg, const void *header, size_t header_length, void *data,
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

void pd_ucx_clear_inbox(ucx_state *st)
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
int pd_ucx_send_msg(ucp_ep_h ep, const pd_msg *m, const void *extra, size_t extra_len)
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
void pd_ucx_progress_or_wait(ucx_state *st, int ms)
{
    if (ucp_worker_progress(st->worker))
        return;
    if (ucp_worker_arm(st->worker) == UCS_ERR_BUSY)
        return;
    struct pollfd p = {.fd = st->efd, .events = POLLIN};
    poll(&p, 1, ms);
}

int pd_ucx_ms_until(double deadline)
{
    double left = deadline - plume_clock_seconds();
    return left <= 0 ? 0 : left > 0.1 ? 100 : (int)(left * 1000) + 1;
}

/* Closes ep (force: pending operations fail at once), waiting at most
 * seconds for the close to finish.  0 when it did. */
int pd_ucx_close_ep(ucx_state *st, ucp_ep_h ep, bool force, double seconds)
{
    if (!ep)
        return 0;
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (r == NULL || UCS_PTR_IS_ERR(r))
        return 0;
    double deadline = plume_clock_seconds() + seconds;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && plume_clock_seconds() < deadline)
        pd_ucx_progress_or_wait(st, pd_ucx_ms_until(deadline));
    bool done = ucp_request_check_status(r) != UCS_INPROGRESS;
    ucp_request_free(r);
    return done ? 0 : -1;
}

/* Splits "HOST:PORT" ("[V6]:PORT" too) and resolves it.  0, or -1 with
 * why in msg. */
int pd_ucx_resolve(const char *addr, bool passive, struct sockaddr_storage *out, socklen_t *len,
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
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
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
int pd_ucx_state_new(plume_kv_connector *c, ucx_state **out, char *msg, size_t cap)
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
            .cb = pd_ucx_on_am,
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

void pd_ucx_state_free(ucx_state *st)
{
    if (!st)
        return;
    pd_ucx_clear_inbox(st);
    free(st->in);
    free(st->conns);
    if (st->worker)
        ucp_worker_destroy(st->worker);
    if (st->ctx)
        ucp_cleanup(st->ctx);
    free(st);
}

const pd_transport pd_ucx_transport = {
    .name = "ucx",
    .seg_in_place = pd_ucx_seg_in_place,
    .seg_create = pd_ucx_seg_create,
    .seg_filled = pd_ucx_seg_filled,
    .seg_free = pd_ucx_seg_free,
    .serve_start = pd_ucx_serve_start,
    .serve_stop = pd_ucx_serve_stop,
    .fetch = pd_ucx_fetch,
    .job_free = pd_ucx_job_free,
    .fetch_end = pd_ucx_fetch_end,
};
