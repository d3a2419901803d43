/* plume-backend-ref: the reference backend.  Every slot of
 * plume_backend_vtable (plume/backend.h, interface version 5) written as
 * plain scalar C on f32, one small function per op, each with the op's
 * contract in a comment above it.  Meant to be read: it is the definition a
 * new backend (CUDA, Metal, ...) is checked against, and the companion of
 * docs/writing-a-backend.md.  It is slow on purpose: no SIMD, no threads,
 * sums in double, weights dequantized to f32 once at load.
 *
 * Handles.  A plume_buf* or plume_bweight* handed to the core is NOT a host
 * pointer: it is a small integer (a slot of this instance's own table, +1
 * so that NULL stays "no buffer") cast to a pointer.  Buffers are 1..16383,
 * weights 0x4001..0x7fff.  Those addresses are in the first 64 KiB, which no
 * Linux process maps (vm.mmap_min_addr), so a core that dereferences a
 * handle instead of going through upload/download faults at once, under
 * ASan too.  Every op checks every handle it is given (live, of the right
 * kind, large enough) and answers a bad one with a plume_err that names the
 * op and the argument.  host_ptr is absent: host-side plugin kernels (a quant
 * plugin's forward) cannot run on this backend, and say so.
 *
 * Pipeline: `plugins: [backend-ref]` and `backend: ref` (backend-ref.yaml). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <plume/backend.h>
#include <plume/fp16.h>
#include <plume/plugin.h>
#include <plume/tensor.h>

/* ---- handles ---------------------------------------------------------- */

#define REF_MAX_HANDLES 16383u /* per table: handles stay below 0x8000 */
#define REF_WEIGHT_TAG 0x4000u /* weight handles are 0x4000 + slot + 1 */

/* A buffer: bytes in host memory that only this file touches. */
typedef struct ref_buffer {
    unsigned char *bytes; /* NULL: the slot is free */
    size_t size;
} ref_buffer;

/* A prepared weight: the checkpoint tensor dequantized to f32, row-major
 * [rows][cols] (cols = ne[0]; a vector is one row). */
typedef struct ref_weight {
    float *f; /* NULL: the slot is free */
    int64_t rows, cols;
} ref_weight;

struct plume_backend {
    ref_buffer *bufs;    /* slot i is handle i + 1 */
    uint32_t n_bufs;     /* slots used so far (live or freed) */
    ref_weight *weights; /* slot i is handle REF_WEIGHT_TAG + i + 1 */
    uint32_t n_weights;
};

static plume_buf *buf_handle(uint32_t slot) { return (plume_buf *)(uintptr_t)(slot + 1u); }
static plume_bweight *weight_handle(uint32_t slot)
{
    return (plume_bweight *)(uintptr_t)(REF_WEIGHT_TAG + slot + 1u);
}

/* A table slot for a new handle.  Fresh slots are used first and a freed
 * slot is reused only once all REF_MAX_HANDLES have been handed out, so a
 * stale handle (used after free) is caught for as long as possible.
 * Returns REF_MAX_HANDLES when the table is full. */
static uint32_t table_slot(void **table, uint32_t *n_used, size_t elem, int (*is_free)(const void *))
{
    if (*n_used < REF_MAX_HANDLES) {
        void *t = realloc(*table, elem * (*n_used + 1u));
        if (!t)
            return REF_MAX_HANDLES;
        *table = t;
        memset((char *)t + elem * *n_used, 0, elem);
        return (*n_used)++;
    }
    for (uint32_t i = 0; i < *n_used; i++)
        if (is_free((const char *)*table + elem * i))
            return i;
    return REF_MAX_HANDLES;
}

static int buffer_is_free(const void *p) { return ((const ref_buffer *)p)->bytes == NULL; }
static int weight_is_free(const void *p) { return ((const ref_weight *)p)->f == NULL; }

/* The buffer behind handle h, checked: live, and at least need bytes.  op
 * and arg name the call and the argument in the error. */
static ref_buffer *get_buf(plume_backend *b, const plume_buf *h, size_t need, const char *op,
                           const char *arg, plume_error *err)
{
    uintptr_t v = (uintptr_t)h;
    if (v == 0 || v > b->n_bufs || !b->bufs[v - 1].bytes) {
        plume_err(err, PLUME_ERR_INVALID,
                  "backend ref: %s: %s = %#lx is not a live buffer of this backend (%s); the "
                  "caller passed a freed, foreign or weight handle: a bug in the caller",
                  op, arg, (unsigned long)v,
                  v == 0 ? "NULL" : (v & REF_WEIGHT_TAG) ? "a weight handle" : "unknown or freed");
        return NULL;
    }
    ref_buffer *buf = &b->bufs[v - 1];
    if (buf->size < need) {
        plume_err(err, PLUME_ERR_INVALID,
                  "backend ref: %s: %s holds %zu bytes, the call needs %zu; allocate it for the "
                  "step's rows and features",
                  op, arg, buf->size, need);
        return NULL;
    }
    return buf;
}

/* The f32 array of n values at the start of buffer h (see get_buf). */
static float *get_f32(plume_backend *b, const plume_buf *h, size_t n, const char *op,
                      const char *arg, plume_error *err)
{
    ref_buffer *buf = get_buf(b, h, n * sizeof(float), op, arg, err);
    return buf ? (float *)(void *)buf->bytes : NULL;
}

