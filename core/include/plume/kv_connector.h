/* plume — the KV connector provider interface: moving a request's prompt KV
 * between workers (prefill/decode disaggregation).
 *
 * No built-in connector; pd-ipc (plugins/pd-ipc) is the first plugin.  The
 * shape follows vLLM's KV connector v1 (vllm/distributed/kv_transfer/
 * kv_connector/v1/base.py): a scheduler half (how many prompt tokens a
 * remote worker provides, where they go once blocks are allocated, what to
 * do when a request finishes) and a worker half (register the KV pool,
 * load before the forward, save after it, report finished and failed
 * transfers).  One engine thread calls every slot; a connector may run its
 * own threads for the transport, but it touches the KV pool only inside
 * start_load and save (on the engine thread, between forwards), with one
 * exception: a producer may read (only read) the blocks of a request saved
 * in place, which the engine keeps unchanged until get_finished reports
 * the send (pd-ipc's ucx transport lets the decode worker read them with
 * RMA from the pool, where the pool is host memory).
 *
 * The flow, with the engine's side in core/src/engine/kv_glue.c:
 *   producer (prefill worker): a request carrying do_remote_decode runs its
 *     prompt (and samples one token).  When it finishes, request_finished
 *     says whether the engine must keep its blocks (delay freeing) and
 *     fills the parameters a consumer needs (transfer id, address).  The
 *     engine then lists it in the step metadata given to save; the blocks
 *     are freed once get_finished reports the send done.
 *   consumer (decode worker): a request carrying do_remote_prefill waits in
 *     the engine's waiting-for-remote-KV state.  n_remote_tokens says how
 *     many prompt positions will be loaded; the engine allocates their
 *     blocks and calls update_after_alloc (the connector starts fetching in
 *     the background); each step start_load gets the metadata of every
 *     request still waiting and copies in what has arrived; get_finished
 *     reports loads done (the request then runs, computing only the last
 *     prompt position, which yields its first token's logits) and loads
 *     failed (the request fails with the connector's message, or is
 *     recomputed locally when the pipeline says on_failure: recompute).
 *
 * In a pipeline: `kv_connector: { method: NAME, role: prefill|decode,
 * on_failure: fail|recompute, ... }` (the rest goes to the provider). */
#ifndef PLUME_KV_CONNECTOR_H
#define PLUME_KV_CONNECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/backend.h"
#include "plume/error.h"
#include "plume/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: a scheduler half and a worker half over the backend's KV pool (dtype
 * and byte strides); version 1 handed f32 pointers per layer and was never
 * called by the engine. */
#define PLUME_KV_CONNECTOR_INTERFACE_VERSION 2

typedef struct plume_kv_connector plume_kv_connector; /* a connector instance */

typedef enum plume_kv_role {
    PLUME_KV_PRODUCER = 1, /* `role: prefill`: computes prompts and sends their KV */
    PLUME_KV_CONSUMER = 2, /* `role: decode`: receives prompt KV and decodes */
} plume_kv_role;

#define PLUME_KV_XFER_ID_MAX 64
#define PLUME_KV_XFER_ADDR_MAX 256

/* A request's transfer parameters (the API's "kv_transfer_params"). */
typedef struct plume_kv_transfer_params {
    bool do_remote_decode;   /* to a producer: keep this prompt's KV for a consumer */
    bool do_remote_prefill;  /* to a consumer: load this prompt's KV from remote_addr */
    char transfer_id[PLUME_KV_XFER_ID_MAX];     /* names the KV at the producer */
    char remote_addr[PLUME_KV_XFER_ADDR_MAX];   /* the producer's endpoint (ipc: a
                                                   Unix socket path) */
} plume_kv_transfer_params;

/* The engine's KV cache, given once to register_kv: the backend's pool (its
 * layout in backend.h: byte l*layer_stride + s*slot_stride + ... of k and
 * v; one block of one layer is the block_size * slot_stride contiguous
 * bytes from slot block*block_size) and the backend to move bytes with
 * (upload/download at byte offsets; host_ptr where it has one).  model_id
 * identifies the model (a hash of its architecture, sizes, parameter count,
 * weight bytes, quantization and vocabulary): two workers with different
 * model_id must never exchange KV. */
typedef struct plume_kv_layout {
    const plume_kv_pool *pool;
    const plume_backend_vtable *bvt;
    plume_backend *b;
    uint64_t model_id;
} plume_kv_layout;

/* One request in a step's metadata: its transfer parameters, the blocks
 * that hold (save) or receive (load) positions 0 .. n_tokens-1, and its
 * prompt (so that a connector can check that the KV it loads was computed
 * for these very tokens). */
