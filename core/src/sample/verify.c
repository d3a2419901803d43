/* Speculative verification: the rejection sampler (see plume/sampler.h). */
#include <string.h>

#include "plume/sampler.h"
#include "sample/draw.h"

/* Draws from a distribution; a point mass is returned without touching the
 * RNG, so greedy decoding stays independent of the random stream. */
static int32_t draw(plume_rng *rng, const float *p, int32_t nv)
{
    int32_t only = -1, count = 0;
    for (int32_t i = 0; i < nv && count < 2; i++)
        if (p[i] > 0.0f) {
            only = i;
            count++;
        }
    if (count == 1)
        return only;
    return plume_draw_at(p, nv, plume_rng_uniform(rng));
}

/* Samples from normalize(max(0, p - q)); q is a point mass on d when qrow is
 * NULL.  When the residual is empty (p <= q everywhere, i.e. p == q) any
 * draw from p is exact. */
static int32_t residual_draw(plume_rng *rng, const float *p, const float *qrow, int32_t d,
                             int32_t nv, float *res)
{
    double sum = 0.0;
    for (int32_t i = 0; i < nv; i++) {
        float q = qrow ? qrow[i] : (i == d ? 1.0f : 0.0f);
        float r = p[i] - q;
        res[i] = r > 0.0f ? r : 0.0f;
        sum += res[i];
    }
    if (sum <= 0.0)
        return draw(rng, p, nv);
    for (int32_t i = 0; i < nv; i++)
        res[i] = (float)(res[i] / sum);
    return draw(rng, res, nv);
}

int32_t plume_spec_verify(const plume_verify_target *t, const float *logits, const int32_t *draft,
                          int32_t n_draft, const float *draft_probs, int32_t *history,
                          size_t n_history, int32_t *out, int32_t *n_accepted, float *work)
{
    const int32_t nv = t->n_vocab;
    float *p = work, *res = work + nv;
    int32_t n_out = 0;
    for (int32_t i = 0; i <= n_draft; i++) {
        const float *row = logits + (size_t)i * nv;
        t->probs(t->ctx, row, history, n_history + (size_t)i, p);
        if (i == n_draft) { /* every draft accepted: the bonus token */
            out[n_out++] = draw(t->rng, p, nv);
            break;
        }
        const int32_t d = draft[i];
        const float *qrow = draft_probs ? draft_probs + (size_t)i * nv : NULL;
        const float q = qrow ? qrow[d] : 1.0f, pd = p[d];
        /* accept with probability min(1, p/q); no draw when the answer is sure */
        bool accept = q > 0.0f && pd > 0.0f &&
                      (pd >= q || plume_rng_uniform(t->rng) < (double)pd / q);
        if (accept) {
            out[n_out++] = d;
            history[n_history + (size_t)i] = d;
            continue;
        }
        out[n_out++] = residual_draw(t->rng, p, qrow, d, nv, res);
        break;
    }
    *n_accepted = n_out - 1;
    return n_out;
}

static int32_t builtin_probs(void *ctx, const float *logits, const int32_t *history,
                             size_t n_history, float *probs)
{
    return plume_sampler_probs(ctx, logits, history, n_history, probs);
}

int32_t plume_sampler_verify(plume_sampler *s, const float *logits, const int32_t *draft,
                             int32_t n_draft, const float *draft_probs, int32_t *history,
                             size_t n_history, int32_t *out, int32_t *n_accepted, float *work)
{
    plume_verify_target t = {builtin_probs, s, plume_sampler_rng(s), plume_sampler_n_vocab(s)};
    return plume_spec_verify(&t, logits, draft, n_draft, draft_probs, history, n_history, out,
                             n_accepted, work);
}
