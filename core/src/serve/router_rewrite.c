/* plume router: request rewriting (router_rewrite.h). */
#include "serve/router_rewrite.h"

#include <stdio.h>
#include <stdlib.h>

#include "serve/openai_api.h"

json_t *router_parse_request(const char *body, size_t len, bool *stream, char *msg, size_t cap)
{
    json_error_t je;
    json_t *req = json_loadb(body ? body : "", len, 0, &je);
    if (!json_is_object(req)) {
        serve_api_fail(msg, cap, 400, "the body must be a JSON object (%s)",
                       req ? "it is another JSON value" : je.text);
        json_decref(req);
        return NULL;
    }
    *stream = json_is_true(json_object_get(req, "stream"));
    return req;
}

json_t *router_prefill_request(const json_t *req)
{
    json_t *pre = json_deep_copy(req);
    if (!pre)
        return NULL;
    json_object_del(pre, "max_completion_tokens");
    json_object_del(pre, "stream_options");
    if (json_object_set_new(pre, "max_tokens", json_integer(1)) ||
        json_object_set_new(pre, "stream", json_false()) ||
        json_object_set_new(pre, "kv_transfer_params",
                            json_pack("{s:b}", "do_remote_decode", 1))) {
        json_decref(pre);
        return NULL;
    }
    return pre;
}

json_t *router_decode_request(const json_t *req, const json_t *prefill_answer)
{
    json_t *kx = json_object_get(prefill_answer, "kv_transfer_params");
    if (!json_is_object(kx))
        return NULL;
    json_t *dec = json_deep_copy(req);
    if (!dec || json_object_set(dec, "kv_transfer_params", kx)) {
        json_decref(dec);
        return NULL;
    }
    return dec;
}

size_t router_stream_error_tail(const char *worker_url, const char *failure, char *buf,
                                size_t cap)
{
    char msg[700];
    snprintf(msg, sizeof msg,
             "the decode worker at %s failed while streaming: %s; the response is incomplete",
             worker_url, failure);
    json_t *j = serve_api_error(502, msg);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    int n = snprintf(buf, cap, "data: %s\n\ndata: [DONE]\n\n", s ? s : "{}");
    free(s);
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}
