/* plume — errors.
 *
 * Every fallible function in plume returns 0 on success and -1 on failure,
 * and fills a caller-owned plume_error (which may be NULL when the caller does
 * not care).  The message is one line that says what was wrong and, where
 * there is one, what to do about it. */
#ifndef PLUME_ERROR_H
#define PLUME_ERROR_H

#include <stdarg.h>

#include "plume/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum plume_status {
    PLUME_OK = 0,
    PLUME_ERR_IO,          /* a file could not be opened, read or mapped */
    PLUME_ERR_FORMAT,      /* a file is truncated, corrupt or not what it claims */
    PLUME_ERR_UNSUPPORTED, /* well-formed input that plume does not handle */
    PLUME_ERR_INVALID,     /* a bad argument or setting from the caller */
    PLUME_ERR_NOMEM,       /* an allocation failed */
    PLUME_ERR_RANGE,       /* a value outside what the model or cache allows */
    PLUME_ERR_INTERNAL     /* a bug in plume: please report it */
} plume_status;

#define PLUME_ERROR_MSG_MAX 1024

typedef struct plume_error {
    plume_status code;
    char msg[PLUME_ERROR_MSG_MAX];
} plume_error;

/* Fills err (if non-NULL) with code and a printf-style message; returns -1 so
 * that callers can write `return plume_err(err, ...)`.  A message is always
 * one line: control bytes (a newline in a tensor name or a regex read from a
 * model file) become '?'. */
PLUME_API int plume_err(plume_error *err, plume_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an already-set message (used to add context such as
 * a file name as an error travels up); control bytes become '?' as in
 * plume_err.  Returns -1. */
PLUME_API int plume_err_prefix(plume_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Short name of a status code, e.g. "format error". */
PLUME_API const char *plume_status_name(plume_status code);

#ifdef __cplusplus
}
#endif
#endif
