/* Perplexity and KL divergence over fixed windows (see perplexity.h). */
#include "plume/clock.h"
#include "plume/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval/window.h"

#define PPL_CHUNK 128 /* positions per forward */

/* First scored logit position of a window. */
static int32_t first_scored(const plume_ppl_params *p)
{
    return p->stride > 0 ? p->n_ctx - p->stride - 1 : p->n_ctx / 2;
}

int plume_ppl_plan(size_t n_tokens, const plume_ppl_params *p, int32_t *n_windows,
                   int32_t *per_window, plume_error *err)
{
    if (p->n_ctx < 4)
        return plume_err(err, PLUME_ERR_INVALID, "the window (--ctx) must be at least 4 tokens, "
                                                 "got %d", p->n_ctx);
    if (p->stride < 0 || p->stride >= p->n_ctx)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the stride must be in [1, %d) (below the window), got %d", p->n_ctx,
                         p->stride);
    if (n_tokens < (size_t)p->n_ctx)
        return plume_err(err, PLUME_ERR_RANGE,
                         "the text has %zu tokens, fewer than one window of %d; use a longer "
                         "text or a smaller --ctx",
                         n_tokens, p->n_ctx);
    size_t nw = p->stride > 0 ? (n_tokens - (size_t)p->n_ctx) / (size_t)p->stride + 1
                              : n_tokens / (size_t)p->n_ctx;
    if (p->max_windows > 0 && nw > (size_t)p->max_windows)
        nw = (size_t)p->max_windows;
    if (nw > INT32_MAX)
        return plume_err(err, PLUME_ERR_RANGE, "too many windows (%zu)", nw);
    *n_windows = (int32_t)nw;
    *per_window = p->n_ctx - 1 - first_scored(p);
    return 0;
}

/* log Σ exp(x) in double; *argmax gets the index of the largest value. */
static double log_sum_exp(const float *x, int32_t n, int32_t *argmax)
{
    int32_t am = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[am])
            am = i;
    double mx = x[am], s = 0.0;
    for (int32_t i = 0; i < n; i++)
        s += exp((double)x[i] - mx);
    *argmax = am;
    return mx + log(s);
}

/* KL(base || model) for one position, given both log-normalisers. */
static double kl_div(const float *lb, double lse_b, const float *lm, double lse_m, int32_t n)
{
    double kl = 0.0;
    for (int32_t i = 0; i < n; i++) {
        double logpb = (double)lb[i] - lse_b;
        kl += exp(logpb) * (logpb - ((double)lm[i] - lse_m));
    }
    return kl > 0.0 ? kl : 0.0; /* tiny negatives are rounding */
}

/* Accumulators of the whole run. */
typedef struct ppl_acc {
    double nll, nll2, bnll, bnll2, kl, kl2;
    int64_t n, same;
    double *kls; /* every KL value, for the quantiles */
} ppl_acc;

static void mean_err(double sum, double sum2, int64_t n, double *mean, double *err)
{
    *mean = n ? sum / (double)n : 0.0;
    double var = n ? sum2 / (double)n - *mean * *mean : 0.0;
    *err = n > 1 && var > 0.0 ? sqrt(var / (double)(n - 1)) : 0.0;
}

