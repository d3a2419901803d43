/* pd-ipc's memfd transport (pd_transport.h): one machine.  A segment is a
 * memfd; the prefill worker's listener thread answers decode workers on a
 * Unix SOCK_SEQPACKET socket (HELLO, then GET id answered with the memfd's
 * descriptor by SCM_RIGHTS); the decode worker maps it read-only.  A
 * segment is handed out once: the prefill worker closes its descriptor
 * then, the decode worker unmaps it after copying, and the kernel frees
 * it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pd_ipc.h"

/* ---- prefill ---- */

static int memfd_seg_create(plume_kv_connector *c, pd_seg *seg, size_t bytes, unsigned char **map,
                            plume_error *err)
{
    (void)c;
    char name[96];
    snprintf(name, sizeof name, "plume-kv-%s", seg->id);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)bytes)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return plume_err(err, PLUME_ERR_NOMEM, "cannot create a %zu-byte shared memory segment: %s",
                         bytes, strerror(e));
    }
    void *m = bytes ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    if (bytes && m == MAP_FAILED) {
        int e = errno;
        close(fd);
        return plume_err(err, PLUME_ERR_NOMEM, "cannot map a %zu-byte segment: %s", bytes,
                         strerror(e));
    }
    seg->fd = fd;
    seg->bytes = bytes;
    *map = m;
    return 0;
}

static void memfd_seg_filled(pd_seg *seg, unsigned char *map)
{
    if (seg->bytes)
        munmap(map, seg->bytes);
}

static void memfd_seg_free(plume_kv_connector *c, pd_seg *seg)
{
    (void)c;
    if (seg->fd >= 0)
        close(seg->fd);
    seg->fd = -1;
}

/* One decode worker's connection: HELLO, then GETs until it hangs up. */
static void serve_conn(plume_kv_connector *c, int s)
{
    pd_set_timeouts(s, c->timeout_s < 5 ? c->timeout_s : 5);
    pd_msg m, r;
    int fd;
    if (pd_recv(s, &m, &fd) || m.type != PD_HELLO) {
        if (fd >= 0)
            close(fd);
        return;
    }
    int bad = pd_producer_hello(c, &m, &r);
    if (pd_send(s, &r, -1) || bad)
        return;
    while (pd_recv(s, &m, &fd) == 0) {
        if (fd >= 0)
            close(fd);
        if (m.type != PD_GET) {
            r = pd_msg_new(PD_ERR);
            snprintf(r.text, sizeof r.text, "unexpected message: only GET after the handshake");
            pd_send(s, &r, -1);
            return;
        }
        pthread_mutex_lock(&c->mu);
        int32_t at = pd_producer_find(c, m.id, &r);
        int seg_fd = -1;
        if (at >= 0) { /* one claim: the decode worker's descriptor keeps it alive */
            r = pd_producer_seg_msg(&c->segs[at]);
            seg_fd = dup(c->segs[at].fd);
            pd_producer_drop(c, at);
        }
        pthread_mutex_unlock(&c->mu);
        if (at >= 0 && seg_fd < 0) {
            r = pd_msg_new(PD_ERR);
            snprintf(r.text, sizeof r.text, "the prefill worker is out of descriptors: %s",
                     strerror(errno));
        }
        int rc = pd_send(s, &r, seg_fd);
        if (seg_fd >= 0)
            close(seg_fd);
        if (rc == 0 && seg_fd >= 0) {
            pthread_mutex_lock(&c->mu);
            c->st.sent++;
            pthread_mutex_unlock(&c->mu);
        }
    }
}

static void *listener(void *arg)
{
    plume_kv_connector *c = arg;
    while (!pd_stopping(c)) {
        struct pollfd p = {.fd = c->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 200) > 0) {
            int s = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (s >= 0) {
                serve_conn(c, s);
                close(s);
            }
        }
        pd_producer_expire(c);
    }
    return NULL;
}