/* The weight behind handle h, checked: live, and (when cols > 0) of cols
 * columns and (when rows > 0) of rows rows. */
static const ref_weight *get_weight(plume_backend *b, const plume_bweight *h, int64_t rows,
                                    int64_t cols, const char *op, const char *arg,
                                    plume_error *err)
{
    uintptr_t v = (uintptr_t)h;
    uintptr_t slot = v - REF_WEIGHT_TAG - 1u;
    if (v <= REF_WEIGHT_TAG || slot >= b->n_weights || !b->weights[slot].f) {
        plume_err(err, PLUME_ERR_INVALID,
                  "backend ref: %s: %s = %#lx is not a live weight of this backend (%s); the "
                  "caller passed a freed or foreign handle, or a buffer: a bug in the caller",
                  op, arg, (unsigned long)v,
                  v == 0 ? "NULL" : v < REF_WEIGHT_TAG ? "a buffer handle" : "unknown or freed");
        return NULL;
    }
    const ref_weight *w = &b->weights[slot];
    if ((cols > 0 && w->cols != cols) || (rows > 0 && w->rows != rows)) {
        plume_err(err, PLUME_ERR_INVALID,
                  "backend ref: %s: %s is [%lld][%lld], the call expects [%lld][%lld] (0 = any)",
                  op, arg, (long long)w->rows, (long long)w->cols, (long long)rows,
                  (long long)cols);
        return NULL;
    }
    return w;
}

/* a * b, or SIZE_MAX when it overflows (every size below goes through it,
 * so that an absurd shape is an error rather than a short allocation). */
static size_t mul_size(size_t a, size_t b)
{
    return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b;
}

/* Dimensions must be positive: one check for every op's int32 shape
 * arguments. */
static int check_dims(const char *op, int32_t rows, int32_t dim, plume_error *err)
{
    if (rows < 0 || dim <= 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "backend ref: %s: bad shape %d rows x %d features (rows >= 0, "
                         "features > 0)",
                         op, rows, dim);
    return 0;
}

/* ---- lifecycle -------------------------------------------------------- */

/* Usable everywhere, preferred nowhere: 1 is the lowest score that lets a
 * pipeline name `backend: ref` (0 = unusable); `backend: auto` keeps the
 * first backend registered with the highest score, so it never picks this
 * one over the built-in cpu. */
static int ref_score(void) { return 1; }

/* n_threads is ignored: this backend runs everything on the caller's
 * thread (and has no parallel_for, so host kernels run fn(ctx, 0, 1)). */
static int ref_create(const plume_settings *s, int n_threads, plume_backend **out,
                      plume_error *err)
{
    (void)s;
    (void)n_threads;
    plume_backend *b = calloc(1, sizeof *b);
    if (!b)
        return plume_err(err, PLUME_ERR_NOMEM, "backend ref: out of memory");
    *out = b;
    return 0;
}

/* Frees whatever the core did not (it should have freed everything). */
static void ref_destroy(plume_backend *b)
{
    if (!b)
        return;
    for (uint32_t i = 0; i < b->n_bufs; i++)
        free(b->bufs[i].bytes);
    for (uint32_t i = 0; i < b->n_weights; i++)
        free(b->weights[i].f);
    free(b->bufs);
    free(b->weights);
    free(b);
}

/* Everything plume can dequantize, both KV dtypes, any positive even head
 * size (RoPE rotates pairs), both RoPE pairings. */
static int ref_supports(plume_backend *b, plume_backend_feature f, int64_t arg)
{
    (void)b;
    switch (f) {
    case PLUME_FEAT_WEIGHT_TYPE: return arg >= 0 && arg <= UINT32_MAX && plume_dtype_supported((uint32_t)arg);
    case PLUME_FEAT_KV_DTYPE: return arg == PLUME_KV_F32 || arg == PLUME_KV_F16;
    case PLUME_FEAT_HEAD_DIM: return arg > 0 && arg % 2 == 0;
    case PLUME_FEAT_ROPE_ADJACENT: return arg == 0 || arg == 1;
    case PLUME_FEAT_MOE: return 0; /* no gather_rows / scatter_add_rows */
    case PLUME_FEAT_ATTN_SINKS: return 0; /* its attention has no sink term */
    }
    return 0; /* a feature this build does not know: say no */
}

/* ---- buffers ---------------------------------------------------------- */

static plume_buf *ref_buf_alloc(plume_backend *b, size_t bytes, plume_error *err)
{
    uint32_t slot = table_slot((void **)&b->bufs, &b->n_bufs, sizeof *b->bufs, buffer_is_free);
    unsigned char *mem = slot < REF_MAX_HANDLES ? malloc(bytes ? bytes : 1) : NULL;
    if (!mem) {
        if (slot < REF_MAX_HANDLES)
            plume_err(err, PLUME_ERR_NOMEM,
                      "backend ref: out of memory allocating a buffer of %zu bytes", bytes);
        else
            plume_err(err, PLUME_ERR_NOMEM,
                      "backend ref: out of buffer handles (%u live at most); free buffers the "
                      "core no longer uses",
                      REF_MAX_HANDLES);
        return NULL;
    }
    b->bufs[slot] = (ref_buffer){mem, bytes};
    return buf_handle(slot);
}

