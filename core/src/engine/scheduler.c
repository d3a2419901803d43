#include "engine/scheduler.h"

#include <stdlib.h>
#include <string.h>

static int grow(plume_seq_queue *q)
{
    if (q->n < q->cap)
        return 0;
    int32_t cap = q->cap ? 2 * q->cap : 16;
    plume_seq **it = realloc(q->items, sizeof *it * (size_t)cap);
    if (!it)
        return -1;
    q->items = it;
    q->cap = cap;
    return 0;
}

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

/* Sends the newest running sequence back to the front of the waiting queue
 * with its blocks freed; it will be recomputed (prefix cache permitting). */
static void preempt_newest(plume_scheduler *s)
{
    plume_seq *victim = s->running.items[s->running.n - 1];
    s->running.n--;
    plume_bm_release(s->bm, &victim->bt);
    victim->n_computed = 0;
    victim->status = PLUME_SEQ_WAITING;
    victim->n_preemptions++;
    s->preemptions++;
    if (s->on_preempt)
        s->on_preempt(s->hook_ctx, victim);
    plume_queue_push_front(&s->waiting, victim); /* cannot fail: the engine reserves room for
                                                    every live request in waiting */
}

/* Schedules running sequences in order (oldest first); only prefill-phase
 * ones (more than one position left) when prefill_only.  Returns the count
 * added to items. */
static int32_t schedule_running(plume_scheduler *s, plume_sched_item *items, int32_t n_items,
                                int32_t *budget, bool prefill_only, bool decode_only)
{
    for (int32_t i = 0; i < s->running.n && *budget > 0 && n_items < s->max_num_seqs;) {
        plume_seq *seq = s->running.items[i];
        int32_t left = seq->n_tokens - seq->n_computed;
        if ((prefill_only && left <= 1) || (decode_only && left > 1)) {
            i++;
            continue;
        }
        int32_t want = left;
        bool spec = false;
        if (left == 1 && s->spec_k > 0) { /* room to verify drafts, within max_total */
            int32_t room = seq->max_total - seq->n_tokens - 1;
            int32_t extra = room < s->spec_k ? room : s->spec_k;
            if (extra > 0) {
                want = 1 + extra;
                spec = true;
            }
        }
        int32_t n = want < *budget ? want : *budget;
        spec = spec && n > 1;
        bool victim_self = false;
        while (plume_bm_ensure(s->bm, &seq->bt, (int64_t)seq->n_computed + n) != 0) {
            if (spec) { /* drop the draft room before evicting anyone for it */
                spec = false;
                n = 1;
                continue;
            }
            if (s->running.items[s->running.n - 1] == seq) {
                preempt_newest(s); /* nothing newer to free: wait ourselves */
                victim_self = true;
                break;
            }
            preempt_newest(s);
        }
        if (victim_self)
            break; /* everything after it was newer and is preempted too */
        items[n_items++] = (plume_sched_item){seq, n, spec || seq->n_computed + n == seq->n_tokens,
                                              spec, 0};
        *budget -= n;
        i++;
    }
    return n_items;
}

/* Admits waiting sequences in arrival order while budgets and blocks allow;
 * stops at the first that does not fit (no overtaking). */
static int32_t schedule_waiting(plume_scheduler *s, plume_sched_item *items, int32_t n_items,
                                int32_t *budget)
{
    const int32_t bs = plume_bm_block_size(s->bm);
    while (s->waiting.n > 0 && *budget > 0 && n_items < s->max_num_seqs &&
           s->running.n < s->max_num_seqs) {
        plume_seq *seq = s->waiting.items[0];
        if (seq->bt.n == 0) {
            /* keep at least the last position to compute: it yields the logits */
            int64_t cached = plume_bm_match_prefix(s->bm, &seq->bt, seq->tokens, seq->n_tokens,
                                                   (seq->n_tokens - 1) / bs);
            seq->n_computed = (int32_t)cached;
        }
        int32_t left = seq->n_tokens - seq->n_computed;
        int32_t n = left < *budget ? left : *budget;
        if (plume_bm_ensure(s->bm, &seq->bt, (int64_t)seq->n_computed + n) != 0) {
            plume_bm_release(s->bm, &seq->bt); /* give shared prefix refs back */
            seq->n_computed = 0;
            break;
        }
        if (seq->n_preemptions == 0) {
            seq->n_cached_prompt = seq->n_computed;
            s->cached_prompt_tokens += seq->n_computed;
        }
        plume_queue_remove_at(&s->waiting, 0);
        seq->status = PLUME_SEQ_RUNNING;
        plume_queue_push_back(&s->running, seq); /* cannot fail: reserved for max_num_seqs */
        items[n_items++] = (plume_sched_item){seq, n, seq->n_computed + n == seq->n_tokens, false, 0};
        *budget -= n;
    }
    return n_items;
}

int32_t plume_schedule(plume_scheduler *s, plume_sched_item *items)
{
    int32_t budget = s->max_batched_tokens, n = 0;
    if (s->mixed) {
        n = schedule_running(s, items, 0, &budget, false, false);
        return schedule_waiting(s, items, n, &budget);
    }
    /* separate: any prefill work (chunks in flight, then new prompts) first */
    n = schedule_running(s, items, 0, &budget, true, false);
    n = schedule_waiting(s, items, n, &budget);
    if (n > 0)
        return n;
    return schedule_running(s, items, 0, &budget, false, true);
}
