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
 *   gpt-oss (biases everywhere; llama.cpp's openai-moe.cpp, transformers'
 *   modeling_gpt_oss.py):
 *   GGUF      the names above plus blk.N.ffn_gate_inp.bias [n_expert],
 *             blk.N.ffn_{gate,up}_exps.bias [n_expert][n_ff_exp],
 *             blk.N.ffn_down_exps.bias [n_expert][n_embd]; experts in any
 *             type, MXFP4 as convert_hf_to_gguf.py writes them
 *   HF        model.layers.N.mlp.router.{weight,bias},
 *             ...mlp.experts.gate_up_proj [n_expert][n_embd][2 n_ff_exp]
 *             (x @ W; gate the even columns, up the odd), gate_up_proj_bias
 *             [n_expert][2 n_ff_exp] (likewise), down_proj [n_expert]
 *             [n_ff_exp][n_embd], down_proj_bias [n_expert][n_embd]; or the
 *             OpenAI MXFP4 form ..._blocks [n_expert][out][in/32][16] and
 *             ..._scales [n_expert][out][in/32] (U8) of gate_up_proj (rows
 *             interleaved gate/up) and down_proj.  Both are rearranged at
 *             load (moe_repack.h).
 * Dimensions above are PyTorch order; ggml order (ne) is reversed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"
#include "model/model_internal.h"
#include "model/moe_repack.h"
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
                         "(supported: %s)",
                         m->path, name, plume_dtype_name(t->type), plume_dtype_supported_names());
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

/* A native linear over the view v (kept in the model's moe struct), with
 * the bias view bias (NULL: none). */
static int make_linear_b(plume_model *m, const plume_tensor *v, const plume_tensor *bias,
                         plume_lin *L, plume_error *err)
{
    /* a dummy checkpoint's matrix (v is a copy of its plan entry, which
     * may still be unmade): the entry, made or filled on demand */
    const plume_dummy_tensor *e = m->dummy ? plume_dummy_find(m->dummy, v->name) : NULL;
    if (e) {
        plume_bweight *w = NULL, *bw = NULL;
        if (plume_model_dummy_prepare(m, &e->t, &w, err))
            return -1;
        if (bias && m->bvt->weight_prepare(m->b, bias, &bw, err)) {
            m->bvt->weight_free(m->b, w);
            return plume_err_prefix(err, "backend %s preparing '%s'", m->bvt->name, bias->name);
        }
        if (plume_native_linear_adopt(m->bvt, m->b, w, bw, v->ne[0], v->ne[1], &L->pl, err))
            return -1;
    } else if (plume_native_linear_create(m->bvt, m->b, v, bias, &L->pl, err)) {
        return plume_err_prefix(err, "%s: backend %s preparing '%s'", m->path, m->bvt->name,
                                v->name);
    }
    L->vt = &plume_builtin_native_linear;
    m->n_params += v->ne[0] * v->ne[1] + (bias ? bias->ne[0] : 0);
    m->weight_bytes += (int64_t)v->nbytes + (bias ? (int64_t)bias->nbytes : 0);
    return 0;
}

static int make_linear(plume_model *m, const plume_tensor *v, plume_lin *L, plume_error *err)
{
    return make_linear_b(m, v, NULL, L, err);
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

/* Checks that the bias tensor t (named name) holds rows x n float values
 * and fills views[i * 3 + which] with row i as a 1-D vector, i < rows. */
static int bias_rows(const plume_model *m, const plume_tensor *t, const char *name, int64_t n,
                     int64_t rows, plume_tensor *views, int which, plume_error *err)
{
    if (!t)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' is missing", m->path, name);
    const size_t es = plume_dtype_supported(t->type) && plume_dtype_block_elems(t->type) == 1
                          ? plume_dtype_block_bytes(t->type) : 0;
    if (es == 0 || t->ne[0] != n || plume_tensor_nelements(t) != n * rows ||
        t->nbytes < (size_t)(n * rows) * es)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: tensor '%s' should be %lld x %lld values of a float type "
                         "(ggml order [%lld, %lld]), found [%lld, %lld] of type %s",
                         m->path, name, (long long)rows, (long long)n, (long long)n,
                         (long long)rows, (long long)t->ne[0],
                         (long long)(t->n_dims > 1 ? t->ne[1] : 1), plume_dtype_name(t->type));
    for (int64_t i = 0; i < rows; i++)
        views[3 * i + which] = (plume_tensor){.name = t->name, .type = t->type, .n_dims = 1,
                                              .ne = {n, 1, 1, 1},
                                              .data = (const char *)t->data + (size_t)(i * n) * es,
                                              .nbytes = (size_t)n * es};
    return 0;
}