static void ref_buf_free(plume_backend *b, plume_buf *buf)
{
    uintptr_t v = (uintptr_t)buf;
    if (v == 0 || v > b->n_bufs)
        return; /* NULL (allowed) or not ours: nothing to free */
    free(b->bufs[v - 1].bytes);
    b->bufs[v - 1] = (ref_buffer){NULL, 0};
}

/* get_buf for bytes [off, off+bytes) of h, refusing a range whose end
 * overflows size_t. */
static ref_buffer *get_buf_range(plume_backend *b, const plume_buf *h, size_t off, size_t bytes,
                                 const char *op, const char *arg, plume_error *err)
{
    if (off > SIZE_MAX - bytes) {
        plume_err(err, PLUME_ERR_INVALID, "backend ref: %s: offset %zu + %zu bytes overflows", op,
                  off, bytes);
        return NULL;
    }
    return get_buf(b, h, off + bytes, op, arg, err);
}

/* dst[off .. off+bytes) = src[0 .. bytes). */
static int ref_upload(plume_backend *b, plume_buf *dst, size_t off, const void *src, size_t bytes,
                      plume_error *err)
{
    ref_buffer *d = get_buf_range(b, dst, off, bytes, "upload", "dst", err);
    if (!d)
        return -1;
    if (bytes)
        memcpy(d->bytes + off, src, bytes);
    return 0;
}

/* dst[0 .. bytes) = src[off .. off+bytes). */
static int ref_download(plume_backend *b, void *dst, const plume_buf *src, size_t off,
                        size_t bytes, plume_error *err)
{
    ref_buffer *s = get_buf_range(b, src, off, bytes, "download", "src", err);
    if (!s)
        return -1;
    if (bytes)
        memcpy(dst, s->bytes + off, bytes);
    return 0;
}

/* ---- weights ---------------------------------------------------------- */

/* Any tensor plume can read (plume_dtype_supported: F32, F16, BF16, Q4_0,
 * Q4_1, Q8_0, Q4_K, Q6_K) becomes an f32 matrix [ne[1]*ne[2]*ne[3]][ne[0]]
 * with plume_dequantize; t->data is not kept. */
static int ref_weight_prepare(plume_backend *b, const plume_tensor *t, plume_bweight **out,
                              plume_error *err)
{
    const char *name = t->name ? t->name : "(unnamed)";
    if (!plume_dtype_supported(t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "backend ref: tensor %s has type %s, which plume cannot dequantize; "
                         "convert the checkpoint to a supported type",
                         name, plume_dtype_name(t->type));
    int64_t cols = t->ne[0], rows = 1;
    for (int d = 1; d < PLUME_MAX_DIMS; d++)
        rows *= t->ne[d];
    size_t row_bytes = plume_dtype_row_bytes(t->type, cols);
    if (cols <= 0 || rows <= 0 || row_bytes == 0 || mul_size(row_bytes, (size_t)rows) > t->nbytes)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "backend ref: tensor %s (%s, %lld x %lld) has a shape its type cannot "
                         "hold in %zu bytes (rows must be whole %zu-element blocks)",
                         name, plume_dtype_name(t->type), (long long)rows, (long long)cols,
                         t->nbytes, plume_dtype_block_elems(t->type));
    uint32_t slot =
        table_slot((void **)&b->weights, &b->n_weights, sizeof *b->weights, weight_is_free);
    size_t n = mul_size((size_t)rows, (size_t)cols);
    float *f = slot < REF_MAX_HANDLES ? malloc(mul_size(n, sizeof(float))) : NULL;
    if (!f)
        return plume_err(err, PLUME_ERR_NOMEM,
                         "backend ref: out of memory (or of weight handles) preparing %s: %zu f32 "
                         "values",
                         name, n);
    plume_dequantize((plume_dtype)t->type, t->data, f, (int64_t)n);
    b->weights[slot] = (ref_weight){f, rows, cols};
    *out = weight_handle(slot);
    return 0;
}

static void ref_weight_free(plume_backend *b, plume_bweight *w)
{
    uintptr_t slot = (uintptr_t)w - REF_WEIGHT_TAG - 1u;
    if ((uintptr_t)w <= REF_WEIGHT_TAG || slot >= b->n_weights)
        return;
    free(b->weights[slot].f);
    b->weights[slot] = (ref_weight){NULL, 0, 0};
}

/* ---- the KV cache ----------------------------------------------------- */

/* One allocation for K and one for V, laid out as plume_kv_pool describes:
 * [layer][slot][kv head][head_dim] of elem_bytes each, packed.  F16 stores
 * IEEE binary16 (plume/fp16.h, round to nearest even). */
