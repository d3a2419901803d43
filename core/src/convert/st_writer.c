/* safetensors writer (formats.md §4; safetensors/src/tensor.rs `prepare` and
 * `serialize_to_file`). */
#include "convert/st_writer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/grow.h"

/* dtype strings in the Rust enum's ("increasing alignment") order, with
 * their sizes in bytes; sub-byte types (F4, F6_*) are not writable here. */
static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    {"BOOL", 1},         {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"F8_E8M0", 1},      {"F8_E4M3FNUZ", 1},     {"F8_E5M2FNUZ", 1},
    {"I16", 2},          {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
    {"U32", 4},          {"F32", 4}, {"C64", 8}, {"F64", 8},     {"I64", 8},
    {"U64", 8},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

typedef struct st_entry {
    char *name;
    int dtype; /* index into DTYPES */
    int ndim;
    int64_t shape[8];
    uint64_t nbytes, begin;
    st_fill_fn fill;
    void *user;
} st_entry;

struct st_writer {
    st_entry *v;
    size_t n, cap;
    char **meta; /* key, value, key, value, ... */
    size_t n_meta;
    uint64_t total;
    bool sorted;
};

/* A growable string buffer for the header. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    char *p = plume_grow(b->p, &b->cap, b->n + n + 1, 4096, 1);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf_u64(sbuf *b, uint64_t v)
{
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    sb_putn(b, tmp, (size_t)k);
}

/* A JSON string as serde_json writes it: '"', '\\' and control characters
 * escaped, everything else (UTF-8 included) verbatim. */
static void sb_json_str(sbuf *b, const char *s)
{
    sb_putn(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\b': sb_puts(b, "\\b"); break;
        case '\f': sb_puts(b, "\\f"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                sb_puts(b, esc);
            } else {
                sb_putn(b, (const char *)p, 1);
            }
        }
    }
    sb_putn(b, "\"", 1);
}

st_writer *st_writer_new(void) { return calloc(1, sizeof(st_writer)); }

void st_writer_free(st_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].name);
    for (size_t i = 0; i < 2 * w->n_meta; i++)
        free(w->meta[i]);
    free(w->meta);
    free(w->v);
    free(w);
}

int st_writer_meta(st_writer *w, const char *key, const char *value, plume_error *err)
{
    char **m = realloc(w->meta, sizeof *m * 2 * (w->n_meta + 1));
    if (!m)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    w->meta = m;
    m[2 * w->n_meta] = strdup(key);
    m[2 * w->n_meta + 1] = strdup(value);
    w->n_meta++;
    if (!m[2 * w->n_meta - 2] || !m[2 * w->n_meta - 1])
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    return 0;
}

int st_writer_add(st_writer *w, const char *name, const char *dtype, const int64_t *shape,
                  int ndim, st_fill_fn fill, void *user, plume_error *err)
{
    int dt = -1;
    for (size_t i = 0; i < N_DTYPES; i++)
        if (strcmp(DTYPES[i].name, dtype) == 0)
            dt = (int)i;
    if (dt < 0)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "safetensors writer: dtype '%s' of tensor '%s' is not writable", dtype,
                         name);
    if (ndim < 0 || ndim > 8)
        return plume_err(err, PLUME_ERR_INVALID, "safetensors writer: tensor '%s' has %d dims",
                         name, ndim);
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->v[i].name, name) == 0)
            return plume_err(err, PLUME_ERR_INVALID,
                             "safetensors writer: tensor '%s' added twice", name);
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && numel > UINT64_MAX / 16 / (uint64_t)shape[d]))
            return plume_err(err, PLUME_ERR_INVALID,
                             "safetensors writer: tensor '%s' has a bad dimension %lld", name,
                             (long long)shape[d]);
        numel *= (uint64_t)shape[d];
    }
    st_entry *v = plume_grow(w->v, &w->cap, w->n + 1, 64, sizeof *v);
    if (!v)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    w->v = v;
    st_entry *e = &w->v[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = strdup(name)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    e->dtype = dt;
    e->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        e->shape[d] = shape[d];
    e->nbytes = numel * DTYPES[dt].size;
    e->fill = fill;
    e->user = user;
    w->n++;
    w->total += e->nbytes;
    w->sorted = false;
    return 0;
}

