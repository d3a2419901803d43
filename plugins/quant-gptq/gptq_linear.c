/* quant-gptq: the "gptq" linear provider (formats.md §1): probe/load of a
 * GPTQ Linear from its qweight/qzeros/scales[/g_idx][/bias] tensors, a
 * repack into a row-major, act-order-permuted layout, and the CPU
 * reference kernel.  Modelled on the built-in "native" provider
 * (core/src/runtime/builtin_cpu.c). */
#include "gptq_linear.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- config ---- */

static const char *const k_formats[] = {"gptq", "gptq_v2"};
static const char *const k_keys[] = {"method", "bits", "group_size", "sym", "desc_act",
                                     "checkpoint_format"};

int gptq_config_from_settings(const plume_settings *s, gptq_load_config *c, plume_error *err)
{
    c->bits = 4;
    c->group_size = 128;
    c->sym = true;
    c->desc_act = false;
    c->fmt = GPTQ_ZERO_V1;
    if (!s)
        return 0;
    int64_t bits, gs;
    size_t fi;
    if (plume_settings_int(s, "bits", 4, 2, 8, &bits, err) ||
        plume_settings_int(s, "group_size", 128, -1, INT32_MAX, &gs, err) ||
        plume_settings_bool(s, "sym", true, &c->sym, err) ||
        plume_settings_bool(s, "desc_act", false, &c->desc_act, err) ||
        plume_settings_choice(s, "checkpoint_format", k_formats, 2, 0, &fi, err))
        return -1;
    if (gptq_check_bits((int)bits, NULL))
        return plume_settings_error(s, "bits", err,
                                    "bits = %" PRId64 " is not supported by the gptq provider "
                                    "(supported: 2, 3, 4, 8)",
                                    bits);
    if (gs == 0)
        return plume_settings_error(s, "group_size", err,
                                    "group_size must be -1 (one group) or positive, got 0");
    c->bits = (int)bits;
    c->group_size = gs;
    c->fmt = fi == 1 ? GPTQ_ZERO_V2 : GPTQ_ZERO_V1;
    return 0;
}

static int gptq_validate(const plume_settings *s, plume_error *err)
{
    gptq_load_config c;
    if (gptq_config_from_settings(s, &c, err))
        return -1;
    return plume_settings_check_keys(s, k_keys, sizeof k_keys / sizeof k_keys[0], err);
}

/* ---- the repacked layer ---- */

struct gptq_layer {
    int64_t K, N, G;
    int bits, fb, pf;  /* code width, repacked field width (4 for 3-bit), fields per word */
    int32_t *perm;     /* [K] act-order: xp[i] = x[perm[i]]; NULL = identity */
    int64_t nseg;      /* runs of one group in (permuted) input order */
    int64_t *seg;      /* [nseg + 1] starts, seg[nseg] = K */
    int32_t *seg_grp;  /* [nseg] */
    int64_t kw;        /* words per output row */
    uint32_t *wq;      /* [N][kw]: codes of row n in permuted input order, pf per word,
                          lowest index in the lowest bits */
    float *scale;      /* [N][G] */
    float *zero;       /* [N][G] true zero points */
    float *bias;       /* [N] or NULL */
    int64_t max_seg;
};

void gptq_layer_free(gptq_layer *l)
{
    if (!l)
        return;
    free(l->perm);
    free(l->seg);
    free(l->seg_grp);
    free(l->wq);
    free(l->scale);
    free(l->zero);
    free(l->bias);
    free(l);
}

void gptq_layer_shape(const gptq_layer *l, int64_t *K, int64_t *N)
{
    *K = l->K;
    *N = l->N;
}

bool gptq_layer_permuted(const gptq_layer *l) { return l->perm != NULL; }

