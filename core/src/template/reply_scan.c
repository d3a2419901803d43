/* Scanning a reply for markup (reply_scan.h). */
#include "template/reply_scan.h"

#include <string.h>

const char *reply_find(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k))
            return s + i;
    return NULL;
}

bool reply_is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

size_t reply_partial_tag(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && !memcmp(s + n - k, tag, k))
            return k;
    return 0;
}