static void fill_stats(const ppl_acc *a, plume_ppl_stats *s)
{
    double e;
    s->n_scored = a->n;
    mean_err(a->nll, a->nll2, a->n, &s->nll_mean, &e);
    s->ppl = exp(s->nll_mean);
    s->ppl_err = s->ppl * e;
    if (s->has_base) {
        mean_err(a->bnll, a->bnll2, a->n, &s->base_nll_mean, &e);
        s->base_ppl = exp(s->base_nll_mean);
        s->base_ppl_err = s->base_ppl * e;
        mean_err(a->kl, a->kl2, a->n, &s->kl_mean, &s->kl_err);
        double p = a->n ? (double)a->same / (double)a->n : 0.0;
        s->top1_pct = 100.0 * p;
        s->top1_err = a->n > 1 ? 100.0 * sqrt(p * (1.0 - p) / (double)(a->n - 1)) : 0.0;
    }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Scores the n_logits rows of one chunk whose last position is pos_end−1. */
static void score_rows(const plume_ppl_params *p, const int32_t *win, int32_t pos_end,
                       int32_t n_logits, const float *lm, const float *lb, int32_t n_vocab,
                       ppl_acc *a)
{
    int32_t first = first_scored(p);
    for (int32_t k = 0; k < n_logits; k++) {
        int32_t pos = pos_end - n_logits + k;
        if (pos < first || pos > p->n_ctx - 2)
            continue;
        int32_t tgt = win[pos + 1], am_m, am_b;
        const float *rm = lm + (size_t)k * (size_t)n_vocab;
        double lse_m = log_sum_exp(rm, n_vocab, &am_m);
        double nll = lse_m - (double)rm[tgt];
        a->nll += nll;
        a->nll2 += nll * nll;
        if (lb) {
            const float *rb = lb + (size_t)k * (size_t)n_vocab;
            double lse_b = log_sum_exp(rb, n_vocab, &am_b);
            double bnll = lse_b - (double)rb[tgt];
            double kl = kl_div(rb, lse_b, rm, lse_m, n_vocab);
            a->bnll += bnll;
            a->bnll2 += bnll * bnll;
            a->kl += kl;
            a->kl2 += kl * kl;
            a->kls[a->n] = kl;
            a->same += am_m == am_b;
        }
        a->n++;
    }
}

/* Runs one window through m (and base) chunk by chunk, scoring as it goes. */
static int run_window(const plume_ppl_params *p, plume_window *wm, plume_window *wb,
                      const int32_t *win, int32_t n_vocab, ppl_acc *a, plume_error *err)
{
    int32_t first = first_scored(p), chunk = plume_window_chunk(wm);
    for (int32_t a0 = 0; a0 < p->n_ctx; a0 += chunk) {
        int32_t n = p->n_ctx - a0 < chunk ? p->n_ctx - a0 : chunk, b = a0 + n;
        int32_t from = a0 > first ? a0 : first;
        int32_t n_logits = b > from ? b - from : 0;
        const float *lm = plume_window_run(wm, win + a0, n, a0, n_logits, err);
        if (!lm)
            return -1;
        const float *lb = NULL;
        if (wb && !(lb = plume_window_run(wb, win + a0, n, a0, n_logits, err)))
            return plume_err_prefix(err, "base model");
        score_rows(p, win, b, n_logits, lm, lb, n_vocab, a);
    }
    return 0;
}

int plume_perplexity(const plume_model *m, const plume_model *base, const int32_t *tokens,
                     size_t n_tokens, int32_t bos, const plume_ppl_params *p,
                     plume_ppl_progress_fn progress, void *user, plume_ppl_stats *out,
                     plume_error *err)
{
    int32_t n_windows, per_window, n_vocab = plume_model_n_vocab(m);
    if (plume_ppl_plan(n_tokens, p, &n_windows, &per_window, err))
        return -1;
    if (base && plume_model_n_vocab(base) != n_vocab)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the base model's vocabulary has %d entries, the model's %d: KL "
                         "divergence needs the same vocabulary",
                         plume_model_n_vocab(base), n_vocab);
    for (size_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return plume_err(err, PLUME_ERR_INVALID, "token %zu (id %d) is outside the "
                                                     "vocabulary of %d", i, tokens[i], n_vocab);
    plume_window *wm = NULL, *wb = NULL;
    ppl_acc a = {0};
    int32_t *win = malloc(sizeof(int32_t) * (size_t)p->n_ctx);
    int rc = -1;
    if (!win || (base && !(a.kls = malloc(sizeof(double) * (size_t)n_windows *
                                          (size_t)per_window)))) {
        plume_err(err, PLUME_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (plume_window_create(m, p->n_ctx, PPL_CHUNK, p->kv_dtype, &wm, err) ||
        (base && plume_window_create(base, p->n_ctx, PPL_CHUNK, PLUME_KV_F32, &wb, err)))
        goto out;
    plume_ppl_stats s = {.n_windows = n_windows, .n_tokens = (int64_t)n_tokens,
                         .has_base = base != NULL};
    double t0 = plume_clock_seconds();
    int32_t step = p->stride > 0 ? p->stride : p->n_ctx;
    for (int32_t w = 0; w < n_windows; w++) {
        memcpy(win, tokens + (size_t)w * (size_t)step, sizeof(int32_t) * (size_t)p->n_ctx);
        if (bos >= 0)
            win[0] = bos;
        if (run_window(p, wm, wb, win, n_vocab, &a, err)) {
            plume_err_prefix(err, "window %d", w + 1);
            goto out;
        }
        s.window = w + 1;
        s.seconds = plume_clock_seconds() - t0;
        fill_stats(&a, &s);
        if (progress)
            progress(user, &s);
    }
    if (base && a.n) {
        qsort(a.kls, (size_t)a.n, sizeof(double), cmp_double);
        s.kl_median = a.n % 2 ? a.kls[a.n / 2] : 0.5 * (a.kls[a.n / 2 - 1] + a.kls[a.n / 2]);
        s.kl_p99 = a.kls[(size_t)floor(0.99 * (double)(a.n - 1))];
        s.kl_max = a.kls[a.n - 1];
    }
    *out = s;
    rc = 0;
out:
    plume_window_free(wm);
    plume_window_free(wb);
    free(a.kls);
    free(win);
    return rc;
}
