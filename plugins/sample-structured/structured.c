/* sample-structured: the sampler provider (structured.h). */
#include "structured.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constraint.h"
#include "grow.h"
#include "vocab.h"

static const char *const constraint_keys[SS_KIND_COUNT] = {"json_schema", "json_object", "regex",
                                                           "choice", "grammar", "tool_calls"};
static const char *const all_keys[] = {"json_schema", "json_object", "regex", "choice", "grammar",
                                       "tool_calls",
                                       "temperature", "top_k", "top_p", "min_p",
                                       "repetition_penalty", "repeat_last_n", "presence_penalty",
                                       "frequency_penalty"};

typedef struct ss_shared {
    ss_vocab vocab;
    ss_cache cache;
} ss_shared;

struct plume_sampler_state {
    ss_shared *sh;
    ss_compiled *c;
    plume_sampler *smp;
    float *buf;                 /* masked logits */
    /* the automaton's state after each accepted token (index 0: the start),
     * as stack sets, so rollback is a pop and a DFA flush loses nothing */
    uint32_t *stk;
    size_t n_stk, cap_stk;
    size_t *off;                /* state i: stk[off[i] .. off[i+1]) */
    size_t n_states, cap_states;
    int32_t cur;                /* DFA id of the last state, valid in epoch cur_epoch */
    uint64_t cur_epoch;
    bool failed;
    plume_error err;
};

/* Reads the constraint from settings: kind, text (text NULL for
 * json_object). */
static int read_constraint(const plume_settings *s, ss_kind *kind, const char **text,
                           plume_error *err)
{
    int found = -1;
    for (int k = 0; k < SS_KIND_COUNT; k++)
        if (s && plume_settings_has(s, constraint_keys[k])) {
            if (found >= 0)
                return plume_settings_error(s, constraint_keys[k], err,
                                            "give one constraint: %s and %s are both set",
                                            constraint_keys[found], constraint_keys[k]);
            found = k;
        }
    if (found < 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the structured sampler needs one constraint: json_schema, json_object, "
                         "regex, choice, grammar or tool_calls");
    *kind = (ss_kind)found;
    if (found == SS_JSON_OBJECT) {
        bool on;
        if (plume_settings_bool(s, "json_object", false, &on, err))
            return -1;
        if (!on)
            return plume_settings_error(s, "json_object", err,
                                        "json_object: false constrains nothing; leave the "
                                        "structured sampler out instead");
        *text = "";
        return 0;
    }
    return plume_settings_string(s, constraint_keys[found], NULL, text, err);
}

/* The standard sampler's parameters: base (the request's), overridden by
 * the settings' keys. */
static int read_sampling(const plume_settings *s, const plume_sampling_params *base,
                         plume_sampling_params *p, plume_error *err)
{
    plume_sampling_params d = base ? *base : plume_sampling_defaults();
    double t, tp, mp, rp, pp, fp;
    int64_t k, rn;
    if (plume_settings_float(s, "temperature", d.temperature, 0.0, 100.0, &t, err) ||
        plume_settings_int(s, "top_k", d.top_k, 0, 1 << 30, &k, err) ||
        plume_settings_float_open_lo(s, "top_p", d.top_p, 0.0, 1.0, &tp, err) ||
        plume_settings_float(s, "min_p", d.min_p, 0.0, 0.999999, &mp, err) ||
        plume_settings_float_open_lo(s, "repetition_penalty", d.repetition_penalty, 0.0, 100.0,
                                     &rp, err) ||
        plume_settings_int(s, "repeat_last_n", d.repeat_last_n, -1, 1 << 30, &rn, err) ||
        plume_settings_float(s, "presence_penalty", d.presence_penalty, -2.0, 2.0, &pp, err) ||
        plume_settings_float(s, "frequency_penalty", d.frequency_penalty, -2.0, 2.0, &fp, err))
        return -1;
    *p = d;
    p->temperature = (float)t;
    p->top_k = (int32_t)k;
    p->top_p = (float)tp;
    p->min_p = (float)mp;
    p->repetition_penalty = (float)rp;
    p->repeat_last_n = (int32_t)rn;
    p->presence_penalty = (float)pp;
    p->frequency_penalty = (float)fp;
    return 0;
}

static int ss_validate(const plume_settings *s, plume_error *err)
{
    ss_kind kind;
    const char *text;
    plume_sampling_params p;
    if (plume_settings_check_keys(s, all_keys, sizeof all_keys / sizeof *all_keys, err) ||
        read_constraint(s, &kind, &text, err) || read_sampling(s, NULL, &p, err))
        return -1;
    ss_compiled *c; /* compile once to report a refused schema before anything loads */
    if (ss_compile(kind, text, strlen(text), &c, err)) {
        char msg[PLUME_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "refused");
        return plume_settings_error(s, constraint_keys[kind], err, "%s", msg);
    }
    ss_compiled_free(c);
    return 0;
}

