/* A request body received in pieces (libmicrohttpd's upload callback),
 * shared by plume serve and plume router. */
#ifndef PLUME_SERVE_HTTP_BODY_H
#define PLUME_SERVE_HTTP_BODY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct serve_body {
    char *data;   /* NUL-terminated once anything arrived; NULL before */
    size_t len, cap;
    bool too_big; /* the upload passed max: answer 413 when it ends */
} serve_body;

/* Appends n bytes to b.  Once the total would pass max the piece and every
 * later one are dropped and too_big is set; the caller keeps accepting the
 * upload so that its 413 reaches the client.  0, or -1 when out of memory. */
int serve_body_append(serve_body *b, const char *data, size_t n, size_t max);

/* Frees b's buffer (b itself belongs to the caller). */
void serve_body_free(serve_body *b);

#endif
