/* An independent oracle for the sampler's distribution, a chi-square p-value
 * and Pearson's statistic, shared by the sampler, verification and engine
 * speculation tests.
 *
 * oracle_probs() is written from the definitions, in double precision, and
 * shares no code with core/src/sample/: it never sorts, it ranks each token
 * by counting the tokens above it.  The order it implements is the one
 * docs/engine.md ("Sampling") documents:
 *
 *   repetition penalty over the last repeat_last_n tokens of the history
 *   (each distinct token once: a positive logit is divided by the penalty,
 *   a negative one multiplied) -> temperature (logits / T; T = 0 is the
 *   argmax) -> softmax -> top-k (the k highest) -> min-p (keep
 *   p >= min_p * p_max) -> top-p on the tokens left, renormalised (the
 *   smallest set of most likely tokens whose mass reaches top_p) ->
 *   renormalise.  This is vLLM's order (penalties, temperature, min-p,
 *   top-k, top-p; top-k and min-p commute).
 *
 * Each cut reports how close a token came to its threshold (*margin; for
 * top-k, the gap between the k-th and the next tempered logit); a test
 * asserts the margin is wide so that float rounding in plume cannot flip a
 * token in or out and make the case fragile. */
#ifndef PLUME_TEST_SAMPLE_ORACLE_H
#define PLUME_TEST_SAMPLE_ORACLE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plume/sampler.h"

#define ORACLE_MAX_NV 512

/* Writes the distribution over nv tokens to out; returns the kept count. */
static inline int oracle_probs(const plume_sampling_params *sp, const float *logits, int nv,
                               const int32_t *hist, size_t n_hist, double *out, double *margin)
{
    double l[ORACLE_MAX_NV];
    double m = INFINITY;
    for (int v = 0; v < nv; v++)
        l[v] = logits[v];
    /* repetition penalty: the window is the last repeat_last_n tokens */
    if ((double)sp->repetition_penalty != 1.0 && hist) {
        size_t from = 0;
        if (sp->repeat_last_n >= 0)
            from = n_hist > (size_t)sp->repeat_last_n ? n_hist - (size_t)sp->repeat_last_n : 0;
        if (sp->repeat_last_n == 0)
            from = n_hist;
        int in_window[ORACLE_MAX_NV] = {0};
        for (size_t j = from; j < n_hist; j++)
            if (hist[j] >= 0 && hist[j] < nv)
                in_window[hist[j]] = 1;
        for (int v = 0; v < nv; v++)
            if (in_window[v])
                l[v] = l[v] > 0 ? l[v] / (double)sp->repetition_penalty
                                : l[v] * (double)sp->repetition_penalty;
    }
    if (sp->temperature == 0.0f) {
        int best = 0;
        for (int v = 1; v < nv; v++)
            if (l[v] > l[best])
                best = v;
        for (int v = 0; v < nv; v++)
            out[v] = v == best ? 1.0 : 0.0;
        if (margin)
            *margin = m;
        return 1;
    }
    for (int v = 0; v < nv; v++)
        l[v] /= (double)sp->temperature;
    /* rank: how many tokens come before v (higher logit, or equal and lower id) */
    int rank[ORACLE_MAX_NV];
    for (int v = 0; v < nv; v++) {
        rank[v] = 0;
        for (int u = 0; u < nv; u++)
            if (l[u] > l[v] || (l[u] == l[v] && u < v))
                rank[v]++;
    }
    int keep[ORACLE_MAX_NV];
    for (int v = 0; v < nv; v++)
        keep[v] = sp->top_k <= 0 || rank[v] < sp->top_k;
    if (sp->top_k > 0 && sp->top_k < nv) { /* the gap between the k-th and the next logit */
        double kth = 0, next = 0;
        for (int v = 0; v < nv; v++) {
            if (rank[v] == sp->top_k - 1)
                kth = l[v];
            if (rank[v] == sp->top_k)
                next = l[v];
        }
        if (kth - next < m)
            m = kth - next;
    }
    /* softmax over the top-k set */
    double mx = -INFINITY, z = 0;
    for (int v = 0; v < nv; v++)
        if (keep[v] && l[v] > mx)
            mx = l[v];
    double p[ORACLE_MAX_NV];
    for (int v = 0; v < nv; v++) {
        p[v] = keep[v] ? exp(l[v] - mx) : 0.0;
        z += p[v];
    }
    for (int v = 0; v < nv; v++)
        p[v] /= z;
    /* min-p, relative to the most likely token */
    double pmax = 0;
    for (int v = 0; v < nv; v++)
        if (keep[v] && p[v] > pmax)
            pmax = p[v];
    for (int v = 0; v < nv; v++)
        if (keep[v] && sp->min_p > 0.0f) {
            double ratio = p[v] / pmax;
            keep[v] = ratio >= (double)sp->min_p;
            if (fabs(ratio - (double)sp->min_p) < m)
                m = fabs(ratio - (double)sp->min_p);
        }
    /* top-p on the tokens left, renormalised: v stays when the mass of the
     * tokens ranked before it is still short of top_p (so the token that
     * crosses top_p stays) */
    double left = 0;
    for (int v = 0; v < nv; v++)
        if (keep[v])
            left += p[v];
    int kept = 0;
    z = 0;
    for (int v = 0; v < nv; v++) {
        int stay = keep[v];
        if (stay && (double)sp->top_p < 1.0) {
            double above = 0;
            for (int u = 0; u < nv; u++)
                if (keep[u] && rank[u] < rank[v])
                    above += p[u] / left;
            stay = above < (double)sp->top_p;
            if (rank[v] > 0 && fabs(above - (double)sp->top_p) < m)
                m = fabs(above - (double)sp->top_p);
        }
        out[v] = stay ? p[v] : 0.0;
        z += out[v];
        kept += stay;
    }
    for (int v = 0; v < nv; v++)
        out[v] /= z;
    if (margin)
        *margin = m;
    return kept;
}

