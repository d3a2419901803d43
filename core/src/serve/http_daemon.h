/* The one HTTP server of plume serve and plume router, on libmicrohttpd
 * (one thread per connection, an internal polling thread): it binds, reads
 * bodies up to a limit, looks the path up in the caller's route table,
 * checks the API key (constant time) before any handler runs, answers
 * 404/405/401/413 itself in the OpenAI error shape (serve_api_error), and
 * caps connections and idle time (http_limits). */
#ifndef PLUME_SERVE_HTTP_DAEMON_H
#define PLUME_SERVE_HTTP_DAEMON_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct http_daemon http_daemon;

/* One request as its handler sees it. */
typedef struct http_exchange {
    http_daemon *d;
    struct MHD_Connection *conn;
    const char *url, *method;
    const char *body;       /* the whole body, NUL-terminated ("" when none) */
    size_t body_len;
    /* Set by a handler that keeps something past its return (a generation
     * the connection waits on): done(state, completed) runs when the
     * connection ends, completed false when the client left or it failed. */
    void *state;
    void (*done)(void *state, bool completed);
} http_exchange;

typedef enum MHD_Result (*http_handler)(void *user, http_exchange *x);

typedef struct http_route {
    const char *path;       /* matched exactly; one ending in '/' matches every longer
                             * path under it (the rest is the handler's to read) */
    bool post;              /* true: POST; false: GET (and HEAD) */
    bool open;              /* true: answered without the API key (/health, /metrics) */
    http_handler fn;
} http_route;

/* Connection limits and timeouts, each set on purpose (docs/serving.md). */
typedef struct http_limits {
    unsigned max_connections;        /* open at once; more are refused at accept */
    unsigned max_connections_per_ip; /* from one address: one client cannot take all */
    unsigned idle_timeout_s;         /* a connection silent this long is closed */
} http_limits;

/* The limits plume serve and plume router use: 1024 connections, 256 per
 * address, 60 s of silence. */
http_limits http_default_limits(void);

typedef struct http_daemon_opts {
    const char *who;              /* "plume serve", "the router": named in messages */
    const char *host;             /* an IPv4 or IPv6 address */
    int port;                     /* 0: the kernel picks a free one */
    const char *api_key;          /* NULL: no key needed */
    size_t max_body;              /* bytes; larger bodies get 413 */
    const char *max_body_option;  /* the option that sets max_body ("--max-body"), or NULL */
    http_limits limits;
    const http_route *routes;     /* borrowed: must outlive the daemon */
    int n_routes;
    void *user;                   /* handed to every handler and to on_error */
    void (*on_error)(void *user, int status); /* may be NULL: every error answer, counted */
} http_daemon_opts;

/* Binds and starts serving; *port_out is the bound port.  On failure writes
 * why (and what to change) to msg and returns -1. */
int http_daemon_start(const http_daemon_opts *o, http_daemon **out, int *port_out, char *msg,
                      size_t cap);
/* Stops accepting new connections (open ones keep being served). */
void http_daemon_quiesce(http_daemon *d);
/* Closes every connection and frees the daemon (NULL: nothing). */
void http_daemon_stop(http_daemon *d);

/* Answers: each queues the response and returns libmicrohttpd's verdict.
 * text is copied; j is consumed (NULL: answered as out of memory). */
enum MHD_Result http_send_text(http_exchange *x, unsigned status, const char *type,
                               const char *text, size_t len);
/* text: a malloc'd string, sent (up to its NUL) and freed. */
enum MHD_Result http_send_owned(http_exchange *x, unsigned status, const char *type, char *text);
enum MHD_Result http_send_json(http_exchange *x, unsigned status, json_t *j);
/* The OpenAI error shape {"error": {message, type, code}} (serve_api_error),
 * counted through on_error. */
enum MHD_Result http_send_error(http_exchange *x, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A streamed response of unknown length (Content-Type type, no caching):
 * read fills buf as libmicrohttpd's content reader does; free(cls) runs
 * once at the end, also when queuing fails. */
enum MHD_Result http_send_stream(http_exchange *x, const char *type, size_t block,
                                 ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max),
                                 void *cls, void (*free_cls)(void *cls));

/* The socket of x's connection (-1 if unknown), to notice a client that left. */
int http_exchange_fd(http_exchange *x);

#endif
