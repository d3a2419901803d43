/* pd-ipc's wire: the messages a decode worker and a prefill worker
 * exchange (memfd transport: over a Unix SOCK_SEQPACKET socket, one
 * fixed-size message per packet; ucx: one message per active message), the
 * identity both sides must share to exchange KV, and passing a
 * shared-memory segment's descriptor with SCM_RIGHTS.  KV bytes never go
 * through the messages: only the descriptor of the memfd that holds them,
 * or (ucx) the address and remote key to read them from. */
#ifndef PD_WIRE_H
#define PD_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/kv_connector.h"

#define PD_MAGIC 0x706c4b56u /* "plKV" */
#define PD_VERSION 2

/* What must match for KV to mean the same on both sides. */
typedef struct pd_ident {
    uint64_t model_id;
    int32_t dtype, block_size, n_layer, n_head_kv, head_dim;
    uint64_t elem_bytes, head_stride, slot_stride;
} pd_ident;

typedef enum pd_type {
    PD_HELLO = 1,  /* decode -> prefill: magic, version, ident */
    PD_HELLO_OK,   /* prefill -> decode */
    PD_GET,        /* decode -> prefill: id */
    PD_SEG,        /* prefill -> decode: n_tokens, n_blocks, bytes + the memfd (ucx:
                      where to read the blocks: raddr, raddr_v, layer_stride; after
                      the message the packed rkeys of K (rkey_len bytes) and V
                      (rkey_v_len) and n_blocks int32 block ids) */
    PD_ERR,        /* either way: text says why */
    PD_GOT,        /* ucx, decode -> prefill: id was read, free it */
} pd_type;

typedef struct pd_msg {
    uint32_t magic, version, type;
    int32_t n_tokens, n_blocks;
    uint64_t bytes;
    uint64_t tokens_hash;   /* PD_SEG: of the n_tokens prompt ids the KV was computed for */
    uint64_t raddr;         /* PD_SEG, ucx: layer 0 block 0 of K at the prefill worker */
    uint64_t raddr_v;       /*   and of V; block b of layer l is at l * layer_stride + b *
                               block_size * slot_stride from them */
    uint64_t layer_stride;
    uint32_t rkey_len;      /*   bytes of K's packed rkey after the message */
    uint32_t rkey_v_len;    /*   then V's */
    pd_ident ident;
    char id[PLUME_KV_XFER_ID_MAX];
    char text[400];
} pd_msg;

/* The identity of a registered pool. */
pd_ident pd_ident_of(const plume_kv_layout *kv);

/* 0 when a and b may exchange KV; else writes what differs and what to do
 * to msg ("decode" describes a, "prefill" b). */
int pd_ident_check(const pd_ident *decode, const pd_ident *prefill, char *msg, size_t cap);

/* A hash of n token ids (FNV-1a): a segment says which prompt it holds. */
uint64_t pd_tokens_hash(const int32_t *ids, int32_t n);

/* Bytes of one block of one layer of K (or V). */
size_t pd_block_bytes(const pd_ident *id);

/* Sends m (with fd attached when fd >= 0).  0, or -1 with errno set. */
int pd_send(int sock, const pd_msg *m, int fd);
/* Receives one message (and a descriptor into *fd when one came, else
 * -1).  0, or -1 with errno set (EAGAIN on timeout, ECONNRESET or EPIPE
 * when the peer is gone, EPROTO for a malformed message). */
int pd_recv(int sock, pd_msg *m, int *fd);

/* Sets the socket's send and receive timeouts. */
void pd_set_timeouts(int sock, double seconds);

/* A message of type t with the magic and version set. */
pd_msg pd_msg_new(pd_type t);

/* 0 when the n bytes at p are a well-formed message (magic, version, size;
 * its strings are then terminated in *m), else -1. */
int pd_msg_parse(const void *p, size_t n, pd_msg *m);

/* remote_addr of a prefill worker on the ucx transport: "ucx://HOST:PORT". */
#define PD_UCX_SCHEME "ucx://"

#endif
