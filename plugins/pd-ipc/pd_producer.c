/* pd-ipc, prefill side: save copies a finished prompt's KV blocks into a
 * memfd segment; a listener thread answers decode workers on the Unix
 * socket (handshake, then the segment's descriptor for a transfer id) and
 * drops segments nobody claimed within timeout_s. */
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

/* Removes segment i (under mu), closing its memfd: the memory is gone once
 * no decode worker holds it either. */
static void seg_drop(plume_kv_connector *c, int32_t i)
{
    close(c->segs[i].fd);
    c->st.live_segments--;
    c->st.live_bytes -= (int64_t)c->segs[i].bytes;
    c->segs[i] = c->segs[--c->n_segs];
}

static void expire(plume_kv_connector *c)
{
    double now = pd_now();
    pthread_mutex_lock(&c->mu);
    for (int32_t i = c->n_segs - 1; i >= 0; i--)
        if (now - c->segs[i].t_created > c->timeout_s) {
            fprintf(stderr,
                    "plume pd-ipc: transfer %s was not claimed by a decode worker within "
                    "timeout_s (%g s); its KV is dropped\n",
                    c->segs[i].id, c->timeout_s);
            seg_drop(c, i);
            c->st.expired++;
        }
    pthread_mutex_unlock(&c->mu);
}

static void reply_err(int s, const char *fmt, const char *arg)
{
    pd_msg m = pd_msg_new(PD_ERR);
    snprintf(m.text, sizeof m.text, fmt, arg);
    pd_send(s, &m, -1);
}

/* One decode worker's connection: HELLO, then GETs until it hangs up. */
static void serve_conn(plume_kv_connector *c, int s)
{
    pd_set_timeouts(s, c->timeout_s < 5 ? c->timeout_s : 5);
    pd_msg m;
    int fd;
    if (pd_recv(s, &m, &fd) || m.type != PD_HELLO) {
        if (fd >= 0)
            close(fd);
        return;
    }
    char why[400];
    if (pd_ident_check(&m.ident, &c->ident, why, sizeof why)) {
        fprintf(stderr, "plume pd-ipc: refused a decode worker: %s\n", why);
        reply_err(s, "%s", why);
        return;
    }
    pd_msg ok = pd_msg_new(PD_HELLO_OK);
    ok.ident = c->ident;
    if (pd_send(s, &ok, -1))
        return;
    while (pd_recv(s, &m, &fd) == 0) {
        if (fd >= 0)
            close(fd);
        if (m.type != PD_GET) {
            reply_err(s, "%s", "unexpected message: only GET after the handshake");
            return;
        }
        pthread_mutex_lock(&c->mu);
        int32_t at = -1;
        for (int32_t i = 0; i < c->n_segs; i++)
            if (strcmp(c->segs[i].id, m.id) == 0)
                at = i;
        pd_seg seg = at >= 0 ? c->segs[at] : (pd_seg){0};
        if (at >= 0) { /* one claim: the decode worker's descriptor keeps it alive */
            seg.fd = dup(seg.fd);
            seg_drop(c, at);
        }
        pthread_mutex_unlock(&c->mu);
        if (at < 0 || seg.fd < 0) {
            reply_err(s,
                      "this prefill worker holds no KV for transfer %s (already claimed, "
                      "expired after timeout_s, or the prefill worker restarted); send the "
                      "request to the prefill worker again",
                      m.id);
            continue;
        }
        pd_msg r = pd_msg_new(PD_SEG);
        memcpy(r.id, seg.id, sizeof r.id);
        r.n_tokens = seg.n_tokens;
        r.n_blocks = seg.n_blocks;
        r.bytes = seg.bytes;
        r.tokens_hash = seg.tokens_hash;
        int rc = pd_send(s, &r, seg.fd);
        close(seg.fd);
        if (rc == 0) {
            pthread_mutex_lock(&c->mu);
            c->st.sent++;
            pthread_mutex_unlock(&c->mu);
        }
    }
}

static void *listener(void *arg)
{
    plume_kv_connector *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        bool stop = c->stopping;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            break;
        struct pollfd p = {.fd = c->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 200) > 0) {
            int s = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (s >= 0) {
                serve_conn(c, s);
                close(s);
            }
        }
        expire(c);
    }
    return NULL;
}

int pd_producer_start(plume_kv_connector *c, plume_error *err)
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
    if (pthread_create(&c->thread, NULL, listener, c)) {
        close(s);
        c->listen_fd = -1;
        unlink(c->sock_path);
        return plume_err(err, PLUME_ERR_NOMEM, "cannot start the pd-ipc listener thread");
    }
    c->thread_started = true;
    return 0;
}

