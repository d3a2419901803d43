/* The client's setup of every request, init/cleanup and the blocking GET
 * (http_client.h). */
#include "serve/http_client.h"
#include "serve/http_client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool http_init(char *err, size_t errsize)
{
    CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        snprintf(err, errsize, "libcurl failed to initialise: %s", curl_easy_strerror(rc));
        return false;
    }
    return true;
}

void http_cleanup(void) { curl_global_cleanup(); }

static bool append(struct curl_slist **list, const char *h)
{
    struct curl_slist *n = curl_slist_append(*list, h);
    if (!n)
        return false;
    *list = n;
    return true;
}

CURLcode http_easy_setup(CURL *e, const char *url, const char *body, const char *accept,
                         const char *api_key, double connect_timeout_s, double total_timeout_s,
                         char *errbuf, struct curl_slist **headers)
{
    struct curl_slist *h = NULL;
    char line[1024];
    bool ok = append(&h, "Expect:");
    if (ok && body)
        ok = append(&h, "Content-Type: application/json");
    if (ok && accept) {
        snprintf(line, sizeof line, "Accept: %s", accept);
        ok = append(&h, line);
    }
    if (ok && api_key) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", api_key);
        ok = append(&h, line);
    }
    *headers = h;
    if (!ok)
        return CURLE_OUT_OF_MEMORY;
    CURLcode rc = curl_easy_setopt(e, CURLOPT_URL, url);
    if (!rc && body)
        rc = curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    if (!rc && body)
        rc = curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_PROXY, ""); /* no proxy from the environment */
    if (!rc) rc = curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    if (!rc && connect_timeout_s > 0)
        rc = curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(connect_timeout_s * 1000));
    if (!rc && total_timeout_s > 0)
        rc = curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(total_timeout_s * 1000));
    return rc;
}

char *http_get(const char *url, const char *api_key, double timeout_s, char *err, size_t errsize)
{
    http_call_opts o = {.connect_timeout_s = timeout_s, .idle_timeout_s = timeout_s,
                        .total_timeout_s = timeout_s, .api_key = api_key,
                        .max_body = (size_t)1 << 20};
    http_call *c = http_call_start(url, NULL, &o);
    if (!c) {
        snprintf(err, errsize, "out of memory starting a request to %s", url);
        return NULL;
    }
    size_t len = 0;
    const char *body = http_call_wait_body(c, &len);
    long status = http_call_wait_headers(c);
    char *out = NULL;
    if (!body)
        snprintf(err, errsize, "%s", http_call_error(c));
    else if (status != 200)
        snprintf(err, errsize, "HTTP %ld", status);
    else if (!(out = malloc(len + 1)))
        snprintf(err, errsize, "out of memory");
    else {
        memcpy(out, body, len);
        out[len] = '\0';
    }
    http_call_free(c);
    return out;
}
