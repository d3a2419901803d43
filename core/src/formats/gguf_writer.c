/* GGUF v3 writer: see gguf_writer.h.  Layout: formats.md §3.1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"
#include "formats/gguf_writer.h"
#include "plume/tensor.h"

#define ALIGN 32

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

typedef struct wtensor {
    char name[65];
    int n_dims;
    int64_t ne[4];
    uint32_t type;
    size_t nbytes;
    uint64_t offset;
} wtensor;

struct gguf_writer {
    wbuf kv;          /* serialized pairs */
    uint64_t n_kv;
    char **keys;      /* for has_key */
    size_t n_keys, cap_keys;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t data_size; /* padded */
    FILE *f;
    char path[4096];
    size_t next;      /* next tensor to write */
    size_t part;      /* bytes of it written so far by gguf_writer_tensor_part */
    uint64_t written;
};

static void put(wbuf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    uint8_t *p = plume_grow(b->p, &b->cap, b->n + n, 4096, 1);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_u32(wbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void put_u64(wbuf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

static void put_str(wbuf *b, const char *s, size_t len)
{
    put_u64(b, len);
    put(b, s, len);
}

gguf_writer *gguf_writer_new(void) { return calloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    if (w->f)
        fclose(w->f);
    for (size_t i = 0; i < w->n_keys; i++)
        free(w->keys[i]);
    free(w->keys);
    free(w->kv.p);
    free(w->t);
    free(w);
}

bool gguf_writer_has_key(const gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_keys; i++)
        if (strcmp(w->keys[i], key) == 0)
            return true;
    return false;
}

static void key(gguf_writer *w, const char *k, size_t len, gguf_type type)
{
    char **p = plume_grow(w->keys, &w->cap_keys, w->n_keys + 1, 64, sizeof *p);
    if (!p) {
        w->kv.oom = true;
        return;
    }
    w->keys = p;
    char *c = malloc(len + 1);
    if (!c) {
        w->kv.oom = true;
        return;
    }
    memcpy(c, k, len);
    c[len] = 0;
    w->keys[w->n_keys++] = c;
    w->n_kv++;
    put_str(&w->kv, k, len);
    put_u32(&w->kv, (uint32_t)type);
}

void gguf_writer_kv_u32(gguf_writer *w, const char *k, uint32_t v)
{
    key(w, k, strlen(k), GGUF_TYPE_UINT32);
    put_u32(&w->kv, v);
}

void gguf_writer_kv_f32(gguf_writer *w, const char *k, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    key(w, k, strlen(k), GGUF_TYPE_FLOAT32);
    put_u32(&w->kv, u);
}

void gguf_writer_kv_bool(gguf_writer *w, const char *k, bool v)
{
    uint8_t b = v ? 1 : 0;
    key(w, k, strlen(k), GGUF_TYPE_BOOL);
    put(&w->kv, &b, 1);
}

void gguf_writer_kv_str(gguf_writer *w, const char *k, const char *s, size_t len)
{
    key(w, k, strlen(k), GGUF_TYPE_STRING);
    put_str(&w->kv, s, len);
}

void gguf_writer_kv_arr(gguf_writer *w, const char *k, gguf_type elem, uint64_t n)
{
    key(w, k, strlen(k), GGUF_TYPE_ARRAY);
    put_u32(&w->kv, (uint32_t)elem);
    put_u64(&w->kv, n);
}

void gguf_writer_arr_str(gguf_writer *w, const char *s, size_t len) { put_str(&w->kv, s, len); }
void gguf_writer_arr_i32(gguf_writer *w, int32_t v) { put_u32(&w->kv, (uint32_t)v); }

void gguf_writer_arr_f32(gguf_writer *w, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(&w->kv, u);
}

/* The value's bytes (without its type tag). */
static void put_value(wbuf *b, const gguf_value *v)
{
    uint8_t x8;
    uint16_t x16;
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8:
        x8 = (uint8_t)(v->type == GGUF_TYPE_UINT8 ? v->u : (uint64_t)v->i);
        put(b, &x8, 1);
        break;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
        x16 = (uint16_t)(v->type == GGUF_TYPE_UINT16 ? v->u : (uint64_t)v->i);
        put(b, (uint8_t[]){(uint8_t)x16, (uint8_t)(x16 >> 8)}, 2);
        break;
    case GGUF_TYPE_UINT32: put_u32(b, (uint32_t)v->u); break;
    case GGUF_TYPE_INT32: put_u32(b, (uint32_t)v->i); break;
    case GGUF_TYPE_UINT64: put_u64(b, v->u); break;
    case GGUF_TYPE_INT64: put_u64(b, (uint64_t)v->i); break;
    case GGUF_TYPE_FLOAT32: {
        float f = (float)v->f;
        uint32_t u;
        memcpy(&u, &f, 4);
        put_u32(b, u);
        break;
    }
    case GGUF_TYPE_FLOAT64: {
        uint64_t u;
        memcpy(&u, &v->f, 8);
        put_u64(b, u);
        break;
    }
    case GGUF_TYPE_BOOL:
        x8 = v->b ? 1 : 0;
        put(b, &x8, 1);
        break;
    case GGUF_TYPE_STRING: put_str(b, v->s.ptr, (size_t)v->s.len); break;
    case GGUF_TYPE_ARRAY:
        put_u32(b, (uint32_t)v->arr.type);
        put_u64(b, v->arr.n);
        for (uint64_t i = 0; i < v->arr.n; i++)
            put_value(b, &v->arr.items[i]);
        break;
    default: break;
    }
}

void gguf_writer_kv_value(gguf_writer *w, const char *k, size_t key_len, const gguf_value *v)
{
    key(w, k, key_len, v->type);
    put_value(&w->kv, v);
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, int n_dims, const int64_t *ne,
                           uint32_t type, plume_error *err)
{
    size_t len = strlen(name);
    if (len > 64)
        return plume_err(err, PLUME_ERR_INVALID,
                         "tensor name '%s' is longer than GGUF's 64 bytes", name);
    if (n_dims < 1 || n_dims > 4)
        return plume_err(err, PLUME_ERR_INVALID, "tensor %s has %d dimensions (1..4)", name,
                         n_dims);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return plume_err(err, PLUME_ERR_INVALID, "tensor %s is declared twice", name);
    size_t rb = plume_dtype_row_bytes(type, ne[0]);
    if (!rb)
        return plume_err(err, PLUME_ERR_INVALID,
                         "tensor %s: rows of %lld cannot be stored as %s (block of %zu)", name,
                         (long long)ne[0], plume_dtype_name(type), plume_dtype_block_elems(type));
    wtensor *p = plume_grow(w->t, &w->cap_t, w->n_t + 1, 64, sizeof *p);
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    w->t = p;
    wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->n_dims = n_dims;
    size_t rows = 1;
    for (int i = 0; i < 4; i++) {
        t->ne[i] = i < n_dims ? ne[i] : 1;
        if (i > 0)
            rows *= (size_t)t->ne[i];
    }
    t->type = type;
    t->nbytes = rb * rows;
    t->offset = w->data_size;
    w->data_size += (t->nbytes + ALIGN - 1) / ALIGN * ALIGN;
    return 0;
}

size_t gguf_writer_tensor_bytes(const gguf_writer *w, size_t i)
{
    return i < w->n_t ? w->t[i].nbytes : 0;
}

static int io_err(gguf_writer *w, plume_error *err)
{
    return plume_err(err, PLUME_ERR_IO, "cannot write %s: %s (check free disk space)", w->path,
                     strerror(errno));
}

int gguf_writer_open(gguf_writer *w, const char *path, plume_error *err)
{
    if (w->kv.oom)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory collecting GGUF metadata");
    snprintf(w->path, sizeof w->path, "%s", path);
    wbuf h = {0};
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, w->n_t);
    put_u64(&h, w->n_kv);
    put(&h, w->kv.p, w->kv.n);
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, t->type);
        put_u64(&h, t->offset);
    }
    static const uint8_t zero[ALIGN];
    put(&h, zero, (ALIGN - h.n % ALIGN) % ALIGN);
    if (h.oom) {
        free(h.p);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory writing the GGUF header");
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        free(h.p);
        return plume_err(err, PLUME_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    }
    size_t n = fwrite(h.p, 1, h.n, w->f);
    w->written = h.n;
    free(h.p);
    return n == w->written ? 0 : io_err(w, err);
}

