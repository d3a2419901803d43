/* The streaming reader of gpt-oss's harmony replies (plume/chat_parse.h).
 *
 * A reply is a run of messages, each a header and a body:
 *   [<|start|>assistant[ to=R]]<|channel|>C[ to=R][ [<|constrain|>]T]<|message|>BODY
 * ended by <|end|> (the next message follows), <|call|> or <|return|> (the
 * reply ends; those two end generation, so they are usually not in the
 * text).  The generation prompt already holds the first "<|start|>assistant".
 * Channel "analysis" is reasoning; "final" and "commentary" are the answer;
 * a recipient "functions.NAME" makes the body a call of NAME with the body
 * as its JSON arguments, in any channel (the formats OpenAI's harmony
 * documentation and llama.cpp's gpt-oss parser accept).  Text that does not
 * follow the format is passed on as content, never dropped. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "plume/chat_parse.h"
#include "template/reply_scan.h"

enum { H_HEAD, H_BODY, H_RAW };
enum { K_REASONING, K_CONTENT, K_CALL };

/* A header longer than this is not one (the longest real ones, with a
 * recipient and a constraint, are under 100 bytes). */
#define MAX_HEADER 512

struct plume_harmony {
    bool calls;           /* read recipients as tool calls */
    uint64_t seed, n_ids;
    int state, kind;
    char *name;           /* K_CALL: the function's name */
    size_t scanned;       /* K_CALL: body bytes already searched for an end in vain */
    reply_buf b;          /* undecided text */
};

typedef struct hout {
    char *reasoning, *content;
    plume_tool_call *calls;
    size_t n_calls;
    bool oom;
} hout;

static const char *const ENDS[] = {"<|end|>", "<|call|>", "<|return|>"};
static const char START[] = "<|start|>", CHANNEL[] = "<|channel|>", MESSAGE[] = "<|message|>";

plume_harmony *plume_harmony_new(bool calls, uint64_t seed)
{
    plume_harmony *h = calloc(1, sizeof *h);
    if (h) {
        h->calls = calls;
        h->seed = seed;
    }
    return h;
}

void plume_harmony_free(plume_harmony *h)
{
    if (!h)
        return;
    free(h->name);
    free(h->b.p);
    free(h);
}

bool plume_template_is_harmony(const char *t)
{
    return t && strstr(t, CHANNEL) && strstr(t, MESSAGE);
}

static void put(hout *o, char **dst, const char *s, size_t n)
{
    if (!o->oom && reply_append(dst, s, n))
        o->oom = true;
}

/* True when s[0..n) may still become the start of a header. */
static bool header_may_start(const char *s, size_t n)
{
    /* (a first message may open with its recipient: the generation prompt
     * ends "<|start|>assistant", and leading blanks are skipped) */
    static const char *const OPENERS[] = {START, CHANNEL, "to="};
    for (size_t i = 0; i < sizeof OPENERS / sizeof OPENERS[0]; i++) {
        size_t k = strlen(OPENERS[i]);
        if (!memcmp(s, OPENERS[i], n < k ? n : k))
            return true;
    }
    return false;
}

/* The value after "to=" in h[0..n) (up to a blank or "<|"), into *r and *rn;
 * false when there is none. */
static bool recipient(const char *h, size_t n, const char **r, size_t *rn)
{
    const char *t = reply_find(h, n, "to=");
    if (!t)
        return false;
    const char *s = t + 3, *e = s;
    while (e < h + n && !reply_is_ws(*e) && !(e + 1 < h + n && e[0] == '<' && e[1] == '|'))
        e++;
    *r = s;
    *rn = (size_t)(e - s);
    return *rn > 0;
}

/* Reads the header h[0..n) (without "<|message|>"): sets p->kind and
 * p->name.  1, 0 when it is not a header, -1 on OOM. */
static int read_header(plume_harmony *p, const char *h, size_t n)
{
    const char *c = reply_find(h, n, CHANNEL);
    const char *r = NULL;
    size_t rn = 0;
    bool has_r = recipient(h, n, &r, &rn) && !(rn == 9 && !memcmp(r, "assistant", 9));
    if (!c && !has_r)
        return 0;
    bool analysis = false;
    if (c) {
        const char *ch = c + strlen(CHANNEL);
        size_t left = n - (size_t)(ch - h);
        analysis = left >= 8 && !memcmp(ch, "analysis", 8) &&
                   (left == 8 || reply_is_ws(ch[8]) || ch[8] == '<');
    }
    free(p->name);
    p->name = NULL;
    if (has_r && p->calls) {
        if (rn > 10 && !memcmp(r, "functions.", 10)) {
            r += 10;
            rn -= 10;
        }
        if (!(p->name = reply_dup(r, rn)))
            return -1;
        p->kind = K_CALL;
    } else {
        p->kind = analysis ? K_REASONING : K_CONTENT;
    }
    return 1;
}

/* The longest tag find_end looks for ("<|return|>"). */
#define END_TAG_MAX 10

/* The first message end or new message start in b[0..n), searched from
 * from: its offset in *at and length in *len (0 for a <|start|>, which the
 * next header reads); false when there is none. */
