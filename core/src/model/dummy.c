/* Dummy checkpoints: the tensor plan of an HF config.json and its seeded
 * random contents (dummy.h).  Per-tensor types of a preset come from
 * quant/gguf_mix.h (a table of llama-quantize's naming rules, no
 * quantizer), so that the dummy loader and `plume dummy-gguf` agree. */
#include "model/dummy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "plume/weight_format.h"
#include "quant/gguf_mix.h"

struct plume_dummy {
    plume_model_config cfg;
    plume_dummy_tensor *t;
    size_t n;
    uint64_t seed;
    char dtype[16];
    uint32_t file_type;
    bool deferred;
    char *tokenizer;
};

/* The tensors of one layer: GGUF suffix, HF suffix, kind. */
enum { K_MATRIX, K_NORM, K_BIAS };
typedef struct layer_tensor {
    const char *gguf, *hf;
    int kind;
    char qk;
} layer_tensor;

static const layer_tensor LAYER[] = {
    {"attn_norm.weight", "input_layernorm.weight", K_NORM, 0},
    {"attn_q.weight", "self_attn.q_proj.weight", K_MATRIX, 'q'},
    {"attn_q.bias", "self_attn.q_proj.bias", K_BIAS, 'q'},
    {"attn_k.weight", "self_attn.k_proj.weight", K_MATRIX, 'k'},
    {"attn_k.bias", "self_attn.k_proj.bias", K_BIAS, 'k'},
    {"attn_v.weight", "self_attn.v_proj.weight", K_MATRIX, 0},
    {"attn_v.bias", "self_attn.v_proj.bias", K_BIAS, 0},
    {"attn_output.weight", "self_attn.o_proj.weight", K_MATRIX, 0},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", K_NORM, 0},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", K_NORM, 0},
    {"ffn_norm.weight", "post_attention_layernorm.weight", K_NORM, 0},
    {"ffn_gate.weight", "mlp.gate_proj.weight", K_MATRIX, 0},
    {"ffn_up.weight", "mlp.up_proj.weight", K_MATRIX, 0},
    {"ffn_down.weight", "mlp.down_proj.weight", K_MATRIX, 0},
};

static bool file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Appends one tensor: ne0 x ne1 (ne1 = 1: a vector). */
static int add(plume_dummy *d, const char *gguf, const char *hf, int kind, char qk, int64_t ne0,
               int64_t ne1, uint32_t type, plume_error *err)
{
    plume_dummy_tensor *e = &d->t[d->n];
    memset(e, 0, sizeof *e);
    snprintf(e->gguf, sizeof e->gguf, "%s", gguf);
    snprintf(e->hf, sizeof e->hf, "%s", hf);
    e->qk = qk;
    e->t.name = e->hf;
    e->t.n_dims = kind == K_MATRIX ? 2 : 1;
    e->t.ne[0] = ne0;
    e->t.ne[1] = kind == K_MATRIX ? ne1 : 1;
    e->t.ne[2] = e->t.ne[3] = 1;
    e->random = kind == K_MATRIX;
    e->value = kind == K_NORM ? (d->cfg.norm_plus_one ? 0.0f : 1.0f) : 0.0f;
    e->t.type = kind == K_MATRIX ? type : PLUME_DTYPE_F32;
    if (e->random && plume_fill_spec_init(&e->spec, type, ne0, hf, d->seed, PLUME_DUMMY_STD))
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "dummy weights: tensor %s (rows of %lld) would be %s, which the "
                         "generator cannot make (it makes F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                         "Q4_K and Q6_K in whole blocks); choose another dtype or pure: true",
                         gguf, (long long)ne0, plume_dtype_name(type));
    e->t.nbytes = plume_dtype_row_bytes(e->t.type, ne0) * (size_t)e->t.ne[1];
    d->n++;
    return 0;
}

/* The type of a matrix (ne2 > 1: a 3-D GGUF tensor of experts) under
 * the dtype setting. */
static uint32_t matrix_type(const plume_dummy *d, const gguf_mix *mix, bool pure, const char *gguf,
                            int64_t ne0, int64_t ne1, int64_t ne2, uint32_t float_type)
{
    if (!mix)
        return float_type;
    if (strstr(gguf, "ffn_gate_inp.weight")) /* the router: llama-quantize keeps it in float */
        return PLUME_DTYPE_F32;
    if (pure)
        return mix->base;
    const plume_model_config *c = &d->cfg;
    gguf_mix_model mm = {.n_layer = c->n_layer,
                         .n_gqa = c->n_head_kv ? c->n_head / c->n_head_kv : 1,
                         .tied = c->tied_embeddings,
                         .n_expert = c->n_expert};
    const int64_t ne[4] = {ne0, ne1, ne2, 1};
    return gguf_mix_tensor_type(mix, &mm, gguf, ne2 > 1 ? 3 : 2, ne).type;
}

