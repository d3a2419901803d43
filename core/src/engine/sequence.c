#include "engine/sequence.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/builtin.h"
#include "plume/struct_size.h"

int plume_seq_create(int64_t id, const int32_t *prompt, int32_t n, int32_t max_total,
                     const plume_request_params *p, const plume_tokenizer *tok, int32_t n_vocab,
                     void *shared, plume_seq **out, plume_error *err)
{
    plume_seq *s = calloc(1, sizeof *s);
    if (!s)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a request");
    s->id = id;
    s->status = PLUME_SEQ_WAITING;
    s->params = *p;
    if (p->kv_transfer) { /* a copy: the caller's struct need not outlive the call */
        s->has_kv_xfer = true;
        s->kv_xfer = *p->kv_transfer;
    }
    s->params.kv_transfer = NULL;
    s->spec_rate = 1.0f; /* a new sequence drafts the full k */
    s->params.stop = NULL;
    s->n_prompt = s->n_tokens = n;
    s->max_total = max_total;
    s->cap = max_total > n ? max_total : n;
    s->tokens = malloc(sizeof(int32_t) * (size_t)s->cap);
    s->text_cap = 256;
    s->text = malloc(s->text_cap);
    if (p->n_stop)
        s->stop = calloc(p->n_stop, sizeof *s->stop);
    if (!s->tokens || !s->text || (p->n_stop && !s->stop))
        goto nomem;
    memcpy(s->tokens, prompt, sizeof(int32_t) * (size_t)n);
    s->text[0] = '\0';
    for (size_t i = 0; i < p->n_stop; i++) {
        if (!p->stop[i] || !p->stop[i][0]) {
            plume_seq_free(s);
            return plume_err(err, PLUME_ERR_INVALID, "stop string %zu is empty", i);
        }
        if (!(s->stop[i] = strdup(p->stop[i])))
            goto nomem;
        size_t len = strlen(p->stop[i]);
        if (len > s->max_stop_len)
            s->max_stop_len = len;
    }
    s->params.n_stop = p->n_stop;
    /* every request samples through a provider's vtable; the built-in one
     * is only created differently, from the request's sampling params */
    int rc;
    if (p->sampler && PLUME_SAMPLER_HAS(p->sampler, create_ex)) {
        plume_sampler_create_args a = {sizeof a,        p->sampler_settings, n_vocab,
                                       p->sampling.seed, &p->sampling,       tok,
                                       shared,           (size_t)n};
        rc = p->sampler->create_ex(&a, &s->sst, err);
    } else if (p->sampler) {
        rc = p->sampler->create(p->sampler_settings, n_vocab, p->sampling.seed, &s->sst, err);
    } else {
        rc = builtin_standard_create_params(&p->sampling, n_vocab, &s->sst, err);
    }
    if (rc) {
        s->sst = NULL;
        plume_seq_free(s);
        return -1;
    }
    s->svt = p->sampler ? p->sampler : &plume_builtin_standard_sampler;
    /* the built-in sampler's presence and frequency penalties count only the
     * generated tokens; other providers get the same whole history as ever */
    if (s->svt == &plume_builtin_standard_sampler)
        plume_sampler_set_prompt_len((plume_sampler *)s->sst, (size_t)n);
    plume_rng_seed(&s->vrng, p->sampling.seed ^ 0x7665726966790000ull); /* "verify" */
    plume_detok_init(&s->detok, tok, p->render_special);
    *out = s;
    return 0;
nomem:
    plume_seq_free(s);
    return plume_err(err, PLUME_ERR_NOMEM, "out of memory adding a request");
}

void plume_seq_free(plume_seq *s)
{
    if (!s)
        return;
    if (s->stop)
        for (size_t i = 0; i < s->params.n_stop; i++)
            free(s->stop[i]);
    free(s->stop);
    if (s->sst)
        s->svt->destroy(s->sst);
    plume_block_table_free(&s->bt);
    free(s->tokens);
    free(s->text);
    free(s->error);
    free(s);
}

int32_t plume_seq_sample(plume_seq *s, const float *logits)
{
    return s->svt->sample(s->sst, logits, s->tokens, (size_t)s->n_tokens);
}

/* The provider's own RNG when it has an rng slot (a vtable from an older
 * build may end before it), else the sequence's. */
static plume_rng *verify_rng(plume_seq *s)
{
    const plume_sampler_vtable *vt = s->svt;
    if (PLUME_HAS_MEMBER(plume_sampler_vtable, vt, rng) && vt->rng)
        return vt->rng(s->sst);
    return &s->vrng;
}

