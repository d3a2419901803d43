/* Speculative decoding in the engine: the proposer, its buffers and the
 * drafts of a step (verification is in postprocess.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "plume/clock.h"
#include "plume/struct_size.h"

void plume_engine_proposer_forget(void *ctx, plume_seq *seq)
{
    plume_engine *e = ctx;
    if (e->prop && e->prop_vt->release) {
        double t0 = plume_clock_seconds();
        e->prop_vt->release(e->prop, seq->id);
        e->spec_prop_total_s += plume_clock_seconds() - t0;
    }
}

void plume_engine_proposer_accepted(plume_engine *e, int64_t seq_id, int32_t n_drafted,
                                    int32_t n_accepted)
{
    if (!e->prop_vt->accepted)
        return;
    double t0 = plume_clock_seconds();
    e->prop_vt->accepted(e->prop, seq_id, n_drafted, n_accepted);
    e->spec_prop_total_s += plume_clock_seconds() - t0;
}

void plume_engine_proposer_usage(const plume_engine *e, plume_proposer_usage *out)
{
    memset(out, 0, sizeof *out);
    if (!e->prop)
        return;
    out->seconds = e->spec_prop_total_s;
    out->propose_calls = e->spec_prop_calls;
    const int64_t ns = e->p.max_num_seqs, k = e->spec_k, nv = plume_model_n_vocab(e->m);
    out->engine_bytes = ns * k * nv * (int64_t)sizeof(float) /* logits rows past the first */ +
                        ns * k * (nv * (int64_t)sizeof(float) + (int64_t)sizeof(int32_t)) +
                        ns * (int64_t)(sizeof *e->pseqs + sizeof *e->drafts) +
                        2 * nv * (int64_t)sizeof(float) + (k + 1) * (int64_t)sizeof(int32_t);
    out->memory = (plume_proposer_memory){-1, -1, -1};
    if (e->prop_vt->memory)
        e->prop_vt->memory(e->prop, &out->memory);
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
    plume_struct_copy(&e->prop_copy, sizeof e->prop_copy, vt);
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
        .host_private = e, /* plume_proposer_host_load_model counts its loads into e */
    };
    host.backend_vt = plume_model_backend(e->m, &host.backend);
    int rc = (e->prop_copy.validate && settings && e->prop_copy.validate(settings, err)) ||
             e->prop_copy.create(&host, settings, &e->prop, err);
    if (rc) {
        e->prop = NULL;
        plume_engine_free_spec(e);
        return -1;
    }
    e->prop_vt = &e->prop_copy;
    e->spec_k = k;
    e->sched.spec_k = k;
    /* the averages belong to the proposer that produced them */
    e->spec_n_obs = e->spec_steps_obs = e->spec_step_n = 0;
    e->spec_step_drafted = e->spec_step_accepted = 0;
    e->spec_drafted_avg = e->spec_accepted_avg = e->spec_propose_s = 0.0;
    e->spec_skip_run = 0;
    e->spec_prop_total_s = 0.0;
    e->spec_prop_calls = 0;
    return 0;
}

int plume_engine_set_spec_policy(plume_engine *e, bool adaptive, int32_t disable_above_batch,
                                 plume_error *err)
{
    if (e->sched.running.n > 0 || e->sched.waiting.n > 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the speculation policy can only be changed between runs; %d requests "
                         "are still running or waiting",
                         e->sched.running.n + e->sched.waiting.n);
    if (disable_above_batch < -1)
        return plume_err(err, PLUME_ERR_INVALID,
                         "disable_above_batch must be -1 (auto), 0 (never) or a batch size "
                         "N > 0, got %d",
                         disable_above_batch);
    e->p.spec_adaptive = adaptive;
    e->p.spec_disable_above_batch = disable_above_batch;
    e->sched.spec_adaptive = adaptive;
    e->spec_skip_run = 0;
    return 0;
}

/* ---- the cost model (disable_above_batch: auto) ---- */

#define AVG_W 0.25      /* weight of a new forward time */
#define SPEC_AVG_W 0.25 /* weight of a step's mean drafted/accepted/proposer time */
#define RATE_W 0.5      /* weight of a new step in a sequence's acceptance average */
#define EXPLORE_EVERY 8  /* auto drafts again after this many steps off, to re-measure */
#define WARM_OBS 16      /* sequence-steps averaged before auto judges */
#define SKIP_MARGIN 1.1  /* auto skips drafts when going without is this much faster */

void plume_engine_spec_time_forward(plume_engine *e, int32_t positions, double seconds)
{
    if (positions < 1 || positions > e->fw_cap)
        return;
    double *t = &e->fw_time[positions];
    *t = *t > 0 ? (1 - AVG_W) * *t + AVG_W * seconds : seconds;
}

/* The forward time of n (possibly fractional) positions, interpolated
 * between the nearest measured counts around it; < 0 when n is not
 * bracketed by measurements (nothing below or above it). */
static double forward_time(const plume_engine *e, double n)
{
    if (n < 1 || n > e->fw_cap)
        return -1;
    int32_t lo = (int32_t)n, hi = lo < n ? lo + 1 : lo;
    while (lo >= 1 && e->fw_time[lo] <= 0)
        lo--;
    while (hi <= e->fw_cap && e->fw_time[hi] <= 0)
        hi++;
    if (lo < 1 || hi > e->fw_cap)
        return -1;
    if (hi == lo)
        return e->fw_time[lo];
    double f = (n - lo) / (double)(hi - lo);
    return (1 - f) * e->fw_time[lo] + f * e->fw_time[hi];
}

