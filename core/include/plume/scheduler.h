/* plume — the scheduler provider interface: building each step's batch.
 *
 * Built in: "continuous" — the engine's FCFS continuous-batching scheduler
 * (chunked prefill, mixed or separate prefill/decode steps, preemption by
 * recompute).  Its plan slot is NULL: the core's own scheduler runs.  A
 * plugin scheduler sees a read-only view of the waiting and running
 * sequences and the step's budgets and says which sequences run and how
 * many positions each computes; the engine still owns KV blocks and
 * preemption.
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

/* What a scheduler sees of one sequence. */
typedef struct plume_sched_seq {
    int64_t seq_id;
    int64_t arrival;        /* smaller = arrived earlier */
    int32_t n_prompt;       /* prompt tokens */
    int32_t n_tokens;       /* prompt + generated so far */
    int32_t n_computed;     /* positions already in the KV cache */
    int32_t n_preemptions;
} plume_sched_seq;

/* The step's limits. */
typedef struct plume_sched_budget {
    int32_t max_num_seqs;       /* sequences per step */
    int32_t max_batched_tokens; /* positions per step */
    int32_t free_blocks;        /* KV blocks free now */
    int32_t block_size;         /* tokens per KV block */
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

    /* Optional together (both NULL or both set): an instance per engine. */
    int (*create)(const plume_settings *s, plume_sched_policy **out, plume_error *err);
    void (*destroy)(plume_sched_policy *p);

    /* Optional (NULL: the core's continuous-batching scheduler): fills
     * picks (capacity budget->max_num_seqs) and returns how many; the sum
     * of n must not exceed max_batched_tokens.  The engine allocates blocks
     * in pick order and preempts the newest running sequence when a pick
     * does not fit. */
    int32_t (*plan)(plume_sched_policy *p, const plume_sched_seq *running, int32_t n_running,
                    const plume_sched_seq *waiting, int32_t n_waiting,
                    const plume_sched_budget *budget, plume_sched_pick *picks);
} plume_scheduler_vtable;

#ifdef __cplusplus
}
#endif
#endif
