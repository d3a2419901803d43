/* The mixture-of-experts MLP (moe.h): host routing, then per active expert
 * a gather of its rows, its gate/up/down linears over them, and a weighted
 * scatter-add into the residual stream. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/moe.h"
#include "runtime/builtin.h"

int64_t plume_moe_plan_bytes(const plume_model_config *c, int32_t max_tokens)
{
    const int64_t T = max_tokens, X = c->n_expert, k = c->n_expert_used;
    return T * X * 4 + 2 * T * k * 4 + (2 * X + 1) * 4 + 2 * T * k * 4 + T * 4 +
           3 * X * (int64_t)sizeof(void *);
}

int plume_moe_plan_init(plume_moe_plan *p, const plume_model_config *c, int32_t max_tokens,
                        plume_error *err)
{
    memset(p, 0, sizeof *p);
    const size_t T = (size_t)max_tokens, X = (size_t)c->n_expert, k = (size_t)c->n_expert_used;
    p->max_tokens = max_tokens;
    p->n_expert = c->n_expert;
    p->k = c->n_expert_used;
    p->logits = malloc(sizeof(float) * T * X);
    p->ids = malloc(sizeof(int32_t) * T * k);
    p->w = malloc(sizeof(float) * T * k);
    p->count = malloc(sizeof(int32_t) * X);
    p->offset = malloc(sizeof(int32_t) * (X + 1));
    p->rows = malloc(sizeof(int32_t) * T * k);
    p->rw = malloc(sizeof(float) * T * k);
    p->iota = malloc(sizeof(int32_t) * T);
    p->seg_gu = malloc(sizeof(*p->seg_gu) * 2 * X);
    p->seg_down = malloc(sizeof(*p->seg_down) * X);
    p->grouped_tokens = plume_moe_grouped_rows(c, max_tokens) / (int32_t)k;
    if (!p->logits || !p->ids || !p->w || !p->count || !p->offset || !p->rows || !p->rw ||
        !p->iota || !p->seg_gu || !p->seg_down) {
        plume_moe_plan_free(p);
        return plume_err(err, PLUME_ERR_NOMEM,
                         "out of memory for the routing of %d tokens over %d experts", max_tokens,
                         c->n_expert);
    }
    for (int32_t r = 0; r < max_tokens; r++)
        p->iota[r] = r;
    return 0;
}

void plume_moe_plan_free(plume_moe_plan *p)
{
    free(p->logits);
    free(p->ids);
    free(p->w);
    free(p->count);
    free(p->offset);
    free(p->rows);
    free(p->rw);
    free(p->iota);
    free(p->seg_gu);
    free(p->seg_down);
    memset(p, 0, sizeof *p);
}

void plume_moe_route(const plume_model_config *c, const float *logits, int32_t n, int32_t *ids,
                     float *w)
{
    const int X = c->n_expert, k = c->n_expert_used;
    for (int32_t r = 0; r < n; r++) {
        const float *l = logits + (size_t)r * X;
        int32_t *id = ids + (size_t)r * k;
        float *wr = w + (size_t)r * k;
        /* top-k by selection: the highest remaining logit, the lower index on a tie */
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < X; e++) {
                bool taken = false;
                for (int i = 0; i < j && !taken; i++)
                    taken = id[i] == e;
                if (!taken && (best < 0 || l[e] > l[best]))
                    best = e;
            }
            id[j] = best;
        }
        const double mx = (double)l[id[0]];
        double sum = 0.0;
        if (c->moe_norm_topk)
            for (int j = 0; j < k; j++)
                sum += exp((double)l[id[j]] - mx);
        else
            for (int e = 0; e < X; e++)
                sum += exp((double)l[e] - mx);
        for (int j = 0; j < k; j++)
            wr[j] = (float)(exp((double)l[id[j]] - mx) / sum);
    }
}

/* Groups the routed (row, expert) pairs by expert: rows ascending within
 * each expert, with their weights. */
