/* Speculative decoding in the engine: the proposer, its buffers and the
 * drafts of a step (verification is in postprocess.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

void plume_engine_on_preempt(void *ctx, plume_seq *seq)
{
    plume_engine *e = ctx;
    if (e->prop && e->prop_vt->release)
        e->prop_vt->release(e->prop, seq->id);
}

void plume_engine_free_spec(plume_engine *e)
{
    if (e->prop)
        e->prop_vt->destroy(e->prop);
    e->prop = NULL;
    e->prop_vt = NULL;
    e->spec_k = 0;
    e->sched.spec_k = 0;
    free(e->pseqs);
    free(e->drafts);
    free(e->draft_tokens);
    free(e->draft_probs);
    free(e->verify_work);
    free(e->verify_out);
    e->pseqs = NULL;
    e->drafts = NULL;
    e->draft_tokens = NULL;
    e->draft_probs = NULL;
    e->verify_work = NULL;
    e->verify_out = NULL;
}

int plume_engine_set_proposer(plume_engine *e, const plume_proposer_vtable *vt,
                              const plume_settings *settings, int32_t k, plume_error *err)
{
    if (e->sched.running.n > 0 || e->sched.waiting.n > 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the proposer can only be changed between runs; %d requests are still "
                         "running or waiting",
                         e->sched.running.n + e->sched.waiting.n);
    plume_engine_free_spec(e);
    if (!vt)
        return 0; /* speculation off */
    if (vt->interface_version == 1)
        return plume_err(err, PLUME_ERR_INVALID,
                         "proposer '%s' has interface version 1, older than this plume accepts "
                         "(%d: create takes the host, plume_proposer_host, and each "
                         "plume_propose_seq carries the request's sampling parameters); port it "
                         "to the current plume/proposer.h and rebuild",
                         vt->name ? vt->name : "?", PLUME_PROPOSER_INTERFACE_VERSION);
    if (vt->struct_size < offsetof(plume_proposer_vtable, accepted) ||
        vt->interface_version != PLUME_PROPOSER_INTERFACE_VERSION || !vt->create ||
        !vt->destroy || !vt->propose)
        return plume_err(err, PLUME_ERR_INVALID,
                         "proposer '%s' has interface version %u (size %u); plume expects "
                         "version %d with create, destroy and propose set",
                         vt->name ? vt->name : "?", vt->interface_version, vt->struct_size,
                         PLUME_PROPOSER_INTERFACE_VERSION);
    if (k < 1 || k > 64)
        return plume_err(err, PLUME_ERR_INVALID,
                         "num_speculative_tokens must be in [1, 64], got %d", k);
    const int32_t nv = plume_model_n_vocab(e->m), ns = e->p.max_num_seqs;
    /* logits for up to k+1 positions of every sequence of a step */
    float *lg = realloc(e->logits, sizeof(float) * (size_t)ns * (size_t)(k + 1) * (size_t)nv);
    if (!lg)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for speculative logits");
    e->logits = lg;
    e->logits_rows = ns * (k + 1);
    e->pseqs = calloc((size_t)ns, sizeof *e->pseqs);
    e->drafts = calloc((size_t)ns, sizeof *e->drafts);
    e->draft_tokens = malloc(sizeof(int32_t) * (size_t)ns * (size_t)k);
    e->draft_probs = malloc(sizeof(float) * (size_t)ns * (size_t)k * (size_t)nv);
    e->verify_work = malloc(sizeof(float) * 2 * (size_t)nv);
    e->verify_out = malloc(sizeof(int32_t) * (size_t)(k + 1));
    if (!e->pseqs || !e->drafts || !e->draft_tokens || !e->draft_probs || !e->verify_work ||
        !e->verify_out) {
        plume_engine_free_spec(e);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory for %d speculative tokens x %d sequences", k, ns);
    }
    /* slots a smaller (older) vtable lacks read as NULL */
    memset(&e->prop_copy, 0, sizeof e->prop_copy);
    memcpy(&e->prop_copy, vt,
           vt->struct_size < sizeof e->prop_copy ? vt->struct_size : sizeof e->prop_copy);
    plume_proposer_host host = {
        .struct_size = sizeof host,
        .registry = e->p.registry,
        .target = e->m,
        .n_vocab = nv,
        .n_ctx_train = plume_model_n_ctx_train(e->m),
        .max_seq_len = e->n_ctx,
        .max_tokens_per_step = e->p.max_batched_tokens,
        .max_seqs = ns,
        .k = k,
    };
    host.backend_vt = plume_model_backend(e->m, &host.backend);
    if ((e->prop_copy.validate && settings && e->prop_copy.validate(settings, err)) ||
        e->prop_copy.create(&host, settings, &e->prop, err)) {
        e->prop = NULL;
        plume_engine_free_spec(e);
        return -1;
    }
    e->prop_vt = &e->prop_copy;
    e->spec_k = k;
    e->sched.spec_k = k;
    return 0;
}

