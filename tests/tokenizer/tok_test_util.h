/* Test helpers for the tokenizer tests: temp files, GGUF metadata (no
 * tensors; gguf_writer.h's buffer and the array kinds it lacks) and the
 * GPT-2 byte alphabet. */
#ifndef TOK_TEST_UTIL_H
#define TOK_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../gguf/gguf_writer.h"

/* Writes n bytes to a fresh temp file whose path goes to path (cap bytes);
 * returns 0 on success. */
static inline int tt_write_temp(const char *suffix, const void *p, size_t n, char *path,
                                size_t cap)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, cap, "%s/plume_tok_XXXXXX%s", dir, suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0)
        return -1;
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return close(fd);
}

/* ---- GGUF metadata, written with the GGUF tests' writer ---- */

/* GGUF v3 header with no tensors and n_kv pairs to follow. */
static inline void tt_gguf_header(gw_buf *b, uint64_t n_kv) { gw_header(b, 3, 0, n_kv); }
static inline void tt_kv_bool(gw_buf *b, const char *key, int v)
{
    uint8_t x = (uint8_t)(v != 0);
    gw_str(b, key);
    gw_u32(b, 7);
    gw_put(b, &x, 1);
}
static inline void tt_kv_strs(gw_buf *b, const char *key, const char *const *v, size_t n)
{
    gw_str(b, key);
    gw_u32(b, 9);
    gw_u32(b, 8);
    gw_u64(b, n);
    for (size_t i = 0; i < n; i++)
        gw_str(b, v[i]);
}
static inline void tt_kv_i32s(gw_buf *b, const char *key, const int32_t *v, size_t n)
{
    gw_str(b, key);
    gw_u32(b, 9);
    gw_u32(b, 5);
    gw_u64(b, n);
    for (size_t i = 0; i < n; i++)
        gw_u32(b, (uint32_t)v[i]);
}
static inline void tt_kv_f32s(gw_buf *b, const char *key, const float *v, size_t n)
{
    gw_str(b, key);
    gw_u32(b, 9);
    gw_u32(b, 6);
    gw_u64(b, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        gw_u32(b, u);
    }
}

/* UTF-8 of GPT-2's character for byte c (NUL-terminated in out[3]). */
static inline void tt_gpt2_char(uint8_t c, char out[3])
{
    uint32_t cp = c;
    if (c <= 0x20)
        cp = 0x100u + c;
    else if (c >= 0x7f && c <= 0xa0)
        cp = 0x121u + (uint32_t)(c - 0x7f);
    else if (c == 0xad)
        cp = 0x143;
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    }
}

#endif