static void group(plume_moe_plan *p, int32_t n)
{
    const int X = p->n_expert, k = p->k;
    memset(p->count, 0, sizeof(int32_t) * (size_t)X);
    for (int32_t i = 0; i < n * k; i++)
        p->count[p->ids[i]]++;
    p->offset[0] = 0;
    for (int e = 0; e < X; e++)
        p->offset[e + 1] = p->offset[e] + p->count[e];
    memset(p->count, 0, sizeof(int32_t) * (size_t)X);
    for (int32_t r = 0; r < n; r++)
        for (int j = 0; j < k; j++) {
            const int32_t e = p->ids[(size_t)r * k + j], at = p->offset[e] + p->count[e]++;
            p->rows[at] = r;
            p->rw[at] = p->w[(size_t)r * k + j];
        }
}

/* gate and up of one expert on the same rows: one pass when they share a
 * method with forward_multi (one quantization of x), else two. */
static int gate_up(const plume_backend_vtable *B, plume_backend *b, const plume_lin *g,
                   const plume_lin *u, const plume_buf *x, int32_t n, plume_buf *yg,
                   plume_buf *yu, plume_error *err)
{
    if (g->vt == u->vt && g->vt->forward_multi) {
        plume_linear *pl[2] = {g->pl, u->pl};
        plume_buf *y[2] = {yg, yu};
        if (g->vt->forward_multi(pl, 2, B, b, x, n, y, err))
            return plume_err_prefix(err, "linear method %s", g->vt->name);
        return 0;
    }
    if (g->vt->forward(g->pl, B, b, x, n, yg, err) || u->vt->forward(u->pl, B, b, x, n, yu, err))
        return plume_err_prefix(err, "an expert's gate/up");
    return 0;
}

int32_t plume_moe_grouped_rows(const plume_model_config *c, int32_t max_tokens)
{
    const int32_t t = max_tokens < PLUME_MOE_GROUPED_TOKENS ? max_tokens : PLUME_MOE_GROUPED_TOKENS;
    return t * c->n_expert_used;
}

/* The experts' prepared matrices for one matmul_segments call each (gate
 * and up interleaved, then down), or false when an expert is not a
 * native linear without bias (gpt-oss's biased experts, a quant plugin). */
static bool segment_weights(const plume_moe *moe, int32_t X, const plume_bweight **gu,
                            const plume_bweight **dn)
{
    for (int32_t e = 0; e < X; e++) {
        const plume_lin *l[3] = {&moe->gate[e], &moe->up[e], &moe->down[e]};
        for (int i = 0; i < 3; i++)
            if (l[i]->vt != &plume_builtin_native_linear || plume_native_linear_bias(l[i]->pl))
                return false;
        gu[2 * e] = plume_native_linear_weight(l[0]->pl);
        gu[2 * e + 1] = plume_native_linear_weight(l[1]->pl);
        dn[e] = plume_native_linear_weight(l[2]->pl);
    }
    return true;
}

/* Every routed (row, expert) pair at once: one gather of the rows in
 * grouped order, gate and up of every active expert in one
 * matmul_segments, one SwiGLU, the downs in another, one scatter-add in
 * the grouped order (expert ascending, as the per-expert loop adds). */
static int experts_grouped(const plume_backend_vtable *B, plume_backend *b,
                           const plume_model_config *c, plume_moe_plan *p,
                           const plume_moe_bufs *bufs, const plume_buf *xn, plume_buf *x,
                           int32_t n, plume_error *err)
{
    const int32_t E = c->n_embd, F = c->n_ff_exp, X = c->n_expert, m = n * c->n_expert_used;
    plume_buf *const gu[2] = {bufs->gate, bufs->up};
    if (B->gather_rows(b, bufs->xg, xn, p->rows, m, E, err) ||
        B->matmul_segments(b, p->seg_gu, 2, X, p->offset, bufs->xg, gu, err) ||
        B->swiglu(b, bufs->gate, bufs->up, (size_t)m * F, err) ||
        B->matmul_segments(b, p->seg_down, 1, X, p->offset, bufs->gate, &bufs->y, err) ||
        B->scatter_add_rows(b, x, bufs->y, p->rows, p->rw, m, E, err))
        return plume_err_prefix(err, "backend %s: the experts of %d rows as one job", B->name, n);
    return 0;
}

