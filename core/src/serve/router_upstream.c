/* plume router: upstream calls (router_upstream.h). */
#include "serve/router_upstream.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct up_call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    char *url, *body, *auth;
    up_opts o;
    atomic_bool cancel;
    /* under mu */
    long status;
    bool headers_done, done, failed, refused;
    char ctype[128];
    char err[CURL_ERROR_SIZE + 128];
    char *buf;
    size_t len, cap, off;
};

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    up_call *c = ud;
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
    up_call *c = ud;
    size_t len = size * n;
    if (atomic_load(&c->cancel))
        return 0;
    pthread_mutex_lock(&c->mu);
    if (c->len + len + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 8192;
        while (cap < c->len + len + 1)
            cap *= 2;
        char *b = realloc(c->buf, cap);
        if (!b) {
            pthread_mutex_unlock(&c->mu);
            return 0;
        }
        c->buf = b;
        c->cap = cap;
    }
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
    return atomic_load(&((up_call *)ud)->cancel) ? 1 : 0;
}

static void *run(void *arg)
{
    up_call *c = arg;
    char cerr[CURL_ERROR_SIZE] = "";
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    CURLcode rc = CURLE_FAILED_INIT;
    if (h) {
        hd = curl_slist_append(hd, "Content-Type: application/json");
        hd = curl_slist_append(hd, "Expect:");
        if (c->auth)
            hd = curl_slist_append(hd, c->auth);
        curl_easy_setopt(h, CURLOPT_URL, c->url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->o.connect_timeout_s * 1000));
        if (c->o.total_timeout_s > 0)
            curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->o.total_timeout_s * 1000));
        /* a worker silent for idle_timeout_s (stopped, wedged) ends the call */
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(c->o.idle_timeout_s + 0.999));
        rc = curl_easy_perform(h);
    }
    pthread_mutex_lock(&c->mu);
    if (rc != CURLE_OK) {
        c->failed = true;
        c->refused = rc == CURLE_COULDNT_CONNECT;
        snprintf(c->err, sizeof c->err, "%s",
                 rc == CURLE_OPERATION_TIMEDOUT ? "no answer within the router's --timeout"
                 : cerr[0]                      ? cerr
                                                : curl_easy_strerror(rc));
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

up_call *up_start(const char *url, const char *body, const up_opts *o)
{
    up_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->url = strdup(url);
    c->body = strdup(body);
    c->o = *o;
    c->o.api_key = NULL; /* copied into auth: the caller's string need not outlive the call */
    if (o->api_key) {
        size_t n = strlen(o->api_key) + 32;
        c->auth = malloc(n);
        if (c->auth)
            snprintf(c->auth, n, "Authorization: Bearer %s", o->api_key);
    }
    atomic_init(&c->cancel, false);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (!c->url || !c->body || (o->api_key && !c->auth) ||
        pthread_create(&c->th, NULL, run, c)) {
        free(c->url);
        free(c->body);
        free(c->auth);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c);
        return NULL;
    }
    return c;
}

long up_wait_headers(up_call *c)
{
    pthread_mutex_lock(&c->mu);
    while (!c->headers_done)
        pthread_cond_wait(&c->cv, &c->mu);
    long s = c->status;
    pthread_mutex_unlock(&c->mu);
    return s;
}

const char *up_content_type(up_call *c) { return c->ctype; }

const char *up_wait_body(up_call *c, size_t *len)
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

size_t up_read(up_call *c, char *dst, size_t max)
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

const char *up_error(up_call *c)
{
    pthread_mutex_lock(&c->mu);
    const char *e = c->failed ? c->err : NULL;
    pthread_mutex_unlock(&c->mu);
    return e;
}

bool up_refused(up_call *c)
{
    pthread_mutex_lock(&c->mu);
    bool r = c->refused;
    pthread_mutex_unlock(&c->mu);
    return r;
}

void up_free(up_call *c)
{
    if (!c)
        return;
    atomic_store(&c->cancel, true);
    pthread_join(c->th, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->url);
    free(c->body);
    free(c->auth);
    free(c->buf);
    free(c);
}
