/* plume — the scheduler provider interface: building each step's batch.
 *
 * Every engine step asks its scheduler provider's plan which sequences run
 * and how many positions each computes; the engine owns KV blocks,
 * admission and preemption and carries the plan out (the rules are at
 * plan below).  Built in: "continuous" — FCFS continuous batching
 * (chunked prefill, mixed or separate prefill/decode steps, room for
 * speculative drafts), whose plan goes through this same interface
 * (core/src/engine/sched_continuous.c).  An engine gets its provider from
 * plume_engine_params.scheduler (plume/engine.h).
 *
 * In a pipeline, `scheduler: { method: NAME, max_num_seqs, max_batched_tokens,
 * prefix_caching, ... }`: the budgets and prefix caching are the engine's,
 * every other key is the provider's. */
#ifndef PLUME_SCHEDULER_H
#define PLUME_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_SCHEDULER_INTERFACE_VERSION 1

typedef struct plume_sched_policy plume_sched_policy; /* a scheduler instance */

/* What a scheduler sees of one sequence.  n_tokens - n_computed positions
 * are left to compute: more than one while its prompt (or, after a
 * preemption, its prompt and output) is being prefilled, exactly one while
 * it decodes. */
typedef struct plume_sched_seq {
    int64_t seq_id;         /* the request id */
    int64_t arrival;        /* smaller = arrived earlier */
    int32_t n_prompt;       /* prompt tokens */
    int32_t n_tokens;       /* prompt + generated so far */
    int32_t n_computed;     /* positions already in the KV cache; for a waiting
                               sequence, the leading positions the prefix cache
                               holds now (a multiple of block_size, always less
                               than n_tokens), which admission will reuse */
    int32_t n_preemptions;
} plume_sched_seq;

/* The step's limits. */
typedef struct plume_sched_budget {
    int32_t max_num_seqs;       /* sequences per step */
    int32_t max_batched_tokens; /* positions per step */
    int32_t free_blocks;        /* KV blocks free now */
    int32_t block_size;         /* tokens per KV block */
    /* Appended after interface version 1's first release (read it only when
     * it is there: the engine always passes the whole struct): */
    int32_t spec_k;             /* speculative decoding: tokens drafted per decode
                                   (0 = off); a decoding sequence may be given
                                   up to 1 + spec_k positions, see plan */
} plume_sched_budget;

/* One scheduled sequence: from the running list (from_waiting false) or the
 * waiting list, by index, computing n positions this step. */
typedef struct plume_sched_pick {
    int32_t index;
    int32_t n;
    bool from_waiting;
} plume_sched_pick;

typedef struct plume_scheduler_vtable {
    uint32_t struct_size;        /* sizeof(plume_scheduler_vtable) of the provider's build */
    uint32_t interface_version;  /* PLUME_SCHEDULER_INTERFACE_VERSION */
    const char *name;            /* "continuous", ... */

    /* Optional: checks the provider's settings (NULL: it takes none). */
    int (*validate)(const plume_settings *s, plume_error *err);

    /* Optional together (both NULL or both set): an instance per engine,
     * created with the engine from validated settings
     * (plume_engine_params.scheduler_settings; NULL = defaults) and handed
     * to every plan call; destroyed with the engine.  Required with plan
     * (the registry and plume_engine_create refuse a plan without them). */
    int (*create)(const plume_settings *s, plume_sched_policy **out, plume_error *err);
    void (*destroy)(plume_sched_policy *p);

    /* Optional (NULL: the engine plans with the built-in "continuous"
     * scheduler, mixed_batches from plume_engine_params; the provider's
     * create and destroy, if set, are still called).  Called once per
     * step, sometimes twice (below), with the running sequences (in
     * admission order, oldest first) and the waiting ones (queue order:
     * preempted sequences first, then arrivals); fills picks (capacity
     * budget->max_num_seqs) and returns how many.  A pick names a sequence
     * by index into running or waiting and the positions n >= 1 it
     * computes from n_computed; each
     * sequence at most once; the sum of n at most max_batched_tokens.  The
     * engine refuses a plan that breaks these (plume_engine_step fails).
     * It clips n to the positions left, except that a decoding running
     * sequence may take up to 1 + spec_k: the extra positions are room for
     * drafted tokens (clipped to what the request's max_tokens leaves).
     * The engine then carries the picks out in order:
     *   - running: it allocates the KV blocks; when they do not fit it drops
     *     the draft room, then preempts the newest running sequence not yet
     *     scheduled this step (its blocks freed, back to the front of the
     *     waiting queue to be recomputed), until they fit or the pick itself
     *     is that newest sequence and is preempted.  A pick whose sequence
     *     was preempted earlier in the step is skipped.
     *   - waiting: it admits the sequence (reusing its prefix-cache hit; if
     *     earlier picks evicted part of it, n counts from what is left) when
     *     fewer than max_num_seqs run and its blocks fit without preempting
     *     anyone; the first waiting pick that is not admitted ends admission
     *     for the step (later waiting picks are skipped: no overtaking).
     * When nothing at all was scheduled and nothing preempted while
     * sequences are running, plan is called once more with n_waiting 0, so
     * that running sequences advance.  A step that still schedules and
     * preempts nothing while there is work fails plume_engine_step: a plan
     * must pick something that can run.  The arrays are valid during the
     * call only. */
    int32_t (*plan)(plume_sched_policy *p, const plume_sched_seq *running, int32_t n_running,
                    const plume_sched_seq *waiting, int32_t n_waiting,
                    const plume_sched_budget *budget, plume_sched_pick *picks);
} plume_scheduler_vtable;

#ifdef __cplusplus
}
#endif
#endif
