/* plume — the backend provider interface: memory, weights, the KV cache
 * pool and the layer ops of the forward pass on one kind of device.
 *
 * The forward pass (core/src/model/forward.c) is one loop over layers that
 * calls only this vtable and the linear methods (plume/linear.h).  A
 * backend owns everything that lives on its device:
 *   - buffers: opaque handles (plume_buf).  The core never dereferences one;
 *     it moves bytes with upload/download.  host_ptr tells a plugin kernel
 *     that computes on the host where a host-resident buffer lives.
 *   - weights: weight_prepare uploads (and may repack) a checkpoint tensor
 *     into the backend's own layout once, at load; plume_bweight is opaque.
 *   - the KV cache pool: kv_alloc allocates K and V for every layer and
 *     describes their layout (dtype, byte strides) in plume_kv_pool.
 *   - activations: buffers the runner allocates with buf_alloc, one per
 *     activation (q, k and v each in their own packed buffer).
 *   - the ops: embedding gather, rmsnorm, rope, KV store, paged attention
 *     over block tables (prefill chunks and decode rows alike), swiglu,
 *     residual and bias adds, row gather and matmul of prepared weights.
 * Activations are f32, row-major [rows][features], rows packed: row r of a
 * buffer of dim features starts at byte r * dim * 4.  Unless an op says
 * otherwise, its output buffer is not one of its inputs.  Ops return 0, or
 * -1 with err filled: PLUME_ERR_NOMEM when out of memory, PLUME_ERR_INVALID
 * for an argument the core should never pass (a bad handle, a shape that
 * does not match), PLUME_ERR_INTERNAL for a device failure.
 *
 * Per-step metadata (token ids, positions, cache slots, block tables) is
 * host memory described by plume_step; step_begin lets a device backend
 * copy it over once per forward instead of once per op.
 *
 * Built in: "cpu" (always usable).  `backend: auto` in a pipeline picks the
 * registered backend with the highest score on this machine (on a tie, the
 * one registered first: the built-in cpu before any plugin).  Learned from
 * ggml's backend interface (ggml-backend-impl.h), made smaller: no graph,
 * one op per call.  Worked example of a plugin: examples/plugins/backend-ref
 * and docs/writing-a-backend.md. */
#ifndef PLUME_BACKEND_H
#define PLUME_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/dummy_fill.h"
#include "plume/error.h"
#include "plume/settings.h"
#include "plume/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 5: the optional mixture-of-experts row ops gather_rows and
 * scatter_add_rows, and PLUME_FEAT_MOE (a version-4 backend lacks them,
 * past its struct_size, so the registry still accepts 4 and the loader
 * refuses only mixture-of-experts models on it); and the optional
 * weight_fill (dummy weights made on the device).
 * 4: the optional device hooks (device_info, device_ptr, device_scratch,
 * device_gemm) that let a linear method run its own kernels on the
 * backend's device; a version-3 backend simply lacks them (they lie past
 * its struct_size), so the registry still accepts 3.
 * 3: attention takes plume_attn_params (scale, sliding window).  2: opaque
 * buffers, weights, KV pool and layer ops (version 1 passed host pointers
 * and had only matmul).  The registry refuses older versions. */
#define PLUME_BACKEND_INTERFACE_VERSION 5

typedef struct plume_backend plume_backend; /* a backend instance */
typedef struct plume_buf plume_buf;         /* a buffer on the backend's device */
typedef struct plume_bweight plume_bweight; /* a weight prepared by the backend */

/* How the KV cache stores keys and values. */
typedef enum plume_kv_dtype {
    PLUME_KV_F32 = 0,
    PLUME_KV_F16 = 1, /* half the memory and bandwidth; values rounded to binary16 */
    PLUME_KV_INT8 = 2, /* about a quarter: each (slot, kv head)'s head_dim values as
                          int8 q with one f32 scale d beside them, x ≈ q * d
                          (d = max |x| / 127); see plume_kv_pool.scale_offset */
} plume_kv_dtype;

/* "f32", "f16" or "int8" (the kv_cache.dtype / --kv-dtype spelling);
 * "unknown" for any other value. */
static inline const char *plume_kv_dtype_name(plume_kv_dtype d)
{
    return d == PLUME_KV_F32 ? "f32" : d == PLUME_KV_F16 ? "f16" : d == PLUME_KV_INT8 ? "int8"
                                                                                     : "unknown";
}