static int memfd_serve_start(plume_kv_connector *c, plume_error *err)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(c->sock_path) >= sizeof a.sun_path)
        return plume_err(err, PLUME_ERR_INVALID,
                         "kv_connector.socket '%s' is longer than %zu bytes; use a shorter path",
                         c->sock_path, sizeof a.sun_path - 1);
    strcpy(a.sun_path, c->sock_path);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return plume_err(err, PLUME_ERR_IO, "cannot create a Unix socket: %s", strerror(errno));
    /* a live prefill worker on the same path is an error; a stale file from
     * one that died is removed */
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
        close(s);
        return plume_err(err, PLUME_ERR_INVALID,
                         "another prefill worker is listening on %s; give this one its own "
                         "kv_connector.socket",
                         c->sock_path);
    }
    close(s);
    unlink(c->sock_path);
    s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 64)) {
        int e = errno;
        if (s >= 0)
            close(s);
        return plume_err(err, PLUME_ERR_IO,
                         "cannot listen on %s (%s); check that its directory exists and is "
                         "writable",
                         c->sock_path, strerror(e));
    }
    c->listen_fd = s;
    snprintf(c->advertised, sizeof c->advertised, "%s", c->sock_path);
    if (pthread_create(&c->thread, NULL, listener, c)) {
        close(s);
        c->listen_fd = -1;
        unlink(c->sock_path);
        return plume_err(err, PLUME_ERR_NOMEM, "cannot start the pd-ipc listener thread");
    }
    c->thread_started = true;
    return 0;
}

static void memfd_serve_stop(plume_kv_connector *c)
{
    if (c->listen_fd >= 0) {
        close(c->listen_fd);
        c->listen_fd = -1;
        unlink(c->sock_path);
    }
}

/* ---- decode ---- */

static int memfd_fetch(plume_kv_connector *c, pd_job *j)
{
    const char *addr = j->xp.remote_addr;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strncmp(addr, PD_UCX_SCHEME, strlen(PD_UCX_SCHEME)) == 0) {
        snprintf(j->msg, sizeof j->msg,
                 "the prefill worker at %.200s uses the ucx transport; set transport: ucx in "
                 "this decode worker's kv_connector",
                 addr);
        return -1;
    }
    if (strlen(addr) >= sizeof a.sun_path) {
        snprintf(j->msg, sizeof j->msg, "remote_addr '%.200s' is not a Unix socket path", addr);
        return -1;
    }
    strcpy(a.sun_path, addr);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        snprintf(j->msg, sizeof j->msg, "cannot create a Unix socket: %s", strerror(errno));
        return -1;
    }
    pd_set_timeouts(s, c->timeout_s);
    int fd = -1, rc = -1;
    pd_msg m;
    size_t want;
    if (connect(s, (struct sockaddr *)&a, sizeof a)) {
        snprintf(j->msg, sizeof j->msg,
                 "cannot reach the prefill worker at %.200s (%s); is it running?", addr,
                 strerror(errno));
        goto out;
    }
    pd_msg hello = pd_msg_new(PD_HELLO);
    hello.ident = c->ident;
    const char *step = "handshake";
    if (pd_send(s, &hello, -1) || pd_recv(s, &m, &fd))
        goto io;
    if (pd_consumer_hello_reply(c, j, &m))
        goto out;
    step = "transfer";
    pd_msg get = pd_msg_new(PD_GET);
    snprintf(get.id, sizeof get.id, "%s", j->xp.transfer_id);
    if (fd >= 0)
        close(fd);
    if (pd_send(s, &get, -1) || pd_recv(s, &m, &fd))
        goto io;
    if (pd_consumer_seg_reply(c, j, &m, &want))
        goto out;
    if (fd < 0) {
        snprintf(j->msg, sizeof j->msg,
                 "the prefill worker sent no segment for transfer %s: are both workers the same "
                 "plume version?",
                 j->xp.transfer_id);
        goto out;
    }
    void *map = want ? mmap(NULL, want, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    if (want && map == MAP_FAILED) {
        snprintf(j->msg, sizeof j->msg, "cannot map transfer %s's %zu bytes: %s",
                 j->xp.transfer_id, want, strerror(errno));
        goto out;
    }
    j->map = map;
    j->bytes = want;
    rc = 0;
    goto out;
io:
    pd_consumer_io_fail(c, j, step,
                        errno == EAGAIN || errno == EWOULDBLOCK ? 'T'
                        : errno == EPROTO                        ? 'P'
                                                                 : 'G');
out:
    if (fd >= 0)
        close(fd); /* the mapping keeps the segment alive */
    close(s);
    return rc;
}

static void memfd_job_free(pd_job *j)
{
    if (j->bytes)
        munmap(j->map, j->bytes);
    j->map = NULL;
}

const pd_transport pd_memfd_transport = {
    .name = "memfd",
    .seg_create = memfd_seg_create,
    .seg_filled = memfd_seg_filled,
    .seg_free = memfd_seg_free,
    .serve_start = memfd_serve_start,
    .serve_stop = memfd_serve_stop,
    .fetch = memfd_fetch,
    .job_free = memfd_job_free,
};