/* A host 3-D tensor [X][rows][cols] (ggml ne {cols, rows, X}) of type at
 * data, standing for rearranged checkpoint bytes. */
static plume_tensor host_3d(const char *name, uint32_t type, int64_t cols, int64_t rows, int64_t X,
                            const void *data)
{
    return (plume_tensor){.name = name, .type = type, .n_dims = 3, .ne = {cols, rows, X, 1},
                          .data = data,
                          .nbytes = plume_dtype_row_bytes(type, cols) * (size_t)(rows * X)};
}

/* malloc'd n bytes kept in moe->repacked[i] (freed with the moe). */
static void *keep(plume_moe *moe, int i, size_t n)
{
    moe->repacked[i] = malloc(n ? n : 1);
    return moe->repacked[i];
}

/* An OpenAI MXFP4 pair name_blocks [X][rows][in/32][16] and name_scales
 * [X][rows][in/32] (U8), checked against the config. */
static int mxfp4_pair(const plume_model *m, const char *base, int64_t X, int64_t rows, int64_t in,
                      const plume_tensor **blocks, const plume_tensor **scales, plume_error *err)
{
    char bn[192], sn[192];
    snprintf(bn, sizeof bn, "%s_blocks", base);
    snprintf(sn, sizeof sn, "%s_scales", base);
    *blocks = find(m, bn);
    *scales = find(m, sn);
    const plume_tensor *b = *blocks, *s = *scales;
    const int64_t nb = in / 32;
    if (!b || !s)
        return plume_err(err, PLUME_ERR_FORMAT, "%s: tensor '%s' is missing", m->path,
                         b ? sn : bn);
    bool ok = in % 32 == 0 && b->type == PLUME_ST_RAW_TYPE && s->type == PLUME_ST_RAW_TYPE &&
              b->n_dims == 4 && b->ne[0] == 16 && b->ne[1] == nb && b->ne[2] == rows &&
              b->ne[3] == X && s->n_dims == 3 && s->ne[0] == nb && s->ne[1] == rows &&
              s->ne[2] == X && b->nbytes == (size_t)(X * rows * nb * 16) &&
              s->nbytes == (size_t)(X * rows * nb);
    if (!ok)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: '%s' and '%s' should be U8 [%lld][%lld][%lld][16] and [%lld][%lld]"
                         "[%lld] (OpenAI MXFP4 experts of %lld inputs, a multiple of 32); found "
                         "%d-D [.., %lld, %lld, %lld] and %d-D [.., %lld, %lld]",
                         m->path, bn, sn, (long long)X, (long long)rows, (long long)nb,
                         (long long)X, (long long)rows, (long long)nb, (long long)in, b->n_dims,
                         (long long)b->ne[2], (long long)b->ne[1], (long long)b->ne[0], s->n_dims,
                         (long long)s->ne[1], (long long)s->ne[0]);
    return 0;
}

/* gpt-oss's HF experts of layer l (prefix "model.layers.L.mlp.experts."),
 * dense or OpenAI MXFP4, rearranged into plume's [out][in] rows: views
 * 3e..3e+2 over moe->repacked; the gate/up biases de-interleaved likewise,
 * the down biases viewed in place. */