/* Layer l's mixture of experts: the router, each expert's gate, up and
 * down (HF names, one matrix per expert; in GGUF the three 3-D
 * ffn_*_exps tensors, each expert's rows in turn), and Qwen2-MoE's
 * shared expert and its gate. */
static int plan_moe(plume_dummy *d, const gguf_mix *mix, bool pure, uint32_t ftype, int l,
                    plume_error *err)
{
    const plume_model_config *c = &d->cfg;
    const int64_t E = c->n_embd, F = c->n_ff_exp, S = c->n_ff_shexp, X = c->n_expert;
    char g[72], h[112];
    snprintf(g, sizeof g, "blk.%d.ffn_gate_inp.weight", l);
    snprintf(h, sizeof h, "model.layers.%d.mlp.gate.weight", l);
    if (add(d, g, h, K_MATRIX, 0, E, X, matrix_type(d, mix, pure, g, E, X, 1, ftype), err))
        return -1;
    static const char *const gg[3] = {"ffn_gate", "ffn_up", "ffn_down"};
    static const char *const hf[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int i = 0; i < 3; i++) {
        const int64_t ne0 = i == 2 ? F : E, ne1 = i == 2 ? E : F;
        snprintf(g, sizeof g, "blk.%d.%s_exps.weight", l, gg[i]);
        const uint32_t ty = matrix_type(d, mix, pure, g, ne0, ne1, X, ftype);
        for (int e = 0; e < X; e++) {
            snprintf(h, sizeof h, "model.layers.%d.mlp.experts.%d.%s.weight", l, e, hf[i]);
            if (add(d, g, h, K_MATRIX, 0, ne0, ne1, ty, err))
                return -1;
            d->t[d->n - 1].group = e == 0 ? (int32_t)X : -1;
        }
    }
    for (int i = 0; i < 3 && S > 0; i++) {
        const int64_t ne0 = i == 2 ? S : E, ne1 = i == 2 ? E : S;
        snprintf(g, sizeof g, "blk.%d.%s_shexp.weight", l, gg[i]);
        snprintf(h, sizeof h, "model.layers.%d.mlp.shared_expert.%s.weight", l, hf[i]);
        if (add(d, g, h, K_MATRIX, 0, ne0, ne1, matrix_type(d, mix, pure, g, ne0, ne1, 1, ftype),
                err))
            return -1;
    }
    if (S > 0) {
        snprintf(g, sizeof g, "blk.%d.ffn_gate_inp_shexp.weight", l);
        snprintf(h, sizeof h, "model.layers.%d.mlp.shared_expert_gate.weight", l);
        if (add(d, g, h, K_MATRIX, 0, E, 1, matrix_type(d, mix, pure, g, E, 1, 1, ftype), err))
            return -1;
    }
    return 0;
}