static int ss_shared_create(const plume_tokenizer *tok, int32_t n_vocab, void **out,
                            plume_error *err)
{
    ss_shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    if (ss_vocab_build(&sh->vocab, tok, n_vocab, err)) {
        free(sh);
        return -1;
    }
    *out = sh;
    return 0;
}

static void ss_shared_free(void *p)
{
    ss_shared *sh = p;
    if (!sh)
        return;
    ss_cache_free(&sh->cache);
    ss_vocab_free(&sh->vocab);
    free(sh);
}

static void ss_destroy(plume_sampler_state *st)
{
    if (!st)
        return;
    if (st->sh)
        ss_cache_release(&st->sh->cache, st->c);
    plume_sampler_free(st->smp);
    free(st->buf);
    free(st->stk);
    free(st->off);
    free(st);
}

/* Pushes the stacks of DFA state d as the newest state. */
static int push_state(plume_sampler_state *st, int32_t d)
{
    uint32_t n;
    const uint32_t *s = ss_pda_stacks(&st->c->pda, d, &n);
    const size_t cap_stk =
        ss_grow((void **)&st->stk, st->cap_stk, st->n_stk + n, sizeof *st->stk, 256);
    if (!cap_stk)
        return -1;
    st->cap_stk = cap_stk;
    const size_t cap_states =
        ss_grow((void **)&st->off, st->cap_states, st->n_states + 2, sizeof *st->off, 64);
    if (!cap_states)
        return -1;
    st->cap_states = cap_states;
    memcpy(st->stk + st->n_stk, s, n * sizeof *s);
    if (st->n_states == 0)
        st->off[0] = 0;
    st->n_stk += n;
    st->off[++st->n_states] = st->n_stk;
    st->cur = d;
    st->cur_epoch = st->c->pda.epoch;
    return 0;
}

/* The DFA id of the newest state (re-interned after a flush or rollback). */
static int32_t current(plume_sampler_state *st)
{
    ss_pda *p = &st->c->pda;
    if (st->cur >= 0 && st->cur_epoch == p->epoch)
        return st->cur;
    size_t i = st->n_states - 1;
    int32_t d = ss_pda_intern(p, st->stk + st->off[i], (uint32_t)(st->off[i + 1] - st->off[i]));
    if (d < 0)
        return -1;
    st->cur = d;
    st->cur_epoch = p->epoch;
    return d;
}

static int ss_create_ex(const plume_sampler_create_args *a, plume_sampler_state **out,
                        plume_error *err)
{
    if (!a->shared || !a->tokenizer)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the structured sampler needs the engine's tokenizer and shared "
                         "vocabulary index; this engine did not give them");
    const plume_settings *s = a->settings;
    ss_kind kind;
    const char *text;
    plume_sampling_params p;
    if (!s)
        return read_constraint(NULL, &kind, &text, err);
    if (read_constraint(s, &kind, &text, err) || read_sampling(s, a->sampling, &p, err))
        return -1;
    p.seed = a->seed;
    plume_sampler_state *st = calloc(1, sizeof *st);
    if (!st)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    st->sh = a->shared;
    st->cur = -1;
    if (ss_cache_get(&st->sh->cache, kind, text, strlen(text), &st->c, err)) {
        plume_err_prefix(err, "%s", constraint_keys[kind]);
        free(st);
        return -1;
    }
    st->buf = malloc((size_t)a->n_vocab * sizeof *st->buf);
    if (!st->buf) {
        ss_destroy(st);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    if (plume_sampler_create(&p, a->n_vocab, &st->smp, err)) {
        ss_destroy(st);
        return -1;
    }
    plume_sampler_set_prompt_len(st->smp, a->n_prompt);
    int32_t d = ss_pda_start(&st->c->pda);
    if (d < 0 || push_state(st, d)) {
        *err = st->c->pda.err;
        ss_destroy(st);
        return -1;
    }
    *out = st;
    return 0;
}

static int ss_create(const plume_settings *s, int32_t n_vocab, uint64_t seed,
                     plume_sampler_state **out, plume_error *err)
{
    (void)s, (void)n_vocab, (void)seed, (void)out;
    return plume_err(err, PLUME_ERR_UNSUPPORTED,
                     "the structured sampler needs an engine that passes it the tokenizer "
                     "(sampler create_ex); this host only calls create");
}

static void fail(plume_sampler_state *st, const plume_error *e)
{
    if (st->failed)
        return;
    st->failed = true;
    st->err = *e;
}

/* The allowed tokens now; NULL when the automaton failed (st->err). */
static const uint8_t *mask_now(plume_sampler_state *st)
{
    if (st->failed)
        return NULL;
    ss_pda *p = &st->c->pda;
    if (ss_pda_over_budget(p))
        ss_pda_flush(p);
    int32_t d = current(st);
    const uint8_t *m = d >= 0 ? ss_mask(&st->sh->vocab, p, d) : NULL;
    if (!m)
        fail(st, &p->err);
    return m;
}