/* The KV cache of every layer.  The caller fills the shape fields; kv_alloc
 * allocates k and v and fills the layout: the value of (layer l, slot s,
 * kv head h, dimension d) is at byte l*layer_stride + s*slot_stride +
 * h*head_stride + d*elem_bytes of k (and v), where slot s = block *
 * block_size + position % block_size.  With PLUME_KV_INT8 (elem_bytes 1),
 * the f32 scale of (l, s, h) is at byte l*layer_stride + s*slot_stride +
 * h*head_stride + scale_offset, inside the same buffer, so that copying a
 * block's slots copies its scales (a KV connector ships both). */
typedef struct plume_kv_pool {
    /* shape, set by the caller */
    int32_t n_layer, n_blocks, block_size, n_head_kv, head_dim;
    plume_kv_dtype dtype;
    /* set by kv_alloc */
    plume_buf *k, *v;
    size_t elem_bytes, head_stride, slot_stride, layer_stride;
    size_t scale_offset; /* PLUME_KV_INT8: the scale's byte offset in a head; else 0 */
} plume_kv_pool;

/* What one attention call computes besides the cache and the queries. */
typedef struct plume_attn_params {
    int32_t n_head;  /* query heads (a multiple of kv->n_head_kv) */
    float scale;     /* softmax scale applied to q·k; 0 means 1/sqrt(head_dim) */
    int32_t window;  /* > 0: sliding window, a row at position p attends to
                        positions max(0, p - window + 1) .. p only; 0: all of 0 .. p */
    /* Optional attention sinks (gpt-oss): a prepared f32 vector of n_head
     * logits, one per query head, that join each row's softmax denominator
     * and no value (head h: out = Σ_i e^{s_i} v_i / (Σ_i e^{s_i} + e^{sink_h}),
     * transformers' eager_attention_forward in modeling_gpt_oss.py).  NULL:
     * none.  The core sets it only on a backend that answers
     * supports(PLUME_FEAT_ATTN_SINKS) with 1; a backend built before the
     * field existed never sees it (it says no to a feature it does not
     * know, and a caller never builds this struct shorter than it is). */
    const plume_bweight *sinks;
} plume_attn_params;

/* Bytes of K and V one cached position takes over all layers (from the
 * layout kv_alloc filled in). */
static inline int64_t plume_kv_pool_bytes_per_token(const plume_kv_pool *kv)
{
    const int64_t slots = (int64_t)kv->n_blocks * kv->block_size;
    return slots ? 2 * (int64_t)kv->layer_stride * kv->n_layer / slots : 0;
}

/* One sequence's share of a step: positions pos0 .. pos0+n-1, its rows
 * consecutive in the step, its block table covering them. */
typedef struct plume_step_seq {
    int32_t row0, n, pos0;
    const int32_t *block_table;
    int32_t n_table;            /* entries of block_table in use: ceil((pos0+n)/block_size) */
} plume_step_seq;

/* One forward pass's metadata, host memory valid until step_end. */
typedef struct plume_step {
    int32_t n_rows;             /* positions in the step */
    const int32_t *tokens;      /* [n_rows] token ids, checked against the vocabulary */
    const int32_t *pos;         /* [n_rows] positions */
    const int32_t *slots;       /* [n_rows] KV slots, checked against the pool */
    const plume_step_seq *seqs; /* [n_seqs], in row order */
    int32_t n_seqs;
    const int32_t *out_rows;    /* [n_out] rows whose logits are wanted, ascending */
    int32_t n_out;
    void *backend_data;         /* the backend's own (set by step_begin), else NULL */
} plume_step;

/* What a backend may not run, for supports(). */
typedef enum plume_backend_feature {
    PLUME_FEAT_WEIGHT_TYPE = 0, /* arg: a plume_dtype, for weight_prepare and matmul */
    PLUME_FEAT_KV_DTYPE,        /* arg: a plume_kv_dtype */
    PLUME_FEAT_HEAD_DIM,        /* arg: attention head size (even: rope rotates pairs) */
    PLUME_FEAT_ROPE_ADJACENT,   /* arg: 1 = pairs (2i, 2i+1), 0 = (i, i + head_dim/2) */
    PLUME_FEAT_MOE,             /* mixture-of-experts layers (gather_rows, scatter_add_rows
                                   and a matmul per active expert); arg: experts per token */
    PLUME_FEAT_ATTN_SINKS,      /* attention reads plume_attn_params.sinks (arg: query heads);
                                   a backend that does not know it answers 0 */
} plume_backend_feature;

