/* The engine's state, shared by its files: engine.c (requests, the step),
 * postprocess.c (after the forward: sample or verify, append, finish,
 * prefix-cache commit) and speculative.c (the proposer). */
#ifndef PLUME_ENGINE_INTERNAL_H
#define PLUME_ENGINE_INTERNAL_H

#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/runner.h"
#include "plume/engine.h"
#include "plume/proposer.h"
#include "plume/sampler_provider.h"

struct plume_engine {
    const plume_model *m;
    plume_engine_params p;
    plume_kv_cache *kv;
    plume_runner *runner;
    plume_scheduler sched;
    int32_t n_ctx;              /* longest sequence served */
    plume_seq **by_id;          /* index = request id; NULL once released */
    int64_t n_ids, cap_ids;
    plume_sched_item *items;    /* max_num_seqs */
    plume_batch_seq *batch;     /* max_num_seqs */
    float *logits;              /* rows of n_vocab, one per sampled position */
    int32_t logits_rows;
    plume_engine_stats stats;
    /* speculative decoding (optional) */
    const plume_proposer_vtable *prop_vt; /* == &prop_copy while speculation is on */
    plume_proposer_vtable prop_copy;      /* the provider's vtable in this build's layout */
    plume_proposer *prop;
    int32_t spec_k;
    plume_propose_seq *pseqs;   /* max_num_seqs */
    plume_draft *drafts;        /* max_num_seqs */
    int32_t *draft_tokens;      /* max_num_seqs x spec_k */
    float *draft_probs;         /* max_num_seqs x spec_k x n_vocab */
    float *verify_work;         /* 2 x n_vocab */
    int32_t *verify_out;        /* spec_k + 1 */
    /* adaptive speculation (plume_engine_params.spec_*) and the cost model
     * behind disable_above_batch auto */
    bool spec_off_this_step;    /* the policy turned drafting off for this step */
    double *fw_time;            /* [positions]: moving average of a forward's seconds, 0 =
                                   never measured; fw_cap + 1 entries */
    int32_t fw_cap;
    double spec_drafted_avg;    /* moving averages per speculating sequence-step: */
    double spec_accepted_avg;   /*   drafted and accepted tokens, */
    double spec_propose_s;      /*   seconds of the proposer; */
    int64_t spec_n_obs;         /*   sequence-steps averaged so far, */
    int64_t spec_steps_obs;     /*   in this many steps; */
    int64_t spec_step_n;        /* this step's speculating sequences so far, */
    double spec_step_drafted;   /*   their drafted */
    double spec_step_accepted;  /*   and accepted tokens */
    int32_t spec_skip_run;      /* consecutive steps auto turned drafting off */
    double spec_prop_total_s;   /* seconds inside the proposer's calls since it was set */
    int64_t spec_prop_calls;    /*   and its propose calls (plume_engine_proposer_usage) */
    /* default sampler provider (NULL: the built-in) */
    const plume_sampler_vtable *sampler_vt;
    const plume_settings *sampler_settings;
    /* objects sampler providers share among this engine's sequences
     * (plume_sampler_vtable.shared_create), one per provider, made on first
     * use and freed with the engine */
    struct plume_sampler_shared {
        const plume_sampler_vtable *vt;
        void *obj;
    } *sampler_shared;
    int32_t n_sampler_shared;
    /* KV connector (kv_glue.c; NULL kvc: none) */
    plume_kv_connector *kvc;
    plume_kv_connector_vtable kvc_vt;     /* the provider's vtable in this build's layout */
    plume_seq_queue remote;               /* PLUME_SEQ_WAITING_REMOTE_KV, oldest first */
    struct plume_kv_deferred *deferred;   /* finished requests' blocks kept for their send */
    int32_t n_deferred, cap_deferred;
    plume_kv_req_blocks *kv_meta;         /* step metadata scratch */
    int32_t kv_meta_cap;
};