static int ref_kv_alloc(plume_backend *b, plume_kv_pool *kv, plume_error *err)
{
    kv->k = kv->v = NULL;
    if (kv->n_layer <= 0 || kv->n_blocks <= 0 || kv->block_size <= 0 || kv->n_head_kv <= 0 ||
        kv->head_dim <= 0 || (kv->dtype != PLUME_KV_F32 && kv->dtype != PLUME_KV_F16))
        return plume_err(err, PLUME_ERR_INVALID,
                         "backend ref: kv_alloc: bad shape (%d layers, %d blocks of %d, %d kv "
                         "heads of %d, dtype %d): every size must be positive, dtype f32 or f16",
                         kv->n_layer, kv->n_blocks, kv->block_size, kv->n_head_kv, kv->head_dim,
                         (int)kv->dtype);
    kv->elem_bytes = kv->dtype == PLUME_KV_F16 ? 2 : 4;
    kv->head_stride = (size_t)kv->head_dim * kv->elem_bytes;
    kv->slot_stride = mul_size((size_t)kv->n_head_kv, kv->head_stride);
    kv->layer_stride =
        mul_size(mul_size((size_t)kv->n_blocks, (size_t)kv->block_size), kv->slot_stride);
    size_t bytes = mul_size((size_t)kv->n_layer, kv->layer_stride);
    if (bytes == SIZE_MAX)
        return plume_err(err, PLUME_ERR_RANGE, "backend ref: kv_alloc: the cache size overflows; "
                                               "lower kv_cache.max_tokens");
    kv->k = ref_buf_alloc(b, bytes, err);
    kv->v = kv->k ? ref_buf_alloc(b, bytes, err) : NULL;
    if (!kv->v) {
        ref_buf_free(b, kv->k);
        kv->k = NULL;
        return plume_err_prefix(err, "KV cache of %.1f MiB (lower kv_cache.max_tokens)",
                                2.0 * (double)bytes / (1 << 20));
    }
    return 0;
}

static void ref_kv_free(plume_backend *b, plume_kv_pool *kv)
{
    ref_buf_free(b, kv->k);
    ref_buf_free(b, kv->v);
    kv->k = kv->v = NULL;
}

/* The byte offset of (layer, slot, kv head) in K or V. */
static size_t kv_offset(const plume_kv_pool *kv, int32_t layer, int64_t slot, int32_t head)
{
    return (size_t)layer * kv->layer_stride + (size_t)slot * kv->slot_stride +
           (size_t)head * kv->head_stride;
}

/* Reads and writes one cache element as f32. */
static float kv_get(const plume_kv_pool *kv, const unsigned char *p, int32_t d)
{
    if (kv->dtype == PLUME_KV_F16) {
        uint16_t h;
        memcpy(&h, p + 2 * (size_t)d, 2);
        return plume_fp16_to_fp32(h);
    }
    float f;
    memcpy(&f, p + 4 * (size_t)d, 4);
    return f;
}

static void kv_put(const plume_kv_pool *kv, unsigned char *p, int32_t d, float x)
{
    if (kv->dtype == PLUME_KV_F16) {
        uint16_t h = plume_fp32_to_fp16(x);
        memcpy(p + 2 * (size_t)d, &h, 2);
    } else {
        memcpy(p + 4 * (size_t)d, &x, 4);
    }
}

/* The pool's K and V buffers, checked to hold the whole layout, and layer
 * checked against n_layer. */
static int kv_buffers(plume_backend *b, const plume_kv_pool *kv, int32_t layer, const char *op,
                      ref_buffer **k, ref_buffer **v, plume_error *err)
{
    if (layer < 0 || layer >= kv->n_layer)
        return plume_err(err, PLUME_ERR_RANGE, "backend ref: %s: layer %d outside the pool's %d",
                         op, layer, kv->n_layer);
    size_t bytes = mul_size((size_t)kv->n_layer, kv->layer_stride);
    *k = get_buf(b, kv->k, bytes, op, "kv->k", err);
    *v = *k ? get_buf(b, kv->v, bytes, op, "kv->v", err) : NULL;
    return *v ? 0 : -1;
}

/* ---- a step ----------------------------------------------------------- */

/* Checks what plume_step promises, so that a core bug shows here, named,
 * rather than as wrong numbers: the sequences cover rows 0 .. n_rows-1 in
 * order, each row's position is its sequence's pos0 + its index, out_rows
 * ascend within n_rows.  Nothing is copied (the memory is host memory
 * already); backend_data stays NULL. */
static int ref_step_begin(plume_backend *b, plume_step *st, plume_error *err)
{
    (void)b;
    int32_t next = 0;
    for (int32_t s = 0; s < st->n_seqs; s++) {
        const plume_step_seq *q = &st->seqs[s];
        if (q->row0 != next || q->n <= 0 || q->n > st->n_rows - next || q->pos0 < 0 ||
            q->n_table <= 0 || !q->block_table)
            return plume_err(err, PLUME_ERR_INTERNAL,
                             "backend ref: step: sequence %d (rows %d+%d, pos0 %d, %d table "
                             "entries) does not continue the rows at %d of %d: a bug in the core",
                             s, q->row0, q->n, q->pos0, q->n_table, next, st->n_rows);
        for (int32_t i = 0; i < q->n; i++)
            if (st->pos[q->row0 + i] != q->pos0 + i)
                return plume_err(err, PLUME_ERR_INTERNAL,
                                 "backend ref: step: row %d has position %d, its sequence says "
                                 "%d: a bug in the core",
                                 q->row0 + i, st->pos[q->row0 + i], q->pos0 + i);
        next += q->n;
    }
    if (next != st->n_rows)
        return plume_err(err, PLUME_ERR_INTERNAL,
                         "backend ref: step: the sequences cover %d of %d rows: a bug in the core",
                         next, st->n_rows);
    for (int32_t i = 0; i < st->n_out; i++)
        if (st->out_rows[i] < 0 || st->out_rows[i] >= st->n_rows ||
            (i > 0 && st->out_rows[i] <= st->out_rows[i - 1]))
            return plume_err(err, PLUME_ERR_INTERNAL,
                             "backend ref: step: out_rows[%d] = %d is not ascending within %d "
                             "rows: a bug in the core",
                             i, st->out_rows[i], st->n_rows);
    st->backend_data = NULL;
    return 0;
}

