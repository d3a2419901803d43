/* The built-in CPU backend and the native linear method (unquantized and
 * GGUF block types, run by the backend's matmul). */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/threadpool.h"
#include "runtime/builtin.h"

/* ---- cpu backend ---- */

typedef struct cpu_backend {
    plume_pool *pool;
    bool borrowed; /* plume_cpu_backend_wrap: the pool is the caller's */
} cpu_backend;

static int cpu_create(const plume_settings *s, int n_threads, plume_backend **out,
                      plume_error *err)
{
    (void)s;
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the cpu backend");
    int n = n_threads > 0 ? n_threads : plume_cpu_online();
    if (plume_pool_create(n > 0 ? n : 1, &b->pool, err)) {
        free(b);
        return -1;
    }
    *out = (plume_backend *)b;
    return 0;
}

static void cpu_destroy(plume_backend *be)
{
    cpu_backend *b = (cpu_backend *)be;
    if (!b)
        return;
    if (!b->borrowed)
        plume_pool_free(b->pool);
    free(b);
}

static void *cpu_alloc(plume_backend *be, size_t bytes, plume_error *err)
{
    (void)be;
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p)
        plume_err(err, PLUME_ERR_NOMEM, "cpu backend: out of memory allocating %zu bytes", bytes);
    return p;
}

static void cpu_free(plume_backend *be, void *p)
{
    (void)be;
    free(p);
}

static int cpu_copy(plume_backend *be, void *dst, const void *src, size_t bytes, plume_error *err)
{
    (void)be;
    (void)err;
    memcpy(dst, src, bytes);
    return 0;
}

static int cpu_matmul(plume_backend *be, const plume_tensor *w, const float *x, int32_t n_tok,
                      float *y, plume_error *err)
{
    cpu_backend *b = (cpu_backend *)be;
    if (!plume_dtype_supported(w->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "cpu backend: tensor %s has type %s, which the cpu matmul cannot run",
                         w->name ? w->name : "?", plume_dtype_name(w->type));
    if (w->n_dims != 2 || n_tok < 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "cpu backend: matmul needs a 2-D weight and n_tok >= 0 (%s has %d dims)",
                         w->name ? w->name : "?", w->n_dims);
    if (!b || !b->pool)
        return plume_err(err, PLUME_ERR_INVALID,
                         "cpu backend: matmul needs a backend instance (create one first)");
    if (n_tok > 0)
        plume_cpu_matmul(b->pool, w, x, n_tok, y);
    return 0;
}

static void cpu_parallel_for(plume_backend *be, void (*fn)(void *ctx, int ith, int nth),
                             void *ctx)
{
    cpu_backend *b = (cpu_backend *)be;
    if (!b || !b->pool) {
        fn(ctx, 0, 1);
        return;
    }
    plume_pool_run(b->pool, fn, ctx);
}

plume_backend *plume_cpu_backend_wrap(plume_pool *pool, plume_error *err)
{
    cpu_backend *b = calloc(1, sizeof *b);
    if (!b) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        return NULL;
    }
    b->pool = pool;
    b->borrowed = true;
    return (plume_backend *)b;
}

const plume_backend_vtable plume_builtin_cpu = {
    .struct_size = sizeof(plume_backend_vtable),
    .interface_version = PLUME_BACKEND_INTERFACE_VERSION,
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .matmul = cpu_matmul,
    .parallel_for = cpu_parallel_for,
};

/* ---- native linear ---- */

struct plume_linear {
    const plume_tensor *w; /* a view into the open checkpoint */
};

static int native_probe(const plume_weights *wt, const char *prefix)
{
    const plume_tensor *t = plume_weights_find(wt, prefix, "weight");
    return t && t->n_dims == 2 && plume_dtype_supported(t->type) ? 1 : 0;
}

static int native_load(const plume_weights *wt, const char *prefix, const plume_settings *s,
                       const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                       plume_error *err)
{
    (void)s;
    (void)bvt;
    (void)b;
    const plume_tensor *t = plume_weights_find(wt, prefix, "weight");
    if (!t)
        return plume_err(err, PLUME_ERR_FORMAT, "native linear: no tensor %s.weight", prefix);
    if (t->n_dims != 2 || !plume_dtype_supported(t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "native linear: %s.weight is %d-D of type %s; it needs a 2-D tensor of "
                         "F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K or Q6_K (or a quant plugin)",
                         prefix, t->n_dims, plume_dtype_name(t->type));
    plume_linear *l = malloc(sizeof *l);
    if (!l)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    l->w = t;
    *out = l;
    return 0;
}

static void native_destroy(plume_linear *l) { free(l); }

static void native_shape(const plume_linear *l, int64_t *in, int64_t *out)
{
    *in = l->w->ne[0];
    *out = l->w->ne[1];
}

static int native_forward(plume_linear *l, const plume_backend_vtable *bvt, plume_backend *b,
                          const float *x, int32_t n_tok, float *y, plume_error *err)
{
    return bvt->matmul(b, l->w, x, n_tok, y, err);
}

const plume_linear_vtable plume_builtin_native_linear = {
    .struct_size = sizeof(plume_linear_vtable),
    .interface_version = PLUME_LINEAR_INTERFACE_VERSION,
    .name = "native",
    .probe = native_probe,
    .load = native_load,
    .destroy = native_destroy,
    .shape = native_shape,
    .forward = native_forward,
};
