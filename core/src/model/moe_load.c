/* Loading a mixture-of-experts MLP: the router and every expert's gate, up
 * and down as native linears over 2-D views of the checkpoint.
 *
 * Where the experts live (formats.md; llama.cpp's and transformers' names):
 *   GGUF      blk.N.ffn_gate_inp.weight            [n_expert][n_embd]
 *             blk.N.ffn_{gate,up}_exps.weight      [n_expert][n_ff_exp][n_embd]
 *             blk.N.ffn_down_exps.weight           [n_expert][n_embd][n_ff_exp]
 *   HF Mixtral  model.layers.N.block_sparse_moe.gate.weight,
 *               ...block_sparse_moe.experts.E.{w1,w3,w2}.weight (gate, up, down)
 *   HF Qwen3-MoE, OLMoE  model.layers.N.mlp.gate.weight,
 *               ...mlp.experts.E.{gate,up,down}_proj.weight
 *   HF fused (transformers 5's in-memory layout, written by some tools)
 *               model.layers.N.mlp.experts.gate_up_proj [n_expert][2 n_ff_exp][n_embd]
 *               (gate rows first), ...mlp.experts.down_proj [n_expert][n_embd][n_ff_exp]
 *   Qwen2-MoE's shared expert: GGUF blk.N.ffn_{gate,up,down}_shexp.weight and
 *   blk.N.ffn_gate_inp_shexp.weight ([n_embd] or [1][n_embd]); HF
 *   model.layers.N.mlp.shared_expert.{gate,up,down}_proj.weight and
 *   model.layers.N.mlp.shared_expert_gate.weight [1][n_embd]
 * Dimensions above are PyTorch order; ggml order (ne) is reversed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "runtime/builtin.h"

static const plume_tensor *find(const plume_model *m, const char *name)
{
    plume_weights w = {m->fmt, m->ck};
    return plume_weights_find(&w, name, NULL);
}

/* Checks that t (named name) has n_dims dims of ne (ggml order), a type
 * plume computes with in whole blocks, and that the backend runs it. */
static int check_tensor(const plume_model *m, const plume_tensor *t, const char *name, int n_dims,
                        const int64_t ne[3], plume_error *err)
{
    if (!t)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    if (!plume_dtype_supported(t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: tensor '%s' has type %s, which plume cannot compute with yet "
                         "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)",
                         m->path, name, plume_dtype_name(t->type));
    bool ok = t->n_dims == n_dims;
    for (int i = 0; i < n_dims && ok; i++)
        ok = t->ne[i] == ne[i];
    if (!ok)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' has shape (ggml order) [%lld, %lld, %lld] with %d dims; "
                         "the config needs [%lld, %lld, %lld] with %d",
                         m->path, name, (long long)t->ne[0], (long long)t->ne[1],
                         (long long)(t->n_dims > 2 ? t->ne[2] : 1), t->n_dims, (long long)ne[0],
                         (long long)ne[1], (long long)(n_dims > 2 ? ne[2] : 1), n_dims);
    if (plume_dtype_row_bytes(t->type, ne[0]) == 0)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' rows of %lld elements are not a whole number of %s blocks",
                         m->path, name, (long long)ne[0], plume_dtype_name(t->type));
    if (!m->bvt->supports(m->b, PLUME_FEAT_WEIGHT_TYPE, t->type))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "%s: tensor '%s' has type %s, which backend %s cannot run; choose "
                         "another backend (cpu runs every type plume reads)",
                         m->path, name, plume_dtype_name(t->type), m->bvt->name);
    return 0;
}

/* A 2-D view of rows r0 .. r0+n-1 of expert e of the 3-D tensor t. */
static plume_tensor slab_view(const plume_tensor *t, int64_t e, int64_t r0, int64_t n)
{
    const size_t rb = plume_dtype_row_bytes(t->type, t->ne[0]);
    plume_tensor v = {.name = t->name, .type = t->type, .n_dims = 2,
                      .ne = {t->ne[0], n, 1, 1},
                      .data = (const char *)t->data + ((size_t)e * (size_t)t->ne[1] +
                                                       (size_t)r0) * rb,
                      .nbytes = (size_t)n * rb};
    return v;
}