static void ref_step_end(plume_backend *b, plume_step *st)
{
    (void)b;
    (void)st;
}

/* ---- layer ops -------------------------------------------------------- */

/* embed: x[r] = row st->tokens[r] of the table, for every row of the step.
 * The table is [n_vocab][dim] (the token embedding, as prepared). */
static int ref_embed(plume_backend *b, const plume_step *st, const plume_bweight *table,
                     plume_buf *x, int32_t dim, plume_error *err)
{
    const ref_weight *w;
    float *xf;
    if (check_dims("embed", st->n_rows, dim, err) ||
        !(w = get_weight(b, table, 0, dim, "embed", "table", err)) ||
        !(xf = get_f32(b, x, mul_size((size_t)st->n_rows, (size_t)dim), "embed", "x", err)))
        return -1;
    for (int32_t r = 0; r < st->n_rows; r++) {
        int32_t tok = st->tokens[r];
        if (tok < 0 || tok >= w->rows)
            return plume_err(err, PLUME_ERR_RANGE,
                             "backend ref: embed: token %d of row %d is outside the table's %lld "
                             "rows",
                             tok, r, (long long)w->rows);
        memcpy(xf + (size_t)r * dim, w->f + (size_t)tok * dim, sizeof(float) * (size_t)dim);
    }
    return 0;
}

/* rmsnorm: out[r] = x[r] / sqrt(mean(x[r]²) + eps) * w, for r < n_rows.
 * out may be x (the mean is taken before anything is written). */
static int ref_rmsnorm(plume_backend *b, plume_buf *out, const plume_buf *x,
                       const plume_bweight *w, int32_t n_rows, int32_t dim, float eps,
                       plume_error *err)
{
    size_t n = mul_size((size_t)n_rows, (size_t)dim);
    const ref_weight *wt;
    const float *xf;
    float *of;
    if (check_dims("rmsnorm", n_rows, dim, err) ||
        !(wt = get_weight(b, w, 1, dim, "rmsnorm", "w", err)) ||
        !(xf = get_f32(b, x, n, "rmsnorm", "x", err)) ||
        !(of = get_f32(b, out, n, "rmsnorm", "out", err)))
        return -1;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *xr = xf + (size_t)r * dim;
        float *orow = of + (size_t)r * dim;
        double ss = 0.0;
        for (int32_t i = 0; i < dim; i++)
            ss += (double)xr[i] * xr[i];
        const float scale = (float)(1.0 / sqrt(ss / dim + eps));
        for (int32_t i = 0; i < dim; i++)
            orow[i] = xr[i] * scale * wt->f[i];
    }
    return 0;
}

/* rope: rotates, in place, each of the n_heads heads of every row by the
 * row's position: for the pair i < head_dim/2, angle = pos * inv_freq[i]
 * (in f32, as the core computes inv_freq), and the pair is (2i, 2i+1) when
 * adjacent (GGUF llama, after convert_hf_to_gguf's permutation) or
 * (i, i + head_dim/2) otherwise (rotate-half: HF, NEOX, Qwen2):
 *     a' = a cos - b sin,   b' = a sin + b cos. */
static int ref_rope(plume_backend *b, const plume_step *st, plume_buf *x, int32_t n_heads,
                    int32_t head_dim, const plume_bweight *inv_freq, int adjacent,
                    plume_error *err)
{
    if (head_dim % 2 != 0 || n_heads <= 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "backend ref: rope: %d heads of %d: needs heads > 0 and an even "
                         "head_dim",
                         n_heads, head_dim);
    const int32_t half = head_dim / 2, row = n_heads * head_dim;
    const ref_weight *fr;
    float *xf;
    if (check_dims("rope", st->n_rows, row, err) ||
        !(fr = get_weight(b, inv_freq, 1, half, "rope", "inv_freq", err)) ||
        !(xf = get_f32(b, x, mul_size((size_t)st->n_rows, (size_t)row), "rope", "x", err)))
        return -1;
    for (int32_t r = 0; r < st->n_rows; r++) {
        const float pos = (float)st->pos[r];
        for (int32_t h = 0; h < n_heads; h++) {
            float *v = xf + (size_t)r * row + (size_t)h * head_dim;
            for (int32_t i = 0; i < half; i++) {
                const float angle = pos * fr->f[i];
                const float c = cosf(angle), s = sinf(angle);
                const int32_t ia = adjacent ? 2 * i : i, ib = adjacent ? 2 * i + 1 : i + half;
                const float a = v[ia], bb = v[ib];
                v[ia] = a * c - bb * s;
                v[ib] = a * s + bb * c;
            }
        }
    }
    return 0;
}