static int gpt_oss_hf_experts(plume_model *m, plume_moe *moe, const char *p, plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, F = c->n_ff_exp, X = c->n_expert;
    char gu_n[192], d_n[192], gb_n[192], db_n[192];
    snprintf(gu_n, sizeof gu_n, "%sgate_up_proj", p);
    snprintf(d_n, sizeof d_n, "%sdown_proj", p);
    snprintf(gb_n, sizeof gb_n, "%sgate_up_proj_bias", p);
    snprintf(db_n, sizeof db_n, "%sdown_proj_bias", p);
    const plume_tensor *gu = find(m, gu_n), *dn = find(m, d_n);
    plume_tensor tg, tu, td;
    if (gu || dn) { /* dense: [X][E][2F] and [X][F][E], x @ W */
        const int64_t ne_gu[3] = {2 * F, E, X}, ne_d[3] = {E, F, X};
        if (check_tensor(m, gu, gu_n, 3, ne_gu, err) || check_tensor(m, dn, d_n, 3, ne_d, err))
            return -1;
        if (plume_dtype_block_elems(gu->type) != 1 || dn->type != gu->type)
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: '%s' (%s) and '%s' (%s) must share one float type (F32, F16 "
                             "or BF16)",
                             m->path, gu_n, plume_dtype_name(gu->type), d_n,
                             plume_dtype_name(dn->type));
        const size_t es = plume_dtype_block_bytes(gu->type), n = (size_t)(X * F * E) * es;
        void *g = keep(moe, 0, n), *u = keep(moe, 1, n), *d = keep(moe, 2, n);
        if (!g || !u || !d)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory rearranging %s", gu_n);
        plume_repack_cols(gu->data, es, X, E, 2 * F, 0, 2, F, g);
        plume_repack_cols(gu->data, es, X, E, 2 * F, 1, 2, F, u);
        plume_repack_cols(dn->data, es, X, F, E, 0, 1, E, d);
        /* the views keep these names for the model's life: the checkpoint's,
         * not this function's buffers */
        tg = host_3d(gu->name, gu->type, E, F, X, g);
        tu = host_3d(gu->name, gu->type, E, F, X, u);
        td = host_3d(dn->name, dn->type, F, E, X, d);
    } else { /* OpenAI MXFP4: rows are outputs, interleaved gate/up */
        const plume_tensor *gb, *gs, *db, *ds;
        if (mxfp4_pair(m, gu_n, X, 2 * F, E, &gb, &gs, err) ||
            mxfp4_pair(m, d_n, X, E, F, &db, &ds, err))
            return -1;
        const size_t rg = plume_dtype_row_bytes(PLUME_DTYPE_MXFP4, E),
                     rd = plume_dtype_row_bytes(PLUME_DTYPE_MXFP4, F);
        uint8_t *g = keep(moe, 0, rg * (size_t)(X * F)), *u = keep(moe, 1, rg * (size_t)(X * F)),
                *d = keep(moe, 2, rd * (size_t)(X * E));
        if (!g || !u || !d)
            return plume_err(err, PLUME_ERR_NOMEM, "out of memory rearranging %s_blocks", gu_n);
        const int64_t nbg = E / 32, nbd = F / 32;
        for (int64_t x = 0; x < X; x++) {
            const uint8_t *b = (const uint8_t *)gb->data + (size_t)(x * 2 * F * nbg) * 16;
            const uint8_t *s = (const uint8_t *)gs->data + (size_t)(x * 2 * F * nbg);
            plume_mxfp4_rows_from_openai(b, s, nbg, 0, 2, F, g + (size_t)(x * F) * rg);
            plume_mxfp4_rows_from_openai(b, s, nbg, 1, 2, F, u + (size_t)(x * F) * rg);
            plume_mxfp4_rows_from_openai((const uint8_t *)db->data + (size_t)(x * E * nbd) * 16,
                                         (const uint8_t *)ds->data + (size_t)(x * E * nbd), nbd,
                                         0, 1, E, d + (size_t)(x * E) * rd);
        }
        tg = host_3d(gb->name, PLUME_DTYPE_MXFP4, E, F, X, g);
        tu = host_3d(gb->name, PLUME_DTYPE_MXFP4, E, F, X, u);
        td = host_3d(db->name, PLUME_DTYPE_MXFP4, F, E, X, d);
        if (!m->bvt->supports(m->b, PLUME_FEAT_WEIGHT_TYPE, PLUME_DTYPE_MXFP4))
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "%s: %s_blocks are MXFP4, which backend %s cannot run; choose "
                             "another backend (cpu runs every type plume reads)",
                             m->path, gu_n, m->bvt->name);
    }
    for (int64_t e = 0; e < X; e++) {
        moe->views[3 * e] = slab_view(&tg, e, 0, F);
        moe->views[3 * e + 1] = slab_view(&tu, e, 0, F);
        moe->views[3 * e + 2] = slab_view(&td, e, 0, E);
    }
    /* biases: gate_up's de-interleaved into [X][F] twice, down's in place */
    const plume_tensor *gub = find(m, gb_n);
    plume_tensor probe;
    if (bias_rows(m, gub, gb_n, 2 * F, X, moe->bias_views, 0, err))
        return -1;
    const size_t bes = plume_dtype_block_bytes(gub->type), nb = (size_t)(X * F) * bes;
    void *bg = keep(moe, 3, nb), *bu = keep(moe, 4, nb);
    if (!bg || !bu)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory rearranging %s", gb_n);
    plume_repack_cols(gub->data, bes, X, 1, 2 * F, 0, 2, F, bg);
    plume_repack_cols(gub->data, bes, X, 1, 2 * F, 1, 2, F, bu);
    probe = (plume_tensor){.name = gub->name, .type = gub->type, .n_dims = 2, .ne = {F, X, 1, 1},
                           .data = bg, .nbytes = nb};
    if (bias_rows(m, &probe, gb_n, F, X, moe->bias_views, 0, err))
        return -1;
    probe.data = bu;
    if (bias_rows(m, &probe, gb_n, F, X, moe->bias_views, 1, err))
        return -1;
    return bias_rows(m, find(m, db_n), db_n, E, X, moe->bias_views, 2, err);
}