/* A native linear over the view v (kept in the model's moe struct). */
static int make_linear(plume_model *m, const plume_tensor *v, plume_lin *L, plume_error *err)
{
    if (plume_native_linear_create(m->bvt, m->b, v, NULL, &L->pl, err))
        return plume_err_prefix(err, "%s: backend %s preparing '%s'", m->path, m->bvt->name,
                                v->name);
    L->vt = &plume_builtin_native_linear;
    m->n_params += v->ne[0] * v->ne[1];
    m->weight_bytes += (int64_t)v->nbytes;
    return 0;
}

/* The three experts' views of a GGUF or HF-fused layer (3-D tensors). */
static int views_3d(plume_model *m, plume_moe *moe, const char *gate, const char *up,
                    const char *down, bool fused, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, F = c->n_ff_exp, X = c->n_expert;
    const plume_tensor *tg = find(m, gate), *tu = fused ? tg : find(m, up), *td = find(m, down);
    const int64_t ne_gu[3] = {E, fused ? 2 * F : F, X}, ne_d[3] = {F, E, X};
    if (check_tensor(m, tg, gate, 3, ne_gu, err) ||
        (!fused && check_tensor(m, tu, up, 3, ne_gu, err)) ||
        check_tensor(m, td, down, 3, ne_d, err))
        return -1;
    for (int64_t e = 0; e < X; e++) {
        moe->views[3 * e] = slab_view(tg, e, 0, F);
        moe->views[3 * e + 1] = slab_view(tu, e, fused ? F : 0, F);
        moe->views[3 * e + 2] = slab_view(td, e, 0, E);
    }
    return 0;
}

/* The experts' views of an HF layer with one matrix per expert. */
static int views_2d(plume_model *m, plume_moe *moe, const char *fmt, const char *const names[3],
                    int l, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, F = c->n_ff_exp;
    const int64_t ne[3][3] = {{E, F, 1}, {E, F, 1}, {F, E, 1}};
    for (int e = 0; e < c->n_expert; e++)
        for (int i = 0; i < 3; i++) {
            char name[256];
            snprintf(name, sizeof name, fmt, l, e, names[i]);
            const plume_tensor *t = find(m, name);
            if (check_tensor(m, t, name, 2, ne[i], err))
                return -1;
            moe->views[3 * e + i] = *t;
        }
    return 0;
}

/* Qwen2-MoE's shared expert of layer l and its sigmoid gate. */
static int load_shared(plume_model *m, int l, plume_moe *moe, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, F = c->n_ff_shexp;
    static const char *const gg[3] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};
    static const char *const hf[3] = {"gate_proj", "up_proj", "down_proj"};
    const int64_t ne[3][3] = {{E, F, 1}, {E, F, 1}, {F, E, 1}};
    plume_lin *lins[3] = {&moe->sh_gate, &moe->sh_up, &moe->sh_down};
    char name[192];
    for (int i = 0; i < 3; i++) {
        if (m->gguf)
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, gg[i]);
        else
            snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert.%s.weight", l, hf[i]);
        const plume_tensor *t = find(m, name);
        if (check_tensor(m, t, name, 2, ne[i], err) || make_linear(m, t, lins[i], err))
            return -1;
    }
    if (m->gguf)
        snprintf(name, sizeof name, "blk.%d.ffn_gate_inp_shexp.weight", l);
    else
        snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert_gate.weight", l);
    const plume_tensor *t = find(m, name);
    if (!t)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    /* [n_embd] or [1][n_embd]: one output row either way */
    moe->sh_router_view = *t;
    moe->sh_router_view.n_dims = 2;
    moe->sh_router_view.ne[0] = plume_tensor_nelements(t);
    moe->sh_router_view.ne[1] = moe->sh_router_view.ne[2] = moe->sh_router_view.ne[3] = 1;
    const int64_t ne_g[3] = {E, 1, 1};
    if (check_tensor(m, &moe->sh_router_view, name, 2, ne_g, err))
        return -1;
    return make_linear(m, &moe->sh_router_view, &moe->sh_router, err);
}

