/* backend-cuda: the "cuda" backend (plume/backend.h) on one NVIDIA GPU.
 *
 * Buffers are cudaMalloc'd device memory (the handle is the device
 * address; host_ptr is NULL); every op is queued on the instance's one
 * stream and download waits for it.  Weights: matrices go to the device
 * as the checkpoint stores them (f32, f16, bf16, or the GGUF blocks of
 * Q4_0, Q4_1, Q8_0 and MXFP4); vectors become f32.  The KV pool is device
 * memory with the cpu backend's layout (f32 or f16).  The kernels are in cuda_kernels.cu over
 * cuda_bodies.h.
 *
 * matmul: `matmul: rows` (the default) runs the row kernel for every
 * batch — each output depends only on its weight row and its x row, so a
 * prompt's logits are the same bits alone, batched or in any prefill
 * chunks, as backend.h requires.  `matmul: cublas` runs batches of more
 * than CK_GEMV_ROWS * 2 rows as cuBLAS f16 GEMMs (x rounded to f16,
 * quantized weights dequantized into an f16 slab per call): faster
 * prefill, but results then depend on the batch shape. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_backend.h"
#include "cc_cuda.h"
#include "cuda_kernels.h"
#include "cuda_step.h"
#include "plume/fp16.h"

#define GEMM_MIN_ROWS (2 * CK_GEMV_ROWS) /* matmul: cublas from this many rows */
#define SLAB_BYTES ((size_t)64 << 20)    /* most scratch for one dequantized slab */

typedef struct cuda_backend {
    int device;
    cudaStream_t stream;
    bool use_cublas;
    bool act_int8;       /* activations: int8 (Q4_0/Q4_1/Q8_0 rows dotted in integers) */
    cc_blas *blas;       /* NULL until the first GEMM */
    /* the step's metadata: host staging and its device copy */
    int32_t *h_meta, *d_meta;
    size_t meta_cap;     /* int32 elements of both */
    ck_step step;        /* device pointers into d_meta */
    void *scratch;       /* GEMM: f16 x and a dequantized slab */
    size_t scratch_cap;
    void *act;           /* int8 activations: x's blocks, scales and sums */
    size_t act_cap;
    /* a mixture-of-experts op's index arrays: host staging and device copy */
    uint8_t *h_moe;
    void *d_moe;
    size_t moe_cap;      /* bytes of both */
} cuda_backend;

struct plume_bweight {
    ck_weight w;  /* matrices (w.data device memory) */
    float *vec;   /* vectors: f32 on the device */
    int64_t n;    /* vector length */
};

static cuda_backend *CB(plume_backend *b) { return (cuda_backend *)b; }
static float *F(plume_buf *b) { return (float *)b; }
static const float *CF(const plume_buf *b) { return (const float *)b; }

/* ---- errors ---- */

#define WHO "cuda backend"

static int cu_fail(plume_error *err, cudaError_t e, const char *what)
{
    return cc_fail(err, e, WHO, what);
}

#define CU(call, what) CC_CHECK(call, WHO, what)

/* ---- availability ---- */

bool ck_device_usable(char *why, size_t n)
{
    return cc_device_usable(0, ck_kernel_probe, "the backend's kernels", why, n);
}

static int cuda_score(void)
{
    char why[256];
    return ck_device_usable(why, sizeof why) ? 10 : 0;
}

static const char *const matmul_modes[] = {"rows", "cublas"};
/* f32 first, the default: the int8 path passes the emulation but has not
 * yet run on a GPU (docs/backend-cuda.md) */
static const char *const act_modes[] = {"f32", "int8"};

static int cuda_validate(const plume_settings *s, plume_error *err)
{
    static const char *const keys[] = {"matmul", "device", "activations"};
    size_t mode, act;
    int64_t dev;
    if (plume_settings_check_keys(s, keys, 3, err) ||
        plume_settings_choice(s, "matmul", matmul_modes, 2, 0, &mode, err) ||
        plume_settings_choice(s, "activations", act_modes, 2, 0, &act, err) ||
        plume_settings_int(s, "device", 0, 0, 1024, &dev, err))
        return -1;
    return 0;
}

static int cuda_create(const plume_settings *s, int n_threads, plume_backend **out,
                       plume_error *err)
{
    (void)n_threads;
    *out = NULL;
    size_t mode = 0, act = 0;
    int64_t dev = 0;
    if (s && (plume_settings_choice(s, "matmul", matmul_modes, 2, 0, &mode, err) ||
              plume_settings_choice(s, "activations", act_modes, 2, 0, &act, err) ||
              plume_settings_int(s, "device", 0, 0, 1024, &dev, err)))
        return -1;
    char why[256];
    if (!cc_device_usable((int)dev, ck_kernel_probe, "the backend's kernels", why, sizeof why))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "cuda backend: %s; choose a device this machine has (backend setting "
                         "device), or use backend: cpu (or auto, which picks cpu when no device "
                         "is usable)",
                         why);
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b)
        return plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory");
    b->device = (int)dev;
    b->use_cublas = mode == 1;
    b->act_int8 = act == 1;
    cudaError_t e = cudaSetDevice(b->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(b);
        char what[64];
        snprintf(what, sizeof what, "device %d (stream)", (int)dev);
        return cu_fail(err, e, what);
    }
    *out = (plume_backend *)b;
    return 0;
}

