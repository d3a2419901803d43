/* The client's streamed POSTs on one thread, their server-sent events
 * parsed as they arrive (http_client.h: http_multi). */
#include "serve/http_client.h"
#include "serve/http_client_internal.h"
#include "serve/sse_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/clock.h"

#define SSE_MAX_LINE ((size_t)16 << 20) /* a longer line or event is an error */
#define SNIPPET_MAX 400

struct http_multi {
    CURLM *multi;
    http_transfer *active; /* in flight: a doubly linked list */
};

struct http_transfer {
    http_transfer *prev, *next;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    http_sse_fn fn;
    void *user;
    sse_reader sse;
    double last_t;
    long status;
    bool status_known;
    bool failed; /* err holds our own reason (a callback's, a malformed stream) */
    char err[512];
    char snippet[SNIPPET_MAX + 1];
    size_t snippet_len;
    char curl_err[CURL_ERROR_SIZE];
};

http_multi *http_multi_new(void)
{
    http_multi *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->multi = curl_multi_init();
    if (!m->multi) {
        free(m);
        return NULL;
    }
    return m;
}

void http_multi_free(http_multi *m)
{
    if (!m)
        return;
    while (m->active) {
        http_transfer *t = m->active;
        m->active = t->next;
        curl_multi_remove_handle(m->multi, t->easy);
        http_transfer_free(t);
    }
    curl_multi_cleanup(m->multi);
    free(m);
}

static void fail(http_transfer *t, const char *msg)
{
    if (!t->failed)
        snprintf(t->err, sizeof t->err, "%s", msg);
    t->failed = true;
}

/* The reader's event to the transfer's callback, with its arrival time. */
static int on_event(void *user, const char *data, size_t len, char *err, size_t errsize)
{
    http_transfer *t = user;
    return t->fn(t->user, data, len, t->last_t, err, errsize);
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
    http_transfer *t = ud;
    size_t len = size * nmemb;
    t->last_t = plume_clock_seconds();
    if (!t->status_known) {
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
        t->status_known = true;
    }
    if (t->snippet_len < SNIPPET_MAX) {
        size_t k = SNIPPET_MAX - t->snippet_len < len ? SNIPPET_MAX - t->snippet_len : len;
        memcpy(t->snippet + t->snippet_len, p, k);
        t->snippet_len += k;
        t->snippet[t->snippet_len] = '\0';
    }
    if (t->status != 200 || t->failed)
        return len; /* an error body: kept for the message, not parsed */
    if (!sse_reader_feed(&t->sse, p, len)) {
        fail(t, t->sse.err);
        return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
    }
    return len;
}

http_transfer *http_post_sse(http_multi *m, const char *url, const char *api_key,
                             const char *body, double timeout_s, http_sse_fn fn, void *user,
                             char *err, size_t errsize)
{
    http_transfer *t = calloc(1, sizeof *t);
    if (!t || !(t->body = strdup(body)) || !(t->easy = curl_easy_init())) {
        snprintf(err, errsize, "out of memory starting a request");
        http_transfer_free(t);
        return NULL;
    }
    t->fn = fn;
    t->user = user;
    sse_reader_init(&t->sse, SSE_MAX_LINE, on_event, t);
    CURL *e = t->easy;
    CURLcode rc = http_easy_setup(e, url, t->body, "text/event-stream", api_key, 30, timeout_s,
                                  t->curl_err, &t->headers);
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    if (rc) {
        snprintf(err, errsize, "libcurl refused the request options for %s: %s", url,
                 curl_easy_strerror(rc));
        http_transfer_free(t);
        return NULL;
    }
    CURLMcode mc = curl_multi_add_handle(m->multi, e);
    if (mc) {
        snprintf(err, errsize, "libcurl could not start the request to %s: %s", url,
                 curl_multi_strerror(mc));
        http_transfer_free(t);
        return NULL;
    }
    t->next = m->active;
    if (m->active)
        m->active->prev = t;
    m->active = t;
    return t;
}

void http_multi_wait(http_multi *m, int timeout_ms)
{
    int running;
    curl_multi_perform(m->multi, &running);
    curl_multi_poll(m->multi, NULL, 0, timeout_ms, NULL);
    curl_multi_perform(m->multi, &running);
}

/* The snippet as one printable line. */
static void flatten(char *dst, size_t size, const char *s)
{
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 1 < size; i++)
        dst[j++] = (s[i] == '\n' || s[i] == '\r' || s[i] == '\t') ? ' ' : s[i];
    dst[j] = '\0';
}

static void finish(http_transfer *t, CURLcode result)
{
    if (!t->status_known)
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
    if (t->failed)
        return;
    if (result != CURLE_OK) {
        snprintf(t->err, sizeof t->err, "%s",
                 t->curl_err[0] ? t->curl_err : curl_easy_strerror(result));
        t->failed = true;
        return;
    }
    if (t->status != 200) {
        char body[SNIPPET_MAX + 1];
        flatten(body, sizeof body, t->snippet);
        snprintf(t->err, sizeof t->err, "HTTP %ld%s%s", t->status, body[0] ? ": " : "", body);
        t->failed = true;
        return;
    }
    /* a stream that ends without its final blank line: the last event counts */
    if (!sse_reader_end(&t->sse))
        fail(t, t->sse.err);
}

http_transfer *http_multi_next_done(http_multi *m)
{
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(m->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *e = msg->easy_handle;
        CURLcode result = msg->data.result;
        http_transfer *t = NULL;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&t);
        curl_multi_remove_handle(m->multi, e);
        if (t->prev)
            t->prev->next = t->next;
        else
            m->active = t->next;
        if (t->next)
            t->next->prev = t->prev;
        t->prev = t->next = NULL;
        finish(t, result);
        return t;
    }
    return NULL;
}

const char *http_transfer_error(const http_transfer *t) { return t->failed ? t->err : NULL; }
const char *http_transfer_snippet(const http_transfer *t) { return t->snippet; }
void *http_transfer_user(const http_transfer *t) { return t->user; }

void http_transfer_free(http_transfer *t)
{
    if (!t)
        return;
    if (t->easy)
        curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    free(t->body);
    sse_reader_free(&t->sse);
    free(t);
}
