/* The built-in sampler.  Order of operations (vLLM's; docs/engine.md,
 * "Sampling"): repetition penalty on the logits over the last repeat_last_n
 * tokens, then the presence and frequency penalties over the output tokens,
 * temperature, then on the tempered probabilities top-k and min-p
 * (which commute), top-p on what they left, renormalise, draw. */
#include "plume/sampler.h"
#include "sample/draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct plume_sampler {
    plume_sampling_params p;
    int32_t n_vocab;
    plume_rng rng;
    float *work;      /* n_vocab: penalised, scaled logits */
    int32_t *idx;     /* n_vocab: candidate ids, sorted by logit */
    cand *cands;      /* n_vocab: candidates sorted by logit */
    float *sorted;    /* n_vocab: probabilities in candidate order */
    float *probs;     /* n_vocab: final distribution, by id */
    int32_t *counts;  /* n_vocab: output token counts, all 0 between calls */
    size_t n_prompt;  /* leading history entries that are the prompt */
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void plume_rng_seed(plume_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t plume_rng_next(plume_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double plume_rng_uniform(plume_rng *r) { return (double)(plume_rng_next(r) >> 11) * 0x1.0p-53; }

int plume_sampler_create(const plume_sampling_params *p, int32_t n_vocab, plume_sampler **out,
                         plume_error *err)
{
    if (plume_sampling_validate(p, err))
        return -1;
    if (n_vocab <= 0)
        return plume_err(err, PLUME_ERR_INVALID, "vocabulary size must be positive");
    plume_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating a sampler");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->work = malloc(sizeof(float) * (size_t)n_vocab);
    s->idx = malloc(sizeof(int32_t) * (size_t)n_vocab);
    s->probs = malloc(sizeof(float) * (size_t)n_vocab);
    s->sorted = malloc(sizeof(float) * (size_t)n_vocab);
    s->cands = malloc(sizeof(cand) * (size_t)n_vocab);
    s->counts = calloc((size_t)n_vocab, sizeof(int32_t));
    if (!s->work || !s->idx || !s->probs || !s->sorted || !s->cands || !s->counts) {
        plume_sampler_free(s);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory creating a sampler");
    }
    plume_rng_seed(&s->rng, p->seed);
    *out = s;
    return 0;
}

void plume_sampler_free(plume_sampler *s)
{
    if (!s)
        return;
    free(s->work);
    free(s->idx);
    free(s->probs);
    free(s->sorted);
    free(s->cands);
    free(s->counts);
    free(s);
}

/* Applies the repetition penalty to each distinct recent token once. */
static void apply_penalty(plume_sampler *s, const int32_t *hist, size_t n_hist)
{
    float pen = s->p.repetition_penalty;
    if (pen == 1.0f || !hist)
        return;
    size_t start = 0;
    if (s->p.repeat_last_n >= 0 && n_hist > (size_t)s->p.repeat_last_n)
        start = n_hist - (size_t)s->p.repeat_last_n;
    /* idx doubles as a "seen" marker: entries are overwritten later anyway */
    for (size_t i = start; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t >= 0 && t < s->n_vocab)
            s->idx[t] = -1;
    }
    for (size_t i = start; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= s->n_vocab || s->idx[t] != -1)
            continue;
        s->idx[t] = 0;
        s->work[t] = s->work[t] > 0 ? s->work[t] / pen : s->work[t] * pen;
    }
}

/* OpenAI's presence and frequency penalties over the output part of the
 * history (after the first n_prompt entries): each distinct token once,
 * logit -= presence + frequency * count.  counts is left all zero. */
static void apply_output_penalties(plume_sampler *s, const int32_t *hist, size_t n_hist)
{
    const float pres = s->p.presence_penalty, freq = s->p.frequency_penalty;
    if ((pres == 0.0f && freq == 0.0f) || !hist || n_hist <= s->n_prompt)
        return;
    for (size_t i = s->n_prompt; i < n_hist; i++)
        if (hist[i] >= 0 && hist[i] < s->n_vocab)
            s->counts[hist[i]]++;
    for (size_t i = s->n_prompt; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= s->n_vocab || s->counts[t] == 0)
            continue;
        s->work[t] -= pres + freq * (float)s->counts[t];
        s->counts[t] = 0;
    }
}

void plume_sampler_set_prompt_len(plume_sampler *s, size_t n_prompt) { s->n_prompt = n_prompt; }

static int cmp_cand_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* stable: lower id first among ties */
}

/* True when a ranks after b in cmp_cand_desc's order (lower logit, or
 * the same logit and a higher id). */
static int cand_after(const cand *a, const cand *b)
{
    return cmp_cand_desc(a, b) > 0;
}

/* Restores the heap c[0..k) (root: the candidate ranking last) below j. */
static void sift_down(cand *c, int32_t k, int32_t j)
{
    for (;;) {
        int32_t w = j, l = 2 * j + 1, r = l + 1;
        if (l < k && cand_after(&c[l], &c[w]))
            w = l;
        if (r < k && cand_after(&c[r], &c[w]))
            w = r;
        if (w == j)
            return;
        cand t = c[j];
        c[j] = c[w];
        c[w] = t;
        j = w;
    }
}

