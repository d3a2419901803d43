/* Carrying out a scheduler provider's plan: the rules of plume/scheduler.h. */
#include "engine/scheduler.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/builtin.h"
#include "plume/struct_size.h"

int plume_queue_reserve(plume_seq_queue *q, int32_t n)
{
    if (n <= q->cap)
        return 0;
    plume_seq **it = realloc(q->items, sizeof *it * (size_t)n);
    if (!it)
        return -1;
    q->items = it;
    q->cap = n;
    return 0;
}

/* Room for one more item: the capacity doubles (16 at first). */
static int grow(plume_seq_queue *q)
{
    if (q->n < q->cap)
        return 0;
    return plume_queue_reserve(q, q->cap ? 2 * q->cap : 16);
}

int plume_queue_push_back(plume_seq_queue *q, plume_seq *s)
{
    if (grow(q))
        return -1;
    q->items[q->n++] = s;
    return 0;
}

int plume_queue_push_front(plume_seq_queue *q, plume_seq *s)
{
    if (grow(q))
        return -1;
    memmove(q->items + 1, q->items, sizeof *q->items * (size_t)q->n);
    q->items[0] = s;
    q->n++;
    return 0;
}

void plume_queue_remove_at(plume_seq_queue *q, int32_t i)
{
    memmove(q->items + i, q->items + i + 1, sizeof *q->items * (size_t)(q->n - i - 1));
    q->n--;
}

bool plume_queue_remove(plume_seq_queue *q, const plume_seq *s)
{
    for (int32_t i = 0; i < q->n; i++)
        if (q->items[i] == s) {
            plume_queue_remove_at(q, i);
            return true;
        }
    return false;
}

void plume_queue_free(plume_seq_queue *q)
{
    free(q->items);
    memset(q, 0, sizeof *q);
}

void plume_sched_drop(plume_scheduler *s, plume_seq *seq)
{
    plume_bm_release(s->bm, &seq->bt);
    /* a finished sequence was running, or waiting if it never ran or was
     * preempted; only scan the queue it can be in */
    if (!plume_queue_remove(&s->running, seq))
        plume_queue_remove(&s->waiting, seq);
}

int plume_sched_init(plume_scheduler *s, const plume_scheduler_vtable *vt,
                     const plume_settings *settings, bool mixed, plume_error *err)
{
    if (!vt)
        vt = &plume_builtin_continuous;
    const char *name = vt->name ? vt->name : "?";
    if (!PLUME_HAS_MEMBER(plume_scheduler_vtable, vt, plan) ||
        vt->interface_version < 1 || vt->interface_version > PLUME_SCHEDULER_INTERFACE_VERSION)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler '%s' has interface version %u (vtable size %u); plume expects "
                         "version 1..%d with a vtable of at least %zu bytes: rebuild it against "
                         "this plume's headers",
                         name, vt->interface_version, vt->struct_size,
                         PLUME_SCHEDULER_INTERFACE_VERSION,
                         offsetof(plume_scheduler_vtable, plan) + sizeof vt->plan);
    /* slots a smaller (older) vtable lacks read as NULL */
    plume_struct_copy(&s->vt, sizeof s->vt, vt);
    if (!s->vt.create != !s->vt.destroy)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler '%s' sets only one of create and destroy; set both or "
                         "neither", name);
    if (s->vt.plan && !s->vt.create)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler '%s' has a plan slot but no create and destroy; a plan "
                         "needs its instance", name);
    s->picks = calloc((size_t)s->max_num_seqs, sizeof *s->picks);
    if (!s->picks)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the scheduler");
    if (s->vt.validate && settings && s->vt.validate(settings, err))
        return plume_err_prefix(err, "scheduler '%s'", name);
    if (s->vt.create && s->vt.create(settings, &s->policy, err)) {
        s->policy = NULL;
        return plume_err_prefix(err, "scheduler '%s'", name);
    }
    if (s->vt.plan) {
        s->plan = s->vt.plan;
        s->planner = s->policy;
    } else { /* the built-in plan, the provider's instance kept alongside */
        if (builtin_continuous_create(mixed, &s->planner, err))
            return -1;
        s->plan = plume_builtin_continuous.plan;
    }
    return 0;
}

