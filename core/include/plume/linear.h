/* plume — the linear (quantization method) provider interface: loading one
 * linear layer from a checkpoint and running y = x·Wᵀ on a backend.
 *
 * Built in: "native", the unquantized types (F32, F16, BF16) and the GGUF
 * block types plume computes with (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K): prepared
 * by the backend's weight_prepare and run by its matmul.  A quant plugin (quant-gptq, quant-awq) owns its
 * on-disk format and its kernels and may repack at load time.  The core
 * asks every registered method to probe a layer and uses the highest score,
 * so a pipeline selects a method by listing the plugin, not by a key. */
#ifndef PLUME_LINEAR_H
#define PLUME_LINEAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/backend.h"
#include "plume/error.h"
#include "plume/settings.h"
#include "plume/weight_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: forward takes backend buffers (version 1 took host pointers; the
 * registry refuses it) and forward_multi was appended. */
#define PLUME_LINEAR_INTERFACE_VERSION 2

typedef struct plume_linear plume_linear; /* one loaded linear layer */
struct plume_quant_job;
struct plume_quant_result;

/* The checkpoint a layer is read from: its format's vtable and the open
 * checkpoint. */
typedef struct plume_weights {
    const plume_weight_format_vtable *fmt;
    plume_checkpoint *ck;
} plume_weights;

/* The tensor "<prefix>.<suffix>" of w ("blk.0.attn_q" + "weight"), or
 * "<prefix>" when suffix is NULL, through the format's find (or a scan when
 * it has none); NULL when absent or when the name would exceed 511 bytes. */
PLUME_API const plume_tensor *plume_weights_find(const plume_weights *w, const char *prefix,
                                                 const char *suffix);

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

    /* Loads the layer for backend b (the instance the forward pass runs
     * on: uploading or repacking as the method's kernels want).  A method
     * whose kernels cannot run on that backend fails here with a message
     * naming the method and bvt->name. */
    int (*load)(const plume_weights *w, const char *prefix, const plume_settings *s,
                const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                plume_error *err);
    void (*destroy)(plume_linear *l);

    /* Input and output features. */
    void (*shape)(const plume_linear *l, int64_t *in_features, int64_t *out_features);

    /* y[t] = x[t]·Wᵀ (+ the layer's bias, prefix.bias, when the checkpoint
     * has one: a method that loads a layer owns its bias) for t < n_tok; x
     * holds n_tok rows of in features, y n_tok rows of out, f32, both
     * buffers of backend b (the one the layer was loaded for).  A host
     * kernel reaches their memory through bvt->host_ptr and runs on
     * bvt->parallel_for. */
    int (*forward)(plume_linear *l, const plume_backend_vtable *bvt, plume_backend *b,
                   const plume_buf *x, int32_t n_tok, plume_buf *y, plume_error *err);

    /* ---- optional: making checkpoints (`plume quantize`) ---- */

    /* Checks the quantizer's options s (bits, group_size, ... as the method
     * names them; "method" selects among a provider's algorithms, e.g. gptq
     * or rtn), says whether quantize() needs the calibration Hessian, and
     * writes the checkpoint's quantization_config (a JSON object, the text
     * config.json will carry) into config_json (cap bytes). */
    int (*quant_begin)(const plume_settings *s, bool *needs_hessian, char *config_json,
                       size_t cap, plume_error *err);

    /* Quantizes one float Linear: fills out->tensors (the layer's tensors
     * in the method's checkpoint layout, data malloc'd, owned by the caller
     * afterwards), out->w_deq (what the layer now computes, [out][in],
     * caller-allocated) and out->loss. */
    int (*quantize)(const plume_settings *s, const struct plume_quant_job *job,
                    struct plume_quant_result *out, plume_error *err);

    /* ---- optional (version 2) ---- */

    /* n layers of this method (all loaded by it, equal in_features) on the
     * same x, into y[i]: each y[i] exactly what forward(l[i], ...) gives,
     * with work shared where the kernels can (the native method quantizes
     * x once for q, k and v).  NULL: the core calls forward n times. */
    int (*forward_multi)(plume_linear *const *l, int n, const plume_backend_vtable *bvt,
                         plume_backend *b, const plume_buf *x, int32_t n_tok, plume_buf *const *y,
                         plume_error *err);
} plume_linear_vtable;

/* One float Linear handed to quantize(). */
typedef struct plume_quant_job {
    const char *prefix;          /* "model.layers.3.mlp.down_proj" */
    int64_t in_features, out_features;
    const float *w;              /* [out][in], nn.Linear.weight order */
    /* [in][in] = (2/n) Σ x xᵀ over the n calibration tokens that reached
     * this layer (through the already quantized layers before it), or NULL
     * without calibration data; the method may overwrite it. */
    double *hessian;
    int64_t n_tokens;
} plume_quant_job;

/* A tensor a method writes for one layer. */
typedef struct plume_quant_tensor {
    char suffix[32];             /* "qweight" is written as "<prefix>.qweight" */
    const char *dtype;           /* on disk: "I32", "F16" or "F32" */
    int n_dims;
    int64_t shape[4];            /* PyTorch order */
    /* int32_t values for "I32", float values for the float dtypes (the
     * writer rounds them to dtype); malloc'd, freed by the caller */
    void *data;
} plume_quant_tensor;

#define PLUME_QUANT_MAX_TENSORS 8

typedef struct plume_quant_result {
    plume_quant_tensor tensors[PLUME_QUANT_MAX_TENSORS];
    int n_tensors;
    float *w_deq;                /* [out][in], allocated by the caller */
    /* Σ over output rows of (w − w_deq) H (w − w_deq)ᵀ: the squared error
     * of the layer's outputs summed over the calibration tokens, times 2/n;
     * -1 without a Hessian. */
    double loss;
} plume_quant_result;

#ifdef __cplusplus
}
#endif
#endif
