/* pd-ipc's wire (pd_wire.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "pd_wire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

pd_ident pd_ident_of(const plume_kv_layout *kv)
{
    const plume_kv_pool *p = kv->pool;
    return (pd_ident){kv->model_id, (int32_t)p->dtype, p->block_size, p->n_layer,
                      p->n_head_kv, p->head_dim, p->elem_bytes, p->head_stride, p->slot_stride};
}

int pd_ident_check(const pd_ident *a, const pd_ident *b, char *msg, size_t cap)
{
    if (a->model_id != b->model_id) {
        snprintf(msg, cap,
                 "the decode worker runs a different model than the prefill worker (model "
                 "identity %016llx vs %016llx: architecture, sizes, weights or vocabulary "
                 "differ); start both with the same model file",
                 (unsigned long long)a->model_id, (unsigned long long)b->model_id);
        return -1;
    }
    if (a->dtype != b->dtype) {
        snprintf(msg, cap,
                 "the decode worker's KV cache is %s but the prefill worker's is %s; use the "
                 "same kv_cache.dtype in both pipelines",
                 plume_kv_dtype_name((plume_kv_dtype)a->dtype),
                 plume_kv_dtype_name((plume_kv_dtype)b->dtype));
        return -1;
    }
    if (a->block_size != b->block_size) {
        snprintf(msg, cap,
                 "the decode worker's kv_cache.block_size is %d but the prefill worker's is %d; "
                 "use the same block_size in both pipelines",
                 a->block_size, b->block_size);
        return -1;
    }
    if (a->n_layer != b->n_layer || a->n_head_kv != b->n_head_kv || a->head_dim != b->head_dim ||
        a->elem_bytes != b->elem_bytes || a->head_stride != b->head_stride ||
        a->slot_stride != b->slot_stride) {
        snprintf(msg, cap,
                 "the KV layouts differ: decode has %d layers x %d KV heads x %d dims (slot "
                 "stride %llu bytes), prefill %d x %d x %d (%llu bytes); both workers must use "
                 "the same backend kind and kv_cache settings",
                 a->n_layer, a->n_head_kv, a->head_dim, (unsigned long long)a->slot_stride,
                 b->n_layer, b->n_head_kv, b->head_dim, (unsigned long long)b->slot_stride);
        return -1;
    }
    return 0;
}

uint64_t pd_tokens_hash(const int32_t *ids, int32_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)ids;
    for (size_t i = 0; i < (size_t)n * sizeof *ids; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

size_t pd_block_bytes(const pd_ident *id)
{
    return (size_t)id->block_size * id->slot_stride;
}

pd_msg pd_msg_new(pd_type t)
{
    pd_msg m;
    memset(&m, 0, sizeof m);
    m.magic = PD_MAGIC;
    m.version = PD_VERSION;
    m.type = t;
    return m;
}

int pd_msg_parse(const void *p, size_t n, pd_msg *m)
{
    if (n < sizeof *m)
        return -1;
    if (p != m)
        memcpy(m, p, sizeof *m);
    if (m->magic != PD_MAGIC || m->version != PD_VERSION)
        return -1;
    m->id[sizeof m->id - 1] = '\0';
    m->text[sizeof m->text - 1] = '\0';
    return 0;
}

int pd_send(int sock, const pd_msg *m, int fd)
{
    struct iovec iov = {(void *)m, sizeof *m};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t n;
    do
        n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if ((size_t)n != sizeof *m) {
        errno = EPROTO;
        return -1;
    }
    return 0;
}

int pd_recv(int sock, pd_msg *m, int *fd)
{
    *fd = -1;
    struct iovec iov = {m, sizeof *m};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    ssize_t n;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(fd, CMSG_DATA(c), sizeof *fd);
    if (n == 0) {
        errno = ECONNRESET;
        goto bad;
    }
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || pd_msg_parse(m, (size_t)n, m)) {
        errno = EPROTO;
        goto bad;
    }
    return 0;
bad:
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
    return -1;
}

void pd_set_timeouts(int sock, double seconds)
{
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}
