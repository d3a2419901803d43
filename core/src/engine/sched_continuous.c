/* The built-in scheduler provider "continuous": first come first served
 * over the running and waiting sequences, within max_num_seqs and
 * max_batched_tokens; long prompts are prefilled in chunks; a decoding
 * sequence asks for room for spec_k drafted tokens when speculation is on.
 * It only plans (plume/scheduler.h): the engine allocates blocks, admits
 * and preempts.  Two policies (setting mixed_batches):
 *   mixed     -- running sequences first, oldest first (decode tokens and
 *                unfinished prefill chunks), then waiting ones in queue
 *                order fill the rest of the token budget (vLLM v1);
 *   separate  -- a step is all prefill or all decode, prefill first
 *                (nano-vllm).
 * Waiting sequences are planned in queue order and the engine stops
 * admitting at the first that does not fit, so nothing overtakes. */
#include <stdlib.h>

#include "runtime/builtin.h"

struct plume_sched_policy {
    bool mixed;
};

int builtin_continuous_mixed(const plume_settings *s, bool *mixed, plume_error *err)
{
    static const char *const keys[] = {"mixed_batches"};
    return plume_settings_bool(s, "mixed_batches", true, mixed, err) ||
                   plume_settings_check_keys(s, keys, 1, err)
               ? -1
               : 0;
}

static int continuous_validate(const plume_settings *s, plume_error *err)
{
    bool mixed;
    return builtin_continuous_mixed(s, &mixed, err);
}

int builtin_continuous_create(bool mixed, plume_sched_policy **out, plume_error *err)
{
    plume_sched_policy *p = malloc(sizeof *p);
    if (!p)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating the scheduler");
    p->mixed = mixed;
    *out = p;
    return 0;
}

static int continuous_create(const plume_settings *s, plume_sched_policy **out, plume_error *err)
{
    bool mixed;
    return builtin_continuous_mixed(s, &mixed, err) ? -1
                                                     : builtin_continuous_create(mixed, out, err);
}

static void continuous_destroy(plume_sched_policy *p) { free(p); }

/* Running sequences in order; only prefill-phase ones (more than one
 * position left) when prefill_only, only decoding ones when decode_only. */
static int32_t plan_running(const plume_sched_seq *running, int32_t n_running,
                            const plume_sched_budget *b, int32_t *tokens, bool prefill_only,
                            bool decode_only, plume_sched_pick *picks, int32_t n)
{
    for (int32_t i = 0; i < n_running && *tokens > 0 && n < b->max_num_seqs; i++) {
        int32_t left = running[i].n_tokens - running[i].n_computed;
        if ((prefill_only && left <= 1) || (decode_only && left > 1))
            continue;
        int32_t want = left == 1 ? 1 + b->spec_k : left; /* the engine clips the draft room */
        int32_t m = want < *tokens ? want : *tokens;
        picks[n++] = (plume_sched_pick){i, m, false};
        *tokens -= m;
    }
    return n;
}

/* Waiting sequences in queue order while the budgets allow. */
static int32_t plan_waiting(int32_t n_running, const plume_sched_seq *waiting, int32_t n_waiting,
                            const plume_sched_budget *b, int32_t *tokens, plume_sched_pick *picks,
                            int32_t n)
{
    for (int32_t i = 0; i < n_waiting && *tokens > 0 && n < b->max_num_seqs &&
                        n_running + i < b->max_num_seqs;
         i++) {
        int32_t left = waiting[i].n_tokens - waiting[i].n_computed;
        int32_t m = left < *tokens ? left : *tokens;
        picks[n++] = (plume_sched_pick){i, m, true};
        *tokens -= m;
    }
    return n;
}

static int32_t continuous_plan(plume_sched_policy *p, const plume_sched_seq *running,
                               int32_t n_running, const plume_sched_seq *waiting,
                               int32_t n_waiting, const plume_sched_budget *b,
                               plume_sched_pick *picks)
{
    int32_t tokens = b->max_batched_tokens, n;
    if (p->mixed) {
        n = plan_running(running, n_running, b, &tokens, false, false, picks, 0);
        return plan_waiting(n_running, waiting, n_waiting, b, &tokens, picks, n);
    }
    /* separate: any prefill work (chunks in flight, then new prompts) first;
     * when none of it fits, the engine asks again without the waiting ones */
    n = plan_running(running, n_running, b, &tokens, true, false, picks, 0);
    n = plan_waiting(n_running, waiting, n_waiting, b, &tokens, picks, n);
    if (n > 0)
        return n;
    return plan_running(running, n_running, b, &tokens, false, true, picks, 0);
}

const plume_scheduler_vtable plume_builtin_continuous = {
    .struct_size = sizeof(plume_scheduler_vtable),
    .interface_version = PLUME_SCHEDULER_INTERFACE_VERSION,
    .name = PLUME_BUILTIN_SCHEDULER,
    .validate = continuous_validate,
    .create = continuous_create,
    .destroy = continuous_destroy,
    .plan = continuous_plan,
};