/* Copies one request's blocks into a new segment. */
static int save_one(plume_kv_connector *c, const plume_kv_req_blocks *r, pd_seg *out,
                    plume_error *err)
{
    const plume_kv_pool *p = c->kv.pool;
    size_t bb = pd_block_bytes(&c->ident);
    size_t bytes = (size_t)p->n_layer * 2 * (size_t)r->n_blocks * bb;
    char name[96];
    snprintf(name, sizeof name, "plume-kv-%lld", (long long)r->req_id);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)bytes)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return plume_err(err, PLUME_ERR_NOMEM, "cannot create a %zu-byte shared memory segment: %s",
                         bytes, strerror(e));
    }
    unsigned char *map = bytes ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                               : NULL;
    if (bytes && map == MAP_FAILED) {
        int e = errno;
        close(fd);
        return plume_err(err, PLUME_ERR_NOMEM, "cannot map a %zu-byte segment: %s", bytes,
                         strerror(e));
    }
    int rc = 0;
    for (int32_t l = 0; l < p->n_layer && !rc; l++)
        for (int kv = 0; kv < 2 && !rc; kv++)
            for (int32_t i = 0; i < r->n_blocks && !rc; i++) {
                size_t src = (size_t)l * p->layer_stride +
                             (size_t)r->block_ids[i] * (size_t)p->block_size * p->slot_stride;
                size_t dst = (((size_t)l * 2 + (size_t)kv) * (size_t)r->n_blocks + (size_t)i) * bb;
                rc = c->kv.bvt->download(c->kv.b, map + dst, kv ? p->v : p->k, src, bb, err);
            }
    if (bytes)
        munmap(map, bytes);
    if (rc) {
        close(fd);
        return -1;
    }
    int32_t nt = r->n_tokens < r->n_prompt ? r->n_tokens : r->n_prompt;
    *out = (pd_seg){{0}, fd, bytes, nt, r->n_blocks, pd_tokens_hash(r->prompt, nt), pd_now()};
    snprintf(out->id, sizeof out->id, "%s-%lld", c->nonce, (long long)r->req_id);
    return 0;
}

int pd_producer_save(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err)
{
    int32_t saved = 0;
    for (int32_t i = 0; i < meta->n_saves; i++) {
        const plume_kv_req_blocks *r = &meta->saves[i];
        pd_seg seg;
        plume_error e2 = {0};
        int rc = save_one(c, r, &seg, &e2);
        pthread_mutex_lock(&c->mu);
        if (rc == 0 && c->n_segs == c->cap_segs) {
            int32_t cap = c->cap_segs ? 2 * c->cap_segs : 16;
            pd_seg *g = realloc(c->segs, sizeof *g * (size_t)cap);
            if (g) {
                c->segs = g;
                c->cap_segs = cap;
            } else {
                close(seg.fd);
                rc = plume_err(&e2, PLUME_ERR_NOMEM, "out of memory");
            }
        }
        if (rc == 0) {
            c->segs[c->n_segs++] = seg;
            c->st.live_segments++;
            c->st.live_bytes += (int64_t)seg.bytes;
            saved++;
        } else {
            c->st.failed++;
            fprintf(stderr,
                    "plume pd-ipc: could not save request %lld's KV (%s); its decode worker's "
                    "load will fail\n",
                    (long long)r->req_id, e2.msg);
        }
        /* either way the blocks are no longer needed */
        pd_push_id(&c->sent, &c->n_sent, &c->cap_sent, r->req_id);
        pthread_mutex_unlock(&c->mu);
    }
    if (saved == 0 && meta->n_saves > 0)
        return plume_err(err, PLUME_ERR_NOMEM, "no request's KV could be saved");
    return 0;
}

void pd_producer_stop(plume_kv_connector *c)
{
    if (c->thread_started) {
        pthread_mutex_lock(&c->mu);
        c->stopping = true;
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        c->thread_started = false;
    }
    if (c->listen_fd >= 0) {
        close(c->listen_fd);
        c->listen_fd = -1;
        unlink(c->sock_path);
    }
    pthread_mutex_lock(&c->mu);
    while (c->n_segs > 0)
        seg_drop(c, c->n_segs - 1);
    pthread_mutex_unlock(&c->mu);
    free(c->segs);
    c->segs = NULL;
}