int plume_engine_propose(plume_engine *e, int32_t n_items, plume_error *err)
{
    int32_t n = 0;
    for (int32_t i = 0; i < n_items; i++) {
        plume_sched_item *it = &e->items[i];
        if (it->spec && it->seq->params.no_speculation) { /* the scheduler never plans this */
            it->spec = false;
            it->n = 1;
        }
        if (!it->spec)
            continue;
        it->draft = n;
        plume_seq *s = it->seq;
        e->pseqs[n] = (plume_propose_seq){s->id, s->tokens, s->n_tokens, it->n - 1,
                                          &s->params.sampling};
        e->drafts[n] = (plume_draft){e->draft_tokens + (size_t)n * e->spec_k, 0,
                                     e->draft_probs + (size_t)n * e->spec_k *
                                                          (size_t)plume_model_n_vocab(e->m),
                                     0};
        n++;
    }
    if (n == 0)
        return 0;
    if (e->prop_vt->propose(e->prop, e->pseqs, (size_t)n, e->drafts, err))
        return plume_err_prefix(err, "proposer '%s'", e->prop_vt->name);
    const int32_t nv = plume_model_n_vocab(e->m);
    for (int32_t i = 0; i < n_items; i++) {
        plume_sched_item *it = &e->items[i];
        if (!it->spec)
            continue;
        plume_draft *d = &e->drafts[it->draft];
        int32_t nd = d->n < 0 ? 0 : d->n > it->n - 1 ? it->n - 1 : d->n;
        for (int32_t t = 0; t < nd; t++)
            if (d->tokens[t] < 0 || d->tokens[t] >= nv)
                nd = t; /* an id outside the vocabulary ends the draft */
        plume_seq *s = it->seq;
        memcpy(s->tokens + s->n_tokens, d->tokens, sizeof(int32_t) * (size_t)nd);
        d->n = nd;
        it->n = 1 + nd;
        if (nd == 0)
            it->spec = false;
    }
    return 0;
}

int plume_proposer_host_load_model(const plume_proposer_host *host, const char *path,
                                   plume_model **out, plume_error *err)
{
    if (!host || host->struct_size < offsetof(plume_proposer_host, target) || !host->backend ||
        !host->backend_vt)
        return plume_err(err, PLUME_ERR_INVALID,
                         "plume_proposer_host_load_model needs the host the proposer's create "
                         "was given (with its backend instance); pass that pointer");
    if (!path || !path[0])
        return plume_err(err, PLUME_ERR_INVALID,
                         "no model path given to load for the proposer; set one in its settings");
    plume_load_params lp = plume_load_defaults();
    lp.registry = host->registry;
    lp.backend_vt = host->backend_vt;
    lp.backend = host->backend;
    return plume_model_load_ex(path, &lp, out, err);
}