void plume_sched_fini(plume_scheduler *s)
{
    if (s->planner && s->planner != s->policy)
        plume_builtin_continuous.destroy(s->planner);
    if (s->policy)
        s->vt.destroy(s->policy);
    plume_queue_free(&s->waiting);
    plume_queue_free(&s->running);
    free(s->view);
    free(s->view_seq);
    free(s->picks);
}

const char *plume_sched_name(const plume_scheduler *s)
{
    return s->vt.name ? s->vt.name : PLUME_BUILTIN_SCHEDULER;
}

/* Sends the newest running sequence not scheduled this step back to the
 * front of the waiting queue with its blocks freed; it will be recomputed
 * (prefix cache permitting).  Returns it. */
static plume_seq *preempt_newest(plume_scheduler *s)
{
    int32_t i = s->running.n - 1;
    while (s->running.items[i]->sched_step == s->step)
        i--; /* the caller's own sequence is never stamped yet, so this stops */
    plume_seq *victim = s->running.items[i];
    plume_queue_remove_at(&s->running, i);
    plume_bm_release(s->bm, &victim->bt);
    victim->n_computed = 0;
    victim->status = PLUME_SEQ_WAITING;
    victim->n_preemptions++;
    s->preemptions++;
    if (s->on_preempt)
        s->on_preempt(s->hook_ctx, victim);
    plume_queue_push_front(&s->waiting, victim); /* cannot fail: the engine reserves room for
                                                    every live request in waiting */
    return victim;
}

static plume_sched_seq view_of(const plume_seq *q, int32_t n_computed)
{
    return (plume_sched_seq){q->id, q->id, q->n_prompt, q->n_tokens, n_computed,
                             q->n_preemptions};
}

/* Builds the views of the running and (unless no_waiting) waiting queues. */
static int build_views(plume_scheduler *s, bool no_waiting, int32_t *n_waiting, plume_error *err)
{
    int32_t nw = no_waiting ? 0 : s->waiting.n, need = s->running.n + nw;
    if (need > s->view_cap) {
        int32_t cap = need > 2 * s->view_cap ? need : 2 * s->view_cap;
        plume_sched_seq *v = realloc(s->view, sizeof *v * (size_t)cap);
        if (v)
            s->view = v;
        plume_seq **vs = realloc(s->view_seq, sizeof *vs * (size_t)cap);
        if (vs)
            s->view_seq = vs;
        if (!v || !vs)
            return plume_err(err, PLUME_ERR_NOMEM,
                             "out of memory showing %d sequences to the scheduler", need);
        s->view_cap = cap;
    }
    const int32_t bs = plume_bm_block_size(s->bm);
    for (int32_t i = 0; i < s->running.n; i++) {
        plume_seq *q = s->running.items[i];
        s->view[i] = view_of(q, q->n_computed);
        s->view_seq[i] = q;
    }
    for (int32_t i = 0; i < nw; i++) {
        plume_seq *q = s->waiting.items[i];
        /* the prefix-cache hit admission would reuse; the last position is
         * always computed (it yields the logits) */
        int32_t hit = (int32_t)plume_bm_peek_prefix(s->bm, q->tokens, q->n_tokens,
                                                    (q->n_tokens - 1) / bs);
        if (q->bt.n > 0) /* it holds blocks already: KV loaded from a prefill worker */
            hit = q->n_computed;
        s->view[s->running.n + i] = view_of(q, hit);
        s->view_seq[s->running.n + i] = q;
    }
    *n_waiting = nw;
    return 0;
}