static int plan(plume_dummy *d, const gguf_mix *mix, bool pure, uint32_t ftype, plume_error *err)
{
    const plume_model_config *c = &d->cfg;
    const int64_t E = c->n_embd, Q = (int64_t)c->n_head * c->head_dim,
                  KV = (int64_t)c->n_head_kv * c->head_dim, F = c->n_ff, V = c->n_vocab;
    size_t cap = 4 + (size_t)c->n_layer * (sizeof LAYER / sizeof LAYER[0] + 5 +
                                           3 * (size_t)c->n_expert);
    if (!(d->t = calloc(cap, sizeof *d->t)))
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
#define TY(g, a, b) matrix_type(d, mix, pure, g, a, b, 1, ftype)
    if (add(d, "token_embd.weight", "model.embed_tokens.weight", K_MATRIX, 0, E, V,
            TY("token_embd.weight", E, V), err))
        return -1;
    for (int l = 0; l < c->n_layer; l++) {
        const bool moe = plume_config_layer_moe(c, l);
        for (size_t i = 0; i < sizeof LAYER / sizeof LAYER[0]; i++) {
            const layer_tensor *lt = &LAYER[i];
            if ((lt->kind == K_BIAS && !c->qkv_bias) ||
                (strstr(lt->gguf, "_norm.") && strncmp(lt->gguf, "attn_", 5) == 0 &&
                 strcmp(lt->gguf, "attn_norm.weight") != 0 && !c->qk_norm && !c->qk_norm_full) ||
                (moe && strncmp(lt->gguf, "ffn_", 4) == 0 && lt->kind == K_MATRIX))
                continue;
            char g[72], h[112];
            snprintf(g, sizeof g, "blk.%d.%s", l, lt->gguf);
            snprintf(h, sizeof h, "model.layers.%d.%s", l, lt->hf);
            int64_t ne0 = E, ne1 = 1;
            if (strstr(lt->gguf, "_norm.")) {
                const bool qn = strncmp(lt->gguf, "attn_q_norm", 11) == 0,
                           kn = strncmp(lt->gguf, "attn_k_norm", 11) == 0;
                /* per head (Qwen3), or over the whole projection (OLMoE) */
                ne0 = !qn && !kn ? E : !c->qk_norm_full ? c->head_dim : qn ? Q : KV;
            }
            else if (lt->kind == K_BIAS)
                ne0 = lt->qk == 'q' ? Q : KV;
            else if (strncmp(lt->gguf, "attn_q.", 7) == 0)
                ne1 = Q;
            else if (strncmp(lt->gguf, "attn_k.", 7) == 0 || strncmp(lt->gguf, "attn_v.", 7) == 0)
                ne1 = KV;
            else if (strncmp(lt->gguf, "attn_output.", 12) == 0)
                ne0 = Q, ne1 = E;
            else if (strncmp(lt->gguf, "ffn_down.", 9) == 0)
                ne0 = F, ne1 = E;
            else
                ne1 = F; /* gate, up */
            if (add(d, g, h, lt->kind, lt->qk, ne0, ne1,
                    lt->kind == K_MATRIX ? TY(g, ne0, ne1) : PLUME_DTYPE_F32, err))
                return -1;
        }
        if (moe && plan_moe(d, mix, pure, ftype, l, err))
            return -1;
    }
    if (add(d, "output_norm.weight", "model.norm.weight", K_NORM, 0, E, 1, PLUME_DTYPE_F32, err))
        return -1;
    if (!c->tied_embeddings &&
        add(d, "output.weight", "lm_head.weight", K_MATRIX, 0, E, V, TY("output.weight", E, V),
            err))
        return -1;
#undef TY
    return 0;
}

static const char *const FLOATS[] = {"F32", "F16", "BF16"};
static const uint32_t FLOAT_TYPES[] = {PLUME_DTYPE_F32, PLUME_DTYPE_F16, PLUME_DTYPE_BF16};
static const uint32_t FLOAT_FTYPES[] = {0, 1, 32}; /* llama_ftype ALL_F32, MOSTLY_F16, MOSTLY_BF16 */

