/* plume — the linear (quantization method) provider interface: loading one
 * linear layer from a checkpoint and running y = x·Wᵀ on a backend.
 *
 * Built in: "native", the unquantized types (F32, F16, BF16) and the GGUF
 * block types plume computes with (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K), run by
 * the backend's matmul.  A quant plugin (quant-gptq, quant-awq) owns its
 * on-disk format and its kernels and may repack at load time.  The core
 * asks every registered method to probe a layer and uses the highest score,
 * so a pipeline selects a method by listing the plugin, not by a key. */
#ifndef PLUME_LINEAR_H
#define PLUME_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "plume/backend.h"
#include "plume/error.h"
#include "plume/settings.h"
#include "plume/weight_format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_LINEAR_INTERFACE_VERSION 1

typedef struct plume_linear plume_linear; /* one loaded linear layer */

/* The checkpoint a layer is read from: its format's vtable and the open
 * checkpoint. */
typedef struct plume_weights {
    const plume_weight_format_vtable *fmt;
    plume_checkpoint *ck;
} plume_weights;

typedef struct plume_linear_vtable {
    uint32_t struct_size;        /* sizeof(plume_linear_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_LINEAR_INTERFACE_VERSION */
    const char *name;            /* "native", "gptq", "awq", ... */

    /* Optional: checks the provider's settings (NULL: it takes none). */
    int (*validate)(const plume_settings *s, plume_error *err);

    /* How well this method handles the layer whose tensors start with
     * prefix ("blk.0.attn_q" finds "blk.0.attn_q.weight", a GPTQ method
     * "…qweight", "…scales", ...): 0 = not at all.  Reads tensor headers
     * only. */
    int (*probe)(const plume_weights *w, const char *prefix);

    /* Loads the layer for backend b (uploading or repacking as the
     * method's kernels want). */
    int (*load)(const plume_weights *w, const char *prefix, const plume_settings *s,
                const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                plume_error *err);
    void (*destroy)(plume_linear *l);

    /* Input and output features. */
    void (*shape)(const plume_linear *l, int64_t *in_features, int64_t *out_features);

    /* y[t] = x[t]·Wᵀ for t < n_tok; x is n_tok x in, y n_tok x out, both in
     * the backend's memory. */
    int (*forward)(plume_linear *l, const plume_backend_vtable *bvt, plume_backend *b,
                   const float *x, int32_t n_tok, float *y, plume_error *err);
} plume_linear_vtable;

#ifdef __cplusplus
}
#endif
#endif