void plume_engine_spec_observe(plume_engine *e, plume_seq *s, int32_t n_drafted,
                               int32_t n_accepted)
{
    if (n_drafted > 0)
        s->spec_rate = (float)((1 - RATE_W) * s->spec_rate +
                               RATE_W * (double)n_accepted / (double)n_drafted);
    e->spec_step_n++; /* averaged per step by fold_step */
    e->spec_step_drafted += n_drafted;
    e->spec_step_accepted += n_accepted;
}

/* The last step's mean drafted and accepted tokens per speculating
 * sequence into the moving averages (the plain mean over the first steps,
 * then weight SPEC_AVG_W per step, whatever the batch size). */
static void fold_step(plume_engine *e)
{
    if (e->spec_step_n == 0)
        return;
    e->spec_n_obs += e->spec_step_n;
    e->spec_steps_obs++;
    double w = 1.0 / (double)e->spec_steps_obs;
    if (w < SPEC_AVG_W)
        w = SPEC_AVG_W;
    e->spec_drafted_avg = (1 - w) * e->spec_drafted_avg + w * e->spec_step_drafted / e->spec_step_n;
    e->spec_accepted_avg =
        (1 - w) * e->spec_accepted_avg + w * e->spec_step_accepted / e->spec_step_n;
    e->spec_step_n = 0;
    e->spec_step_drafted = e->spec_step_accepted = 0;
}

/* Whether drafting pays for a step of n_dec decoding sequences, n_spec of
 * which would draft: tokens per second with drafts,
 *   (n_dec + n_spec * accepted) / (T(n_dec + n_spec * drafted) + n_spec * propose_s),
 * against n_dec / T(n_dec) without: drafts pay unless going without is
 * SKIP_MARGIN times faster.  Unmeasured terms are measured first: fewer
 * than WARM_OBS sequence-steps averaged or T of the drafting step unknown
 * -> draft; T(n_dec) unknown -> do not. */
static bool drafts_pay(const plume_engine *e, int32_t n_dec, int32_t n_spec)
{
    if (e->spec_n_obs < WARM_OBS)
        return true;
    double t_on = forward_time(e, n_dec + n_spec * e->spec_drafted_avg);
    if (t_on < 0)
        return true;
    double t_off = forward_time(e, n_dec);
    if (t_off < 0)
        return false;
    t_on += n_spec * e->spec_propose_s;
    /* drafting stops only when going without is clearly faster: timings on
     * a shared machine are noisy, and a wrong skip loses what drafts win */
    return (n_dec + n_spec * e->spec_accepted_avg) * t_off * SKIP_MARGIN >= n_dec * t_on;
}

void plume_engine_spec_policy(plume_engine *e)
{
    e->spec_off_this_step = false;
    fold_step(e);
    const int32_t bound = e->p.spec_disable_above_batch;
    if (!e->prop || bound == 0)
        return;
    int32_t n_dec = 0, n_spec = 0;
    for (int32_t i = 0; i < e->sched.running.n; i++) {
        const plume_seq *s = e->sched.running.items[i];
        if (s->n_tokens - s->n_computed != 1)
            continue; /* prefilling */
        n_dec++;
        n_spec += plume_seq_spec_k(s, e->spec_k, e->p.spec_adaptive) > 0;
    }
    if (n_spec == 0)
        return;
    bool off;
    if (bound > 0) {
        off = n_dec > bound;
    } else {
        off = !drafts_pay(e, n_dec, n_spec);
        if (off && ++e->spec_skip_run > EXPLORE_EVERY)
            off = false; /* re-measure acceptance and the drafting step's cost */
        if (!off)
            e->spec_skip_run = 0;
    }
    if (off) {
        e->spec_off_this_step = true;
        e->sched.spec_k = 0;
        e->stats.spec_steps_skipped++;
    }
}

void plume_engine_spec_restore(plume_engine *e)
{
    if (e->prop)
        e->sched.spec_k = e->spec_k;
}

int plume_engine_propose(plume_engine *e, int32_t n_items, plume_error *err)
{
    int32_t n = 0;
    for (int32_t i = 0; i < n_items; i++) {
        plume_sched_item *it = &e->items[i];
        if (it->spec && plume_seq_spec_k(it->seq, e->spec_k, false) == 0) {
            /* the scheduler never plans this */
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
    double t0 = plume_clock_seconds();
    if (e->prop_vt->propose(e->prop, e->pseqs, (size_t)n, e->drafts, err))
        return plume_err_prefix(err, "proposer '%s'", e->prop_vt->name);
    double spent = plume_clock_seconds() - t0, per_seq = spent / n;
    e->spec_prop_total_s += spent;
    e->spec_prop_calls++;
    e->spec_propose_s = e->spec_propose_s > 0
                            ? (1 - SPEC_AVG_W) * e->spec_propose_s + SPEC_AVG_W * per_seq
                            : per_seq;
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
        if (nd == 0) { /* counts for the averages: a step that drafted nothing */
            it->spec = false;
            plume_engine_spec_observe(e, s, 0, 0);
        }
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
    if (plume_model_load_ex(path, &lp, out, err))
        return -1;
    if (PLUME_HAS_MEMBER(plume_proposer_host, host, host_private) && host->host_private)
        ((plume_engine *)host->host_private)->stats.proposer_model_loads++;
    return 0;
}
