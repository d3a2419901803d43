#include "plume/error.h"

#include <stdio.h>
#include <string.h>

/* Replaces control bytes (below 0x20, and 0x7f) in msg with '?', so that text
 * quoted from an untrusted file cannot split a message into several lines. */
static void one_line(char *msg)
{
    for (unsigned char *c = (unsigned char *)msg; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            *c = '?';
}

int plume_err(plume_error *err, plume_status code, const char *fmt, ...)
{
    if (!err)
        return -1;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    one_line(err->msg);
    return -1;
}

int plume_err_prefix(plume_error *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char prefix[PLUME_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[PLUME_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3)
        n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
    one_line(err->msg);
    return -1;
}

const char *plume_status_name(plume_status code)
{
    switch (code) {
    case PLUME_OK: return "ok";
    case PLUME_ERR_IO: return "I/O error";
    case PLUME_ERR_FORMAT: return "format error";
    case PLUME_ERR_UNSUPPORTED: return "unsupported";
    case PLUME_ERR_INVALID: return "invalid argument";
    case PLUME_ERR_NOMEM: return "out of memory";
    case PLUME_ERR_RANGE: return "out of range";
    case PLUME_ERR_INTERNAL: return "internal error";
    }
    return "unknown error";
}