/* Verification of a provider with accept/rollback: before the row after
 * draft i its state must have taken drafts 0..i (accepted tentatively and
 * rolled back once verification is done, see plume_seq_verify).  A draft
 * it refuses cannot be accepted anyway (its probability there is 0), so
 * the rows after it are never asked for. */
typedef struct verify_ctx {
    plume_seq *s;
    int32_t n_taken;      /* drafts accepted tentatively so far */
    bool tracks;          /* the provider has accept and rollback */
} verify_ctx;

static void take_drafts(verify_ctx *v, size_t n_history)
{
    plume_seq *s = v->s;
    if (!v->tracks)
        return;
    int32_t want = (int32_t)(n_history - (size_t)s->n_tokens);
    while (v->n_taken < want) {
        plume_error e;
        if (s->svt->accept(s->sst, s->tokens[s->n_tokens + v->n_taken], &e))
            break; /* refused: its row gives it probability 0, verification stops there */
        v->n_taken++;
    }
}

static int32_t provider_probs(void *ctx, const float *logits, const int32_t *history,
                              size_t n_history, float *probs)
{
    verify_ctx *v = ctx;
    take_drafts(v, n_history);
    return v->s->svt->probs(v->s->sst, logits, history, n_history, probs);
}

int32_t plume_seq_verify(plume_seq *s, const float *logits, const int32_t *draft, int32_t n_draft,
                         const float *draft_probs, int32_t n_vocab, int32_t *out,
                         int32_t *n_accepted, float *work)
{
    verify_ctx v = {s, 0, PLUME_SAMPLER_HAS(s->svt, accept) && PLUME_SAMPLER_HAS(s->svt, rollback)};
    /* the drafts sit after the sequence's tokens (speculative.c wrote them there) */
    if (s->svt->probs) {
        plume_verify_target t = {provider_probs, &v, verify_rng(s), n_vocab};
        int32_t n = plume_spec_verify(&t, logits, draft, n_draft, draft_probs, s->tokens,
                                      (size_t)s->n_tokens, out, n_accepted, work);
        if (v.n_taken) /* the emitted tokens are accepted again as they are appended */
            s->svt->rollback(s->sst, v.n_taken);
        return n;
    }
    /* a sampler that cannot state its distribution: draw from it at each
     * position and keep drafts while they match the draw (exact, since every
     * emitted token is the sampler's own draw) */
    int32_t n = 0;
    for (int32_t i = 0; i <= n_draft; i++) {
        take_drafts(&v, (size_t)s->n_tokens + (size_t)i);
        int32_t t = s->svt->sample(s->sst, logits + (size_t)i * n_vocab, s->tokens,
                                   (size_t)s->n_tokens + (size_t)i);
        out[n++] = t;
        if (i == n_draft || t != draft[i])
            break;
        s->tokens[s->n_tokens + i] = t;
    }
    if (v.n_taken)
        s->svt->rollback(s->sst, v.n_taken);
    *n_accepted = n - 1;
    return n;
}

void plume_logprobs_of(const float *logits, int32_t n_vocab, int32_t token, int32_t n_top,
                       plume_token_logprobs *out)
{
    if (n_top > PLUME_MAX_TOP_LOGPROBS)
        n_top = PLUME_MAX_TOP_LOGPROBS;
    if (n_top > n_vocab)
        n_top = n_vocab;
    if (n_top < 0)
        n_top = 0;
    float maxl = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > maxl)
            maxl = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - (double)maxl);
    const double lse = (double)maxl + log(sum);
    /* the n_top largest, kept sorted: a later id only displaces a strictly
     * smaller value, so ties stay in id order */
    int32_t k = 0;
    for (int32_t i = 0; i < n_vocab && n_top > 0; i++) {
        float v = logits[i];
        if (k == n_top && !(v > logits[out->top_ids[k - 1]]))
            continue;
        int32_t j = k < n_top ? k++ : k - 1;
        while (j > 0 && v > logits[out->top_ids[j - 1]]) {
            out->top_ids[j] = out->top_ids[j - 1];
            j--;
        }
        out->top_ids[j] = i;
    }
    for (int32_t j = 0; j < k; j++)
        out->top_logprobs[j] = (float)((double)logits[out->top_ids[j]] - lse);
    out->n_top = k;
    out->logprob = (float)((double)logits[token] - lse);
}

static bool text_append(plume_seq *s, const char *p, size_t n)
{
    if (s->text_len + n + 1 > s->text_cap) {
        size_t cap = 2 * (s->text_len + n + 1);
        char *t = realloc(s->text, cap);
        if (!t)
            return false;
        s->text = t;
        s->text_cap = cap;
    }
    memcpy(s->text + s->text_len, p, n);
    s->text_len += n;
    s->text[s->text_len] = '\0';
    return true;
}