/* kv_store: for every row r, its k and v ([n_rows][n_head_kv * head_dim])
 * go to layer's cache at slot st->slots[r], rounded to the pool's dtype. */
static int ref_kv_store(plume_backend *b, const plume_step *st, plume_kv_pool *kv, int32_t layer,
                        const plume_buf *k, const plume_buf *v, plume_error *err)
{
    const int32_t kv_dim = kv->n_head_kv * kv->head_dim;
    const int64_t n_slots = (int64_t)kv->n_blocks * kv->block_size;
    const size_t n = mul_size((size_t)st->n_rows, (size_t)kv_dim);
    ref_buffer *kc, *vc;
    const float *kf, *vf;
    if (kv_buffers(b, kv, layer, "kv_store", &kc, &vc, err) ||
        !(kf = get_f32(b, k, n, "kv_store", "k", err)) ||
        !(vf = get_f32(b, v, n, "kv_store", "v", err)))
        return -1;
    for (int32_t r = 0; r < st->n_rows; r++) {
        const int32_t slot = st->slots[r];
        if (slot < 0 || slot >= n_slots)
            return plume_err(err, PLUME_ERR_RANGE,
                             "backend ref: kv_store: row %d's slot %d is outside the pool's %lld",
                             r, slot, (long long)n_slots);
        for (int32_t h = 0; h < kv->n_head_kv; h++) {
            unsigned char *kd = kc->bytes + kv_offset(kv, layer, slot, h);
            unsigned char *vd = vc->bytes + kv_offset(kv, layer, slot, h);
            const size_t src = (size_t)r * kv_dim + (size_t)h * kv->head_dim;
            for (int32_t d = 0; d < kv->head_dim; d++) {
                kv_put(kv, kd, d, kf[src + d]);
                kv_put(kv, vd, d, vf[src + d]);
            }
        }
    }
    return 0;
}

/* The cache slot of position p of sequence q: its block table maps the
 * block p / block_size to a pool block.  -1 when the table does not cover
 * p or names a block outside the pool. */
static int64_t slot_of(const plume_kv_pool *kv, const plume_step_seq *q, int32_t p)
{
    const int32_t entry = p / kv->block_size;
    if (entry >= q->n_table)
        return -1;
    const int32_t block = q->block_table[entry];
    if (block < 0 || block >= kv->n_blocks)
        return -1;
    return (int64_t)block * kv->block_size + p % kv->block_size;
}

/* One query head of one row against its sequence's cache, two-pass
 * softmax in double:
 *     s_p = (q · K[p]) * scale                        for p = lo .. pos
 *     out = Σ_p exp(s_p - max s) V[p]  /  Σ_p exp(s_p - max s)
 * scale = 1/sqrt(head_dim) unless ap->scale > 0; lo = 0, or with a sliding
 * window (ap->window > 0) max(0, pos - window + 1).  score is scratch for
 * pos + 1 doubles, acc for head_dim. */
static int attend_head(const plume_kv_pool *kv, const unsigned char *kc, const unsigned char *vc,
                       int32_t layer, const plume_step_seq *q, int32_t pos, int32_t kv_head,
                       const plume_attn_params *ap, const float *qh, float *out, double *score,
                       double *acc, plume_error *err)
{
    const int32_t hd = kv->head_dim;
    const double scale = ap->scale > 0 ? (double)ap->scale : 1.0 / sqrt((double)hd);
    const int32_t lo = ap->window > 0 && pos + 1 > ap->window ? pos + 1 - ap->window : 0;
    double max = -INFINITY;
    for (int32_t p = lo; p <= pos; p++) {
        const int64_t slot = slot_of(kv, q, p);
        if (slot < 0)
            return plume_err(err, PLUME_ERR_RANGE,
                             "backend ref: attention: position %d of the sequence at row %d is "
                             "not covered by its block table (%d entries) inside the pool's %d "
                             "blocks: a bug in the core",
                             p, q->row0, q->n_table, kv->n_blocks);
        const unsigned char *key = kc + kv_offset(kv, layer, slot, kv_head);
        double dot = 0.0;
        for (int32_t d = 0; d < hd; d++)
            dot += (double)qh[d] * kv_get(kv, key, d);
        score[p] = dot * scale;
        if (score[p] > max)
            max = score[p];
    }
    double sum = 0.0;
    for (int32_t d = 0; d < hd; d++)
        acc[d] = 0.0;
    for (int32_t p = lo; p <= pos; p++) {
        const double e = exp(score[p] - max);
        const unsigned char *val = vc + kv_offset(kv, layer, slot_of(kv, q, p), kv_head);
        sum += e;
        for (int32_t d = 0; d < hd; d++)
            acc[d] += e * kv_get(kv, val, d);
    }
    for (int32_t d = 0; d < hd; d++)
        out[d] = (float)(acc[d] / sum);
    return 0;
}

