/* UTF-8 helpers for splitting text into characters and for lossy output. */
#include <string.h>

#include "tokenizer/tok_internal.h"

int tok_utf8_len(uint8_t c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        return 2;
    if ((c & 0xf0) == 0xe0)
        return 3;
    if ((c & 0xf8) == 0xf0)
        return 4;
    return 1;
}

/* Bounds on the second byte of a sequence with lead c (rejects overlongs,
 * surrogates and code points above U+10FFFF); false for an invalid lead. */
static bool lead_bounds(uint8_t c, int *need, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        *need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        *need = 2;
        if (c == 0xe0)
            *lo = 0xa0;
        else if (c == 0xed)
            *hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        *need = 3;
        if (c == 0xf0)
            *lo = 0x90;
        else if (c == 0xf4)
            *hi = 0x8f;
    } else
        return false;
    return true;
}

/* Length of the valid prefix of a sequence at s (n bytes): returns k >= 1
 * bytes consumed; *complete says whether they form a whole character. */
static size_t valid_prefix(const uint8_t *s, size_t n, bool *complete)
{
    *complete = false;
    if (s[0] < 0x80) {
        *complete = true;
        return 1;
    }
    int need;
    uint8_t lo, hi;
    if (!lead_bounds(s[0], &need, &lo, &hi))
        return 1;
    size_t k = 1;
    for (int i = 0; i < need; i++, k++) {
        if (k >= n)
            return k;
        uint8_t c = s[k];
        uint8_t l = i == 0 ? lo : 0x80, h = i == 0 ? hi : 0xbf;
        if (c < l || c > h)
            return k;
    }
    *complete = true;
    return k;
}

int tok_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const uint8_t *u = (const uint8_t *)s;
    bool complete;
    size_t k = valid_prefix(u, n, &complete);
    if (!complete)
        return 0;
    uint32_t c;
    if (k == 1)
        c = u[0];
    else if (k == 2)
        c = ((uint32_t)(u[0] & 0x1f) << 6) | (u[1] & 0x3f);
    else if (k == 3)
        c = ((uint32_t)(u[0] & 0x0f) << 12) | ((uint32_t)(u[1] & 0x3f) << 6) | (u[2] & 0x3f);
    else
        c = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3f) << 12) |
            ((uint32_t)(u[2] & 0x3f) << 6) | (u[3] & 0x3f);
    *cp = c;
    return (int)k;
}

size_t tok_utf8_incomplete_tail(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    /* a truncated sequence starts at most 3 bytes before the end */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        size_t i = n - back;
        if ((u[i] & 0xc0) == 0x80)
            continue;
        bool complete;
        size_t k = valid_prefix(u + i, back, &complete);
        return (!complete && k == back && u[i] >= 0xc2) ? back : 0;
    }
    return 0;
}

bool tok_utf8_valid(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        bool complete;
        size_t k = valid_prefix(u + i, n - i, &complete);
        if (!complete)
            return false;
        i += k;
    }
    return true;
}

size_t tok_utf8_lossy(const char *s, size_t n, char *out, size_t cap)
{
    static const char repl[3] = {(char)0xef, (char)0xbf, (char)0xbd};
    const uint8_t *u = (const uint8_t *)s;
    size_t w = 0, i = 0;
    while (i < n) {
        bool complete;
        size_t k = valid_prefix(u + i, n - i, &complete);
        if (complete) {
            if (w + k <= cap)
                memcpy(out + w, s + i, k);
            w += k;
        } else {
            if (w + 3 <= cap)
                memcpy(out + w, repl, 3);
            w += 3;
        }
        i += k;
    }
    return w;
}
