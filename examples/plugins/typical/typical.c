/* plume-typical: locally typical sampling (Meister et al., 2022, "Locally
 * Typical Sampling"; the same as HF transformers' TypicalLogitsWarper and
 * llama.cpp's typical sampler).
 *
 * Each step: p = softmax(logits / temperature), H = the entropy of p.  A
 * token's surprisal is -log p_i; the "typical" tokens are those whose
 * surprisal is closest to H.  Sort tokens by |-log p_i - H|, keep the
 * shortest prefix whose probability mass reaches typical_p (at least
 * min_keep tokens), renormalise and draw.  typical_p = 1 keeps every token;
 * a tiny typical_p keeps only the single most typical token.
 *
 * Settings (pipeline: sampling: { method: typical, ... }):
 *   typical_p    (0, 1]       default 0.95
 *   temperature  (0, 100]     default 1.0
 *   min_keep     [1, 1000]    default 1 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <plume/plugin.h>
#include <plume/sampler.h>

typedef struct typical_params {
    double typical_p, temperature;
    int64_t min_keep;
} typical_params;

struct plume_sampler_state {
    typical_params p;
    int32_t n_vocab;
    plume_rng rng;
    double *prob;      /* n_vocab */
    double *dist;      /* n_vocab: |-log p - H| */
    int32_t *order;    /* n_vocab: token ids by dist */
};

static int read_params(const plume_settings *s, typical_params *p, plume_error *err)
{
    static const char *const keys[] = {"typical_p", "temperature", "min_keep"};
    if (plume_settings_float_open_lo(s, "typical_p", 0.95, 0.0, 1.0, &p->typical_p, err) ||
        plume_settings_float_open_lo(s, "temperature", 1.0, 0.0, 100.0, &p->temperature, err) ||
        plume_settings_int(s, "min_keep", 1, 1, 1000, &p->min_keep, err))
        return -1;
    return plume_settings_check_keys(s, keys, sizeof keys / sizeof *keys, err);
}

static int typical_validate(const plume_settings *s, plume_error *err)
{
    typical_params p;
    return read_params(s, &p, err);
}

static void typical_destroy(plume_sampler_state *st)
{
    if (!st)
        return;
    free(st->prob);
    free(st->dist);
    free(st->order);
    free(st);
}

static int typical_create(const plume_settings *s, int32_t n_vocab, uint64_t seed,
                          plume_sampler_state **out, plume_error *err)
{
    plume_sampler_state *st = calloc(1, sizeof *st);
    if (!st)
        return plume_err(err, PLUME_ERR_NOMEM, "typical: out of memory");
    if (read_params(s, &st->p, err)) {
        free(st);
        return -1;
    }
    st->n_vocab = n_vocab;
    st->prob = malloc(sizeof *st->prob * (size_t)n_vocab);
    st->dist = malloc(sizeof *st->dist * (size_t)n_vocab);
    st->order = malloc(sizeof *st->order * (size_t)n_vocab);
    if (!st->prob || !st->dist || !st->order) {
        typical_destroy(st);
        return plume_err(err, PLUME_ERR_NOMEM, "typical: out of memory for %d tokens", n_vocab);
    }
    plume_rng_seed(&st->rng, seed);
    *out = st;
    return 0;
}

/* qsort has no context argument: the distances being sorted. */
static _Thread_local const double *sort_dist;

static int by_dist(const void *a, const void *b)
{
    double x = sort_dist[*(const int32_t *)a], y = sort_dist[*(const int32_t *)b];
    if (x != y)
        return x < y ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b; /* ties: lower id first */
}

/* Fills st->order[0..n) with the kept tokens and returns n and their mass. */
static int32_t typical_set(plume_sampler_state *st, const float *logits, double *mass)
{
    const int32_t nv = st->n_vocab;
    double mx = -INFINITY, sum = 0, h = 0;
    for (int32_t i = 0; i < nv; i++)
        if (logits[i] > mx)
            mx = logits[i];
    for (int32_t i = 0; i < nv; i++)
        sum += st->prob[i] = exp((logits[i] - mx) / st->p.temperature);
    for (int32_t i = 0; i < nv; i++) {
        st->prob[i] /= sum;
        if (st->prob[i] > 0)
            h -= st->prob[i] * log(st->prob[i]);
    }
    for (int32_t i = 0; i < nv; i++) {
        st->dist[i] = st->prob[i] > 0 ? fabs(-log(st->prob[i]) - h) : INFINITY;
        st->order[i] = i;
    }
    sort_dist = st->dist;
    qsort(st->order, (size_t)nv, sizeof *st->order, by_dist);
    double acc = 0;
    int32_t n = 0;
    while (n < nv) {
        acc += st->prob[st->order[n++]];
        if (acc >= st->p.typical_p && n >= st->p.min_keep)
            break;
    }
    *mass = acc;
    return n;
}

static int32_t typical_sample(plume_sampler_state *st, const float *logits,
                              const int32_t *history, size_t n_history)
{
    (void)history;
    (void)n_history;
    double mass;
    int32_t n = typical_set(st, logits, &mass);
    double u = plume_rng_uniform(&st->rng) * mass;
    for (int32_t i = 0; i < n; i++) {
        u -= st->prob[st->order[i]];
        if (u < 0)
            return st->order[i];
    }
    return st->order[n - 1];
}

static int32_t typical_probs(plume_sampler_state *st, const float *logits,
                             const int32_t *history, size_t n_history, float *probs)
{
    (void)history;
    (void)n_history;
    double mass;
    int32_t n = typical_set(st, logits, &mass);
    memset(probs, 0, sizeof *probs * (size_t)st->n_vocab);
    for (int32_t i = 0; i < n; i++)
        probs[st->order[i]] = (float)(st->prob[st->order[i]] / mass);
    return n;
}

static const plume_sampler_vtable typical_sampler = {
    .struct_size = sizeof(plume_sampler_vtable),
    .interface_version = PLUME_SAMPLER_INTERFACE_VERSION,
    .name = "typical",
    .validate = typical_validate,
    .create = typical_create,
    .destroy = typical_destroy,
    .sample = typical_sample,
    .probs = typical_probs,
};

static int typical_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_sampler(reg, &typical_sampler);
}

PLUME_PLUGIN_DEFINE("typical", "0.1.0", "locally typical sampling (typical_p)", "Apache-2.0",
                    typical_init)