int gptq_layer_build(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                     const int32_t *g_idx, const float *bias, int64_t K, int64_t N, int64_t G,
                     const gptq_load_config *cfg, gptq_layer **out, plume_error *err)
{
    if (gptq_check_bits(cfg->bits, err))
        return -1;
    int bits = cfg->bits, align = gptq_pack_align(bits);
    /* the repacked rows use a 4-bit field for 3-bit codes */
    int pf = 32 / (bits == 3 ? 4 : bits);
    if (K <= 0 || N <= 0 || K % align || N % align)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: in_features %" PRId64 " and out_features %" PRId64
                         " must be positive multiples of %d for bits = %d",
                         K, N, align, bits);
    int64_t want_g = gptq_n_groups(K, cfg->group_size);
    if (G != want_g)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: scales/qzeros have %" PRId64 " groups but group_size = %" PRId64
                         " over %" PRId64 " inputs needs %" PRId64,
                         G, cfg->group_size, K, want_g);
    if (cfg->desc_act && !g_idx)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: desc_act = true needs a g_idx tensor, and the layer has none");
    if (g_idx && gptq_check_g_idx(g_idx, K, G, err))
        return -1;

    gptq_layer *l = calloc(1, sizeof *l);
    if (!l)
        return plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory");
    l->K = K;
    l->N = N;
    l->G = G;
    l->bits = bits;
    l->fb = 32 / pf;
    l->pf = pf;
    l->kw = K / pf;
    int32_t *grp = malloc((size_t)K * sizeof *grp); /* group of permuted position i */
    int32_t *zeros = malloc((size_t)(G * N) * sizeof *zeros);
    l->seg = malloc((size_t)(K + 1) * sizeof *l->seg);
    l->seg_grp = malloc((size_t)K * sizeof *l->seg_grp);
    l->wq = calloc((size_t)(N * l->kw), sizeof *l->wq);
    l->scale = malloc((size_t)(N * G) * sizeof *l->scale);
    l->zero = malloc((size_t)(N * G) * sizeof *l->zero);
    if (bias)
        l->bias = malloc((size_t)N * sizeof *l->bias);
    if (!grp || !zeros || !l->seg || !l->seg_grp || !l->wq || !l->scale || !l->zero ||
        (bias && !l->bias)) {
        plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory repacking a %" PRId64 "x%" PRId64
                  " layer", N, K);
        goto fail;
    }
    if (gptq_unpack_qzeros(qzeros, G, N, bits, cfg->fmt, zeros, err))
        goto fail;

    /* Input order: identity when g_idx is absent or non-decreasing; else
     * perm = a stable argsort(g_idx) (formats.md §1.4, vLLM exllama). */
    bool monotone = true;
    if (g_idx)
        for (int64_t k = 1; k < K; k++)
            if (g_idx[k] < g_idx[k - 1])
                monotone = false;
    if (!monotone) {
        l->perm = malloc((size_t)K * sizeof *l->perm);
        int64_t *cnt = calloc((size_t)G + 1, sizeof *cnt);
        if (!l->perm || !cnt) {
            free(cnt);
            plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory");
            goto fail;
        }
        for (int64_t k = 0; k < K; k++)
            cnt[g_idx[k] + 1]++;
        for (int64_t g = 0; g < G; g++)
            cnt[g + 1] += cnt[g];
        for (int64_t k = 0; k < K; k++)
            l->perm[cnt[g_idx[k]]++] = (int32_t)k;
        free(cnt);
    }
    for (int64_t i = 0; i < K; i++) {
        int64_t k = l->perm ? l->perm[i] : i;
        grp[i] = g_idx ? g_idx[k] : (int32_t)(cfg->group_size > 0 ? k / cfg->group_size : 0);
    }
    l->nseg = 0;
    for (int64_t i = 0; i < K; i++)
        if (i == 0 || grp[i] != grp[i - 1]) {
            l->seg[l->nseg] = i;
            l->seg_grp[l->nseg++] = grp[i];
        }
    l->seg[l->nseg] = K;
    for (int64_t s = 0; s < l->nseg; s++)
        if (l->seg[s + 1] - l->seg[s] > l->max_seg)
            l->max_seg = l->seg[s + 1] - l->seg[s];

    /* Repack: row n holds its codes in permuted input order. */
    for (int64_t i = 0; i < K; i++) {
        int64_t k = l->perm ? l->perm[i] : i;
        for (int64_t n = 0; n < N; n++) {
            uint32_t q = gptq_qweight_code(qweight, N, bits, k, n);
            l->wq[n * l->kw + i / pf] |= q << (l->fb * (int)(i % pf));
        }
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t n = 0; n < N; n++) {
            l->scale[n * G + g] = scales[g * N + n];
            l->zero[n * G + g] = (float)zeros[g * N + n];
        }
    if (bias)
        memcpy(l->bias, bias, (size_t)N * sizeof *bias);
    free(grp);
    free(zeros);
    *out = l;
    return 0;
fail:
    free(grp);
    free(zeros);
    gptq_layer_free(l);
    return -1;
}

/* ---- the reference kernel ---- */

