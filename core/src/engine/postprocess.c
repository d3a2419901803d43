/* After a step's forward (nano-vllm's postprocess): each item that reaches
 * the end of its sequence gets its next token -- sampled through the
 * sequence's sampler provider, or, with drafts, the accepted drafts plus
 * one token from verification -- which is appended (stop conditions,
 * on_event/on_token, with the log-probabilities of the raw logits row each
 * token came from when the request asked for them); a finished request is
 * dropped; computed full blocks go into the prefix cache. */
#include <string.h>

#include "engine/engine_internal.h"

void plume_engine_finish_drop(plume_engine *e, plume_seq *s)
{
    if (s->dropped)
        return;
    s->dropped = true;
    int32_t committed = s->n_computed < s->n_tokens ? s->n_computed : s->n_tokens;
    if (s->bt.n > 0)
        plume_bm_commit(e->sched.bm, &s->bt, s->tokens, committed);
    /* a KV connector may keep the blocks for a send (then s->bt is empty) */
    plume_kv_glue_on_finish(e, s);
    plume_engine_proposer_forget(e, s);
    plume_sched_drop(&e->sched, s);
}

/* The log-probabilities of token in row lg when s asked for them (into
 * *buf), else NULL. */
static const plume_token_logprobs *logprobs(const plume_seq *s, const float *lg, int32_t nv,
                                            int32_t token, plume_token_logprobs *buf)
{
    if (s->params.logprobs < 0)
        return NULL;
    plume_logprobs_of(lg, nv, token, s->params.logprobs, buf);
    return buf;
}

/* Verifies one sequence's drafts against its logits rows, appends the
 * accepted tokens plus one target token, rolls back the rest. */
static void verify(plume_engine *e, plume_sched_item *it, const plume_draft *d, const float *lg)
{
    plume_seq *s = it->seq;
    const plume_tokenizer *tok = plume_model_tokenizer(e->m);
    const int32_t nv = plume_model_n_vocab(e->m);
    int32_t n_acc;
    int32_t n_out = plume_seq_verify(s, lg, d->tokens, d->n, d->has_probs ? d->probs : NULL, nv,
                                     e->verify_out, &n_acc, e->verify_work);
    e->stats.spec_drafted += d->n;
    e->stats.spec_forwards++;
    s->n_drafted += d->n;
    plume_engine_proposer_accepted(e, s->id, d->n, n_acc);
    plume_engine_spec_observe(e, s, d->n, n_acc);
    /* the last token and the accepted drafts now have valid KV */
    s->n_computed += 1 + n_acc;
    for (int32_t i = 0; i < n_out; i++) {
        e->stats.generated_tokens++;
        e->stats.spec_emitted++;
        if (i < n_acc) { /* only drafts that made it into the output count */
            e->stats.spec_accepted++;
            s->n_accepted++;
        }
        /* emitted token i comes from row i: an accepted draft from the row
         * that verified it, the last token from the row it was drawn from */
        plume_token_logprobs lp;
        plume_seq_append(s, e->verify_out[i],
                         logprobs(s, lg + (size_t)i * nv, nv, e->verify_out[i], &lp), tok);
        if (s->status == PLUME_SEQ_FINISHED)
            return; /* by a stop condition or an abort from on_token: the caller drops it */
    }
    plume_bm_truncate(e->sched.bm, &s->bt, s->n_tokens);
}

void plume_engine_postprocess(plume_engine *e, int32_t n)
{
    const plume_tokenizer *tok = plume_model_tokenizer(e->m);
    const int32_t nv = plume_model_n_vocab(e->m);
    int32_t row = 0;
    for (int32_t i = 0; i < n; i++) {
        plume_sched_item *it = &e->items[i];
        plume_seq *s = it->seq;
        if (s->status == PLUME_SEQ_FINISHED) {
            /* aborted by an on_token callback earlier in this step: already dropped */
            if (it->sample)
                row += e->batch[i].n_logits;
            continue;
        }
        if (!it->sample) {
            s->n_computed += it->n;
            plume_bm_commit(e->sched.bm, &s->bt, s->tokens, s->n_computed);
            continue;
        }
        const float *lg = e->logits + (size_t)row * nv;
        row += e->batch[i].n_logits;
        s->n_forwards++;
        if (s->params.first_logits && s->n_tokens == s->n_prompt)
            memcpy(s->params.first_logits, lg, sizeof(float) * (size_t)nv);
        if (it->spec) {
            verify(e, it, &e->drafts[it->draft], lg);
        } else {
            s->n_computed += it->n;
            int32_t tok_id = plume_seq_sample(s, lg);
            e->stats.generated_tokens++;
            plume_token_logprobs lp;
            plume_seq_append(s, tok_id, logprobs(s, lg, nv, tok_id, &lp), tok);
        }
        if (s->status == PLUME_SEQ_FINISHED) {
            plume_engine_finish_drop(e, s);
        } else {
            plume_bm_commit(e->sched.bm, &s->bt, s->tokens, s->n_computed);
        }
    }
}
