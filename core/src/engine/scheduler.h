/* The built-in scheduler: first come first served over a waiting and a
 * running queue; each step is bounded by max_num_seqs and
 * max_batched_tokens; long prompts are prefilled in chunks; when KV blocks
 * run out the newest running sequence is preempted (its blocks freed, to be
 * recomputed later).  Two policies:
 *   mixed     — running sequences first (decode tokens and unfinished
 *               prefill chunks), then new prompts fill the rest of the token
 *               budget (vLLM v1);
 *   separate  — a step is all prefill or all decode, prefill first
 *               (nano-vllm). */
#ifndef PLUME_ENGINE_SCHEDULER_H
#define PLUME_ENGINE_SCHEDULER_H

#include "engine/block_manager.h"
#include "engine/sequence.h"

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

typedef struct plume_scheduler {
    int32_t max_num_seqs;
    int32_t max_batched_tokens;
    bool mixed;
    plume_block_manager *bm;
    plume_seq_queue waiting, running;
    int32_t spec_k;   /* drafted tokens to reserve room for per decode (0 = off) */
    int64_t preemptions;
    int64_t cached_prompt_tokens;
    void (*on_preempt)(void *ctx, plume_seq *seq); /* optional */
    void *hook_ctx;
} plume_scheduler;

/* Builds one step into items (capacity max_num_seqs); returns the count.
 * Never exceeds the budgets; moves admitted sequences from waiting to
 * running and preempted ones back to the front of waiting. */
int32_t plume_schedule(plume_scheduler *s, plume_sched_item *items);

/* Releases a sequence's blocks and takes it out of both queues. */
void plume_sched_drop(plume_scheduler *s, plume_seq *seq);

#endif