int gptq_forward_ref(const gptq_layer *l, const float *x, int32_t n_tok, float *y,
                     plume_error *err)
{
    if (n_tok < 0)
        return plume_err(err, PLUME_ERR_INVALID, "gptq: n_tok must be >= 0, got %" PRId32, n_tok);
    if (n_tok == 0)
        return 0;
    const int64_t K = l->K, N = l->N, G = l->G;
    const int bits = l->bits, fb = l->fb, pf = l->pf;
    const uint32_t mask = (1u << bits) - 1u;
    float *buf = malloc((size_t)l->max_seg * sizeof *buf);
    float *xp = NULL;
    if (l->perm)
        xp = malloc((size_t)n_tok * (size_t)K * sizeof *xp);
    if (!buf || (l->perm && !xp)) {
        free(buf);
        free(xp);
        return plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory in forward");
    }
    const float *xs = x;
    if (l->perm) { /* gather activations into the act-order */
        for (int32_t t = 0; t < n_tok; t++)
            for (int64_t i = 0; i < K; i++)
                xp[(int64_t)t * K + i] = x[(int64_t)t * K + l->perm[i]];
        xs = xp;
    }
    for (int64_t n = 0; n < N; n++) {
        const uint32_t *row = l->wq + n * l->kw;
        for (int32_t t = 0; t < n_tok; t++)
            y[(int64_t)t * N + n] = l->bias ? l->bias[n] : 0.0f;
        for (int64_t s = 0; s < l->nseg; s++) {
            int64_t a = l->seg[s], b = l->seg[s + 1];
            float sc = l->scale[n * G + l->seg_grp[s]], z = l->zero[n * G + l->seg_grp[s]];
            for (int64_t i = a; i < b; i++) {
                uint32_t q = (row[i / pf] >> (fb * (int)(i % pf))) & mask;
                buf[i - a] = sc * ((float)q - z); /* formats.md §1.5 */
            }
            for (int32_t t = 0; t < n_tok; t++) {
                const float *xt = xs + (int64_t)t * K + a;
                float acc = 0.0f;
                for (int64_t i = 0; i < b - a; i++)
                    acc += buf[i] * xt[i];
                y[(int64_t)t * N + n] += acc;
            }
        }
    }
    free(buf);
    free(xp);
    return 0;
}

/* ---- tensors through the weight-format interface ---- */

static const plume_tensor *find_t(const plume_weights *w, const char *prefix, const char *suffix)
{
    char name[512];
    if ((size_t)snprintf(name, sizeof name, "%s.%s", prefix, suffix) >= sizeof name)
        return NULL;
    if (w->fmt->find)
        return w->fmt->find(w->ck, name);
    for (size_t i = 0, m = w->fmt->n_tensors(w->ck); i < m; i++) {
        const plume_tensor *t = w->fmt->tensor(w->ck, i);
        if (strcmp(t->name, name) == 0)
            return t;
    }
    return NULL;
}

/* A 32-bit integer tensor: safetensors keeps I32/U32 as raw views (type not
 * a plume dtype) of 4 bytes per element. */
static bool is_i32(const plume_tensor *t)
{
    return t && !plume_dtype_supported(t->type) &&
           t->nbytes == (size_t)plume_tensor_nelements(t) * 4u;
}

static bool is_float(const plume_tensor *t)
{
    return t && (t->type == PLUME_DTYPE_F32 || t->type == PLUME_DTYPE_F16 ||
                 t->type == PLUME_DTYPE_BF16);
}

static int gptq_probe(const plume_weights *w, const char *prefix)
{
    const plume_tensor *qw = find_t(w, prefix, "qweight");
    const plume_tensor *qz = find_t(w, prefix, "qzeros");
    const plume_tensor *sc = find_t(w, prefix, "scales");
    return is_i32(qw) && qw->n_dims == 2 && is_i32(qz) && is_float(sc) ? 10 : 0;
}

static int32_t *copy_i32(const plume_tensor *t)
{
    int32_t *p = malloc(t->nbytes ? t->nbytes : 4);
    if (p)
        memcpy(p, t->data, t->nbytes); /* views may be unaligned */
    return p;
}

static float *copy_f32(const plume_tensor *t)
{
    int64_t n = plume_tensor_nelements(t);
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    if (p)
        plume_dequantize((plume_dtype)t->type, t->data, p, n);
    return p;
}

struct plume_linear {
    gptq_layer *g;
};