typedef struct plume_kv_req_blocks {
    int64_t req_id;
    const plume_kv_transfer_params *xp;
    const int32_t *block_ids;
    int32_t n_blocks;       /* ceil(n_tokens / block_size) */
    int32_t n_tokens;
    const int32_t *prompt;  /* the request's prompt token ids */
    int32_t n_prompt;
} plume_kv_req_blocks;

/* What the scheduler half tells the worker half for one step. */
typedef struct plume_kv_step_meta {
    const plume_kv_req_blocks *loads;  /* consumer: requests waiting for remote KV */
    int32_t n_loads;
    const plume_kv_req_blocks *saves;  /* producer: finished requests to send */
    int32_t n_saves;
} plume_kv_step_meta;

/* What get_finished reports (ids valid until the next call). */
typedef struct plume_kv_finished {
    const int64_t *sent;       /* producer: sends done, their blocks may be freed */
    int32_t n_sent;
    const int64_t *received;   /* consumer: loads done, the KV is in their blocks */
    int32_t n_received;
    const int64_t *failed;     /* consumer: loads that failed, */
    const char *const *failed_msg; /* each with why (one line, says what to do) */
    int32_t n_failed;
} plume_kv_finished;

/* Counts for /metrics and the leak tests. */
typedef struct plume_kv_connector_stats {
    int64_t live_segments;     /* transfer buffers alive now (shared memory, ...) */
    int64_t live_bytes;        /*   and their bytes */
    int64_t sent, received, failed, expired; /* transfers since creation */
} plume_kv_connector_stats;

typedef struct plume_kv_connector_vtable {
    uint32_t struct_size;        /* sizeof(plume_kv_connector_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_KV_CONNECTOR_INTERFACE_VERSION */
    const char *name;            /* "ipc", ... */

    /* Optional: checks the provider's settings (NULL: it takes none). */
    int (*validate)(const plume_settings *s, plume_error *err);

    int (*create)(const plume_settings *s, plume_kv_role role, plume_kv_connector **out,
                  plume_error *err);
    /* Stops the connector's threads and frees every transfer buffer. */
    void (*destroy)(plume_kv_connector *c);

    /* ---- worker half ---- */

    /* Once, after create: the KV pool the transfers read and write (valid
     * until destroy).  Fails when the connector cannot move this layout. */
    int (*register_kv)(plume_kv_connector *c, const plume_kv_layout *kv, plume_error *err);

    /* Before a forward (consumer): copies into their blocks the KV of the
     * listed requests that has arrived, without blocking on the transport;
     * get_finished then reports them received. */
    int (*start_load)(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err);

    /* After a forward (producer): takes the KV of the listed requests out
     * of their blocks (a save may finish later: get_finished says when).
     * Fails only when nothing can be saved at all (then the engine frees
     * the blocks and the consumer's load will fail loudly). */
    int (*save)(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err);

    /* Transfers that ended since the last call. */
    void (*get_finished)(plume_kv_connector *c, plume_kv_finished *out);

    /* ---- scheduler half ---- */

    /* Consumer: how many of the first n_prompt positions of this request a
     * remote worker provides (0: none, compute it locally).  The engine
     * computes at least the last prompt position itself, so it asks for at
     * most n_prompt - 1. */
    int32_t (*n_remote_tokens)(plume_kv_connector *c, int64_t req_id,
                               const plume_kv_transfer_params *xp, int32_t n_prompt);

    /* Consumer: blocks for the n_tokens remote positions are allocated;
     * start fetching (in the background: never block the engine). */
    int (*update_after_alloc)(plume_kv_connector *c, int64_t req_id,
                              const plume_kv_transfer_params *xp, int32_t n_tokens,
                              plume_error *err);

    /* A request the connector saw finished (done: its prompt was computed
     * and it ended by stop or length, not by abort or error).  Producer
     * with do_remote_decode and done: returns 1 when the engine must keep
     * the blocks until get_finished reports the send (the engine then lists
     * it in save's metadata) and fills out for the consumer; 0 to free them
     * now.  Consumer: forgets whatever it holds for the request (an abort
     * while loading); returns 0. */
    int (*request_finished)(plume_kv_connector *c, int64_t req_id,
                            const plume_kv_transfer_params *xp, bool done,
                            plume_kv_transfer_params *out);

    /* Optional: counts for /metrics (NULL: all 0). */
    void (*stats)(plume_kv_connector *c, plume_kv_connector_stats *out);
} plume_kv_connector_vtable;

#ifdef __cplusplus
}
#endif
#endif