static bool find_end(const char *b, size_t n, size_t from, size_t *at, size_t *len)
{
    b += from;
    n -= from;
    bool found = false;
    for (size_t i = 0; i <= sizeof ENDS / sizeof ENDS[0]; i++) {
        const char *tag = i < sizeof ENDS / sizeof ENDS[0] ? ENDS[i] : START;
        const char *f = reply_find(b, n, tag);
        if (f && (!found || (size_t)(f - b) < *at)) {
            *at = (size_t)(f - b);
            *len = i < sizeof ENDS / sizeof ENDS[0] ? strlen(tag) : 0;
            found = true;
        }
    }
    *at += from;
    return found;
}

/* How many bytes at the end of b[0..n) may begin a message end or start. */
static size_t end_partial(const char *b, size_t n)
{
    size_t most = reply_partial_tag(b, n, START);
    for (size_t i = 0; i < sizeof ENDS / sizeof ENDS[0]; i++) {
        size_t k = reply_partial_tag(b, n, ENDS[i]);
        if (k > most)
            most = k;
    }
    return most;
}

/* Emits the call p->name with arguments b[0..n), or the text as content
 * when it is not a JSON object. */
static void emit_call(plume_harmony *p, hout *o, const char *b, size_t n)
{
    json_t *j = json_loadb(b, n, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        put(o, &o->content, b, n);
        return;
    }
    plume_tool_call c = {.id = reply_call_id(p->seed, &p->n_ids),
                         .name = p->name,
                         .arguments = json_dumps(j, 0)};
    p->name = NULL;
    json_decref(j);
    if (reply_push_call(&o->calls, &o->n_calls, c))
        o->oom = true;
}

/* Consumes what it can of p->b; returns the bytes consumed. */
static size_t step(plume_harmony *p, hout *o, bool final)
{
    const char *b = p->b.p;
    size_t n = p->b.n;
    if (p->state == H_RAW) {
        put(o, &o->content, b, n);
        return n;
    }
    if (p->state == H_HEAD) {
        size_t ws = 0;
        while (ws < n && reply_is_ws(b[ws]))
            ws++;
        if (ws == n)
            return final ? (put(o, &o->content, b, n), n) : 0;
        /* A header starts with an opener and is at most MAX_HEADER long;
         * the same test decides on a prefix, so that text read in pieces
         * is judged as it is whole. */
        const char *m = reply_find(b + ws, n - ws, MESSAGE);
        size_t hl = m ? (size_t)(m - (b + ws)) : 0;
        int rc = m && hl <= MAX_HEADER && header_may_start(b + ws, hl)
                     ? read_header(p, b + ws, hl)
                     : 0;
        if (rc < 0) {
            o->oom = true;
            return 0;
        }
        if (rc) {
            p->state = H_BODY;
            p->scanned = 0;
            return (size_t)(m - b) + strlen(MESSAGE);
        }
        if (m || final || !header_may_start(b + ws, n - ws) ||
            n - ws > MAX_HEADER + strlen(MESSAGE) - 1)
            p->state = H_RAW; /* not harmony: the rest is plain answer text */
        return 0;
    }
    /* H_BODY */
    size_t at = 0, len = 0;
    /* a call's body is held whole until it ends: search only what is new
     * (less a tag's length that may straddle the old end) */
    size_t from = p->kind == K_CALL && p->scanned > END_TAG_MAX ? p->scanned - END_TAG_MAX : 0;
    bool ended = find_end(b, n, from, &at, &len);
    if (p->kind == K_CALL) {
        if (!ended && !final) {
            p->scanned = n;
            return 0;
        }
        p->scanned = 0;
        size_t body = ended ? at : n;
        emit_call(p, o, b, body);
        p->state = H_HEAD;
        return ended ? at + len : n;
    }
    char **dst = p->kind == K_REASONING ? &o->reasoning : &o->content;
    if (ended) {
        put(o, dst, b, at);
        p->state = H_HEAD;
        return at + len;
    }
    size_t keep = final ? 0 : end_partial(b, n);
    put(o, dst, b, n - keep);
    return n - keep;
}

int plume_harmony_feed(plume_harmony *p, const char *text, size_t len, bool final,
                       char **reasoning, char **content, plume_tool_call **calls,
                       size_t *n_calls, plume_error *err)
{
    *reasoning = *content = NULL;
    *calls = NULL;
    *n_calls = 0;
    if (reply_buf_add(&p->b, text, len))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading a harmony reply");
    hout o = {0};
    while (!o.oom) {
        int before = p->state;
        size_t used = p->b.n ? step(p, &o, final) : 0;
        if (used)
            reply_buf_drop(&p->b, used);
        else if (p->state == before || !p->b.n)
            break;
    }
    if (o.oom) {
        free(o.reasoning);
        free(o.content);
        plume_tool_calls_free(o.calls, o.n_calls);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory reading a harmony reply");
    }
    *reasoning = o.reasoning;
    *content = o.content;
    *calls = o.calls;
    *n_calls = o.n_calls;
    return 0;
}
