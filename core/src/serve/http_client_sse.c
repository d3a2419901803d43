/* The client's streamed POSTs on one thread, their server-sent events
 * parsed as they arrive (http_client.h: http_multi). */
#include "serve/http_client.h"
#include "serve/http_client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plume/clock.h"

#define SSE_MAX_LINE ((size_t)16 << 20) /* a longer event is an error */
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
    /* SSE state: the current line, the current event's data */
    char *line, *data;
    size_t line_len, line_cap, data_len, data_cap;
    bool has_data, after_cr;
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

static bool grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *p = realloc(*buf, c);
    if (!p)
        return false;
    *buf = p;
    *cap = c;
    return true;
}

static void fail(http_transfer *t, const char *msg)
{
    if (!t->failed)
        snprintf(t->err, sizeof t->err, "%s", msg);
    t->failed = true;
}

/* Hands the pending event to the callback; false to abort. */
static bool dispatch(http_transfer *t)
{
    if (!t->has_data)
        return true;
    t->data[t->data_len] = '\0';
    char msg[sizeof t->err];
    msg[0] = '\0';
    int rc = t->fn(t->user, t->data, t->data_len, t->last_t, msg, sizeof msg);
    t->has_data = false;
    t->data_len = 0;
    if (rc) {
        fail(t, msg[0] ? msg : "the stream was aborted");
        return false;
    }
    return true;
}

/* One complete SSE line (without its terminator); false to abort. */
static bool sse_line(http_transfer *t, const char *s, size_t n)
{
    if (n == 0)
        return dispatch(t);
    if (s[0] == ':') /* a comment (keep-alive ping) */
        return true;
    const char *colon = memchr(s, ':', n);
    size_t flen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = (size_t)(s + n - v);
    if (vlen && *v == ' ') {
        v++;
        vlen--;
    }
    if (flen == 4 && memcmp(s, "data", 4) == 0) {
        size_t need = t->data_len + (t->has_data ? 1 : 0) + vlen + 1;
        if (need > SSE_MAX_LINE || !grow(&t->data, &t->data_cap, need)) {
            fail(t, "an SSE event over 16 MiB: the server's stream is not what an "
                    "OpenAI-compatible server sends");
            return false;
        }
        if (t->has_data)
            t->data[t->data_len++] = '\n';
        memcpy(t->data + t->data_len, v, vlen);
        t->data_len += vlen;
        t->has_data = true;
    } else if (flen == 5 && memcmp(s, "error", 5) == 0) {
        char msg[sizeof t->err];
        snprintf(msg, sizeof msg, "the server sent an SSE error event: %.*s",
                 (int)(vlen > 300 ? 300 : vlen), v);
        fail(t, msg);
        return false;
    }
    /* event:, id:, retry: and unknown fields are ignored, as the SSE spec says */
    return true;
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
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (c == '\n' && t->after_cr) { /* the \n of a \r\n */
            t->after_cr = false;
            continue;
        }
        t->after_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            if (!sse_line(t, t->line, t->line_len))
                return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
            t->line_len = 0;
            continue;
        }
        /* the run up to the next terminator, appended at once */
        size_t j = i;
        while (j < len && p[j] != '\n' && p[j] != '\r')
            j++;
        if (t->line_len + (j - i) + 1 > SSE_MAX_LINE ||
            !grow(&t->line, &t->line_cap, t->line_len + (j - i) + 1)) {
            fail(t, "an SSE line over 16 MiB: the server's stream is not what an "
                    "OpenAI-compatible server sends");
            return 0;
        }
        memcpy(t->line + t->line_len, p + i, j - i);
        t->line_len += j - i;
        i = j - 1;
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
    if (t->line_len && !sse_line(t, t->line, t->line_len))
        return;
    t->line_len = 0;
    dispatch(t);
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
    free(t->line);
    free(t->data);
    free(t);
}
