/* Speculative verification: the rejection sampler (see plume/sampler.h). */
#include <string.h>

#include "plume/sampler.h"

/* Samples from normalize(max(0, p - q)); q is a point mass on d when qrow is
 * NULL.  Falls back to p itself when the residual is empty (p <= q
 * everywhere, which happens only when p == q: then any draw from p is
 * exact). */
static int32_t residual_draw(plume_sampler *s, float *p, const float *qrow, int32_t d,
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
        return plume_sampler_draw(s, p);
    for (int32_t i = 0; i < nv; i++)
        res[i] = (float)(res[i] / sum);
    return plume_sampler_draw(s, res);
}

/* A token from p: its point mass when greedy (no RNG draw), else a draw. */
static int32_t pick(plume_sampler *s, const float *p, int32_t nv)
{
    if (plume_sampler_is_greedy(s))
        for (int32_t i = 0; i < nv; i++)
            if (p[i] > 0.0f)
                return i;
    return plume_sampler_draw(s, p);
}

int32_t plume_sampler_verify(plume_sampler *s, const float *logits, const int32_t *draft,
                             int32_t n_draft, const float *draft_probs, int32_t *history,
                             size_t n_history, int32_t *out, int32_t *n_accepted, float *work)
{
    const int32_t nv = plume_sampler_n_vocab(s);
    float *p = work, *res = work + nv;
    int32_t n_out = 0;
    for (int32_t i = 0; i <= n_draft; i++) {
        const float *row = logits + (size_t)i * nv;
        plume_sampler_probs(s, row, history, n_history + (size_t)i, p);
        if (i == n_draft) { /* every draft accepted: the bonus token */
            out[n_out++] = pick(s, p, nv);
            break;
        }
        const int32_t d = draft[i];
        const float *qrow = draft_probs ? draft_probs + (size_t)i * nv : NULL;
        bool accept;
        if (plume_sampler_is_greedy(s)) {
            accept = p[d] > 0.0f; /* the point mass sits on the argmax */
        } else {
            float q = qrow ? qrow[d] : 1.0f;
            float pd = p[d];
            accept = q > 0.0f && (pd >= q || plume_sampler_uniform(s) < (double)pd / q);
        }
        if (accept) {
            out[n_out++] = d;
            history[n_history + (size_t)i] = d;
            continue;
        }
        out[n_out++] = plume_sampler_is_greedy(s) ? pick(s, p, nv)
                                                  : residual_draw(s, p, qrow, d, nv, res);
        break;
    }
    *n_accepted = n_out - 1;
    return n_out;
}