static void cuda_destroy(plume_backend *be)
{
    cuda_backend *b = CB(be);
    if (!b)
        return;
    (void)cudaSetDevice(b->device);
    (void)cudaStreamSynchronize(b->stream);
    cc_blas_free(b->blas);
    (void)cudaFree(b->d_meta);
    (void)cudaFree(b->scratch);
    (void)cudaFree(b->act);
    (void)cudaFree(b->d_moe);
    (void)cudaStreamDestroy(b->stream);
    (void)cudaGetLastError();
    free(b->h_meta);
    free(b->h_moe);
    free(b);
}

static int cuda_supports(plume_backend *be, plume_backend_feature f, int64_t arg)
{
    (void)be;
    switch (f) {
    case PLUME_FEAT_WEIGHT_TYPE:
        return arg == PLUME_DTYPE_F32 || arg == PLUME_DTYPE_F16 || arg == PLUME_DTYPE_BF16 ||
               arg == PLUME_DTYPE_Q4_0 || arg == PLUME_DTYPE_Q4_1 || arg == PLUME_DTYPE_Q8_0 ||
               arg == PLUME_DTYPE_MXFP4;
    case PLUME_FEAT_KV_DTYPE:
        return arg == PLUME_KV_F32 || arg == PLUME_KV_F16;
    case PLUME_FEAT_HEAD_DIM: /* the attention kernel's per-lane registers */
        return arg > 0 && arg <= CK_HD_MAX && arg % 2 == 0;
    case PLUME_FEAT_ROPE_ADJACENT:
        return arg == 0 || arg == 1;
    case PLUME_FEAT_MOE: /* gather_rows, scatter_add_rows (and matmul_segments) */
        return 1;
    case PLUME_FEAT_ATTN_SINKS: /* ck_attn_write's sink term */
        return 1;
    }
    return 0;
}

/* ---- buffers ---- */

static plume_buf *cuda_buf_alloc(plume_backend *be, size_t bytes, plume_error *err)
{
    cuda_backend *b = CB(be);
    void *p = NULL;
    cudaError_t e = cudaSetDevice(b->device);
    if (e == cudaSuccess)
        e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cu_fail(err, e, "cudaMalloc");
        return NULL;
    }
    return p;
}

static void cuda_buf_free(plume_backend *be, plume_buf *buf)
{
    if (!buf)
        return;
    (void)cudaStreamSynchronize(CB(be)->stream); /* queued work may still use it */
    (void)cudaFree(buf);
}

static int cuda_upload(plume_backend *be, plume_buf *dst, size_t off, const void *src,
                       size_t bytes, plume_error *err)
{
    cuda_backend *b = CB(be);
    CU(cudaMemcpyAsync((char *)dst + off, src, bytes, cudaMemcpyHostToDevice, b->stream),
       "upload (cudaMemcpyAsync)");
    CU(cudaStreamSynchronize(b->stream), "upload (synchronize)"); /* src may go away */
    return 0;
}

static int cuda_download(plume_backend *be, void *dst, const plume_buf *src, size_t off,
                         size_t bytes, plume_error *err)
{
    cuda_backend *b = CB(be);
    CU(cudaMemcpyAsync(dst, (const char *)src + off, bytes, cudaMemcpyDeviceToHost, b->stream),
       "download (cudaMemcpyAsync)");
    CU(cudaStreamSynchronize(b->stream), "download (synchronize)");
    return 0;
}

static int cuda_synchronize(plume_backend *be, plume_error *err)
{
    CU(cudaStreamSynchronize(CB(be)->stream), "cudaStreamSynchronize");
    return 0;
}

/* ---- weights ---- */

/* n values of t (any plume dtype) as f32, malloc'd. */
static float *to_f32(const plume_tensor *t, int64_t n, plume_error *err)
{
    float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!f) {
        plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory converting %s",
                  t->name ? t->name : "a tensor");
        return NULL;
    }
    plume_dequantize((plume_dtype)t->type, t->data, f, n);
    return f;
}

static int put(cuda_backend *b, void **dst, const void *src, size_t bytes, plume_error *err)
{
    CU(cudaMalloc(dst, bytes ? bytes : 1), "cudaMalloc (a weight)");
    CU(cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, b->stream), "weight upload");
    CU(cudaStreamSynchronize(b->stream), "weight upload (synchronize)");
    return 0;
}

