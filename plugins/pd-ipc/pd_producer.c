/* pd-ipc, prefill side, whatever the transport: save copies a finished
 * prompt's KV blocks into a new segment (pd_transport.h makes it); the
 * transport's listener thread serves segments to decode workers with the
 * helpers here (the handshake's identity check, finding a transfer id) and
 * drops those nobody claimed, or nobody finished reading, within
 * timeout_s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_ipc.h"
#include "plume/clock.h"

void pd_producer_drop(plume_kv_connector *c, int32_t i)
{
    if (c->segs[i].block_ids) { /* the engine may free the blocks now */
        pd_push_id(&c->sent, &c->n_sent, &c->cap_sent, c->segs[i].req_id);
        free(c->segs[i].block_ids);
        c->segs[i].block_ids = NULL;
    }
    c->tp->seg_free(c, &c->segs[i]);
    c->st.live_segments--;
    c->st.live_bytes -= (int64_t)c->segs[i].bytes;
    c->segs[i] = c->segs[--c->n_segs];
}

void pd_producer_expire(plume_kv_connector *c)
{
    double now = plume_clock_seconds();
    pthread_mutex_lock(&c->mu);
    for (int32_t i = c->n_segs - 1; i >= 0; i--) {
        const pd_seg *s = &c->segs[i];
        if (s->claimed_by || now - s->t_created <= c->timeout_s)
            continue;
        fprintf(stderr,
                "plume pd-ipc: transfer %s was not claimed by a decode worker within timeout_s "
                "(%g s); its KV is dropped\n",
                s->id, c->timeout_s);
        pd_producer_drop(c, i);
        c->st.expired++;
    }
    pthread_mutex_unlock(&c->mu);
}

int pd_producer_hello(plume_kv_connector *c, const pd_msg *hello, pd_msg *reply)
{
    char why[400];
    if (pd_ident_check(&hello->ident, &c->ident, why, sizeof why)) {
        fprintf(stderr, "plume pd-ipc: refused a decode worker: %s\n", why);
        *reply = pd_msg_new(PD_ERR);
        snprintf(reply->text, sizeof reply->text, "%s", why);
        return -1;
    }
    *reply = pd_msg_new(PD_HELLO_OK);
    reply->ident = c->ident;
    return 0;
}

int32_t pd_producer_find(plume_kv_connector *c, const char *id, pd_msg *reply)
{
    for (int32_t i = 0; i < c->n_segs; i++)
        if (strcmp(c->segs[i].id, id) == 0 && !c->segs[i].claimed_by)
            return i;
    *reply = pd_msg_new(PD_ERR);
    snprintf(reply->text, sizeof reply->text,
             "this prefill worker holds no KV for transfer %.64s (already claimed, expired after "
             "timeout_s, or the prefill worker restarted); send the request to the prefill "
             "worker again",
             id);
    return -1;
}

pd_msg pd_producer_seg_msg(const pd_seg *seg)
{
    pd_msg r = pd_msg_new(PD_SEG);
    memcpy(r.id, seg->id, sizeof r.id);
    r.n_tokens = seg->n_tokens;
    r.n_blocks = seg->n_blocks;
    r.bytes = seg->bytes;
    r.tokens_hash = seg->tokens_hash;
    return r;
}

int pd_producer_start(plume_kv_connector *c, plume_error *err)
{
    return c->tp->serve_start(c, err);
}

/* Copies one request's blocks into a new segment. */
static int save_one(plume_kv_connector *c, const plume_kv_req_blocks *r, pd_seg *out,
                    plume_error *err)
{
    const plume_kv_pool *p = c->kv.pool;
    size_t bb = pd_block_bytes(&c->ident);
    size_t bytes = (size_t)p->n_layer * 2 * (size_t)r->n_blocks * bb;
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->req_id = r->req_id;
    snprintf(out->id, sizeof out->id, "%s-%lld", c->nonce, (long long)r->req_id);
    int32_t nt = r->n_tokens < r->n_prompt ? r->n_tokens : r->n_prompt;
    int in_place = c->tp->seg_in_place ? c->tp->seg_in_place(c, out, r->block_ids, r->n_blocks) : 0;
    if (in_place < 0)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    if (!in_place) { /* a copy: the blocks go back to the engine at once */
        unsigned char *map = NULL;
        if (c->tp->seg_create(c, out, bytes, &map, err))
            return -1;
        int rc = 0;
        for (int32_t l = 0; l < p->n_layer && !rc; l++)
            for (int kv = 0; kv < 2 && !rc; kv++)
                for (int32_t i = 0; i < r->n_blocks && !rc; i++) {
                    size_t src = (size_t)l * p->layer_stride +
                                 (size_t)r->block_ids[i] * (size_t)p->block_size * p->slot_stride;
                    size_t dst =
                        (((size_t)l * 2 + (size_t)kv) * (size_t)r->n_blocks + (size_t)i) * bb;
                    rc = c->kv.bvt->download(c->kv.b, map + dst, kv ? p->v : p->k, src, bb, err);
                }
        c->tp->seg_filled(out, map);
        if (rc) {
            c->tp->seg_free(c, out);
            return -1;
        }
    }
    out->bytes = bytes;
    out->n_tokens = nt;
    out->n_blocks = r->n_blocks;
    out->tokens_hash = pd_tokens_hash(r->prompt, nt);
    out->t_created = plume_clock_seconds();
    return 0;
}

int pd_producer_save(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err)
{
    int32_t saved = 0;
    for (int32_t i = 0; i < meta->n_saves; i++) {
        const plume_kv_req_blocks *r = &meta->saves[i];
        pd_seg seg;
        plume_error e2 = {0};
        int rc = save_one(c, r, &seg, &e2);
        pthread_mutex_lock(&c->mu);
        if (rc == 0 && c->n_segs == c->cap_segs) {
            int32_t cap = c->cap_segs ? 2 * c->cap_segs : 16;
            pd_seg *g = realloc(c->segs, sizeof *g * (size_t)cap);
            if (g) {
                c->segs = g;
                c->cap_segs = cap;
            } else {
                free(seg.block_ids);
                c->tp->seg_free(c, &seg);
                rc = plume_err(&e2, PLUME_ERR_NOMEM, "out of memory");
            }
        }
        bool in_place = rc == 0 && seg.block_ids;
        if (rc == 0) {
            c->segs[c->n_segs++] = seg;
            c->st.live_segments++;
            c->st.live_bytes += (int64_t)seg.bytes;
            saved++;
        } else {
            c->st.failed++;
            fprintf(stderr,
                    "plume pd-ipc: could not save request %lld's KV (%s); its decode worker's "
                    "load will fail\n",
                    (long long)r->req_id, e2.msg);
        }
        /* either way the blocks are no longer needed, unless the segment
         * is them (reported sent when it is dropped) */
        if (!in_place)
            pd_push_id(&c->sent, &c->n_sent, &c->cap_sent, r->req_id);
        pthread_mutex_unlock(&c->mu);
    }
    if (saved == 0 && meta->n_saves > 0)
        return plume_err(err, PLUME_ERR_NOMEM, "no request's KV could be saved");
    return 0;
}

void pd_producer_stop(plume_kv_connector *c)
{
    if (c->thread_started) {
        pthread_mutex_lock(&c->mu);
        c->stopping = true;
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        c->thread_started = false;
    }
    if (c->registered)
        c->tp->serve_stop(c);
    pthread_mutex_lock(&c->mu);
    while (c->n_segs > 0)
        pd_producer_drop(c, c->n_segs - 1);
    pthread_mutex_unlock(&c->mu);
    free(c->segs);
    c->segs = NULL;
}
