/* pd-ipc, decode side, whatever the transport: a fetch thread has the
 * transport fetch each request's segment from its prefill worker (its
 * remote_addr: handshake with identities, the transfer id, the bytes);
 * start_load (engine thread) copies staged segments into the request's
 * blocks and frees them.  Every transport wait is bounded by timeout_s, so
 * a dead or stuck prefill worker fails the load, never hangs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_ipc.h"
#include "plume/clock.h"

int pd_consumer_hello_reply(plume_kv_connector *c, pd_job *j, const pd_msg *m)
{
    if (m->type == PD_ERR) {
        snprintf(j->msg, sizeof j->msg, "the prefill worker at %.60s refused: %.380s",
                 j->xp.remote_addr, m->text);
        return -1;
    }
    if (m->type != PD_HELLO_OK) {
        pd_consumer_io_fail(c, j, "handshake", 'P');
        return -1;
    }
    return 0;
}

int pd_consumer_seg_reply(plume_kv_connector *c, pd_job *j, const pd_msg *m, size_t *bytes)
{
    if (m->type == PD_ERR) {
        snprintf(j->msg, sizeof j->msg, "%s", m->text);
        return -1;
    }
    size_t want = (size_t)c->kv.pool->n_layer * 2 * (size_t)m->n_blocks * pd_block_bytes(&c->ident);
    int32_t need_blocks = (j->n_tokens + c->ident.block_size - 1) / c->ident.block_size;
    if (m->type != PD_SEG || strcmp(m->id, j->xp.transfer_id) != 0 || m->n_blocks < 0 ||
        m->bytes != want || m->n_tokens < 0 ||
        (int64_t)m->n_blocks * c->ident.block_size < m->n_tokens) {
        snprintf(j->msg, sizeof j->msg,
                 "the prefill worker sent a malformed segment for transfer %s (%d tokens, "
                 "%llu bytes): are both workers the same plume version?",
                 j->xp.transfer_id, m->n_tokens, (unsigned long long)m->bytes);
        return -1;
    }
    if (m->n_tokens < j->n_tokens || m->n_blocks < need_blocks) {
        snprintf(j->msg, sizeof j->msg,
                 "transfer %s holds the KV of a %d-token prompt, shorter than this request's: "
                 "the prefill worker computed another prompt; send the decode worker the same "
                 "prompt (and chat template input) as the prefill worker",
                 j->xp.transfer_id, m->n_tokens);
        return -1;
    }
    j->seg_blocks = m->n_blocks;
    j->seg_tokens = m->n_tokens;
    j->seg_hash = m->tokens_hash;
    *bytes = want;
    return 0;
}

void pd_consumer_io_fail(plume_kv_connector *c, pd_job *j, const char *step, char kind)
{
    snprintf(j->msg, sizeof j->msg,
             "the prefill worker at %.200s %s during the %s (kv_connector.timeout_s %g s)",
             j->xp.remote_addr,
             kind == 'T'   ? "did not answer in time"
             : kind == 'P' ? "sent a malformed message"
                           : "went away",
             step, c->timeout_s);
}

static void *fetcher(void *arg)
{
    plume_kv_connector *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->stopping) /* queued jobs are freed by pd_consumer_stop */
            break;
        pd_job *j = NULL;
        for (int32_t i = 0; i < c->n_jobs && !j; i++)
            if (c->jobs[i]->state == PD_QUEUED)
                j = c->jobs[i];
        if (!j) {
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        j->state = PD_FETCHING;
        pthread_mutex_unlock(&c->mu);
        double t0 = plume_clock_seconds();
        int rc = c->tp->fetch(c, j);
        j->fetch_s = plume_clock_seconds() - t0;
        pthread_mutex_lock(&c->mu);
        if (j->cancelled) { /* the request went away meanwhile: the job is ours to free */
            if (rc == 0)
                c->tp->job_free(j);
            free(j);
            continue;
        }
        if (rc == 0) {
            j->state = PD_STAGED;
            c->st.live_segments++;
            c->st.live_bytes += (int64_t)j->bytes;
        } else {
            j->state = PD_FAILED;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (c->tp->fetch_end)
        c->tp->fetch_end(c);
    return NULL;
}

int pd_consumer_start(plume_kv_connector *c, plume_error *err)
{
    if (pthread_create(&c->thread, NULL, fetcher, c))
        return plume_err(err, PLUME_ERR_NOMEM, "cannot start the pd-ipc fetch thread");
    c->thread_started = true;
    return 0;
}

int pd_consumer_enqueue(plume_kv_connector *c, int64_t req_id, const plume_kv_transfer_params *xp,
                        int32_t n_tokens, plume_error *err)
{
    pd_job *j = calloc(1, sizeof *j);
    if (!j)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory queueing a KV load");
    j->req_id = req_id;
    j->xp = *xp;
    j->n_tokens = n_tokens;
    pthread_mutex_lock(&c->mu);
    if (c->n_jobs == c->cap_jobs) {
        int32_t cap = c->cap_jobs ? 2 * c->cap_jobs : 16;
        pd_job **g = realloc(c->jobs, sizeof *g * (size_t)cap);
        if (!g) {
            pthread_mutex_unlock(&c->mu);
            free(j);
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory queueing a KV load");
        }
        c->jobs = g;
        c->cap_jobs = cap;
    }
    c->jobs[c->n_jobs++] = j;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* Drops job i from the list (under mu); a staged one is unmapped. */
static void job_remove(plume_kv_connector *c, int32_t i)
{
    pd_job *j = c->jobs[i];
    c->jobs[i] = c->jobs[--c->n_jobs];
    if (j->state == PD_FETCHING) { /* the thread frees it when its fetch returns */
        j->cancelled = true;
        return;
    }
    if (j->state == PD_STAGED) {
        c->tp->job_free(j);
        c->st.live_segments--;
        c->st.live_bytes -= (int64_t)j->bytes;
    }
    free(j);
}

/* Copies a staged job into its blocks (engine thread, no lock needed for
 * the copy: a STAGED job is left alone by the fetch thread). */
static int copy_in(plume_kv_connector *c, const pd_job *j, const plume_kv_req_blocks *r,
                   plume_error *err)
{
    const plume_kv_pool *p = c->kv.pool;
    size_t bb = pd_block_bytes(&c->ident);
    const unsigned char *map = j->map;
    for (int32_t l = 0; l < p->n_layer; l++)
        for (int kv = 0; kv < 2; kv++)
            for (int32_t i = 0; i < r->n_blocks; i++) {
                size_t src = (((size_t)l * 2 + (size_t)kv) * (size_t)j->seg_blocks + (size_t)i) * bb;
                size_t dst = (size_t)l * p->layer_stride +
                             (size_t)r->block_ids[i] * (size_t)p->block_size * p->slot_stride;
                if (c->kv.bvt->upload(c->kv.b, kv ? p->v : p->k, dst, map + src, bb, err))
                    return -1;
            }
    return 0;
}

int pd_consumer_load(plume_kv_connector *c, const plume_kv_step_meta *meta, plume_error *err)
{
    (void)err;
    pthread_mutex_lock(&c->mu);
    for (int32_t k = 0; k < meta->n_loads; k++) {
        const plume_kv_req_blocks *r = &meta->loads[k];
        for (int32_t i = 0; i < c->n_jobs; i++) {
            pd_job *j = c->jobs[i];
            if (j->req_id != r->req_id)
                continue;
            if (j->state == PD_STAGED &&
                (r->n_prompt < j->seg_tokens ||
                 pd_tokens_hash(r->prompt, j->seg_tokens) != j->seg_hash)) {
                /* KV of another prompt must never be used: fail it */
                j->state = PD_FAILED;
                c->tp->job_free(j);
                c->st.live_segments--;
                c->st.live_bytes -= (int64_t)j->bytes;
                snprintf(j->msg, sizeof j->msg,
                         "transfer %.64s holds the KV of another prompt than this request's; "
                         "send the decode worker the same prompt (and chat template input) as "
                         "the prefill worker",
                         j->xp.transfer_id);
            }
            if (j->state == PD_STAGED) {
                plume_error e2 = {0};
                double t0 = plume_clock_seconds();
                int crc = copy_in(c, j, r, &e2);
                if (crc == 0 && c->log_transfers)
                    fprintf(stderr,
                            "plume pd-ipc: transfer %s: %d tokens, %zu bytes: fetched (%s) in "
                            "%.2f ms, copied into the cache in %.2f ms\n",
                            j->xp.transfer_id, j->seg_tokens, j->bytes, c->tp->name,
                            j->fetch_s * 1e3, (plume_clock_seconds() - t0) * 1e3);
                if (crc) {
                    j->state = PD_FAILED; /* job_remove below must not free twice */
                    c->tp->job_free(j);
                    c->st.live_segments--;
                    c->st.live_bytes -= (int64_t)j->bytes;
                    snprintf(j->msg, sizeof j->msg, "copying the KV into the cache failed: %.400s",
                             e2.msg);
                } else {
                    c->st.received++;
                    pd_push_id(&c->received, &c->n_received, &c->cap_received, j->req_id);
                    job_remove(c, i);
                    break;
                }
            }
            if (j->state == PD_FAILED) {
                c->st.failed++;
                char *msg = strdup(j->msg);
                if (pd_push_id(&c->failed, &c->n_failed, &c->cap_failed, j->req_id) == 0) {
                    char **fm = realloc(c->failed_msg, sizeof *fm * (size_t)c->cap_failed);
                    if (fm) {
                        c->failed_msg = fm;
                        fm[c->n_failed - 1] = msg;
                        msg = NULL;
                    } else {
                        c->n_failed--;
                    }
                }
                free(msg);
                job_remove(c, i);
            }
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void pd_consumer_cancel(plume_kv_connector *c, int64_t req_id)
{
    pthread_mutex_lock(&c->mu);
    for (int32_t i = 0; i < c->n_jobs; i++)
        if (c->jobs[i]->req_id == req_id) {
            job_remove(c, i);
            break;
        }
    pthread_mutex_unlock(&c->mu);
}

void pd_consumer_stop(plume_kv_connector *c)
{
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->thread_started) {
        pthread_join(c->thread, NULL); /* a fetch in progress ends within timeout_s */
        c->thread_started = false;
    }
    while (c->n_jobs > 0)
        job_remove(c, c->n_jobs - 1);
    free(c->jobs);
    c->jobs = NULL;
}