/* What microbench measures (`plume bench roofline`).  A backend answers the
 * ones its device has and refuses the others with PLUME_ERR_UNSUPPORTED. */
typedef enum plume_microbench {
    PLUME_MB_READ_GBS = 0,   /* streaming read bandwidth of the device's memory, GB/s */
    PLUME_MB_F16_TFLOPS = 1, /* dense f16 matrix multiply, f32 accumulation, TFLOP/s */
    PLUME_MB_F32_GFLOPS = 2, /* peak f32 fused multiply-add rate, GFLOP/s (2 per FMA) */
    PLUME_MB_INT8_GOPS = 3,  /* peak int8 dot-product rate, GOP/s (2 per multiply-add) */
    /* The peak int8 rate of the vector dot-product instructions alone, GOP/s:
     * on a CPU whose fastest int8 path is a matrix unit (AMX tiles), its
     * vector units' rate (vpdpbusd); elsewhere the same as PLUME_MB_INT8_GOPS. */
    PLUME_MB_INT8_VEC_GOPS = 4,
} plume_microbench;

/* What device_info tells a plugin kernel about the backend's device. */
typedef struct plume_device_info {
    const char *api;         /* the compute API: "cuda" (the only one so far) */
    int32_t device;          /* the device ordinal (cudaSetDevice) */
    void *stream;            /* the queue every op of this instance runs on, in order
                                (a cudaStream_t): enqueue plugin kernels there */
    int32_t batch_invariant; /* 1: the instance promises backend.h's matmul contract
                                (every row's result the same bits whatever n_rows), so a
                                plugin's kernels must keep it too; 0: the pipeline chose
                                speed (e.g. cuda's matmul: cublas) */
} plume_device_info;

/* Precision of device_gemm's products. */
typedef enum plume_gemm_precision {
    PLUME_GEMM_F32 = 0,  /* f32 inputs, f32 products and accumulation */
    PLUME_GEMM_TF32 = 1, /* f32 inputs rounded to tf32 in the products, f32 accumulation */
    PLUME_GEMM_F16 = 2,  /* f16 inputs (w and x both binary16), f32 accumulation */
} plume_gemm_precision;

/* One device_gemm: y[t][o] = Σ_i x[t][i] · w[i][o] for t < n_rows, o <
 * n_out, i < k, every pointer a device address (device_ptr, device_scratch
 * or the plugin's own buffers).  w is [k][n_out] row-major (ld n_out), x
 * [n_rows][k] (ld k), y [n_rows][ldy] f32 (ldy >= n_out: y may be a column
 * slab of a wider output).  w and x are f32, or binary16 with
 * PLUME_GEMM_F16. */