static int cuda_weight_prepare(plume_backend *be, const plume_tensor *t, plume_bweight **out,
                               plume_error *err)
{
    cuda_backend *b = CB(be);
    *out = NULL;
    if (!cuda_supports(be, PLUME_FEAT_WEIGHT_TYPE, t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "cuda backend: tensor %s has type %s; the cuda backend runs F32, F16, "
                         "BF16, Q4_0, Q4_1, Q8_0 and MXFP4 (use backend: cpu for this model)",
                         t->name ? t->name : "?", plume_dtype_name(t->type));
    if (t->n_dims != 1 && t->n_dims != 2)
        return plume_err(err, PLUME_ERR_INVALID, "cuda backend: tensor %s has %d dims (1 or 2)",
                         t->name ? t->name : "?", t->n_dims);
    CU(cudaSetDevice(b->device), "cudaSetDevice");
    plume_bweight *w = calloc(1, sizeof *w);
    if (!w)
        return plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory");
    const int64_t n = plume_tensor_nelements(t);
    int rc = -1;
    if (t->n_dims == 1) {
        float *f = to_f32(t, n, err);
        if (f) {
            w->n = n;
            rc = put(b, (void **)&w->vec, f, sizeof(float) * (size_t)n, err);
            free(f);
        }
    } else { /* as the checkpoint stores it */
        w->w.K = t->ne[0];
        w->w.N = t->ne[1];
        w->w.type = (int)t->type;
        w->w.row_bytes = (int64_t)plume_dtype_row_bytes(t->type, t->ne[0]);
        void *dev = NULL;
        rc = put(b, &dev, t->data, (size_t)(w->w.row_bytes * w->w.N), err);
        w->w.data = dev;
    }
    if (rc) {
        (void)cudaFree((void *)w->w.data);
        (void)cudaFree(w->vec);
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

/* load_format: dummy: the matrix made on the device by ck_fill, the same
 * bytes cuda_weight_prepare would upload from plume_fill_row's host rows;
 * no host copy. */
static int cuda_weight_fill(plume_backend *be, const plume_tensor *t, const plume_fill_spec *spec,
                            plume_bweight **out, plume_error *err)
{
    cuda_backend *b = CB(be);
    *out = NULL;
    if (!cuda_supports(be, PLUME_FEAT_WEIGHT_TYPE, t->type) || t->type == PLUME_DTYPE_MXFP4 ||
        t->n_dims != 2 || spec->type != t->type || spec->ne0 != t->ne[0])
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "cuda backend: cannot fill %s (%d dims, type %s); the cuda backend "
                         "fills F32, F16, BF16, Q4_0, Q4_1 and Q8_0 matrices (use dtype F16, "
                         "BF16 or a preset with pure: true)",
                         t->name ? t->name : "?", t->n_dims, plume_dtype_name(t->type));
    CU(cudaSetDevice(b->device), "cudaSetDevice");
    plume_bweight *w = calloc(1, sizeof *w);
    if (!w)
        return plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory");
    w->w.K = t->ne[0];
    w->w.N = t->ne[1];
    w->w.type = (int)t->type;
    w->w.row_bytes = (int64_t)plume_dtype_row_bytes(t->type, t->ne[0]);
    void *dev = NULL;
    cudaError_t e = cudaMalloc(&dev, (size_t)(w->w.row_bytes * w->w.N));
    if (e == cudaSuccess)
        e = ck_launch_fill(spec, dev, w->w.row_bytes, w->w.N, b->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(b->stream);
    if (e != cudaSuccess) {
        (void)cudaFree(dev);
        free(w);
        return cu_fail(err, e, "dummy weight fill");
    }
    w->w.data = dev;
    *out = w;
    return 0;
}

static void cuda_weight_free(plume_backend *be, plume_bweight *w)
{
    if (!w)
        return;
    (void)cudaStreamSynchronize(CB(be)->stream);
    (void)cudaFree((void *)w->w.data);
    (void)cudaFree(w->vec);
    free(w);
}

/* ---- the KV cache ---- */

static int cuda_kv_alloc(plume_backend *be, plume_kv_pool *kv, plume_error *err)
{
    cuda_backend *b = CB(be);
    kv->elem_bytes = kv->dtype == PLUME_KV_F16 ? 2 : 4;
    kv->head_stride = (size_t)kv->head_dim * kv->elem_bytes;
    kv->slot_stride = kv->head_stride * (size_t)kv->n_head_kv;
    kv->layer_stride = kv->slot_stride * (size_t)kv->n_blocks * (size_t)kv->block_size;
    const size_t bytes = kv->layer_stride * (size_t)kv->n_layer;
    kv->k = kv->v = NULL;
    CU(cudaSetDevice(b->device), "cudaSetDevice");
    cudaError_t e = cudaMalloc((void **)&kv->k, bytes ? bytes : 1);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&kv->v, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        (void)cudaFree(kv->k);
        kv->k = kv->v = NULL;
        (void)cudaGetLastError();
        return plume_err(err, e == cudaErrorMemoryAllocation ? PLUME_ERR_NOMEM : PLUME_ERR_INTERNAL,
                         "cuda backend: allocating a KV cache of %d blocks x %d tokens (%.1f MiB) "
                         "in device memory: %s; lower kv_cache.max_tokens",
                         kv->n_blocks, kv->block_size, 2.0 * (double)bytes / (1 << 20),
                         cudaGetErrorString(e));
    }
    return 0;
}

static void cuda_kv_free(plume_backend *be, plume_kv_pool *kv)
{
    (void)cudaStreamSynchronize(CB(be)->stream);
    (void)cudaFree(kv->k);
    (void)cudaFree(kv->v);
    kv->k = kv->v = NULL;
}

/* ---- a step: its metadata copied to the device once ---- */

static int cuda_step_begin(plume_backend *be, plume_step *st, plume_error *err)
{
    cuda_backend *b = CB(be);
    const size_t need = ck_step_size(st);
    if (need > b->meta_cap) {
        const size_t cap = need * 2;
        int32_t *h = realloc(b->h_meta, sizeof(int32_t) * cap);
        if (!h)
            return plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory");
        b->h_meta = h;
        CU(cudaStreamSynchronize(b->stream), "synchronize (step metadata)");
        (void)cudaFree(b->d_meta);
        b->d_meta = NULL;
        b->meta_cap = 0;
        CU(cudaMalloc((void **)&b->d_meta, sizeof(int32_t) * cap), "cudaMalloc (step metadata)");
        b->meta_cap = cap;
    }
    ck_step_pack(st, b->h_meta);
    /* pageable source: the copy has left h_meta when this returns, and the
     * stream orders it after the previous step's kernels */
    CU(cudaMemcpyAsync(b->d_meta, b->h_meta, sizeof(int32_t) * need, cudaMemcpyHostToDevice,
                       b->stream),
       "step metadata upload");
    b->step = ck_step_view(b->d_meta, st);
    st->backend_data = &b->step;
    return 0;
}

static void cuda_step_end(plume_backend *be, plume_step *st)
{
    (void)be;
    st->backend_data = NULL;
}

static const ck_step *step_of(const plume_step *st, plume_error *err)
{
    if (!st->backend_data)
        plume_err(err, PLUME_ERR_INVALID,
                  "cuda backend: an op that reads the step ran outside step_begin/step_end: a bug "
                  "in the caller");
    return st->backend_data;
}

#define LAUNCH(call, what) CU(call, what " kernel")

/* ---- layer ops ---- */

static int cuda_embed(plume_backend *be, const plume_step *st, const plume_bweight *table,
                      plume_buf *x, int32_t dim, plume_error *err)
{
    const ck_step *S = step_of(st, err);
    if (!S)
        return -1;
    LAUNCH(ck_launch_embed(S, &table->w, F(x), st->n_rows, dim, CB(be)->stream), "embed");
    return 0;
}

static int cuda_rmsnorm(plume_backend *be, plume_buf *out, const plume_buf *x,
                        const plume_bweight *w, int32_t n_rows, int32_t dim, float eps,
                        plume_error *err)
{
    LAUNCH(ck_launch_rmsnorm(F(out), CF(x), w->vec, n_rows, dim, eps, CB(be)->stream), "rmsnorm");
    return 0;
}

static int cuda_rope(plume_backend *be, const plume_step *st, plume_buf *x, int32_t n_heads,
                     int32_t head_dim, const plume_bweight *inv_freq, int adjacent,
                     plume_error *err)
{
    const ck_step *S = step_of(st, err);
    if (!S)
        return -1;
    LAUNCH(ck_launch_rope(S, F(x), st->n_rows, n_heads, head_dim, inv_freq->vec, adjacent,
                          CB(be)->stream),
           "rope");
    return 0;
}

static int cuda_kv_store(plume_backend *be, const plume_step *st, plume_kv_pool *kv,
                         int32_t layer, const plume_buf *k, const plume_buf *v, plume_error *err)
{
    const ck_step *S = step_of(st, err);
    if (!S)
        return -1;
    const size_t off = (size_t)layer * kv->layer_stride;
    LAUNCH(ck_launch_kv_store(S, (char *)kv->k + off, (char *)kv->v + off,
                              kv->dtype == PLUME_KV_F16, (int64_t)kv->n_head_kv * kv->head_dim,
                              CF(k), CF(v), st->n_rows, kv->n_head_kv * kv->head_dim,
                              CB(be)->stream),
           "kv_store");
    return 0;
}

static int cuda_attention(plume_backend *be, const plume_step *st, const plume_kv_pool *kv,
                          int32_t layer, const plume_buf *q, const plume_attn_params *p,
                          plume_buf *out, plume_error *err)
{
    const ck_step *S = step_of(st, err);
    if (!S)
        return -1;
    if (p->sinks && (!p->sinks->vec || p->sinks->n != p->n_head))
        return plume_err(err, PLUME_ERR_INVALID,
                         "cuda backend: attention sinks must be a prepared vector of %d floats "
                         "(one per query head): a bug in the caller",
                         p->n_head);
    if (p->n_head <= 0 || p->n_head % kv->n_head_kv != 0 || p->window < 0 || !(p->scale >= 0) ||
        kv->head_dim > CK_HD_MAX)
        return plume_err(err, PLUME_ERR_INVALID,
                         "cuda backend: attention: %d query heads over %d kv heads of %d, scale "
                         "%g, window %d (want a positive multiple of the kv heads, head_dim <= "
                         "%d, a scale >= 0 and a window >= 0): a bug in the caller",
                         p->n_head, kv->n_head_kv, kv->head_dim, (double)p->scale, p->window,
                         CK_HD_MAX);
    const size_t off = (size_t)layer * kv->layer_stride;
    const ck_attn A = {CF(q),
                       (const uint8_t *)kv->k + off,
                       (const uint8_t *)kv->v + off,
                       kv->dtype == PLUME_KV_F16,
                       kv->block_size,
                       p->n_head,
                       kv->n_head_kv,
                       kv->head_dim,
                       p->window,
                       (int64_t)kv->n_head_kv * kv->head_dim,
                       p->scale > 0 ? p->scale : 1.0f / sqrtf((float)kv->head_dim),
                       F(out),
                       p->sinks ? p->sinks->vec : NULL};
    LAUNCH(ck_launch_attention(S, &A, st->n_rows, CB(be)->stream), "attention");
    return 0;
}

static int cuda_swiglu(plume_backend *be, plume_buf *gate, const plume_buf *up, size_t n,
                       plume_error *err)
{
    LAUNCH(ck_launch_swiglu(F(gate), CF(up), (int64_t)n, CB(be)->stream), "swiglu");
    return 0;
}

static int cuda_swiglu_oai(plume_backend *be, plume_buf *gate, const plume_buf *up, size_t n,
                           float alpha, float limit, plume_error *err)
{
    LAUNCH(ck_launch_swiglu_oai(F(gate), CF(up), (int64_t)n, alpha, limit, CB(be)->stream),
           "swiglu_oai");
    return 0;
}

static int cuda_add(plume_backend *be, plume_buf *x, const plume_buf *y, size_t n,
                    plume_error *err)
{
    LAUNCH(ck_launch_add(F(x), CF(y), (int64_t)n, CB(be)->stream), "add");
    return 0;
}

static int cuda_add_bias(plume_backend *be, plume_buf *y, const plume_bweight *bias,
                         int32_t n_rows, int32_t dim, plume_error *err)
{
    LAUNCH(ck_launch_add_bias(F(y), bias->vec, n_rows, dim, CB(be)->stream), "add_bias");
    return 0;
}

static int cuda_gather_out_rows(plume_backend *be, const plume_step *st, plume_buf *dst,
                                const plume_buf *src, int32_t dim, plume_error *err)
{
    const ck_step *S = step_of(st, err);
    if (!S)
        return -1;
    if (st->n_out > 0)
        LAUNCH(ck_launch_gather(S, F(dst), CF(src), st->n_out, dim, CB(be)->stream), "gather");
    return 0;
}

/* ---- matmul ---- */

static int scratch(cuda_backend *b, size_t bytes, plume_error *err)
{
    return cc_scratch_reserve(b->stream, &b->scratch, &b->scratch_cap, bytes, WHO, err);
}

/* A matrix the int8 path runs (activations: int8 and a Q4_0, Q4_1 or
 * Q8_0 matrix). */
static bool int8_path(const cuda_backend *b, const ck_weight *W)
{
    return b->act_int8 &&
           (W->type == CK_Q4_0 || W->type == CK_Q4_1 || W->type == CK_Q8_0);
}

/* x (n_rows x K) quantized per block of 32 into the instance's
 * activation buffer (ck_quant_q8): X's int8 values, scales and sums. */
static int quant_x(cuda_backend *b, const float *x, int32_t n_rows, int64_t K, ck_act *X,
                   plume_error *err)
{
    const size_t nq = (size_t)n_rows * (size_t)K, nb = nq / 32, qb = (nq + 255) & ~(size_t)255;
    if (cc_scratch_reserve(b->stream, &b->act, &b->act_cap, qb + 2 * sizeof(float) * nb, WHO, err))
        return -1;
    int8_t *q = b->act;
    float *d = (float *)((char *)b->act + qb), *s = d + nb;
    LAUNCH(ck_launch_quant_q8(x, n_rows, K, q, d, s, b->stream), "activation quantization");
    X->q = q, X->d = d, X->s = s;
    return 0;
}

/* cuBLAS f16 GEMM of one weight: x once to f16, then W itself (f16) or
 * slabs of it dequantized to f16. */
static int gemm_one(cuda_backend *b, const ck_weight *W, const void *xh, int32_t n_rows, float *y,
                    void *slab, int64_t slab_rows, plume_error *err)
{
    if (W->type == CK_F16)
        return cc_blas_gemm(b->blas, true, (int)W->N, n_rows, (int)W->K, W->data, (int)W->K, xh, (int)W->K, y, (int)W->N, PLUME_GEMM_F16, err);
    for (int64_t o0 = 0; o0 < W->N; o0 += slab_rows) {
        const int64_t rows = W->N - o0 < slab_rows ? W->N - o0 : slab_rows;
        LAUNCH(ck_launch_dequant_slab(W, o0, rows, slab, b->stream), "dequantize");
        if (cc_blas_gemm(b->blas, true, (int)rows, n_rows, (int)W->K, slab, (int)W->K, xh, (int)W->K, y + o0, (int)W->N, PLUME_GEMM_F16, err))
            return -1;
    }
    return 0;
}

static int cuda_matmul(plume_backend *be, const plume_bweight *const *w, int n_w,
                       const plume_buf *x, int32_t n_rows, plume_buf *const *y, plume_error *err)
{
    cuda_backend *b = CB(be);
    for (int i = 0; i < n_w; i++)
        if (!w[i]->w.data || w[i]->w.K != w[0]->w.K)
            return plume_err(err, PLUME_ERR_INVALID,
                             "cuda backend: matmul needs prepared matrices of equal in-features");
    if (n_rows <= 0)
        return 0;
    if (!b->use_cublas || n_rows < GEMM_MIN_ROWS) {
        ck_act xf = {CF(x), NULL, NULL, NULL}, xq = xf; /* xq.q: quantized once, if needed */
        for (int i = 0; i < n_w; i++) {
            const bool q8 = int8_path(b, &w[i]->w);
            if (q8 && !xq.q && quant_x(b, CF(x), n_rows, w[i]->w.K, &xq, err))
                return -1;
            LAUNCH(ck_launch_gemv(&w[i]->w, q8 ? &xq : &xf, n_rows, F(y[i]), b->stream),
                   "row matmul");
        }
        return 0;
    }
    if (!b->blas && cc_blas_create(b->stream, WHO, "the backend's matmul: rows", &b->blas, err))
        return -1;
    const int64_t K = w[0]->w.K;
    const size_t xh_bytes = ((size_t)n_rows * (size_t)K * 2 + 255) & ~(size_t)255;
    int64_t slab_rows = (int64_t)(SLAB_BYTES / ((size_t)K * 2));
    if (slab_rows < 1)
        slab_rows = 1;
    int64_t max_n = 0;
    for (int i = 0; i < n_w; i++)
        if (w[i]->w.type != CK_F16 && w[i]->w.N > max_n)
            max_n = w[i]->w.N;
    if (slab_rows > max_n)
        slab_rows = max_n;
    if (scratch(b, xh_bytes + (size_t)slab_rows * (size_t)K * 2, err))
        return -1;
    void *xh = b->scratch, *slab = (char *)b->scratch + xh_bytes;
    LAUNCH(ck_launch_to_f16(CF(x), (int64_t)n_rows * K, xh, b->stream), "to f16");
    for (int i = 0; i < n_w; i++)
        if (gemm_one(b, &w[i]->w, xh, n_rows, F(y[i]), slab, slab_rows, err))
            return -1;
    return 0;
}

/* ---- mixture-of-experts rows (backend.h version 5) ---- */

/* The host staging area of at least bytes for one op's index arrays,
 * with a device copy of the same size (growing waits for queued work
 * that may read the old copy).  NULL with err filled on failure. */
static void *moe_host(cuda_backend *b, size_t bytes, plume_error *err)
{
    if (bytes <= b->moe_cap)
        return b->h_moe;
    const size_t cap = bytes * 2;
    uint8_t *h = realloc(b->h_moe, cap);
    if (!h) {
        plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory (%zu bytes of expert indices)",
                  cap);
        return NULL;
    }
    b->h_moe = h;
    cudaError_t e = cudaStreamSynchronize(b->stream);
    (void)cudaFree(b->d_moe);
    b->d_moe = NULL;
    b->moe_cap = 0;
    if (e == cudaSuccess)
        e = cudaMalloc(&b->d_moe, cap);
    if (e != cudaSuccess) {
        b->d_moe = NULL;
        cu_fail(err, e, "cudaMalloc (expert indices)");
        return NULL;
    }
    b->moe_cap = cap;
    return b->h_moe;
}

/* Copies the first bytes of the staging area to its device copy, after
 * the stream's queued work (pageable source: the host array is free to
 * reuse when this returns). */
static int moe_push(cuda_backend *b, size_t bytes, plume_error *err)
{
    CU(cudaMemcpyAsync(b->d_moe, b->h_moe, bytes, cudaMemcpyHostToDevice, b->stream),
       "expert indices upload");
    return 0;
}

static int cuda_gather_rows(plume_backend *be, plume_buf *dst, const plume_buf *src,
                            const int32_t *idx, int32_t n, int32_t dim, plume_error *err)
{
    cuda_backend *b = CB(be);
    if (n <= 0 || dim <= 0)
        return 0;
    int32_t *h = moe_host(b, sizeof(int32_t) * (size_t)n, err);
    if (!h)
        return -1;
    memcpy(h, idx, sizeof(int32_t) * (size_t)n);
    if (moe_push(b, sizeof(int32_t) * (size_t)n, err))
        return -1;
    LAUNCH(ck_launch_gather_rows(F(dst), CF(src), b->d_moe, n, dim, b->stream), "gather_rows");
    return 0;
}

/* The scatter as destinations: each distinct row r of idx once (row[u]),
 * with the i that add into it in ascending order (list[start[u] ..
 * start[u+1])), so one thread per element adds them in the cpu's order. */
static int cuda_scatter_add_rows(plume_backend *be, plume_buf *dst, const plume_buf *src,
                                 const int32_t *idx, const float *w, int32_t n, int32_t dim,
                                 plume_error *err)
{
    cuda_backend *b = CB(be);
    if (n <= 0 || dim <= 0)
        return 0;
    int32_t max_r = 0;
    for (int32_t i = 0; i < n; i++) {
        if (idx[i] < 0)
            return plume_err(err, PLUME_ERR_INVALID,
                             "cuda backend: scatter_add_rows: index %d of %d is %d: a bug in the "
                             "caller",
                             i, n, idx[i]);
        max_r = idx[i] > max_r ? idx[i] : max_r;
    }
    int32_t *at = calloc((size_t)max_r + 2, sizeof *at); /* ck_scatter_plan's per-row scratch */
    if (!at)
        return plume_err(err, PLUME_ERR_NOMEM, "cuda backend: out of memory (scatter of %d rows)",
                         n);
    /* row[n] start[n + 1] list[n] (int32), then w[n] */
    const size_t ints = 3 * (size_t)n + 1;
    int32_t *h = moe_host(b, sizeof(int32_t) * ints + sizeof(float) * (size_t)n, err);
    if (!h) {
        free(at);
        return -1;
    }
    const int32_t n_u = ck_scatter_plan(idx, n, at, h, h + n, h + 2 * n + 1);
    free(at);
    memcpy(h + ints, w, sizeof(float) * (size_t)n);
    if (moe_push(b, sizeof(int32_t) * ints + sizeof(float) * (size_t)n, err))
        return -1;
    const int32_t *d = b->d_moe;
    LAUNCH(ck_launch_scatter_add(F(dst), CF(src), d, d + n, d + 2 * n + 1,
                                 (const float *)(d + ints), n_u, dim, b->stream),
           "scatter_add_rows");
    return 0;
}

/* Every active segment's weights (their ck_weight, device pointers inside)
 * and the tasks (CK_GEMV_ROWS rows of one segment each) in one upload,
 * then one k_gemv_seg launch per output j.  Each (row, output) is the
 * row kernel's ck_gemv_lane over that row alone: the same bits as
 * cuda_matmul of the row, as backend.h asks. */
static int cuda_matmul_segments(plume_backend *be, const plume_bweight *const *w, int n_w,
                                int32_t n_seg, const int32_t *off, const plume_buf *x,
                                plume_buf *const *y, plume_error *err)
{
    cuda_backend *b = CB(be);
    if (n_w <= 0 || n_seg <= 0 || off[n_seg] <= 0)
        return 0;
    for (int32_t s = 0; s < n_seg; s++) {
        if (off[s + 1] < off[s])
            return plume_err(err, PLUME_ERR_INVALID,
                             "cuda backend: matmul_segments: offsets not ascending at segment %d",
                             s);
        for (int j = 0; j < n_w && off[s + 1] > off[s]; j++) {
            const ck_weight *W = &w[(size_t)s * n_w + j]->w;
            if (!W->data || W->K != w[0]->w.K || W->N != w[j]->w.N)
                return plume_err(err, PLUME_ERR_INVALID,
                                 "cuda backend: matmul_segments needs prepared matrices of equal "
                                 "in-features and, per output, equal out-features (segment %d, "
                                 "output %d)",
                                 s, j);
        }
    }
    int32_t n_act;
    const int32_t n_tasks = ck_seg_plan(off, n_seg, NULL, &n_act);
    const size_t wbytes = sizeof(ck_weight) * (size_t)n_act * (size_t)n_w;
    uint8_t *h = moe_host(b, wbytes + sizeof(ck_seg_task) * (size_t)n_tasks, err);
    if (!h)
        return -1;
    ck_weight *ws = (ck_weight *)h;
    ck_seg_task *tasks = (ck_seg_task *)(h + wbytes);
    for (int32_t s = 0, a = 0; s < n_seg; s++)
        if (off[s + 1] > off[s]) {
            for (int j = 0; j < n_w; j++)
                ws[(size_t)a * n_w + j] = w[(size_t)s * n_w + j]->w;
            a++;
        }
    ck_seg_plan(off, n_seg, tasks, &n_act);
    if (moe_push(b, wbytes + sizeof(ck_seg_task) * (size_t)n_tasks, err))
        return -1;
    const ck_weight *dws = b->d_moe;
    const ck_seg_task *dtasks = (const ck_seg_task *)((const uint8_t *)b->d_moe + wbytes);
    ck_act xf = {CF(x), NULL, NULL, NULL}, xq = xf; /* xq.q: quantized once, if needed */
    for (int j = 0; j < n_w; j++) {
        int type = w[j]->w.type; /* one kernel for the type all segments share */
        for (int32_t s = 0; s < n_seg; s++)
            if (off[s + 1] > off[s] && w[(size_t)s * n_w + j]->w.type != type)
                type = -1;
        const bool q8 = type >= 0 && int8_path(b, &w[j]->w);
        if (q8 && !xq.q && quant_x(b, CF(x), off[n_seg], w[0]->w.K, &xq, err))
            return -1;
        LAUNCH(ck_launch_gemv_seg(dws, n_w, j, type, dtasks, n_tasks, w[j]->w.N, q8 ? &xq : &xf,
                                  F(y[j]), b->stream),
               "segmented row matmul");
    }
    return 0;
}

/* ---- device hooks for plugin kernels (backend.h, version 4) ---- */

static int cuda_device_info(plume_backend *be, plume_device_info *out, plume_error *err)
{
    (void)err;
    cuda_backend *b = CB(be);
    *out = (plume_device_info){.api = "cuda", .device = b->device, .stream = (void *)b->stream,
                               .batch_invariant = !b->use_cublas};
    return 0;
}

static void *cuda_device_ptr(plume_backend *be, const plume_buf *buf)
{
    (void)be;
    return (void *)buf; /* the handle is the device address */
}

static void *cuda_device_scratch(plume_backend *be, size_t bytes, plume_error *err)
{
    cuda_backend *b = CB(be);
    return scratch(b, bytes ? bytes : 1, err) ? NULL : b->scratch;
}

static int cuda_device_gemm(plume_backend *be, const plume_device_gemm *g, plume_error *err)
{
    cuda_backend *b = CB(be);
    if (g->n_out <= 0 || g->n_rows < 0 || g->k <= 0 || g->ldy < g->n_out || !g->w || !g->x ||
        !g->y)
        return plume_err(err, PLUME_ERR_INVALID,
                         "cuda backend: device_gemm of %d outputs, %d rows, k %d, ldy %d",
                         (int)g->n_out, (int)g->n_rows, (int)g->k, (int)g->ldy);
    if (!g->n_rows)
        return 0;
    if (!b->blas && cc_blas_create(b->stream, WHO, NULL, &b->blas, err))
        return -1;
    /* column-major: w is n_out x k (ld n_out), x k x n_rows (ld k), y
     * n_out x n_rows (ld ldy): Y = W · X */
    return cc_blas_gemm(b->blas, false, g->n_out, g->n_rows, g->k, g->w, g->n_out, g->x, g->k,
                        g->y, g->ldy, g->precision, err);
}

/* ---- microbenchmarks for `plume bench roofline` (cuda_backend.h) ---- */

int ck_bench_read_bandwidth(plume_backend *be, size_t bytes, int reps, double *gbs,
                            plume_error *err)
{
    cuda_backend *b = CB(be);
    void *p = NULL;
    float *sink = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = -1;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&sink, 1024 * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMemsetAsync(p, 0, bytes, b->stream);
    if (e == cudaSuccess)
        e = cudaEventCreate(&e0);
    if (e == cudaSuccess)
        e = cudaEventCreate(&e1);
    if (e == cudaSuccess)
        e = ck_launch_read_probe(p, (int64_t)(bytes / 16), sink, b->stream); /* warm-up */
    if (e == cudaSuccess)
        e = cudaEventRecord(e0, b->stream);
    for (int i = 0; i < reps && e == cudaSuccess; i++)
        e = ck_launch_read_probe(p, (int64_t)(bytes / 16), sink, b->stream);
    if (e == cudaSuccess)
        e = cudaEventRecord(e1, b->stream);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(e1);
    float ms = 0;
    if (e == cudaSuccess)
        e = cudaEventElapsedTime(&ms, e0, e1);
    if (e == cudaSuccess) {
        *gbs = (double)bytes * reps / (ms * 1e-3) / 1e9;
        rc = 0;
    } else {
        cu_fail(err, e, "bandwidth probe");
    }
    (void)cudaFree(p);
    (void)cudaFree(sink);
    if (e0)
        (void)cudaEventDestroy(e0);
    if (e1)
        (void)cudaEventDestroy(e1);
    return rc;
}

int ck_bench_f16_gemm(plume_backend *be, int n, int reps, double *tflops, plume_error *err)
{
    cuda_backend *b = CB(be);
    if (!b->blas && cc_blas_create(b->stream, WHO, "the backend's matmul: rows", &b->blas, err))
        return -1;
    const size_t bytes = (size_t)n * (size_t)n * 2;
    void *a = NULL, *x = NULL;
    float *y = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = -1;
    cudaError_t e = cudaMalloc(&a, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&x, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&y, (size_t)n * (size_t)n * 4);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(a, 0, bytes, b->stream);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(x, 0, bytes, b->stream);
    if (e == cudaSuccess)
        e = cudaEventCreate(&e0);
    if (e == cudaSuccess)
        e = cudaEventCreate(&e1);
    if (e != cudaSuccess) {
        cu_fail(err, e, "f16 GEMM probe set-up");
        goto done;
    }
    if (cc_blas_gemm(b->blas, true, n, n, n, a, n, x, n, y, n, PLUME_GEMM_F16, err)) /* warm-up */
        goto done;
    (void)cudaEventRecord(e0, b->stream);
    for (int i = 0; i < reps; i++)
        if (cc_blas_gemm(b->blas, true, n, n, n, a, n, x, n, y, n, PLUME_GEMM_F16, err))
            goto done;
    (void)cudaEventRecord(e1, b->stream);
    float ms = 0;
    if ((e = cudaEventSynchronize(e1)) != cudaSuccess ||
        (e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess) {
        cu_fail(err, e, "f16 GEMM probe timing");
        goto done;
    }
    *tflops = 2.0 * n * (double)n * n * reps / (ms * 1e-3) / 1e12;
    rc = 0;
done:
    (void)cudaFree(a);
    (void)cudaFree(x);
    (void)cudaFree(y);
    if (e0)
        (void)cudaEventDestroy(e0);
    if (e1)
        (void)cudaEventDestroy(e1);
    return rc;
}

#define MB_READ_BYTES ((size_t)1 << 30) /* far beyond the L2 */
#define MB_GEMM_N 8192

static int cuda_microbench(plume_backend *be, plume_microbench what, int reps, double *out,
                           plume_error *err)
{
    if (reps < 1)
        reps = 1;
    switch (what) {
    case PLUME_MB_READ_GBS:
        return ck_bench_read_bandwidth(be, MB_READ_BYTES, reps, out, err);
    case PLUME_MB_F16_TFLOPS:
        return ck_bench_f16_gemm(be, MB_GEMM_N, reps, out, err);
    default: /* the host's peaks (f32 FMA, int8 dot) are the cpu backend's */
        break;
    }
    return plume_err(err, PLUME_ERR_UNSUPPORTED, "cuda backend: no microbenchmark %d", (int)what);
}

const plume_backend_vtable ck_backend_vtable = {
    .struct_size = sizeof(plume_backend_vtable),
    .interface_version = PLUME_BACKEND_INTERFACE_VERSION,
    .name = "cuda",
    .validate = cuda_validate,
    .score = cuda_score,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .supports = cuda_supports,
    .buf_alloc = cuda_buf_alloc,
    .buf_free = cuda_buf_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .host_ptr = NULL,
    .weight_prepare = cuda_weight_prepare,
    .weight_free = cuda_weight_free,
    .kv_alloc = cuda_kv_alloc,
    .kv_free = cuda_kv_free,
    .step_begin = cuda_step_begin,
    .step_end = cuda_step_end,
    .embed = cuda_embed,
    .rmsnorm = cuda_rmsnorm,
    .rope = cuda_rope,
    .kv_store = cuda_kv_store,
    .attention = cuda_attention,
    .swiglu = cuda_swiglu,
    .add = cuda_add,
    .add_bias = cuda_add_bias,
    .gather_out_rows = cuda_gather_out_rows,
    .matmul = cuda_matmul,
    .gather_rows = cuda_gather_rows,
    .scatter_add_rows = cuda_scatter_add_rows,
    .swiglu_oai = cuda_swiglu_oai,
    .matmul_segments = cuda_matmul_segments,
    .synchronize = cuda_synchronize,
    .microbench = cuda_microbench,
    .device_info = cuda_device_info,
    .device_ptr = cuda_device_ptr,
    .device_scratch = cuda_device_scratch,
    .device_gemm = cuda_device_gemm,
    .weight_fill = cuda_weight_fill,
};