/* Checks the plan against plume/scheduler.h's rules. */
static int check_plan(plume_scheduler *s, int32_t n_picks, int32_t n_running, int32_t n_waiting,
                      plume_error *err)
{
    const char *name = plume_sched_name(s);
    if (n_picks < 0 || n_picks > s->max_num_seqs)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler '%s' planned %d sequences; a plan holds 0 to max_num_seqs "
                         "(%d): fix the provider's plan",
                         name, n_picks, s->max_num_seqs);
    int64_t sum = 0;
    for (int32_t i = 0; i < n_picks; i++) {
        const plume_sched_pick *p = &s->picks[i];
        int32_t lim = p->from_waiting ? n_waiting : n_running;
        if (p->index < 0 || p->index >= lim)
            return plume_err(err, PLUME_ERR_INVALID,
                             "scheduler '%s' picked %s index %d, but there are %d %s "
                             "sequences: fix the provider's plan",
                             name, p->from_waiting ? "waiting" : "running", p->index, lim,
                             p->from_waiting ? "waiting" : "running");
        if (p->n < 1)
            return plume_err(err, PLUME_ERR_INVALID,
                             "scheduler '%s' gave %s sequence %d %d positions; a pick computes "
                             "at least 1: fix the provider's plan",
                             name, p->from_waiting ? "waiting" : "running", p->index, p->n);
        sum += p->n;
        plume_seq *q = s->view_seq[(p->from_waiting ? n_running : 0) + p->index];
        if (q->sched_step == s->step)
            return plume_err(err, PLUME_ERR_INVALID,
                             "scheduler '%s' picked request %lld twice in one step; pick each "
                             "sequence at most once: fix the provider's plan",
                             name, (long long)q->id);
        q->sched_step = s->step;
    }
    for (int32_t i = 0; i < n_picks; i++) /* unstamp: the stamp means "scheduled" below */
        s->view_seq[(s->picks[i].from_waiting ? n_running : 0) + s->picks[i].index]->sched_step =
            0;
    if (sum > s->max_batched_tokens)
        return plume_err(err, PLUME_ERR_INVALID,
                         "scheduler '%s' planned %lld positions, more than max_batched_tokens "
                         "(%d): fix the provider's plan",
                         name, (long long)sum, s->max_batched_tokens);
    return 0;
}

/* A running pick: its blocks, dropping draft room and then preempting the
 * newest unscheduled running sequence until they fit.  Returns whether it
 * was scheduled into *it. */
int32_t plume_seq_spec_k(const plume_seq *seq, int32_t k, bool adaptive)
{
    int32_t cap = seq->params.num_speculative_tokens;
    if (seq->params.no_speculation || k <= 0 || cap == 0)
        return 0;
    if (cap > 0 && cap < k)
        k = cap;
    if (adaptive) {
        int32_t ka = (int32_t)lroundf(seq->spec_rate * (float)k) + 1;
        if (ka < k)
            k = ka < 1 ? 1 : ka;
    }
    return k;
}

static bool take_running(plume_scheduler *s, plume_seq *seq, int32_t n, plume_sched_item *it)
{
    if (seq->status != PLUME_SEQ_RUNNING)
        return false; /* preempted earlier in this step */
    int32_t left = seq->n_tokens - seq->n_computed;
    bool spec = false;
    int32_t k = left == 1 ? plume_seq_spec_k(seq, s->spec_k, s->spec_adaptive) : 0;
    if (k > 0 && n > 1) {
        /* room to verify drafts, within max_total */
        int32_t room = seq->max_total - seq->n_tokens - 1;
        int32_t extra = room < k ? room : k;
        if (n > 1 + extra)
            n = 1 + extra;
        spec = n > 1;
    } else if (n > left) {
        n = left;
    }
    while (plume_bm_ensure(s->bm, &seq->bt, (int64_t)seq->n_computed + n) != 0) {
        if (spec) { /* drop the draft room before evicting anyone for it */
            spec = false;
            n = 1;
            continue;
        }
        if (preempt_newest(s) == seq)
            return false; /* nothing newer to free: it waits itself */
    }
    seq->sched_step = s->step;
    *it = (plume_sched_item){seq, n, spec || seq->n_computed + n == seq->n_tokens, spec, 0};
    return true;
}

/* A waiting pick: admits it when a running slot and its blocks are free.
 * Returns whether it was scheduled into *it. */