/* gpt-oss's experts and their biases of layer l, and the router's bias
 * name into rb. */
static int gpt_oss_experts(plume_model *m, int l, plume_moe *moe, char *rb, size_t rbs,
                           plume_error *err)
{
    const plume_model_config *c = &m->cfg;
    const int64_t E = c->n_embd, F = c->n_ff_exp, X = c->n_expert;
    moe->bias_views = calloc(3 * (size_t)X, sizeof *moe->bias_views);
    if (!moe->bias_views)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory for %lld experts' biases",
                         (long long)X);
    if (!m->gguf) {
        char p[96];
        snprintf(p, sizeof p, "model.layers.%d.mlp.experts.", l);
        snprintf(rb, rbs, "model.layers.%d.mlp.router.bias", l);
        return gpt_oss_hf_experts(m, moe, p, err);
    }
    char a[96], b[96], d[96];
    snprintf(rb, rbs, "blk.%d.ffn_gate_inp.bias", l);
    snprintf(a, sizeof a, "blk.%d.ffn_gate_exps.weight", l);
    snprintf(b, sizeof b, "blk.%d.ffn_up_exps.weight", l);
    snprintf(d, sizeof d, "blk.%d.ffn_down_exps.weight", l);
    if (views_3d(m, moe, a, b, d, false, err))
        return -1;
    static const char *const bn[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int i = 0; i < 3; i++) {
        char n[96];
        snprintf(n, sizeof n, "blk.%d.%s.bias", l, bn[i]);
        if (bias_rows(m, find(m, n), n, i == 2 ? E : F, X, moe->bias_views, i, err))
            return -1;
    }
    return 0;
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
    char router[160], a[160], b[160], d[160], rbias[160] = "";
    int rc;
    if (c->moe_bias) { /* gpt-oss */
        snprintf(router, sizeof router,
                 m->gguf ? "blk.%d.ffn_gate_inp.weight" : "model.layers.%d.mlp.router.weight", l);
        rc = gpt_oss_experts(m, l, moe, rbias, sizeof rbias, err);
    } else if (m->gguf) {
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
    plume_tensor rbv[3]; /* the router's bias as a vector (slot 0) */
    if (rc || check_tensor(m, rt, router, 2, ne_r, err) ||
        (rbias[0] && bias_rows(m, find(m, rbias), rbias, X, 1, rbv, 0, err)) ||
        make_linear_b(m, rt, rbias[0] ? &rbv[0] : NULL, &moe->router, err) ||
        (c->n_ff_shexp > 0 && load_shared(m, l, moe, err)))
        return -1;
    const plume_tensor *bv = moe->bias_views;
    const int64_t params0 = m->n_params, bytes0 = m->weight_bytes;
    for (int e = 0; e < X; e++)
        if (make_linear_b(m, &moe->views[3 * e], bv ? &bv[3 * e] : NULL, &moe->gate[e], err) ||
            make_linear_b(m, &moe->views[3 * e + 1], bv ? &bv[3 * e + 1] : NULL, &moe->up[e],
                          err) ||
            make_linear_b(m, &moe->views[3 * e + 2], bv ? &bv[3 * e + 2] : NULL, &moe->down[e],
                          err))
            return -1;
    m->expert_params += m->n_params - params0;
    m->expert_bytes += m->weight_bytes - bytes0;
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
    free(moe->bias_views);
    for (int i = 0; i < 5; i++) /* after the linears that viewed them */
        free(moe->repacked[i]);
    free(moe);
    L->moe = NULL;
}