int plume_dummy_open(const char *dir, const plume_settings *s, plume_dummy **out,
                     plume_error *err)
{
    *out = NULL;
    static const char *const keys[] = {"dtype", "pure", "seed", "tokenizer"};
    const char *dtype;
    bool pure;
    int64_t seed;
    char *tok = NULL;
    if (s && (plume_settings_check_keys(s, keys, 4, err) ||
              plume_settings_string(s, "dtype", "F16", &dtype, err) ||
              plume_settings_bool(s, "pure", false, &pure, err) ||
              plume_settings_int(s, "seed", PLUME_DUMMY_SEED, 0, INT64_MAX, &seed, err) ||
              (plume_settings_has(s, "tokenizer") &&
               plume_settings_path_value(s, "tokenizer", &tok, err))))
        return -1;
    if (!s) {
        dtype = "F16";
        pure = false;
        seed = PLUME_DUMMY_SEED;
    }
    plume_dummy *d = calloc(1, sizeof *d);
    if (!d) {
        free(tok);
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory");
    }
    d->seed = (uint64_t)seed;
    d->tokenizer = tok;
    snprintf(d->dtype, sizeof d->dtype, "%s", dtype);
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (!file_exists(p)) {
        plume_err(err, PLUME_ERR_IO,
                  "dummy weights: %s has no config.json; load_format: dummy needs a directory "
                  "holding an HF config.json (bench/configs/ has some)",
                  dir);
        goto fail;
    }
    if (plume_config_from_hf_json(p, &d->cfg, err) || plume_config_validate(&d->cfg, err))
        goto fail;
    if (d->cfg.arch == PLUME_ARCH_GEMMA3 || d->cfg.arch == PLUME_ARCH_GPT_OSS) {
        plume_err(err, PLUME_ERR_UNSUPPORTED,
                  "dummy weights: %s is a %s config; dummy weights cover llama, qwen2, qwen3 "
                  "and the mixtures of experts mixtral, qwen3_moe, qwen2_moe and olmoe so far%s",
                  p, d->cfg.arch == PLUME_ARCH_GEMMA3 ? "Gemma 3" : "gpt-oss",
                  d->cfg.arch == PLUME_ARCH_GPT_OSS
                      ? " (bench/make_moe_dummy_gguf.py --arch gpt-oss writes a random gpt-oss "
                        "GGUF)"
                      : "");
        goto fail;
    }
    const gguf_mix *mix = NULL;
    uint32_t ftype = PLUME_DTYPE_F16;
    d->file_type = 1;
    size_t fi = 0;
    while (fi < 3 && strcasecmp(dtype, FLOATS[fi]) != 0)
        fi++;
    if (fi < 3) {
        ftype = FLOAT_TYPES[fi];
        d->file_type = FLOAT_FTYPES[fi];
    } else if ((mix = gguf_mix_find(dtype))) {
        d->file_type = mix->file_type;
    } else {
        plume_err(err, PLUME_ERR_INVALID,
                  "dummy weights: dtype '%s' is not F32, F16, BF16 or a GGUF preset (%s)", dtype,
                  plume_gguf_mix_names());
        goto fail;
    }
    if (!d->tokenizer) {
        snprintf(p, sizeof p, "%s/tokenizer.json", dir);
        if (!file_exists(p)) {
            plume_err(err, PLUME_ERR_IO,
                      "dummy weights: %s has no tokenizer.json; give load_format's tokenizer: "
                      "a .gguf whose vocabulary to borrow (e.g. "
                      "models/SmolLM2-135M-Instruct.Q4_1.gguf) or a tokenizer.json "
                      "(--dummy-tokenizer on the command line)",
                      dir);
            goto fail;
        }
        if (!(d->tokenizer = strdup(p))) {
            plume_err(err, PLUME_ERR_NOMEM, "out of memory");
            goto fail;
        }
    } else if (!file_exists(d->tokenizer)) {
        plume_err(err, PLUME_ERR_IO, "dummy weights: tokenizer %s does not exist", d->tokenizer);
        goto fail;
    }
    if (plan(d, mix, pure, ftype, err))
        goto fail;
    *out = d;
    return 0;
fail:
    plume_dummy_close(d);
    return -1;
}

void plume_dummy_close(plume_dummy *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->t[i].mem);
    free(d->t);
    free(d->tokenizer);
    free(d);
}

const plume_model_config *plume_dummy_config(const plume_dummy *d) { return &d->cfg; }
const char *plume_dummy_tokenizer_path(const plume_dummy *d) { return d->tokenizer; }
uint64_t plume_dummy_seed(const plume_dummy *d) { return d->seed; }
const char *plume_dummy_dtype(const plume_dummy *d) { return d->dtype; }
uint32_t plume_dummy_file_type(const plume_dummy *d) { return d->file_type; }
size_t plume_dummy_n(const plume_dummy *d) { return d->n; }
const plume_dummy_tensor *plume_dummy_at(const plume_dummy *d, size_t i) { return &d->t[i]; }
void plume_dummy_set_deferred(plume_dummy *d, bool deferred) { d->deferred = deferred; }

const plume_dummy_tensor *plume_dummy_find(const plume_dummy *d, const char *hf_name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->t[i].hf, hf_name) == 0)
            return &d->t[i];
    return NULL;
}

const plume_dummy_tensor *plume_dummy_entry(const plume_dummy *d, const plume_tensor *t)
{
    if (!d->n || t < &d->t[0].t || t > &d->t[d->n - 1].t)
        return NULL;
    /* inside the plan's array: the entry whose tensor it is, if any (a
     * lookup per prepared matrix, so no scan) */
    const size_t off = (size_t)((const char *)t - (const char *)&d->t[0].t);
    return off % sizeof d->t[0] == 0 ? &d->t[off / sizeof d->t[0]] : NULL;
}