static int gptq_load(const plume_weights *w, const char *prefix, const plume_settings *s,
                     const plume_backend_vtable *bvt, plume_backend *b, plume_linear **out,
                     plume_error *err)
{
    (void)b;
    if (bvt && strcmp(bvt->name, "cpu") != 0)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "gptq: layer %s: backend \"%s\" has no gptq kernels yet (cpu only)",
                         prefix, bvt->name);
    gptq_load_config cfg;
    if (gptq_config_from_settings(s, &cfg, err))
        return -1;
    const plume_tensor *qw = find_t(w, prefix, "qweight"), *qz = find_t(w, prefix, "qzeros"),
                       *sc = find_t(w, prefix, "scales"), *gi = find_t(w, prefix, "g_idx"),
                       *bi = find_t(w, prefix, "bias");
    if (!qw || !qz || !sc)
        return plume_err(err, PLUME_ERR_FORMAT, "gptq: layer %s lacks %s.%s", prefix, prefix,
                         !qw ? "qweight" : !qz ? "qzeros" : "scales");
    if (!is_i32(qw) || qw->n_dims != 2 || !is_i32(qz) || qz->n_dims != 2)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.qweight and %s.qzeros must be 2-D int32 tensors", prefix,
                         prefix);
    if (!is_float(sc) || sc->n_dims != 2)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.scales must be a 2-D F16, BF16 or F32 tensor (type %s)", prefix,
                         plume_dtype_name(sc->type));
    /* ggml order: ne[0] is the PyTorch last dim (formats.md §1.1 shapes:
     * qweight [K·b/32, N], qzeros [G, N·b/32], scales [G, N]). */
    int64_t N = qw->ne[0], K = qw->ne[1] * 32 / cfg.bits, G = sc->ne[1];
    if ((qw->ne[1] * 32) % cfg.bits)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.qweight has %" PRId64 " rows, not a whole number of %d-bit "
                         "blocks (check bits)",
                         prefix, qw->ne[1], cfg.bits);
    if (sc->ne[0] != N)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.scales is [%" PRId64 ", %" PRId64 "] but qweight has %" PRId64
                         " output columns",
                         prefix, sc->ne[1], sc->ne[0], N);
    if (qz->ne[1] != G || qz->ne[0] * 32 != N * cfg.bits)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.qzeros is [%" PRId64 ", %" PRId64 "]; with bits = %d it must be"
                         " [%" PRId64 ", %" PRId64 "] (check bits)",
                         prefix, qz->ne[1], qz->ne[0], cfg.bits, G, N * cfg.bits / 32);
    if (gi && (!is_i32(gi) || gi->n_dims != 1 || gi->ne[0] != K))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.g_idx must be a 1-D int32 tensor of %" PRId64
                         " entries (in_features with bits = %d)",
                         prefix, K, cfg.bits);
    if (bi && (!is_float(bi) || plume_tensor_nelements(bi) != N))
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: %s.bias must be a float tensor of %" PRId64 " entries", prefix, N);
    int32_t *qwd = copy_i32(qw), *qzd = copy_i32(qz), *gid = gi ? copy_i32(gi) : NULL;
    float *scd = copy_f32(sc), *bid = bi ? copy_f32(bi) : NULL;
    plume_linear *l = malloc(sizeof *l);
    int rc = -1;
    if (!qwd || !qzd || !scd || (gi && !gid) || (bi && !bid) || !l) {
        plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory loading %s", prefix);
        goto done;
    }
    /* Without desc_act the checkpoint's g_idx is k // group_size by
     * construction; it is still used as given (the kernel takes any g_idx). */
    if (gptq_layer_build(qwd, qzd, scd, gid, bid, K, N, G, &cfg, &l->g, err)) {
        plume_err_prefix(err, "layer %s", prefix);
        goto done;
    }
    *out = l;
    l = NULL;
    rc = 0;
done:
    free(qwd);
    free(qzd);
    free(gid);
    free(scd);
    free(bid);
    free(l);
    return rc;
}

static void gptq_destroy(plume_linear *l)
{
    if (!l)
        return;
    gptq_layer_free(l->g);
    free(l);
}

static void gptq_shape(const plume_linear *l, int64_t *in, int64_t *out)
{
    gptq_layer_shape(l->g, in, out);
}

static int gptq_forward(plume_linear *l, const plume_backend_vtable *bvt, plume_backend *b,
                        const float *x, int32_t n_tok, float *y, plume_error *err)
{
    (void)bvt;
    (void)b;
    return gptq_forward_ref(l->g, x, n_tok, y, err);
}

static const plume_linear_vtable k_gptq_linear = {
    .struct_size = sizeof(plume_linear_vtable),
    .interface_version = PLUME_LINEAR_INTERFACE_VERSION,
    .name = "gptq",
    .validate = gptq_validate,
    .probe = gptq_probe,
    .load = gptq_load,
    .destroy = gptq_destroy,
    .shape = gptq_shape,
    .forward = gptq_forward,
};

const plume_linear_vtable *gptq_linear_vtable(void) { return &k_gptq_linear; }