size_t st_writer_count(const st_writer *w) { return w->n; }
uint64_t st_writer_data_bytes(const st_writer *w) { return w->total; }

/* Descending dtype (enum order), then name bytewise — Rust's `prepare`. */
static int cmp_entry(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->dtype != y->dtype)
        return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void sort_entries(st_writer *w)
{
    if (w->sorted)
        return;
    qsort(w->v, w->n, sizeof *w->v, cmp_entry);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        w->v[i].begin = off;
        off += w->v[i].nbytes;
    }
    w->sorted = true;
}

char *st_writer_header(st_writer *w, size_t *len, plume_error *err)
{
    sort_entries(w);
    sbuf b = {0};
    sb_puts(&b, "{");
    bool first = true;
    if (w->n_meta) {
        sb_puts(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i)
                sb_puts(&b, ",");
            sb_json_str(&b, w->meta[2 * i]);
            sb_puts(&b, ":");
            sb_json_str(&b, w->meta[2 * i + 1]);
        }
        sb_puts(&b, "}");
        first = false;
    }
    for (size_t i = 0; i < w->n; i++) {
        const st_entry *e = &w->v[i];
        if (!first)
            sb_puts(&b, ",");
        first = false;
        sb_json_str(&b, e->name);
        sb_puts(&b, ":{\"dtype\":\"");
        sb_puts(&b, DTYPES[e->dtype].name);
        sb_puts(&b, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            if (d)
                sb_puts(&b, ",");
            sb_printf_u64(&b, (uint64_t)e->shape[d]);
        }
        sb_puts(&b, "],\"data_offsets\":[");
        sb_printf_u64(&b, e->begin);
        sb_puts(&b, ",");
        sb_printf_u64(&b, e->begin + e->nbytes);
        sb_puts(&b, "]}");
    }
    sb_puts(&b, "}");
    while (!b.oom && b.n % 8 != 0)
        sb_puts(&b, " ");
    if (b.oom) {
        free(b.p);
        plume_err(err, PLUME_ERR_NOMEM, "out of memory building a safetensors header");
        return NULL;
    }
    *len = b.n;
    return b.p;
}

static int write_all(FILE *f, const void *p, size_t n, const char *path, plume_error *err)
{
    if (n && fwrite(p, 1, n, f) != n)
        return plume_err(err, PLUME_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

int st_writer_write(st_writer *w, const char *path, st_progress_fn progress, void *user,
                    plume_error *err)
{
    size_t hlen;
    char *hdr = st_writer_header(w, &hlen, err);
    if (!hdr)
        return -1;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    uint64_t max_bytes = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].nbytes > max_bytes)
            max_bytes = w->v[i].nbytes;
    void *buf = max_bytes ? malloc((size_t)max_bytes) : NULL;
    FILE *f = NULL;
    int rc = -1;
    if (!tmp || (max_bytes && !buf)) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory (%llu bytes for the largest tensor)",
                  (unsigned long long)max_bytes);
        goto out;
    }
    snprintf(tmp, plen + 5, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) {
        plume_err(err, PLUME_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto out;
    }
    uint8_t le[8];
    for (int k = 0; k < 8; k++)
        le[k] = (uint8_t)((uint64_t)hlen >> (8 * k));
    if (write_all(f, le, 8, tmp, err) || write_all(f, hdr, hlen, tmp, err))
        goto out;
    for (size_t i = 0; i < w->n; i++) {
        st_entry *e = &w->v[i];
        if (progress)
            progress(user, i, w->n, e->name, DTYPES[e->dtype].name);
        if (e->fill(e->user, buf, (size_t)e->nbytes, err)) {
            plume_err_prefix(err, "tensor '%s'", e->name);
            goto out;
        }
        if (write_all(f, buf, (size_t)e->nbytes, tmp, err))
            goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        plume_err(err, PLUME_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) != 0) {
        plume_err(err, PLUME_ERR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (f)
        fclose(f);
    if (rc && tmp)
        remove(tmp);
    free(buf);
    free(tmp);
    free(hdr);
    return rc;
}