/* attention: causal paged attention.  For every row r (of sequence q, at
 * position st->pos[r]) and query head h < n_head: q[r][h] attends over
 * positions 0 .. pos of q (ap->window > 0: pos - window + 1 .. pos) in
 * layer's cache with scale ap->scale (0: 1/sqrt(head_dim)), reading kv head
 * h / (n_head / n_head_kv) (grouped-query), and the normalized result goes
 * to out[r][h].  q and out are [n_rows][n_head * head_dim]; out may be q
 * (a head is read completely before its result is written). */
static int ref_attention(plume_backend *b, const plume_step *st, const plume_kv_pool *kv,
                         int32_t layer, const plume_buf *q, const plume_attn_params *ap,
                         plume_buf *out, plume_error *err)
{
    const int32_t n_head = ap->n_head;
    if (ap->window < 0 || !(ap->scale >= 0))
        return plume_err(err, PLUME_ERR_INVALID,
                         "backend ref: attention: window %d, scale %g: want both >= 0",
                         ap->window, (double)ap->scale);
    if (n_head <= 0 || n_head % kv->n_head_kv != 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "backend ref: attention: %d query heads is not a positive multiple of "
                         "the pool's %d kv heads",
                         n_head, kv->n_head_kv);
    const int32_t hd = kv->head_dim, group = n_head / kv->n_head_kv, row = n_head * hd;
    const size_t n = mul_size((size_t)st->n_rows, (size_t)row);
    ref_buffer *kc, *vc;
    const float *qf;
    float *of;
    if (kv_buffers(b, kv, layer, "attention", &kc, &vc, err) ||
        !(qf = get_f32(b, q, n, "attention", "q", err)) ||
        !(of = get_f32(b, out, n, "attention", "out", err)))
        return -1;
    int32_t max_pos = 0;
    for (int32_t r = 0; r < st->n_rows; r++)
        max_pos = st->pos[r] > max_pos ? st->pos[r] : max_pos;
    double *score = malloc(sizeof(double) * ((size_t)max_pos + 1));
    double *acc = malloc(sizeof(double) * (size_t)hd);
    float *head = malloc(sizeof(float) * (size_t)hd);
    int rc = score && acc && head
                 ? 0
                 : plume_err(err, PLUME_ERR_NOMEM, "backend ref: attention: out of memory");
    for (int32_t s = 0; s < st->n_seqs && rc == 0; s++) {
        const plume_step_seq *sq = &st->seqs[s];
        for (int32_t r = sq->row0; r < sq->row0 + sq->n && rc == 0; r++) {
            for (int32_t h = 0; h < n_head && rc == 0; h++) {
                const float *qh = qf + (size_t)r * row + (size_t)h * hd;
                rc = attend_head(kv, kc->bytes, vc->bytes, layer, sq, st->pos[r], h / group, ap, qh,
                                 head, score, acc, err);
                if (rc == 0)
                    memcpy(of + (size_t)r * row + (size_t)h * hd, head, sizeof(float) * (size_t)hd);
            }
        }
    }
    free(score);
    free(acc);
    free(head);
    return rc;
}

/* swiglu: gate[i] = silu(gate[i]) * up[i] for i < n, with
 * silu(g) = g / (1 + exp(-g)). */
static int ref_swiglu(plume_backend *b, plume_buf *gate, const plume_buf *up, size_t n,
                      plume_error *err)
{
    float *g;
    const float *u;
    if (!(g = get_f32(b, gate, n, "swiglu", "gate", err)) ||
        !(u = get_f32(b, up, n, "swiglu", "up", err)))
        return -1;
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    return 0;
}

/* add: x[i] += y[i] for i < n (the residual stream). */
static int ref_add(plume_backend *b, plume_buf *x, const plume_buf *y, size_t n, plume_error *err)
{
    float *xf;
    const float *yf;
    if (!(xf = get_f32(b, x, n, "add", "x", err)) || !(yf = get_f32(b, y, n, "add", "y", err)))
        return -1;
    for (size_t i = 0; i < n; i++)
        xf[i] += yf[i];
    return 0;
}

/* add_bias: y[r][i] += bias[i] for r < n_rows, i < dim. */
static int ref_add_bias(plume_backend *b, plume_buf *y, const plume_bweight *bias, int32_t n_rows,
                        int32_t dim, plume_error *err)
{
    const ref_weight *w;
    float *yf;
    if (check_dims("add_bias", n_rows, dim, err) ||
        !(w = get_weight(b, bias, 1, dim, "add_bias", "bias", err)) ||
        !(yf = get_f32(b, y, mul_size((size_t)n_rows, (size_t)dim), "add_bias", "y", err)))
        return -1;
    for (int32_t r = 0; r < n_rows; r++)
        for (int32_t i = 0; i < dim; i++)
            yf[(size_t)r * dim + i] += w->f[i];
    return 0;
}

/* gather_out_rows: dst[i] = src[st->out_rows[i]] for i < st->n_out, rows of
 * dim floats.  dst may be src: out_rows ascend, so out_rows[i] >= i and
 * copying forwards never overwrites a row still to be read. */