/* logits with the disallowed tokens at -inf into st->buf; false when
 * nothing is allowed (or the automaton failed). */
static bool masked(plume_sampler_state *st, const float *logits)
{
    const uint8_t *m = mask_now(st);
    if (!m)
        return false;
    const int32_t nv = st->sh->vocab.n_vocab;
    bool any = false;
    int32_t full = nv & ~7;
    float *out = st->buf;
    for (int32_t i = 0; i < full; i += 8) {
        uint8_t b = m[i >> 3];
        if (b == 0) {
            for (int j = 0; j < 8; j++)
                out[i + j] = -INFINITY;
        } else if (b == 0xFF) {
            any = true;
            memcpy(out + i, logits + i, 8 * sizeof *out);
        } else {
            any = true;
            for (int j = 0; j < 8; j++)
                out[i + j] = (b >> j) & 1 ? logits[i + j] : -INFINITY;
        }
    }
    for (int32_t j = full; j < nv; j++) {
        bool on = ss_mask_get(m, j);
        any |= on;
        out[j] = on ? logits[j] : -INFINITY;
    }
    if (!any) {
        plume_error e;
        plume_err(&e, PLUME_ERR_INTERNAL,
                  "no token of the vocabulary can continue the structured output here");
        fail(st, &e);
    }
    return any;
}

/* When masking failed: an end-of-generation token, so the engine stops the
 * request (accept() then reports the failure as its error). */
static int32_t give_up(plume_sampler_state *st)
{
    return st->sh->vocab.n_eog ? st->sh->vocab.eog_ids[0] : 0;
}

static int32_t ss_sample(plume_sampler_state *st, const float *logits, const int32_t *history,
                         size_t n_history)
{
    if (!masked(st, logits))
        return give_up(st);
    return plume_sampler_sample(st->smp, st->buf, history, n_history);
}

static int32_t ss_probs(plume_sampler_state *st, const float *logits, const int32_t *history,
                        size_t n_history, float *probs)
{
    if (!masked(st, logits)) {
        memset(probs, 0, (size_t)st->sh->vocab.n_vocab * sizeof *probs);
        probs[give_up(st)] = 1.0f;
        return 1;
    }
    return plume_sampler_probs(st->smp, st->buf, history, n_history, probs);
}

static plume_rng *ss_rng(plume_sampler_state *st) { return plume_sampler_rng(st->smp); }

static int ss_accept(plume_sampler_state *st, int32_t token, plume_error *err)
{
    if (st->failed) {
        *err = st->err;
        return -1;
    }
    const ss_vocab *v = &st->sh->vocab;
    ss_pda *p = &st->c->pda;
    int32_t d = current(st);
    if (d < 0) {
        *err = p->err;
        return -1;
    }
    if (token < 0 || token >= v->n_vocab)
        return plume_err(err, PLUME_ERR_INVALID, "token %d is outside the vocabulary", token);
    if (v->eog[token]) {
        if (!p->ds[d].accepting)
            return plume_err(err, PLUME_ERR_INVALID,
                             "end of generation (token %d) before the %s constraint is complete",
                             token, ss_kind_name(st->c->kind));
    } else {
        uint32_t a = v->tok_off[token], b = v->tok_off[token + 1];
        if (a == b)
            return plume_err(err, PLUME_ERR_INVALID,
                             "token %d has no text the %s constraint can check", token,
                             ss_kind_name(st->c->kind));
        for (uint32_t i = a; i < b && d >= 0; i++)
            d = ss_pda_step(p, d, v->bytes[i]);
        if (d == -2) {
            *err = p->err;
            return -1;
        }
        if (d == -1)
            return plume_err(err, PLUME_ERR_INVALID,
                             "token %d (\"%.*s\") cannot continue the %s constraint", token,
                             (int)(b - a > 40 ? 40 : b - a), (const char *)v->bytes + a,
                             ss_kind_name(st->c->kind));
    }
    if (push_state(st, d))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    return 0;
}

static void ss_rollback(plume_sampler_state *st, int32_t n)
{
    if (n <= 0)
        return;
    if ((size_t)n >= st->n_states)
        n = (int32_t)st->n_states - 1; /* the start state stays */
    st->n_states -= (size_t)n;
    st->n_stk = st->off[st->n_states];
    st->cur = -1;
}

static const plume_sampler_vtable vtable = {
    .struct_size = sizeof(plume_sampler_vtable),
    .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = "structured",
    .validate = ss_validate,
    .create = ss_create,
    .destroy = ss_destroy,
    .sample = ss_sample,
    .probs = ss_probs,
    .rng = ss_rng,
    .shared_create = ss_shared_create,
    .shared_free = ss_shared_free,
    .create_ex = ss_create_ex,
    .accept = ss_accept,
    .rollback = ss_rollback,
};

const plume_sampler_vtable *ss_structured_sampler(void) { return &vtable; }