int plume_moe_load(plume_model *m, int l, plume_layer *L, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    plume_moe *moe = calloc(1, sizeof *moe);
    if (!moe)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    L->moe = moe;
    const int X = c->n_expert;
    moe->gate = calloc((size_t)X, sizeof *moe->gate);
    moe->up = calloc((size_t)X, sizeof *moe->up);
    moe->down = calloc((size_t)X, sizeof *moe->down);
    moe->views = calloc(3 * (size_t)X, sizeof *moe->views);
    if (!moe->gate || !moe->up || !moe->down || !moe->views)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for %d experts", X);
    moe->n_expert = X;
    char router[160], a[160], b[160], d[160];
    int rc;
    if (m->gguf) {
        snprintf(router, sizeof router, "blk.%d.ffn_gate_inp.weight", l);
        snprintf(a, sizeof a, "blk.%d.ffn_gate_exps.weight", l);
        snprintf(b, sizeof b, "blk.%d.ffn_up_exps.weight", l);
        snprintf(d, sizeof d, "blk.%d.ffn_down_exps.weight", l);
        rc = views_3d(m, moe, a, b, d, false, err);
    } else {
        snprintf(router, sizeof router, "model.layers.%d.mlp.gate.weight", l);
        snprintf(a, sizeof a, "model.layers.%d.mlp.experts.gate_up_proj", l);
        snprintf(d, sizeof d, "model.layers.%d.mlp.experts.down_proj", l);
        snprintf(b, sizeof b, "model.layers.%d.block_sparse_moe.gate.weight", l);
        bool mixtral = !find(m, router) && find(m, b);
        if (mixtral)
            snprintf(router, sizeof router, "%s", b);
        if (find(m, a)) {
            rc = views_3d(m, moe, a, NULL, d, true, err);
        } else if (mixtral) {
            static const char *const w[3] = {"w1", "w3", "w2"};
            rc = views_2d(m, moe, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", w, l,
                          err);
        } else {
            static const char *const w[3] = {"gate_proj", "up_proj", "down_proj"};
            rc = views_2d(m, moe, "model.layers.%d.mlp.experts.%d.%s.weight", w, l, err);
        }
    }
    const int64_t ne_r[3] = {c->n_embd, X, 1};
    const plume_tensor *rt = find(m, router);
    if (rc || check_tensor(m, rt, router, 2, ne_r, err) || make_linear(m, rt, &moe->router, err) ||
        (c->n_ff_shexp > 0 && load_shared(m, l, moe, err)))
        return -1;
    for (int e = 0; e < X; e++)
        if (make_linear(m, &moe->views[3 * e], &moe->gate[e], err) ||
            make_linear(m, &moe->views[3 * e + 1], &moe->up[e], err) ||
            make_linear(m, &moe->views[3 * e + 2], &moe->down[e], err))
            return -1;
    return 0;
}

static void lin_release(plume_lin *L)
{
    if (L->vt && L->pl)
        L->vt->destroy(L->pl);
    L->vt = NULL;
    L->pl = NULL;
}

void plume_moe_free(plume_layer *L)
{
    plume_moe *moe = L->moe;
    if (!moe)
        return;
    lin_release(&moe->router);
    lin_release(&moe->sh_gate);
    lin_release(&moe->sh_up);
    lin_release(&moe->sh_down);
    lin_release(&moe->sh_router);
    for (int e = 0; e < moe->n_expert; e++) {
        if (moe->gate)
            lin_release(&moe->gate[e]);
        if (moe->up)
            lin_release(&moe->up[e]);
        if (moe->down)
            lin_release(&moe->down[e]);
    }
    free(moe->gate);
    free(moe->up);
    free(moe->down);
    free(moe->views);
    free(moe);
    L->moe = NULL;
}