/* Gives on_event (else on_token) the text that can no longer become part
 * of a stop string (all of it when final), with the token's log-probabilities
 * lp when the request asked for them. */
static void emit(plume_seq *s, int32_t token, bool final, plume_finish_reason r,
                 const plume_token_logprobs *lp)
{
    size_t hold = final || s->max_stop_len == 0 ? 0 : s->max_stop_len - 1;
    size_t upto = s->text_len > hold ? s->text_len - hold : 0;
    /* never cut a UTF-8 character: back up over continuation bytes */
    while (!final && upto > s->text_emitted && upto < s->text_len &&
           ((unsigned char)s->text[upto] & 0xC0) == 0x80)
        upto--;
    if (upto < s->text_emitted)
        upto = s->text_emitted;
    if (s->params.on_event) {
        plume_token_event ev = {token, s->text + s->text_emitted, upto - s->text_emitted, r,
                                token >= 0 && s->params.logprobs >= 0 ? lp : NULL};
        s->params.on_event(s->params.user, s->id, &ev);
    } else if (s->params.on_token) {
        s->params.on_token(s->params.user, s->id, token, s->text + s->text_emitted,
                           upto - s->text_emitted, r);
    }
    s->text_emitted = upto;
}

/* Earliest stop string occurrence that ends in the newly added bytes. */
static bool find_stop(plume_seq *s, size_t added, size_t *at)
{
    bool found = false;
    size_t from = s->text_len - added;
    from = from > s->max_stop_len ? from - s->max_stop_len : 0;
    for (size_t i = 0; i < s->params.n_stop; i++) {
        const char *hit = strstr(s->text + from, s->stop[i]);
        if (hit && (!found || (size_t)(hit - s->text) < *at)) {
            *at = (size_t)(hit - s->text);
            found = true;
        }
    }
    return found;
}

plume_finish_reason plume_seq_append(plume_seq *s, int32_t token, const plume_token_logprobs *lp,
                                     const plume_tokenizer *tok)
{
    if (s->status == PLUME_SEQ_FINISHED) /* e.g. aborted from an on_token callback */
        return s->finish;
    s->tokens[s->n_tokens++] = token;
    if (PLUME_SAMPLER_HAS(s->svt, accept)) {
        plume_error e = {0};
        if (s->svt->accept(s->sst, token, &e)) {
            s->error = strdup(e.msg[0] ? e.msg : "the sampler refused the token");
            plume_seq_finish(s, PLUME_FINISH_ERROR);
            return PLUME_FINISH_ERROR;
        }
    }
    if (!s->params.ignore_eos && plume_tokenizer_is_eog(tok, token)) {
        plume_seq_finish(s, PLUME_FINISH_STOP);
        return PLUME_FINISH_STOP;
    }
    char piece[1024];
    int len = plume_detok_push(&s->detok, token, piece, sizeof piece);
    if (len > 0 && !text_append(s, piece, (size_t)len)) {
        s->error = strdup("out of memory storing generated text");
        plume_seq_finish(s, PLUME_FINISH_ERROR);
        return PLUME_FINISH_ERROR;
    }
    size_t at = 0;
    if (len > 0 && s->params.n_stop && find_stop(s, (size_t)len, &at)) {
        s->text_len = at;
        s->text[at] = '\0';
        if (s->text_emitted > at)
            s->text_emitted = at;
        s->stopped_by_string = true;
        plume_seq_finish(s, PLUME_FINISH_STOP);
        return PLUME_FINISH_STOP;
    }
    if (s->n_tokens >= s->max_total) {
        emit(s, token, false, PLUME_FINISH_NONE, lp);
        plume_seq_finish(s, PLUME_FINISH_LENGTH);
        return PLUME_FINISH_LENGTH;
    }
    emit(s, token, false, PLUME_FINISH_NONE, lp);
    return PLUME_FINISH_NONE;
}

void plume_seq_finish(plume_seq *s, plume_finish_reason r)
{
    if (s->status == PLUME_SEQ_FINISHED)
        return;
    if (!s->stopped_by_string) { /* a truncated text keeps no dangling bytes */
        char tail[64];
        int len = plume_detok_flush(&s->detok, tail, sizeof tail);
        if (len > 0)
            text_append(s, tail, (size_t)len);
    }
    s->status = PLUME_SEQ_FINISHED;
    s->finish = r;
    emit(s, -1, true, r, NULL);
}