int plume_moe_forward(const plume_backend_vtable *B, plume_backend *b, const plume_model_config *c,
                      const plume_moe *moe, plume_moe_plan *p, const plume_moe_bufs *bufs,
                      const plume_buf *xn, plume_buf *x, int32_t n, plume_error *err)
{
    const int32_t E = c->n_embd, F = c->n_ff_exp, X = c->n_expert;
    if (n > p->max_tokens)
        return plume_err(err, PLUME_ERR_INTERNAL, "moe: %d rows in a plan for %d", n,
                         p->max_tokens);
    if (moe->router.vt->forward(moe->router.pl, B, b, xn, n, bufs->logits, err))
        return plume_err_prefix(err, "the router");
    if ((B->synchronize && B->synchronize(b, err)) ||
        B->download(b, p->logits, bufs->logits, 0, sizeof(float) * (size_t)n * X, err))
        return plume_err_prefix(err, "backend %s: the router's logits", B->name);
    plume_moe_route(c, p->logits, n, p->ids, p->w);
    group(p, n);
    const bool grouped = n <= p->grouped_tokens && !c->swiglu_oai &&
                         PLUME_BACKEND_HAS_OP(B, matmul_segments) &&
                         segment_weights(moe, X, p->seg_gu, p->seg_down);
    if (grouped && experts_grouped(B, b, c, p, bufs, xn, x, n, err))
        return -1;
    for (int e = 0; e < X && !grouped; e++) {
        const int32_t ne = p->offset[e + 1] - p->offset[e];
        if (ne == 0)
            continue;
        const int32_t *idx = p->rows + p->offset[e];
        const plume_buf *in = xn; /* every row routed here, in order: no gather needed */
        if (ne != n) {
            if (B->gather_rows(b, bufs->xg, xn, idx, ne, E, err))
                return plume_err_prefix(err, "backend %s: gather_rows", B->name);
            in = bufs->xg;
        }
        if (gate_up(B, b, &moe->gate[e], &moe->up[e], in, ne, bufs->gate, bufs->up, err) ||
            (c->swiglu_oai ? B->swiglu_oai(b, bufs->gate, bufs->up, (size_t)ne * F,
                                           c->swiglu_alpha, c->swiglu_limit, err)
                           : B->swiglu(b, bufs->gate, bufs->up, (size_t)ne * F, err)) ||
            moe->down[e].vt->forward(moe->down[e].pl, B, b, bufs->gate, ne, bufs->y, err) ||
            B->scatter_add_rows(b, x, bufs->y, idx, p->rw + p->offset[e], ne, E, err))
            return plume_err_prefix(err, "expert %d", e);
    }
    if (!moe->sh_router.vt)
        return 0;
    /* the shared expert on every row, scaled by sigmoid of its gate's logit */
    const int32_t S = c->n_ff_shexp;
    if (moe->sh_router.vt->forward(moe->sh_router.pl, B, b, xn, n, bufs->logits, err) ||
        (B->synchronize && B->synchronize(b, err)) ||
        B->download(b, p->w, bufs->logits, 0, sizeof(float) * (size_t)n, err))
        return plume_err_prefix(err, "the shared expert's gate");
    for (int32_t r = 0; r < n; r++)
        p->w[r] = (float)(1.0 / (1.0 + exp(-(double)p->w[r])));
    if (gate_up(B, b, &moe->sh_gate, &moe->sh_up, xn, n, bufs->gate, bufs->up, err) ||
        B->swiglu(b, bufs->gate, bufs->up, (size_t)n * S, err) ||
        moe->sh_down.vt->forward(moe->sh_down.pl, B, b, bufs->gate, n, bufs->y, err) ||
        B->scatter_add_rows(b, x, bufs->y, p->iota, p->w, n, E, err))
        return plume_err_prefix(err, "the shared expert");
    return 0;
}