typedef struct plume_device_gemm {
    int32_t n_out, n_rows, k, ldy;
    const void *w, *x;
    float *y;
    plume_gemm_precision precision;
} plume_device_gemm;

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
     * backend's choice: host threads for its own work and parallel_for). */
    int (*create)(const plume_settings *s, int n_threads, plume_backend **out, plume_error *err);
    void (*destroy)(plume_backend *b);

    /* 1 when this instance can run feature f with argument arg, else 0.
     * The loader asks before it prepares anything, so that a model the
     * backend cannot run is one clear error naming both. */
    int (*supports)(plume_backend *b, plume_backend_feature f, int64_t arg);

    /* ---- buffers ---- */

    /* A buffer of bytes (contents undefined); NULL with err filled when out
     * of memory.  buf_free(NULL) does nothing. */
    plume_buf *(*buf_alloc)(plume_backend *b, size_t bytes, plume_error *err);
    void (*buf_free)(plume_backend *b, plume_buf *buf);
    /* Copies bytes from host memory into dst at byte offset off, and back. */
    int (*upload)(plume_backend *b, plume_buf *dst, size_t off, const void *src, size_t bytes,
                  plume_error *err);
    int (*download)(plume_backend *b, void *dst, const plume_buf *src, size_t off, size_t bytes,
                    plume_error *err);
    /* Optional: the host address of buf's first byte when the buffer lives
     * in host memory (the cpu backend), else NULL.  Host-side plugin
     * kernels need it; NULL (or absent) means they cannot run here. */
    void *(*host_ptr)(plume_backend *b, const plume_buf *buf);

    /* ---- weights ---- */

    /* Prepares a checkpoint tensor for this backend's ops: a matrix (n_dims
     * 2, ne[0] = in, ne[1] = out: linear weights, the embedding table) or a
     * vector (n_dims 1, ne[0] values: norm weights, biases, rope
     * frequencies), of any type supports(PLUME_FEAT_WEIGHT_TYPE) accepts.
     * t->data is host memory that stays valid, unchanged, until weight_free
     * (the checkpoint stays mapped), so a host backend may keep referring
     * to it. */
    int (*weight_prepare)(plume_backend *b, const plume_tensor *t, plume_bweight **out,
                          plume_error *err);
    void (*weight_free)(plume_backend *b, plume_bweight *w);

    /* ---- the KV cache ---- */

    /* Allocates kv->k and kv->v for the shape in kv and fills the layout
     * fields; the contents start undefined.  kv_free releases them. */
    int (*kv_alloc)(plume_backend *b, plume_kv_pool *kv, plume_error *err);
    void (*kv_free)(plume_backend *b, plume_kv_pool *kv);

    /* ---- a step ---- */

    /* Optional: called once before a forward's ops with its metadata (e.g.
     * to copy it to the device and hang it on st->backend_data).  step_end
     * (optional) is called after the step's last op, whether the ops
     * succeeded or not, for every step whose step_begin succeeded or is
     * NULL; never after a failed step_begin. */
    int (*step_begin)(plume_backend *b, plume_step *st, plume_error *err);
    void (*step_end)(plume_backend *b, plume_step *st);

    /* ---- layer ops.  Row r of an activation buffer is at byte r * dim * 4.
     * Each returns 0, or -1 with err filled (a device error). ---- */

    /* x[r] = the row st->tokens[r] of table ([n_vocab][dim]) as f32, for
     * every row of the step. */
    int (*embed)(plume_backend *b, const plume_step *st, const plume_bweight *table,
                 plume_buf *x, int32_t dim, plume_error *err);
    /* out[r] = x[r] / sqrt(mean(x[r]²) + eps) * w, for r < n_rows (out may
     * be x: in place). */
    int (*rmsnorm)(plume_backend *b, plume_buf *out, const plume_buf *x, const plume_bweight *w,
                   int32_t n_rows, int32_t dim, float eps, plume_error *err);
    /* Rotates the n_heads heads of head_dim values of every row in place by
     * the row's position (st->pos), angle pos * inv_freq[i] for the pair i
     * (inv_freq: a prepared f32 vector of head_dim/2); adjacent: pairs
     * (2i, 2i+1), else (i, i + head_dim/2). */
    int (*rope)(plume_backend *b, const plume_step *st, plume_buf *x, int32_t n_heads,
                int32_t head_dim, const plume_bweight *inv_freq, int adjacent, plume_error *err);
    /* Writes every row's k and v ([n_rows][n_head_kv * head_dim]) into
     * layer's cache at the row's slot. */
    int (*kv_store)(plume_backend *b, const plume_step *st, plume_kv_pool *kv, int32_t layer,
                    const plume_buf *k, const plume_buf *v, plume_error *err);
    /* Causal paged attention: for every row, each of p->n_head query heads
     * of q ([n_rows][n_head * head_dim]) attends over positions 0 .. pos of
     * its sequence (p->window > 0: only the last window of them, pos -
     * window + 1 .. pos) in layer's cache through the sequence's block
     * table (grouped-query: head h reads kv head h / (n_head / n_head_kv)),
     * with softmax scale p->scale (0: 1/sqrt(head_dim)); head_dim is
     * kv->head_dim for queries too.  Normalized results to out ([n_rows]
     * [n_head * head_dim], not q).  A row's result depends only on its
     * query, its sequence's cache and p: not on the other rows of the step. */
    int (*attention)(plume_backend *b, const plume_step *st, const plume_kv_pool *kv,
                     int32_t layer, const plume_buf *q, const plume_attn_params *p,
                     plume_buf *out, plume_error *err);
    /* gate[i] = silu(gate[i]) * up[i] for i < n (in place in gate). */
    int (*swiglu)(plume_backend *b, plume_buf *gate, const plume_buf *up, size_t n,
                  plume_error *err);
    /* x[i] += y[i] for i < n (the residual stream). */
    int (*add)(plume_backend *b, plume_buf *x, const plume_buf *y, size_t n, plume_error *err);
    /* y[r][i] += bias[i] for r < n_rows, i < dim. */
    int (*add_bias)(plume_backend *b, plume_buf *y, const plume_bweight *bias, int32_t n_rows,
                    int32_t dim, plume_error *err);
    /* dst[i] = src[st->out_rows[i]] for i < st->n_out, rows of dim (dst is
     * not src). */
    int (*gather_out_rows)(plume_backend *b, const plume_step *st, plume_buf *dst,
                           const plume_buf *src, int32_t dim, plume_error *err);
    /* y[j][t][o] = Σ_i x[t][i] · W_j[o][i] for j < n_w, t < n_rows: n_w
     * prepared matrices of equal in-features applied to the same x (a
     * backend may share work between them, e.g. one quantization of x);
     * each y[j] (never x) must be exactly what the call with that weight
     * alone gives, and every value must depend only on its weight row and
     * its x row (the same bits whatever n_rows, batching or threads). */
    int (*matmul)(plume_backend *b, const plume_bweight *const *w, int n_w, const plume_buf *x,
                  int32_t n_rows, plume_buf *const *y, plume_error *err);

    /* Optional: waits for queued work (NULL: work is synchronous). */
    int (*synchronize)(plume_backend *b, plume_error *err);

    /* Optional: runs fn(ctx, ith, nth) exactly once for every ith < nth on
     * the backend's host worker threads (nth = its thread count, the
     * caller's thread included) and returns when all are done, everything
     * written visible to the caller.  For plugin kernels that compute on the
     * host: split work by ith, never wait for another ith inside fn.  NULL
     * (or b NULL): call fn(ctx, 0, 1) yourself. */
    void (*parallel_for)(plume_backend *b, void (*fn)(void *ctx, int ith, int nth), void *ctx);

    /* Optional: measures what this instance's device can do on all its
     * threads or streams (reps timed runs after a warm-up; the rate of a
     * typical run into *out: the cuda backend gives the mean, cpu the
     * median), for `plume bench roofline` and `plume bench context`.
     * NULL: the backend cannot be measured. */
    int (*microbench)(plume_backend *b, plume_microbench what, int reps, double *out,
                      plume_error *err);

    /* ---- optional ops, for some model families.  A backend lacks an op
     * when its slot is NULL or lies past its vtable's struct_size (built
     * before the op existed); the loader then refuses a model that needs
     * it, naming the op.  Like the ops above: element-wise, so every value
     * depends only on its own inputs. ---- */

    /* x[i] *= s for i < n (Gemma's embedding scale). */
    int (*scale)(plume_backend *b, plume_buf *x, float s, size_t n, plume_error *err);
    /* gate[i] = gelu_tanh(gate[i]) * up[i] for i < n (in place in gate), with
     * gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's
     * gelu(approximate="tanh") (Gemma's MLP). */
    int (*geglu)(plume_backend *b, plume_buf *gate, const plume_buf *up, size_t n,
                 plume_error *err);

    /* ---- optional (version 4): device hooks for plugin kernels.  A
     * linear method whose kernels run on a device (quant-gptq's CUDA
     * kernels) uses them to work on this instance's device, in its stream
     * order: weights go up once at load through buf_alloc + upload (freed
     * with buf_free before the backend is destroyed), activations stay in
     * the backend's buffers, and kernels are enqueued on info.stream, so
     * no host round trip happens per layer.  A backend offers all four or
     * none; a host backend (cpu) offers none and has host_ptr instead. ---- */

    /* Fills *out (api, device, stream, batch_invariant); the stream is the
     * instance's for its whole life. */
    int (*device_info)(plume_backend *b, plume_device_info *out, plume_error *err);
    /* The device address of buf's first byte (valid while buf lives). */
    void *(*device_ptr)(plume_backend *b, const plume_buf *buf);
    /* Device memory of at least bytes, contents undefined, for the caller's
     * kernels on info.stream: the instance's one scratch area, so it stays
     * valid only until the caller returns to the core (the next op or
     * device_scratch call may reuse or move it; growing waits for queued
     * work first).  NULL with err filled when out of memory. */
    void *(*device_scratch)(plume_backend *b, size_t bytes, plume_error *err);
    /* Enqueues one dense GEMM (plume_device_gemm) on info.stream (cuBLAS
     * on cuda); the result may depend on n_rows (not batch-invariant). */
    int (*device_gemm)(plume_backend *b, const plume_device_gemm *g, plume_error *err);

    /* ---- optional (version 5): mixture-of-experts layers.  The model
     * routes on the host (the router's logits come back with download),
     * then for each active expert gathers the rows routed to it, runs the
     * expert's linears once over them and scatter-adds the weighted result
     * into the residual stream.  A backend offers both or neither, and
     * answers supports(PLUME_FEAT_MOE) with 1 when it does.  idx and w are
     * host memory, read during the call only. ---- */

    /* dst[i] = src[idx[i]] for i < n, rows of dim floats (dst is not src;
     * every idx[i] a row of src). */
    int (*gather_rows)(plume_backend *b, plume_buf *dst, const plume_buf *src, const int32_t *idx,
                       int32_t n, int32_t dim, plume_error *err);
    /* dst[idx[i]][j] += w[i] * src[i][j] for i < n (in that order), j <
     * dim: each product rounded to f32, then added (so a row's result
     * depends only on its own rows, not on n). */
    int (*scatter_add_rows)(plume_backend *b, plume_buf *dst, const plume_buf *src,
                            const int32_t *idx, const float *w, int32_t n, int32_t dim,
                            plume_error *err);

    /* ---- optional (version 5): dummy weights ---- */

    /* Prepares the matrix t (n_dims 2; t->data is NULL and unread) as
     * weight_prepare would prepare the host bytes that plume_fill_row(spec,
     * r, ...) gives for every row r < t->ne[1], but makes those bytes where
     * the weight lives (a device kernel), so that no host copy of the model
     * exists (`load_format: dummy`, plume/dummy_fill.h).  spec->type ==
     * t->type.  NULL: the core makes the bytes in host memory and calls
     * weight_prepare. */
    int (*weight_fill)(plume_backend *b, const plume_tensor *t, const plume_fill_spec *spec,
                       plume_bweight **out, plume_error *err);

    /* ---- optional (version 5, appended later): gpt-oss's experts ---- */

    /* gate[i] = g * sigmoid(alpha g) * (u + 1) for i < n (in place in gate),
     * with g = min(gate[i], limit) and u = clamp(up[i], -limit, limit):
     * the clamped SwiGLU of transformers' GptOssExperts._apply_gate (alpha
     * 1.702, limit 7.0 there; llama.cpp's ggml_swiglu_oai).  A backend
     * without it (NULL, or past its struct_size) cannot run gpt-oss. */
    int (*swiglu_oai)(plume_backend *b, plume_buf *gate, const plume_buf *up, size_t n,
                      float alpha, float limit, plume_error *err);

    /* ---- optional (version 5, appended in ABI 2.2): a layer's experts as
     * one job (llama.cpp's mul_mat_id) ---- */

    /* For each segment s < n_seg and j < n_w: rows off[s] .. off[s+1]-1 of
     * y[j] = the same rows of x times w[s * n_w + j]ᵀ.  Every w has the
     * same in-features; w[s * n_w + j] has y[j]'s width for every s; a
     * segment may be empty (its weights are not read).  Each value must be
     * exactly what matmul(&w[s * n_w + j], 1, ...) gives for that x row
     * alone: it depends only on its weight row and its x row.  off (n_seg +
     * 1 entries, off[0] = 0, ascending) is host memory read during the call.
     * NULL (or past struct_size): the model runs one matmul per expert. */
    int (*matmul_segments)(plume_backend *b, const plume_bweight *const *w, int n_w,
                           int32_t n_seg, const int32_t *off, const plume_buf *x,
                           plume_buf *const *y, plume_error *err);
} plume_backend_vtable;

/* True when vtable vt has the optional op `field` (set, and inside the
 * provider's struct_size). */
#define PLUME_BACKEND_HAS_OP(vt, field)                                                           \
    ((vt)->struct_size >= offsetof(plume_backend_vtable, field) + sizeof((vt)->field) &&          \
     (vt)->field != NULL)

#ifdef __cplusplus
}
#endif
#endif
