/* plume — the KV connector provider interface: moving finished KV blocks
 * between workers (prefill/decode disaggregation).
 *
 * No built-in connector; pd-ipc is the first plugin.  The shape follows
 * vLLM's KV connector (vllm/distributed/kv_transfer/kv_connector/v1/
 * base.py): a scheduler side that asks how many prompt tokens can be
 * loaded from elsewhere and says what to send when a request finishes, and
 * a worker side that saves and loads KV one layer at a time.  In a
 * pipeline: `kv_connector: { method: NAME, role: producer|consumer, ... }`. */
#ifndef PLUME_KV_CONNECTOR_H
#define PLUME_KV_CONNECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_KV_CONNECTOR_INTERFACE_VERSION 1

typedef struct plume_kv_connector plume_kv_connector; /* a connector instance */

typedef enum plume_kv_role {
    PLUME_KV_PRODUCER = 1, /* computes prefills and sends their KV */
    PLUME_KV_CONSUMER = 2, /* receives KV and decodes */
} plume_kv_role;

/* One layer's K and V for some blocks of one sequence: block i of the
 * sequence lives at k + block_ids[i] * block_stride (same for v), holding
 * block_size positions of n_kv_heads x head_dim f32 values. */
typedef struct plume_kv_layer {
    int32_t layer;
    float *k, *v;
    const int32_t *block_ids;
    int32_t n_blocks;
    int32_t block_size, n_kv_heads, head_dim;
    size_t block_stride;   /* floats between consecutive blocks */
} plume_kv_layer;

typedef struct plume_kv_connector_vtable {
    uint32_t struct_size;        /* sizeof(plume_kv_connector_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_KV_CONNECTOR_INTERFACE_VERSION */
    const char *name;            /* "ipc", ... */

    /* Optional: checks the provider's settings (NULL: it takes none). */
    int (*validate)(const plume_settings *s, plume_error *err);

    int (*create)(const plume_settings *s, plume_kv_role role, plume_kv_connector **out,
                  plume_error *err);
    void (*destroy)(plume_kv_connector *c);

    /* Scheduler side (consumer): how many of the sequence's first n_tokens
     * prompt tokens, beyond the n_computed already cached, can be loaded
     * instead of computed.  0 when none. */
    int32_t (*n_remote_tokens)(plume_kv_connector *c, int64_t seq_id, const int32_t *tokens,
                               int32_t n_tokens, int32_t n_computed);

    /* Scheduler side (producer): the sequence finished its prefill; its KV
     * is in kv (one entry per layer, n_layers entries) and may be sent. */
    int (*request_finished)(plume_kv_connector *c, int64_t seq_id, const int32_t *tokens,
                            int32_t n_tokens, const plume_kv_layer *kv, int32_t n_layers,
                            plume_error *err);

    /* Worker side (consumer): fills the blocks of kv for one layer of the
     * sequence with the received KV. */
    int (*load_layer)(plume_kv_connector *c, int64_t seq_id, plume_kv_layer *kv,
                      plume_error *err);

    /* Optional: waits until every send and load started so far is done
     * (NULL: they are synchronous). */
    int (*wait)(plume_kv_connector *c, plume_error *err);
} plume_kv_connector_vtable;

#ifdef __cplusplus
}
#endif
#endif
