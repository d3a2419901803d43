/* The client's calls on their own threads (http_client.h). */
#include "serve/http_client.h"
#include "serve/http_client_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plume/grow.h"

struct http_call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    char *url, *body, *api_key, *timeout_name;
    http_call_opts o;
    atomic_bool cancel;
    /* under mu */
    long status;
    bool headers_done, done, failed, refused, too_big;
    char ctype[128];
    char err[CURL_ERROR_SIZE + 128];
    char *buf;
    size_t len, cap, off;
};

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    http_call *c = ud;
    size_t len = size * n;
    pthread_mutex_lock(&c->mu);
    if (len > 9 && strncmp(p, "HTTP/", 5) == 0) { /* the status line */
        const char *sp = memchr(p, ' ', len);
        if (sp)
            c->status = strtol(sp + 1, NULL, 10);
    } else if (len >= 13 && strncasecmp(p, "Content-Type:", 13) == 0) {
        size_t i = 13;
        while (i < len && (p[i] == ' ' || p[i] == '\t'))
            i++;
        size_t k = 0;
        while (i < len && p[i] != '\r' && p[i] != '\n' && k + 1 < sizeof c->ctype)
            c->ctype[k++] = p[i++];
        c->ctype[k] = '\0';
    } else if ((len == 2 && p[0] == '\r') || (len == 1 && p[0] == '\n')) {
        c->headers_done = true; /* the end of the (final: no Expect) header block */
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return atomic_load(&c->cancel) ? 0 : len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    http_call *c = ud;
    size_t len = size * n;
    if (atomic_load(&c->cancel))
        return 0;
    pthread_mutex_lock(&c->mu);
    if (c->o.max_body && c->len + len > c->o.max_body) {
        c->too_big = true;
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    char *b = plume_grow(c->buf, &c->cap, c->len + len + 1, 8192, 1);
    if (!b) {
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    c->buf = b;
    memcpy(c->buf + c->len, p, len);
    c->len += len;
    c->buf[c->len] = '\0';
    c->headers_done = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t d, curl_off_t e)
{
    (void)a, (void)b, (void)d, (void)e;
    return atomic_load(&((http_call *)ud)->cancel) ? 1 : 0;
}

static void *run(void *arg)
{
    http_call *c = arg;
    char cerr[CURL_ERROR_SIZE] = "";
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    CURLcode rc = CURLE_FAILED_INIT;
    if (h)
        rc = http_easy_setup(h, c->url, c->body, NULL, c->api_key, c->o.connect_timeout_s,
                             c->o.total_timeout_s, cerr, &hd);
    if (h && rc == CURLE_OK) {
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
        /* a server silent for idle_timeout_s (stopped, wedged) ends the call */
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(c->o.idle_timeout_s + 0.999));
        rc = curl_easy_perform(h);
    }
    pthread_mutex_lock(&c->mu);
    if (rc != CURLE_OK) {
        c->failed = true;
        c->refused = rc == CURLE_COULDNT_CONNECT;
        if (c->too_big)
            snprintf(c->err, sizeof c->err, "the answer is over %zu bytes", c->o.max_body);
        else if (rc == CURLE_OPERATION_TIMEDOUT)
            snprintf(c->err, sizeof c->err, "no answer within %s",
                     c->timeout_name ? c->timeout_name : "the timeout");
        else
            snprintf(c->err, sizeof c->err, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
    }
    c->done = true;
    c->headers_done = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    curl_slist_free_all(hd);
    if (h)
        curl_easy_cleanup(h);
    return NULL;
}

/* A copy of s, NULL staying NULL; *ok false when out of memory. */
static char *dup_or_null(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    *ok = *ok && d;
    return d;
}

/* Releases what a call holds once no thread uses it: its lock, its copied
 * strings, its reply buffer and itself. */
static void call_release(http_call *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->url);
    free(c->body);
    free(c->api_key);
    free(c->timeout_name);
    free(c->buf);
    free(c);
}

http_call *http_call_start(const char *url, const char *body, const http_call_opts *o)
{
    http_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    bool ok = true;
    c->o = *o; /* its strings are copied: the caller's need not outlive the call */
    c->url = dup_or_null(url, &ok);
    c->body = dup_or_null(body, &ok);
    c->api_key = dup_or_null(o->api_key, &ok);
    c->timeout_name = dup_or_null(o->timeout_name, &ok);
    atomic_init(&c->cancel, false);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (!ok || pthread_create(&c->th, NULL, run, c)) {
        call_release(c);
        return NULL;
    }
    return c;
}

long http_call_wait_headers(http_call *c)
{
    pthread_mutex_lock(&c->mu);
    while (!c->headers_done)
        pthread_cond_wait(&c->cv, &c->mu);
    long s = c->status;
    pthread_mutex_unlock(&c->mu);
    return s;
}

const char *http_call_content_type(http_call *c) { return c->ctype; }

const char *http_call_wait_body(http_call *c, size_t *len)
{
    pthread_mutex_lock(&c->mu);
    while (!c->done)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    if (c->failed)
        return NULL;
    *len = c->len;
    return c->buf ? c->buf : "";
}

size_t http_call_read(http_call *c, char *dst, size_t max)
{
    pthread_mutex_lock(&c->mu);
    while (c->off == c->len && !c->done)
        pthread_cond_wait(&c->cv, &c->mu);
    size_t n = c->len - c->off < max ? c->len - c->off : max;
    if (n)
        memcpy(dst, c->buf + c->off, n);
    c->off += n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

const char *http_call_error(http_call *c)
{
    pthread_mutex_lock(&c->mu);
    const char *e = c->failed ? c->err : NULL;
    pthread_mutex_unlock(&c->mu);
    return e;
}

bool http_call_refused(http_call *c)
{
    pthread_mutex_lock(&c->mu);
    bool r = c->refused;
    pthread_mutex_unlock(&c->mu);
    return r;
}

void http_call_free(http_call *c)
{
    if (!c)
        return;
    atomic_store(&c->cancel, true);
    pthread_join(c->th, NULL);
    call_release(c);
}