int plume_dummy_make(plume_dummy *d, const plume_tensor *t, plume_error *err)
{
    plume_dummy_tensor *e = (plume_dummy_tensor *)plume_dummy_entry(d, t);
    if (!e)
        return plume_err(err, PLUME_ERR_INTERNAL, "dummy weights: %s is not a dummy tensor",
                         t->name ? t->name : "?");
    if (e->mem)
        return 0;
    if (!(e->mem = malloc(e->t.nbytes ? e->t.nbytes : 1)))
        return plume_err(err, PLUME_ERR_NOMEM, "dummy weights: out of memory making %s (%zu MiB)",
                         e->hf, e->t.nbytes >> 20);
    if (e->random) {
        const size_t rb = plume_dtype_row_bytes(e->t.type, e->t.ne[0]);
        for (int64_t r = 0; r < e->t.ne[1]; r++)
            plume_fill_row(&e->spec, r, (uint8_t *)e->mem + (size_t)r * rb);
    } else {
        float *f = e->mem;
        for (int64_t i = 0; i < e->t.ne[0]; i++)
            f[i] = e->value;
    }
    e->t.data = e->mem;
    return 0;
}

/* ---- as a weight format ---- */

static int dummy_probe(const char *path)
{
    (void)path;
    return 0; /* chosen by name only (load_format: dummy), never by probing */
}

static int dummy_validate(const plume_settings *s, plume_error *err)
{
    static const char *const keys[] = {"dtype", "pure", "seed", "tokenizer"};
    const char *dtype;
    bool pure;
    int64_t seed;
    if (plume_settings_check_keys(s, keys, 4, err) ||
        plume_settings_string(s, "dtype", "F16", &dtype, err) ||
        plume_settings_bool(s, "pure", false, &pure, err) ||
        plume_settings_int(s, "seed", PLUME_DUMMY_SEED, 0, INT64_MAX, &seed, err))
        return -1;
    if (plume_settings_has(s, "tokenizer")) { /* records it as read (resolved) */
        char *tok = NULL;
        if (plume_settings_path_value(s, "tokenizer", &tok, err))
            return -1;
        free(tok);
    }
    bool ok = gguf_mix_find(dtype) != NULL;
    for (size_t i = 0; i < 3 && !ok; i++)
        ok = strcasecmp(dtype, FLOATS[i]) == 0;
    if (!ok)
        return plume_settings_error(s, "dtype", err,
                                    "'%s' is not F32, F16, BF16 or a GGUF preset (%s)", dtype,
                                    plume_gguf_mix_names());
    return 0;
}

static int dummy_ck_open(const char *path, const plume_settings *s, plume_checkpoint **out,
                         plume_error *err)
{
    plume_dummy *d;
    if (plume_dummy_open(path, s, &d, err))
        return -1;
    *out = (plume_checkpoint *)d;
    return 0;
}

static void dummy_ck_close(plume_checkpoint *c) { plume_dummy_close((plume_dummy *)c); }
static size_t dummy_ck_n(const plume_checkpoint *c) { return ((const plume_dummy *)c)->n; }

/* A lookup makes the tensor unless it is a random matrix left to the
 * backend (deferred); the format interface's tensors are views that stay. */
static const plume_tensor *made(const plume_checkpoint *c, const plume_dummy_tensor *e)
{
    plume_dummy *d = (plume_dummy *)c;
    plume_error err;
    if (!e)
        return NULL;
    if (!e->mem && !(d->deferred && e->random) && plume_dummy_make(d, &e->t, &err))
        return NULL;
    return &e->t;
}

static const plume_tensor *dummy_ck_tensor(const plume_checkpoint *c, size_t i)
{
    return made(c, plume_dummy_at((const plume_dummy *)c, i));
}

static const plume_tensor *dummy_ck_find(const plume_checkpoint *c, const char *name)
{
    return made(c, plume_dummy_find((const plume_dummy *)c, name));
}

static int dummy_ck_metadata(const plume_checkpoint *c, const char *key, char *buf, size_t cap)
{
    const plume_dummy *d = (const plume_dummy *)c;
    if (strcmp(key, "dummy.seed") == 0)
        return snprintf(buf, cap, "%llu", (unsigned long long)d->seed);
    if (strcmp(key, "dummy.dtype") == 0)
        return snprintf(buf, cap, "%s", d->dtype);
    return -1;
}

const plume_weight_format_vtable plume_builtin_dummy = {
    .struct_size = sizeof(plume_weight_format_vtable),
    .interface_version = PLUME_WEIGHT_FORMAT_INTERFACE_VERSION,
    .name = "dummy",
    .validate = dummy_validate,
    .probe = dummy_probe,
    .open = dummy_ck_open,
    .close = dummy_ck_close,
    .n_tensors = dummy_ck_n,
    .tensor = dummy_ck_tensor,
    .find = dummy_ck_find,
    .metadata = dummy_ck_metadata,
};