static int ref_gather_out_rows(plume_backend *b, const plume_step *st, plume_buf *dst,
                               const plume_buf *src, int32_t dim, plume_error *err)
{
    float *df;
    const float *sf;
    if (check_dims("gather_out_rows", st->n_out, dim, err) ||
        !(sf = get_f32(b, src, mul_size((size_t)st->n_rows, (size_t)dim), "gather_out_rows",
                       "src", err)) ||
        !(df = get_f32(b, dst, mul_size((size_t)st->n_out, (size_t)dim), "gather_out_rows",
                       "dst", err)))
        return -1;
    for (int32_t i = 0; i < st->n_out; i++) {
        const int32_t r = st->out_rows[i];
        if (r < 0 || r >= st->n_rows)
            return plume_err(err, PLUME_ERR_RANGE,
                             "backend ref: gather_out_rows: out_rows[%d] = %d is outside the "
                             "step's %d rows",
                             i, r, st->n_rows);
        memmove(df + (size_t)i * dim, sf + (size_t)r * dim, sizeof(float) * (size_t)dim);
    }
    return 0;
}

/* matmul: y[j][t][o] = Σ_i x[t][i] · W_j[o][i] for j < n_w, t < n_rows:
 * every W_j is [out_j][in] with the same in, x is [n_rows][in] and y[j] is
 * [n_rows][out_j].  Each value is one dot product of one weight row and one
 * x row, summed in order in double and rounded once, so it depends on
 * nothing else (not n_rows, not n_w): the batch invariance the contract
 * asks of every backend.  y[j] must not be x (the reference refuses it;
 * in-place matmul is not part of the contract). */
static int ref_matmul(plume_backend *b, const plume_bweight *const *w, int n_w, const plume_buf *x,
                      int32_t n_rows, plume_buf *const *y, plume_error *err)
{
    if (n_w <= 0 || n_rows < 0)
        return plume_err(err, PLUME_ERR_INVALID, "backend ref: matmul: %d weights, %d rows", n_w,
                         n_rows);
    const ref_weight *w0 = get_weight(b, w[0], 0, 0, "matmul", "w[0]", err);
    if (!w0)
        return -1;
    const int64_t in = w0->cols;
    const float *xf = get_f32(b, x, mul_size((size_t)n_rows, (size_t)in), "matmul", "x", err);
    if (!xf)
        return -1;
    for (int j = 0; j < n_w; j++) {
        char wname[32], yname[32];
        snprintf(wname, sizeof wname, "w[%d]", j);
        snprintf(yname, sizeof yname, "y[%d]", j);
        const ref_weight *wj = get_weight(b, w[j], 0, in, "matmul", wname, err);
        float *yf;
        if (!wj ||
            !(yf = get_f32(b, y[j], mul_size((size_t)n_rows, (size_t)wj->rows), "matmul", yname,
                           err)))
            return -1;
        if (y[j] == x)
            return plume_err(err, PLUME_ERR_INVALID,
                             "backend ref: matmul: y[%d] is the input x; give the output its "
                             "own buffer",
                             j);
        for (int64_t o = 0; o < wj->rows; o++) {
            const float *wrow = wj->f + (size_t)o * in;
            for (int32_t t = 0; t < n_rows; t++) {
                const float *xrow = xf + (size_t)t * in;
                double sum = 0.0;
                for (int64_t i = 0; i < in; i++)
                    sum += (double)xrow[i] * wrow[i];
                yf[(size_t)t * wj->rows + o] = (float)sum;
            }
        }
    }
    return 0;
}

/* ---- registration ----------------------------------------------------- */

static const plume_backend_vtable ref_backend = {
    .struct_size = sizeof(plume_backend_vtable),
    .interface_version = PLUME_BACKEND_INTERFACE_VERSION,
    .name = "ref",
    .validate = NULL,  /* no settings */
    .score = ref_score,
    .create = ref_create,
    .destroy = ref_destroy,
    .supports = ref_supports,
    .buf_alloc = ref_buf_alloc,
    .buf_free = ref_buf_free,
    .upload = ref_upload,
    .download = ref_download,
    .host_ptr = NULL,  /* buffers are not host memory a kernel may touch */
    .weight_prepare = ref_weight_prepare,
    .weight_free = ref_weight_free,
    .kv_alloc = ref_kv_alloc,
    .kv_free = ref_kv_free,
    .step_begin = ref_step_begin,
    .step_end = ref_step_end,
    .embed = ref_embed,
    .rmsnorm = ref_rmsnorm,
    .rope = ref_rope,
    .kv_store = ref_kv_store,
    .attention = ref_attention,
    .swiglu = ref_swiglu,
    .add = ref_add,
    .add_bias = ref_add_bias,
    .gather_out_rows = ref_gather_out_rows,
    .matmul = ref_matmul,
    .synchronize = NULL,  /* every op has finished when it returns */
    .parallel_for = NULL, /* no threads: host kernels run fn(ctx, 0, 1) */
};

static int ref_init(plume_registry *reg, plume_error *err)
{
    (void)err; /* a failed registration records its own reason */
    return plume_register_backend(reg, &ref_backend);
}

PLUME_PLUGIN_DEFINE("backend-ref", "0.1.0",
                    "reference backend: every op in plain scalar C, for checking new backends",
                    "Apache-2.0", ref_init)
