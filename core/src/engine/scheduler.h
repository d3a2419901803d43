/* The engine's side of scheduling: the waiting and running queues, and
 * carrying out a scheduler provider's plan (plume/scheduler.h) -- the
 * provider says which sequences run and how many positions each computes;
 * this file allocates their KV blocks, admits waiting sequences and
 * preempts (newest running first, recompute) when blocks run out.  The
 * built-in provider "continuous" (FCFS continuous batching) is in
 * sched_continuous.c and goes through the same vtable. */
#ifndef PLUME_ENGINE_SCHEDULER_H
#define PLUME_ENGINE_SCHEDULER_H

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "plume/scheduler.h"

/* A queue of sequences in order (oldest first). */
typedef struct plume_seq_queue {
    plume_seq **items;
    int32_t n, cap;
} plume_seq_queue;

/* Makes room for n items so that pushes up to n cannot fail. */
int plume_queue_reserve(plume_seq_queue *q, int32_t n);
int plume_queue_push_back(plume_seq_queue *q, plume_seq *s);
int plume_queue_push_front(plume_seq_queue *q, plume_seq *s);
/* Removes the item at index i, keeping order. */
void plume_queue_remove_at(plume_seq_queue *q, int32_t i);
/* Removes s if present; returns whether it was. */
bool plume_queue_remove(plume_seq_queue *q, const plume_seq *s);
void plume_queue_free(plume_seq_queue *q);

typedef struct plume_sched_item {
    plume_seq *seq;
    int32_t n;        /* positions computed this step, from seq->n_computed */
    bool sample;      /* these positions reach the end of the sequence: sample after */
    bool spec;        /* a decode with room for n - 1 drafted tokens to verify */
    int32_t draft;    /* engine's index of this item's draft (spec items) */
} plume_sched_item;

/* The most drafts seq may verify in one step when the engine drafts k:
 * its request's cap (num_speculative_tokens, no_speculation), then, when
 * adaptive, clamp(round(spec_rate * cap) + 1, 1, cap).  0 = none. */
int32_t plume_seq_spec_k(const plume_seq *seq, int32_t k, bool adaptive);

typedef struct plume_scheduler {
    int32_t max_num_seqs;
    int32_t max_batched_tokens;
    plume_block_manager *bm;
    plume_seq_queue waiting, running;
    int32_t spec_k;   /* drafted tokens to reserve room for per decode (0 = off) */
    bool spec_adaptive; /* each sequence's room follows its acceptance (plume_seq_spec_k) */
    int64_t preemptions;
    int64_t cached_prompt_tokens;
    bool prefix_caching;             /* bm shares prefixes: admissions count below */
    int64_t prefix_query_tokens;     /* tokens of admitted sequences looked up in the
                                        prefix cache (re-admissions count again), */
    int64_t prefix_hit_tokens;       /*   and those the cache held */
    void (*on_preempt)(void *ctx, plume_seq *seq); /* optional */
    void *hook_ctx;
    /* the provider */
    plume_scheduler_vtable vt;       /* in this build's layout (absent slots NULL) */
    plume_sched_policy *policy;      /* vt's instance (NULL if it has no create) */
    plume_sched_policy *planner;     /* the instance plan gets: policy, or the
                                        built-in's when vt has no plan */
    int32_t (*plan)(plume_sched_policy *, const plume_sched_seq *, int32_t,
                    const plume_sched_seq *, int32_t, const plume_sched_budget *,
                    plume_sched_pick *);
    /* per-step scratch */
    plume_sched_seq *view;           /* running views, then waiting views */
    plume_seq **view_seq;            /* the sequence behind each view */
    int32_t view_cap;
    plume_sched_pick *picks;         /* max_num_seqs */
    int64_t step;                    /* stamps plume_seq.sched_step */
} plume_scheduler;

/* Sets up s (budgets and bm already set) with scheduler provider vt and its
 * settings, or the built-in "continuous" with mixed_batches = mixed when vt
 * is NULL.  vt must stay valid while s is in use. */
int plume_sched_init(plume_scheduler *s, const plume_scheduler_vtable *vt,
                     const plume_settings *settings, bool mixed, plume_error *err);
/* Destroys the provider's instances and frees the queues and scratch (not
 * the sequences, not bm); s is not usable afterwards. */
void plume_sched_fini(plume_scheduler *s);

/* The provider's name ("continuous" for the built-in). */
const char *plume_sched_name(const plume_scheduler *s);

/* Builds one step into items (capacity max_num_seqs) from the provider's
 * plan; returns the count, or -1 (err set) when the plan breaks the rules
 * of plume/scheduler.h or scheduling runs out of memory.  Never exceeds the
 * budgets; moves admitted sequences from waiting to running and preempted
 * ones back to the front of waiting. */
int32_t plume_schedule(plume_scheduler *s, plume_sched_item *items, plume_error *err);

/* Releases a sequence's blocks and takes it out of both queues. */
void plume_sched_drop(plume_scheduler *s, plume_seq *seq);

#endif