/* kv_glue.c: the engine's side of a KV connector (plume/kv_connector.h).
 * Every function does nothing when the engine has no connector. */

/* Creates the connector of e->p (if any) and registers the KV pool. */
int plume_kv_glue_create(plume_engine *e, plume_error *err);
/* Frees the deferred blocks and destroys the connector (before the pool). */
void plume_kv_glue_free(plume_engine *e);
/* Checks a request's kv_transfer against this worker's role. */
int plume_kv_glue_check_request(const plume_engine *e, const plume_request_params *p,
                                plume_error *err);
/* A new sequence that loads its prompt KV goes into e->remote (state
 * WAITING_REMOTE_KV) instead of waiting; returns whether it did. */
bool plume_kv_glue_park(plume_engine *e, plume_seq *s);
/* Before scheduling: allocates blocks for parked sequences and starts
 * their fetch, copies in the KV that arrived (start_load), moves loaded
 * sequences to waiting and fails (or recomputes) failed loads. */
int plume_kv_glue_before_step(plume_engine *e, plume_error *err);
/* After the forward: saves what finished requests left to send and frees
 * the blocks of sends that are done.  idle: the step ran nothing (waits a
 * little for a transfer instead of spinning). */
int plume_kv_glue_after_step(plume_engine *e, bool idle, plume_error *err);
/* From plume_engine_finish_drop, before the blocks are released: tells the
 * connector, takes the sequence out of e->remote, and keeps its blocks
 * (moved out of s->bt) when the connector delays freeing them. */
void plume_kv_glue_on_finish(plume_engine *e, plume_seq *s);
/* Sequences parked plus deferred sends: work the engine still has. */
int32_t plume_kv_glue_pending(const plume_engine *e);
/* The connector's part of plume_engine_get_load. */
void plume_kv_glue_load(const plume_engine *e, plume_engine_load *out);

/* postprocess.c */

/* After the forward of the step's n items: samples (or verifies drafts)
 * where the items reach the end of their sequences, appends the tokens,
 * finishes and drops what stopped, commits computed blocks to the prefix
 * cache. */
void plume_engine_postprocess(plume_engine *e, int32_t n);

/* Takes a finished request out of the scheduler, once: its computed prompt
 * and output go into the prefix cache, the proposer forgets it, its blocks
 * are released. */
void plume_engine_finish_drop(plume_engine *e, plume_seq *s);

/* speculative.c */

/* The proposer forgets a sequence (its release slot, timed): called when the
 * sequence finishes and, as the scheduler's on_preempt hook, when it is
 * preempted (ctx is the engine). */
void plume_engine_proposer_forget(void *ctx, plume_seq *seq);

/* Turns speculation off and frees its buffers. */
void plume_engine_free_spec(plume_engine *e);

/* Asks the proposer for drafts for the step's spec items, writes them after
 * each sequence's tokens and shrinks each item to 1 + drafted positions. */
int plume_engine_propose(plume_engine *e, int32_t n_items, plume_error *err);

/* The verifier kept n_accepted of seq_id's n_drafted drafts: tells the
 * proposer (timed into plume_engine_proposer_usage). */
void plume_engine_proposer_accepted(plume_engine *e, int64_t seq_id, int32_t n_drafted,
                                    int32_t n_accepted);

/* Before planning a step: whether spec_disable_above_batch turns drafting
 * off for it (sets e->sched.spec_k to 0 until plume_engine_spec_restore). */
void plume_engine_spec_policy(plume_engine *e);
void plume_engine_spec_restore(plume_engine *e);

/* A forward of `positions` positions took `seconds` (the cost model). */
void plume_engine_spec_time_forward(plume_engine *e, int32_t positions, double seconds);

/* A speculating sequence-step drafted n_drafted tokens, n_accepted of which
 * were accepted: the sequence's acceptance average and the engine's. */
void plume_engine_spec_observe(plume_engine *e, plume_seq *s, int32_t n_drafted,
                               int32_t n_accepted);


#endif
