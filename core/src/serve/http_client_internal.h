/* What the client's files share: the one way a request is set up. */
#ifndef PLUME_SERVE_HTTP_CLIENT_INTERNAL_H
#define PLUME_SERVE_HTTP_CLIENT_INTERNAL_H

#include <curl/curl.h>

/* Sets on e what every request of plume's client has: url; body as a JSON
 * POST (borrowed: it must outlive the transfer) or a GET when NULL; the
 * headers Content-Type (POST), "Expect:" (no 100-continue round trip),
 * Accept when accept is non-NULL, Authorization when api_key is; no
 * signals, no proxy from the environment, TCP_NODELAY; the connect and
 * total timeouts (0: none); curl's messages into errbuf
 * (CURL_ERROR_SIZE).  *headers receives the header list: free it with
 * curl_slist_free_all after the transfer.  CURLE_OK, else the first option
 * curl refused (CURLE_OUT_OF_MEMORY when the list could not be built). */
CURLcode http_easy_setup(CURL *e, const char *url, const char *body, const char *accept,
                         const char *api_key, double connect_timeout_s, double total_timeout_s,
                         char *errbuf, struct curl_slist **headers);

#endif
