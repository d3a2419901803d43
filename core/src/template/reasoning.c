/* The streaming <think> splitter (plume/chat_parse.h). */
#include <stdlib.h>
#include <string.h>

#include "plume/chat_parse.h"
#include "template/reply_scan.h"

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

enum { AT_START, IN_REASONING, AFTER_CLOSE, IN_CONTENT };

struct plume_reasoning {
    int state;
    char *held; /* bytes not yet decided (a possible tag prefix, leading whitespace) */
    size_t n_held;
};

plume_reasoning *plume_reasoning_new(bool starts_inside)
{
    plume_reasoning *r = calloc(1, sizeof *r);
    if (r)
        r->state = starts_inside ? IN_REASONING : AT_START;
    return r;
}

void plume_reasoning_free(plume_reasoning *r)
{
    if (!r)
        return;
    free(r->held);
    free(r);
}

int plume_reasoning_feed(plume_reasoning *r, const char *text, size_t len, bool final,
                         char **reasoning, char **content, plume_error *err)
{
    *reasoning = NULL;
    *content = NULL;
    /* work on held + text */
    size_t n = r->n_held + len;
    char *buf = malloc(n + 1);
    if (!buf)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory splitting reasoning");
    if (r->n_held)
        memcpy(buf, r->held, r->n_held);
    if (len)
        memcpy(buf + r->n_held, text, len);
    buf[n] = 0;
    free(r->held);
    r->held = NULL;
    r->n_held = 0;
    size_t i = 0, keep_from = n;
    int rc = 0;
    while (i < n && rc == 0) {
        if (r->state == AT_START) {
            size_t j = i;
            while (j < n && reply_is_ws(buf[j]))
                j++;
            size_t left = n - j, ol = sizeof OPEN - 1;
            if (left >= ol && !memcmp(buf + j, OPEN, ol)) {
                r->state = IN_REASONING;
                i = j + ol;
            } else if (left < ol && !memcmp(buf + j, OPEN, left) && !final) {
                keep_from = i; /* whitespace and a possible "<think" */
                break;
            } else
                r->state = IN_CONTENT;
        } else if (r->state == IN_REASONING) {
            const char *c = reply_find(buf + i, n - i, CLOSE);
            if (c) {
                rc = reply_append(reasoning, buf + i, (size_t)(c - (buf + i)));
                i = (size_t)(c - buf) + sizeof CLOSE - 1;
                r->state = AFTER_CLOSE;
            } else {
                size_t part = final ? 0 : reply_partial_tag(buf + i, n - i, CLOSE);
                rc = reply_append(reasoning, buf + i, n - i - part);
                keep_from = n - part;
                break;
            }
        } else if (r->state == AFTER_CLOSE) {
            while (i < n && reply_is_ws(buf[i]))
                i++;
            if (i < n)
                r->state = IN_CONTENT;
        } else {
            rc = reply_append(content, buf + i, n - i);
            i = n;
        }
    }
    if (rc == 0 && keep_from < n) {
        r->held = malloc(n - keep_from);
        if (!r->held)
            rc = -1;
        else {
            memcpy(r->held, buf + keep_from, n - keep_from);
            r->n_held = n - keep_from;
        }
    }
    free(buf);
    if (rc) {
        free(*reasoning);
        free(*content);
        *reasoning = *content = NULL;
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory splitting reasoning");
    }
    return 0;
}