int gguf_writer_tensor_data(gguf_writer *w, const void *data, size_t nbytes, plume_error *err)
{
    if (!w->f || w->next >= w->n_t)
        return plume_err(err, PLUME_ERR_INTERNAL, "GGUF writer: no tensor left to write");
    const wtensor *t = &w->t[w->next];
    if (nbytes != t->nbytes || w->part)
        return plume_err(err, PLUME_ERR_INTERNAL, "GGUF writer: %s has %zu bytes, got %zu",
                         t->name, t->nbytes, nbytes);
    static const uint8_t zero[ALIGN];
    size_t pad = (ALIGN - nbytes % ALIGN) % ALIGN;
    if (fwrite(data, 1, nbytes, w->f) != nbytes || fwrite(zero, 1, pad, w->f) != pad)
        return io_err(w, err);
    w->written += nbytes + pad;
    w->next++;
    return 0;
}

int gguf_writer_tensor_part(gguf_writer *w, const void *data, size_t nbytes, plume_error *err)
{
    if (!w->f || w->next >= w->n_t)
        return plume_err(err, PLUME_ERR_INTERNAL, "GGUF writer: no tensor left to write");
    const wtensor *t = &w->t[w->next];
    if (w->part + nbytes > t->nbytes)
        return plume_err(err, PLUME_ERR_INTERNAL, "GGUF writer: %s has %zu bytes, got %zu",
                         t->name, t->nbytes, w->part + nbytes);
    if (fwrite(data, 1, nbytes, w->f) != nbytes)
        return io_err(w, err);
    w->part += nbytes;
    w->written += nbytes;
    if (w->part < t->nbytes)
        return 0;
    static const uint8_t zero[ALIGN];
    size_t pad = (ALIGN - t->nbytes % ALIGN) % ALIGN;
    if (fwrite(zero, 1, pad, w->f) != pad)
        return io_err(w, err);
    w->written += pad;
    w->part = 0;
    w->next++;
    return 0;
}

int gguf_writer_close(gguf_writer *w, uint64_t *size, plume_error *err)
{
    if (w->next != w->n_t)
        return plume_err(err, PLUME_ERR_INTERNAL, "GGUF writer: %zu of %zu tensors written",
                         w->next, w->n_t);
    FILE *f = w->f;
    w->f = NULL;
    if (!f || fclose(f) != 0)
        return io_err(w, err);
    if (size)
        *size = w->written;
    return 0;
}
