/* plume — the backend provider interface: memory, copies and the kernels
 * of the forward pass on one kind of device.
 *
 * Built in: "cpu" (always usable).  A device backend (backend-cuda) adds
 * its own.  `backend: auto` in a pipeline picks the registered backend with
 * the highest score on this machine.  Slots for more forward-pass kernels
 * are appended as backends need them (struct_size keeps old plugins
 * working: a slot they lack is NULL, i.e. the core's CPU default). */
#ifndef PLUME_BACKEND_H
#define PLUME_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/settings.h"
#include "plume/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_BACKEND_INTERFACE_VERSION 1

typedef struct plume_backend plume_backend; /* a backend instance */

typedef struct plume_backend_vtable {
    uint32_t struct_size;        /* sizeof(plume_backend_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_BACKEND_INTERFACE_VERSION */
    const char *name;            /* "cpu", "cuda", ... */

    /* Optional: checks the provider's settings (NULL: it takes none). */
    int (*validate)(const plume_settings *s, plume_error *err);

    /* Optional: 0 = unusable on this machine (no device, no driver),
     * higher = preferred by `backend: auto`.  NULL counts as 1.  Cheap:
     * called when a pipeline is resolved. */
    int (*score)(void);

    /* Creates an instance; n_threads is the pipeline's `threads` (0 = the
     * backend's choice). */
    int (*create)(const plume_settings *s, int n_threads, plume_backend **out, plume_error *err);
    void (*destroy)(plume_backend *b);

    /* Device memory.  alloc returns NULL with err filled when out of memory. */
    void *(*alloc)(plume_backend *b, size_t bytes, plume_error *err);
    void (*free)(plume_backend *b, void *ptr);
    /* Host -> device and device -> host copies of bytes. */
    int (*upload)(plume_backend *b, void *dst, const void *src, size_t bytes, plume_error *err);
    int (*download)(plume_backend *b, void *dst, const void *src, size_t bytes,
                    plume_error *err);

    /* y[t][n] = sum_k x[t][k] * W[n][k] for t < n_tok, W with ne[0] = K
     * (in) and ne[1] = N (out) of any type plume_dtype_supported accepts;
     * w->data, x and y are memory this backend reads and writes (for the
     * CPU backend, any host memory). */
    int (*matmul)(plume_backend *b, const plume_tensor *w, const float *x, int32_t n_tok,
                  float *y, plume_error *err);

    /* Optional: waits for queued work (NULL: work is synchronous). */
    int (*synchronize)(plume_backend *b, plume_error *err);

    /* Optional: runs fn(ctx, ith, nth) exactly once for every ith < nth on
     * the backend's host worker threads (nth = its thread count, the
     * caller's thread included) and returns when all are done, everything
     * written visible to the caller.  For plugin kernels that compute on the
     * host: split work by ith, never wait for another ith inside fn.  NULL
     * (or b NULL): call fn(ctx, 0, 1) yourself. */
    void (*parallel_for)(plume_backend *b, void (*fn)(void *ctx, int ith, int nth), void *ctx);
} plume_backend_vtable;

#ifdef __cplusplus
}
#endif
#endif