static bool take_waiting(plume_scheduler *s, plume_seq *seq, int32_t n, plume_sched_item *it)
{
    if (s->running.n >= s->max_num_seqs)
        return false;
    const int32_t bs = plume_bm_block_size(s->bm);
    bool matched_now = seq->bt.n == 0;
    if (matched_now) {
        /* keep at least the last position to compute: it yields the logits */
        int64_t cached = plume_bm_match_prefix(s->bm, &seq->bt, seq->tokens, seq->n_tokens,
                                               (seq->n_tokens - 1) / bs);
        seq->n_computed = (int32_t)cached;
    }
    int32_t left = seq->n_tokens - seq->n_computed;
    if (n > left)
        n = left;
    if (plume_bm_ensure(s->bm, &seq->bt, (int64_t)seq->n_computed + n) != 0) {
        if (matched_now) { /* give shared prefix refs back; blocks it came with (KV
                              loaded from a prefill worker, kv_glue.c) stay */
            plume_bm_release(s->bm, &seq->bt);
            seq->n_computed = 0;
        }
        return false;
    }
    if (s->prefix_caching && matched_now) { /* every admission, as vLLM counts (remote
                                               KV is no prefix-cache hit) */
        s->prefix_query_tokens += seq->n_tokens;
        s->prefix_hit_tokens += seq->n_computed;
    }
    if (seq->n_preemptions == 0 && matched_now) {
        seq->n_cached_prompt = seq->n_computed;
        s->cached_prompt_tokens += seq->n_computed;
    }
    plume_queue_remove(&s->waiting, seq);
    seq->status = PLUME_SEQ_RUNNING;
    plume_queue_push_back(&s->running, seq); /* cannot fail: reserved for max_num_seqs */
    seq->sched_step = s->step;
    *it = (plume_sched_item){seq, n, seq->n_computed + n == seq->n_tokens, false, 0};
    return true;
}

/* One plan, carried out.  Returns the items scheduled, or -1. */
static int32_t plan_and_take(plume_scheduler *s, plume_sched_item *items, bool no_waiting,
                             plume_error *err)
{
    int32_t n_waiting = 0, n_running = s->running.n;
    if (build_views(s, no_waiting, &n_waiting, err))
        return -1;
    plume_sched_budget budget = {s->max_num_seqs, s->max_batched_tokens,
                                 plume_bm_n_free(s->bm), plume_bm_block_size(s->bm), s->spec_k};
    int32_t n_picks = s->plan(s->planner, s->view, n_running, s->view + n_running, n_waiting,
                              &budget, s->picks);
    if (check_plan(s, n_picks, n_running, n_waiting, err))
        return -1;
    int32_t n = 0;
    bool admitting = true;
    const int64_t preempted = s->preemptions;
    for (int32_t i = 0; i < n_picks; i++) {
        const plume_sched_pick *p = &s->picks[i];
        plume_seq *seq = s->view_seq[(p->from_waiting ? n_running : 0) + p->index];
        /* a sequence preempted in this step now heads the waiting queue,
         * which the plan did not see: admitting a planned newcomer before
         * it would overtake it (and evict again soon), so admission stops */
        if (s->preemptions != preempted)
            admitting = false;
        if (!p->from_waiting) {
            n += take_running(s, seq, p->n, &items[n]);
        } else if (admitting) {
            if (take_waiting(s, seq, p->n, &items[n]))
                n++;
            else
                admitting = false; /* no overtaking */
        }
    }
    return n;
}

int32_t plume_schedule(plume_scheduler *s, plume_sched_item *items, plume_error *err)
{
    if (s->running.n == 0 && s->waiting.n == 0)
        return 0;
    s->step++;
    int64_t preempted = s->preemptions;
    int32_t n = plan_and_take(s, items, false, err);
    if (n != 0 || s->preemptions != preempted)
        return n;
    if (s->running.n > 0) { /* nothing admitted, nothing moved: let the running advance */
        s->step++;
        n = plan_and_take(s, items, true, err);
        if (n != 0 || s->preemptions != preempted)
            return n;
    }
    return plume_err(err, PLUME_ERR_INVALID,
                     "scheduler '%s' scheduled nothing while %d sequences are running and %d "
                     "waiting; its plan must pick at least one that can run: fix the provider",
                     plume_sched_name(s), s->running.n, s->waiting.n);
}