/* Q(a, x), the regularised upper incomplete gamma function (series for
 * x < a + 1, Lentz's continued fraction otherwise). */
static inline double oracle_gammq(double a, double x)
{
    if (x <= 0)
        return 1.0;
    double lead = exp(-x + a * log(x) - lgamma(a));
    if (x < a + 1) {
        double ap = a, del = 1.0 / a, sum = del;
        for (int n = 0; n < 10000; n++) {
            ap += 1;
            del *= x / ap;
            sum += del;
            if (fabs(del) < fabs(sum) * 1e-16)
                break;
        }
        return 1.0 - sum * lead;
    }
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < tiny)
            d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-16)
            break;
    }
    return lead * h;
}

/* P(X >= chi) for X chi-square with dof degrees of freedom. */
static inline double oracle_chi2_sf(double chi, int dof) { return oracle_gammq(dof / 2.0, chi / 2.0); }

/* Pearson's statistic of one multinomial (expected counts e, observed o):
 * cells expecting under 5 are pooled, and the pool joins the largest cell
 * while it expects under 5 itself.  A cell that cannot occur (e < 1e-9)
 * must be empty: each that is not is reported and counted in *impossible.
 * Adds to *chi and to *dof (cells - 1). */
static inline void oracle_pearson(const double *e, const int *o, int n, double *chi, int *dof,
                                  int *impossible)
{
    double pe = 0, big_e = -1, big_o = 0;
    int po = 0, cells = 0;
    double sum = 0;
    for (int j = 0; j < n; j++) {
        if (e[j] < 1e-9) {
            if (o[j] != 0) {
                fprintf(stderr, "impossible outcome (cell %d) observed %d times\n", j, o[j]);
                (*impossible)++;
            }
            continue;
        }
        if (e[j] < 5) {
            pe += e[j];
            po += o[j];
            continue;
        }
        if (e[j] > big_e) {
            if (big_e >= 0) { /* the previous biggest becomes an ordinary cell */
                sum += (big_o - big_e) * (big_o - big_e) / big_e;
                cells++;
            }
            big_e = e[j];
            big_o = o[j];
        } else {
            sum += (o[j] - e[j]) * (o[j] - e[j]) / e[j];
            cells++;
        }
    }
    if (pe >= 5 || (big_e < 0 && pe > 0)) {
        sum += (po - pe) * (po - pe) / pe;
        cells++;
    } else {
        big_e += pe;
        big_o += po;
    }
    if (big_e > 0) {
        sum += (big_o - big_e) * (big_o - big_e) / big_e;
        cells++;
    }
    *chi += sum;
    *dof += cells > 0 ? cells - 1 : 0;
}

#endif