/* Moves the k first candidates of c[0..n) in cmp_cand_desc's (total) order
 * to c[0..k), sorted: the same prefix a full qsort leaves, in O(n log k)
 * rather than O(n log n) (a min-heap of the best k seen, its root the worst
 * of them). */
static void select_top(cand *c, int32_t n, int32_t k)
{
    /* c[0..k) becomes the heap: build it, then let every later candidate
     * that beats the root replace it */
    for (int32_t i = k / 2 - 1; i >= 0; i--)
        sift_down(c, k, i);
    for (int32_t i = k; i < n; i++) {
        if (!cand_after(&c[0], &c[i]))
            continue;
        c[0] = c[i];
        sift_down(c, k, 0);
    }
    qsort(c, (size_t)k, sizeof *c, cmp_cand_desc);
}

/* probs = one-hot at the first largest of the penalized logits; 1 kept. */
static int32_t greedy(const plume_sampler *s, float *probs)
{
    int32_t best = 0;
    for (int32_t i = 1; i < s->n_vocab; i++)
        if (s->work[i] > s->work[best])
            best = i;
    probs[best] = 1.0f;
    return 1;
}

int32_t plume_sampler_probs(plume_sampler *s, const float *logits, const int32_t *history,
                            size_t n_history, float *probs)
{
    const int32_t n = s->n_vocab;
    memcpy(s->work, logits, sizeof(float) * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        s->idx[i] = 0;
    apply_penalty(s, history, n_history);
    apply_output_penalties(s, history, n_history);
    memset(probs, 0, sizeof(float) * (size_t)n);
    if (s->p.temperature == 0.0f)
        return greedy(s, probs);
    cand *c = s->cands;
    float *sp = s->sorted;
    for (int32_t i = 0; i < n; i++) {
        c[i].logit = s->work[i] / s->p.temperature;
        c[i].id = i;
    }
    int32_t keep = n;
    if (s->p.top_k > 0 && s->p.top_k < keep) {
        keep = s->p.top_k;
        select_top(c, n, keep); /* c[0..keep) as a full sort would leave them */
    } else {
        qsort(c, (size_t)n, sizeof *c, cmp_cand_desc);
    }
    /* a temperature so small (or a penalty so strong) that the best
     * scaled logit overflows, to +inf or (every logit negative) to -inf,
     * is the limit of the softmax: greedy on the unscaled logits */
    if (isinf(c[0].logit))
        return greedy(s, probs);
    /* softmax over the kept candidates */
    double sum = 0.0;
    float maxl = c[0].logit;
    for (int32_t i = 0; i < keep; i++) {
        sp[i] = expf(c[i].logit - maxl);
        sum += sp[i];
    }
    for (int32_t i = 0; i < keep; i++)
        sp[i] = (float)(sp[i] / sum);
    /* min-p: relative to the most likely token, so normalisation does not
     * matter; before top-p, as in vLLM */
    if (s->p.min_p > 0.0f) {
        float thresh = s->p.min_p * sp[0];
        int32_t k = 1;
        while (k < keep && sp[k] >= thresh)
            k++;
        keep = k;
    }
    /* top-p on what top-k and min-p left, renormalised: the smallest prefix
     * whose mass reaches top_p of the kept mass */
    if (s->p.top_p < 1.0f) {
        double total = 0.0;
        for (int32_t i = 0; i < keep; i++)
            total += sp[i];
        const double target = (double)s->p.top_p * total;
        double cum = 0.0;
        int32_t k = 0;
        while (k < keep) {
            cum += sp[k++];
            if (cum >= target)
                break;
        }
        keep = k;
    }
    sum = 0.0;
    for (int32_t i = 0; i < keep; i++)
        sum += sp[i];
    for (int32_t i = 0; i < keep; i++)
        probs[c[i].id] = (float)(sp[i] / sum);
    return keep;
}

int32_t plume_sampler_draw(plume_sampler *s, const float *probs)
{
    return plume_draw_at(probs, s->n_vocab, plume_rng_uniform(&s->rng));
}

plume_rng *plume_sampler_rng(plume_sampler *s) { return &s->rng; }

bool plume_sampler_is_greedy(const plume_sampler *s) { return s->p.temperature == 0.0f; }

int32_t plume_sampler_n_vocab(const plume_sampler *s) { return s->n_vocab; }

int32_t plume_sampler_sample(plume_sampler *s, const float *logits, const int32_t *history,
                             size_t n_history)
{
    int32_t kept = plume_sampler_probs(s, logits, history, n_history, s->probs);
    if (kept == 1 && s->p.temperature == 0.0f) /* greedy: no draw, the RNG is untouched */
        for (int32_t i = 0; i < s->n_vocab; i++)
            if (s->probs[i] > 0.0f)
                return i;
    return plume_sampler_draw(s, s->probs);
}
