/* Test helper: a minimal GGUF writer into a growable byte buffer, plus
 * temp-file helpers.  Layout per formats.md §3.1; written independently of
 * the reader under test so that the tests check the reader against the spec,
 * not against itself. */
#ifndef PLUME_TEST_GGUF_WRITER_H
#define PLUME_TEST_GGUF_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct gw_buf {
    uint8_t *p;
    size_t n, cap;
} gw_buf;

static inline void gw_put(gw_buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static inline void gw_free(gw_buf *b) { free(b->p); memset(b, 0, sizeof *b); }

static inline void gw_u8(gw_buf *b, uint8_t v) { gw_put(b, &v, 1); }
static inline void gw_u16(gw_buf *b, uint16_t v) { gw_u8(b, v & 0xff); gw_u8(b, v >> 8); }
static inline void gw_u32(gw_buf *b, uint32_t v) { gw_u16(b, v & 0xffff); gw_u16(b, v >> 16); }
static inline void gw_u64(gw_buf *b, uint64_t v) { gw_u32(b, (uint32_t)v); gw_u32(b, (uint32_t)(v >> 32)); }
static inline void gw_f32(gw_buf *b, float f) { uint32_t u; memcpy(&u, &f, 4); gw_u32(b, u); }
static inline void gw_f64(gw_buf *b, double f) { uint64_t u; memcpy(&u, &f, 8); gw_u64(b, u); }

/* Overwrites 4 / 8 little-endian bytes at off. */
static inline void gw_patch_u32(gw_buf *b, size_t off, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b->p[off + i] = (uint8_t)(v >> (8 * i));
}
static inline void gw_patch_u64(gw_buf *b, size_t off, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b->p[off + i] = (uint8_t)(v >> (8 * i));
}

static inline void gw_strn(gw_buf *b, const char *s, size_t n) { gw_u64(b, n); gw_put(b, s, n); }
static inline void gw_str(gw_buf *b, const char *s) { gw_strn(b, s, strlen(s)); }

/* Header: magic, version, tensor count, kv count. */
static inline void gw_header(gw_buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gw_put(b, "GGUF", 4);
    gw_u32(b, version);
    gw_u64(b, n_tensors);
    gw_u64(b, n_kv);
}

/* Key and value type; the caller writes the value. */
static inline void gw_key(gw_buf *b, const char *key, uint32_t type) { gw_str(b, key); gw_u32(b, type); }

static inline void gw_kv_u32(gw_buf *b, const char *key, uint32_t v) { gw_key(b, key, 4); gw_u32(b, v); }
static inline void gw_kv_str(gw_buf *b, const char *key, const char *v) { gw_key(b, key, 8); gw_str(b, v); }

/* Tensor info with n_dims dims from ne[]. */
static inline void gw_tensor_info(gw_buf *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                                  uint32_t type, uint64_t offset)
{
    gw_str(b, name);
    gw_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        gw_u64(b, ne[i]);
    gw_u32(b, type);
    gw_u64(b, offset);
}

/* Zero-pads to a multiple of align. */
static inline void gw_pad(gw_buf *b, size_t align)
{
    while (b->n % align)
        gw_u8(b, 0);
}

/* A per-test temp directory; paths inside it. */
typedef struct gw_tmp {
    char dir[256];
    char path[320];
} gw_tmp;

static inline void gw_tmp_init(gw_tmp *t)
{
    const char *base = getenv("TMPDIR");
    snprintf(t->dir, sizeof t->dir, "%s/plume-gguf-test-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(t->dir))
        abort();
    snprintf(t->path, sizeof t->path, "%s/t.gguf", t->dir);
}

/* Writes n bytes of p to t->path (replacing it). */
static inline void gw_write_file(const gw_tmp *t, const void *p, size_t n)
{
    /* A new file each time: rewriting an existing one through truncation
     * makes ext4 (auto_da_alloc) flush it on close, milliseconds a write. */
    unlink(t->path);
    FILE *fp = fopen(t->path, "wb");
    if (!fp)
        abort();
    if (n && fwrite(p, 1, n, fp) != n)
        abort();
    fclose(fp);
}

static inline void gw_tmp_fini(gw_tmp *t)
{
    unlink(t->path);
    rmdir(t->dir);
}

#endif
