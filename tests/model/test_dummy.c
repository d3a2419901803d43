/* load_format: dummy and plume dummy-gguf (model/dummy.h,
 * quant/dummy_gguf.h), on tiny llama (untied, q/k permuted in GGUF) and
 * qwen3 (tied, q/k norms) configs written to a temporary directory:
 *   - the generator's f16/bf16 rounding equals plume/fp16.h's for every
 *     sign, exponent (subnormals included) and rounding tie;
 *   - each dtype's values have the promised scale (std within 12% of 0.02,
 *     |mean| < 0.1 std, finite; norms 1) by plume_dequantize;
 *   - the written GGUF, loaded as any GGUF, gives the dummy loader's
 *     logits: bit for bit on qwen3 (no permutation), within 1e-5 of the
 *     logit range on llama (the permuted q/k sum in another order);
 *   - a backend with weight_fill (the cpu backend plus a fill that makes
 *     the rows itself) gets unmade matrices and the same logits bit for bit;
 *   - the same seed gives the same logits, another seed others; 24 layers
 *     stay finite;
 *   - mixtures of experts (tiny OLMoE, Qwen3-MoE, Qwen2-MoE with its shared
 *     expert, Mixtral): the in-memory plan's per-expert matrices and the
 *     file's 3-D expert tensors give the same logits (bit for bit but
 *     Mixtral's permuted q/k), on the weight_fill path too; a Qwen3-MoE
 *     with a dense layer loads as dummy weights, and the writer refuses it;
 *   - bad configs and settings fail with a message naming what to fix.
 * Skips (77) without SmolLM2's GGUF, whose tokenizer is borrowed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/dummy.h"
#include "plume/fp16.h"
#include "plume/model.h"
#include "plume/dummy_gguf.h"
#include "runtime/builtin.h"
#include "smollm2_path.h"

#include "../support/check.h"

static int failures;

static char tmp[256], tok[4096];

static void write_config(const char *name, const char *json)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/%s/config.json", tmp, name);
    FILE *f = fopen(p, "w");
    fputs(json, f);
    fclose(f);
}

static plume_settings *settings(const char *dtype, const char *seed, const char *pure)
{
    plume_settings *s;
    plume_error err;
    if (plume_settings_new("load_format", &s, &err) ||
        (dtype && plume_settings_set(s, "dtype", dtype, &err)) ||
        (seed && plume_settings_set(s, "seed", seed, &err)) ||
        (pure && plume_settings_set(s, "pure", pure, &err)) ||
        plume_settings_set(s, "tokenizer", tok, &err)) {
        printf("FAIL: settings: %s\n", err.msg);
        exit(1);
    }
    return s;
}

/* A cpu backend whose weight_fill makes the rows on the host and prepares
 * them: the loader's device-fill path without a device.  Counts calls. */
static plume_backend_vtable fill_cpu;
static int n_fill;
typedef struct kept {
    void *mem;
    plume_tensor t; /* the tensor prepared (the cpu backend's weight points at it) */
    struct kept *next;
} kept;
static kept *kept_list;

static int host_fill(plume_backend *b, const plume_tensor *t, const plume_fill_spec *spec,
                     plume_bweight **out, plume_error *err)
{
    if (t->data || spec->type != t->type)
        return plume_err(err, PLUME_ERR_INVALID, "weight_fill got data or a wrong type");
    n_fill++;
    size_t rb = plume_dtype_row_bytes(t->type, t->ne[0]);
    kept *k = malloc(sizeof *k);
    k->mem = malloc(rb * (size_t)t->ne[1]);
    k->next = kept_list;
    kept_list = k;
    for (int64_t r = 0; r < t->ne[1]; r++)
        plume_fill_row(spec, r, (uint8_t *)k->mem + (size_t)r * rb);
    k->t = *t;
    k->t.data = k->mem;
    return plume_builtin_cpu.weight_prepare(b, &k->t, out, err);
}

/* Logits of tokens 1..8 (the last position's), n_vocab floats, malloc'd. */
static float *logits_of(const char *path, const plume_weight_format_vtable *fmt,
                        const plume_settings *s, const plume_backend_vtable *bvt, int32_t *n_vocab)
{
    plume_load_params p = plume_load_defaults();
    p.format = fmt;
    p.format_settings = s;
    p.backend_vt = bvt;
    p.n_threads = 2;
    plume_model *m;
    plume_context *c;
    plume_error err = {0};
    if (plume_model_load_ex(path, &p, &m, &err)) {
        printf("FAIL: load %s: %s\n", path, err.msg);
        failures++;
        return NULL;
    }
    *n_vocab = plume_model_n_vocab(m);
    float *l = malloc(sizeof(float) * (size_t)*n_vocab);
    const int32_t toks[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (plume_context_create(m, 64, &c, &err) || plume_decode(c, toks, 8, l, &err)) {
        printf("FAIL: decode %s: %s\n", path, err.msg);
        failures++;
        free(l);
        l = NULL;
    } else {
        plume_context_free(c);
    }
    plume_model_free(m);
    return l;
}

/* max |a-b| / (max a - min a) */
static double rel_diff(const float *a, const float *b, int32_t n, bool *bitwise, bool *finite)
{
    double md = 0, lo = INFINITY, hi = -INFINITY;
    *bitwise = memcmp(a, b, sizeof(float) * (size_t)n) == 0;
    *finite = true;
    for (int32_t i = 0; i < n; i++) {
        *finite = *finite && isfinite(a[i]) && isfinite(b[i]);
        md = fmax(md, fabs((double)a[i] - b[i]));
        lo = fmin(lo, a[i]);
        hi = fmax(hi, a[i]);
    }
    return hi > lo ? md / (hi - lo) : md;
}

static void check_rounding(void)
{
    int bad16 = 0, badb = 0;
    uint64_t st = 12345;
    for (int i = 0; i < 2000000; i++) {
        st = plume_fill_mix(st);
        uint32_t bits = (uint32_t)st;
        /* every exponent from f16-underflow to overflow, both signs */
        bits = (bits & 0x807fffffu) | ((uint32_t)(90 + (st >> 40) % 60) << 23);
        if (i % 4 == 0)
            bits &= 0xffffe000u | 0x1000u; /* exact ties */
        float f;
        memcpy(&f, &bits, 4);
        bad16 += plume_fill_f16(f) != plume_fp32_to_fp16(f);
        badb += plume_fill_bf16(f) != plume_fp32_to_bf16(f);
    }
    CHECK(bad16 == 0, "plume_fill_f16 differs from plume_fp32_to_fp16 on %d values", bad16);
    CHECK(badb == 0, "plume_fill_bf16 differs from plume_fp32_to_bf16 on %d values", badb);
}

static void check_scale(const char *dir, const char *dtype)
{
    plume_settings *s = settings(dtype, NULL, "true");
    plume_dummy *d;
    plume_error err;
    if (plume_dummy_open(dir, s, &d, &err)) {
        printf("FAIL: open %s %s: %s\n", dir, dtype, err.msg);
        failures++;
        plume_settings_free(s);
        return;
    }
    for (size_t i = 0; i < plume_dummy_n(d); i++) {
        const plume_dummy_tensor *e = plume_dummy_at(d, i);
        if (plume_dummy_make(d, &e->t, &err)) {
            printf("FAIL: make %s: %s\n", e->hf, err.msg);
            failures++;
            break;
        }
        int64_t n = plume_tensor_nelements(&e->t);
        float *f = malloc(sizeof(float) * (size_t)n);
        plume_dequantize((plume_dtype)e->t.type, e->t.data, f, n);
        double sum = 0, sq = 0;
        bool fin = true;
        for (int64_t k = 0; k < n; k++) {
            fin = fin && isfinite(f[k]);
            sum += f[k];
            sq += (double)f[k] * f[k];
        }
        double mean = sum / (double)n, sd = sqrt(sq / (double)n - mean * mean);
        if (e->random)
            CHECK(fin && fabs(sd - 0.02) < 0.0024 && fabs(mean) < 0.002,
                  "%s %s: mean %g std %g (want ~0 and 0.02)", dtype, e->hf, mean, sd);
        else
            CHECK(fin && mean == e->value && sd < 1e-9, "%s %s: a constant vector has mean %g",
                  dtype, e->hf, mean);
        free(f);
    }
    plume_dummy_close(d);
    plume_settings_free(s);
}

/* The dummy loader against the GGUF writer (and the weight_fill path). */
static void check_same(const char *name, const char *dtype, bool exact)
{
    char dir[512], out[600];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    snprintf(out, sizeof out, "%s/%s-%s.gguf", tmp, name, dtype);
    plume_settings *s = settings(dtype, "7", NULL);
    plume_dummy_gguf_report rep;
    plume_error err = {0};
    if (plume_dummy_to_gguf(dir, s, out, &rep, &err)) {
        printf("FAIL: write %s %s: %s\n", name, dtype, err.msg);
        failures++;
        plume_settings_free(s);
        return;
    }
    int32_t nv = 0, nv2 = 0, nv3 = 0;
    float *a = logits_of(dir, &plume_builtin_dummy, s, NULL, &nv);
    float *b = logits_of(out, NULL, NULL, NULL, &nv2);
    n_fill = 0;
    float *c = logits_of(dir, &plume_builtin_dummy, s, &fill_cpu, &nv3);
    if (a && b && c && nv == nv2 && nv == nv3) {
        bool bit, fin;
        double r = rel_diff(a, b, nv, &bit, &fin);
        CHECK(fin, "%s %s: logits not finite", name, dtype);
        if (exact)
            CHECK(bit, "%s %s: file logits differ from the dummy loader's (rel %g)", name, dtype, r);
        else
            CHECK(r < 1e-5, "%s %s: file logits differ from the dummy loader's by %g of the range",
                  name, dtype, r);
        double r2 = rel_diff(a, c, nv, &bit, &fin);
        CHECK(bit, "%s %s: weight_fill logits differ (rel %g)", name, dtype, r2);
        CHECK(n_fill >= 7, "%s %s: weight_fill made %d matrices, expected every one", name,
              dtype, n_fill);
        printf("ok %s %s: file vs dummy rel %.3g, weight_fill bitwise, %d fills, %.2f MB\n",
               name, dtype, r, n_fill, (double)rep.bytes_written / 1e6);
    } else {
        CHECK(0, "%s %s: vocab %d / %d / %d", name, dtype, nv, nv2, nv3);
    }
    free(a);
    free(b);
    free(c);
    unlink(out);
    plume_settings_free(s);
}

static void check_seed(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/deep", tmp);
    plume_settings *s0 = settings("Q8_0", "0", NULL), *s0b = settings("Q8_0", "0", NULL),
                   *s1 = settings("Q8_0", "1", NULL);
    int32_t n0, n1, n2;
    float *a = logits_of(dir, &plume_builtin_dummy, s0, NULL, &n0);
    float *b = logits_of(dir, &plume_builtin_dummy, s0b, NULL, &n1);
    float *c = logits_of(dir, &plume_builtin_dummy, s1, NULL, &n2);
    if (a && b && c) {
        bool bit, fin;
        rel_diff(a, b, n0, &bit, &fin);
        CHECK(bit && fin, "24 layers, seed 0 twice: logits differ or are not finite");
        double r = rel_diff(a, c, n0, &bit, &fin);
        CHECK(!bit && r > 0.01 && fin, "seed 0 and seed 1 give the same logits (rel %g)", r);
        double sd = 0;
        for (int32_t i = 0; i < n0; i++)
            sd += (double)a[i] * a[i];
        sd = sqrt(sd / n0);
        CHECK(sd > 0.05 && sd < 50, "24 layers: logit rms %g, neither flat nor exploding", sd);
    }
    free(a);
    free(b);
    free(c);
    plume_settings_free(s0);
    plume_settings_free(s0b);
    plume_settings_free(s1);
}

static void expect_error(const char *name, plume_settings *s, const char *want)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    plume_dummy *d = NULL;
    plume_error err = {0};
    int rc = plume_dummy_open(dir, s, &d, &err);
    CHECK(rc != 0 && strstr(err.msg, want), "%s: expected an error with '%s', got rc %d '%s'",
          name, want, rc, err.msg);
    plume_dummy_close(d);
    plume_settings_free(s);
}

#define LLAMA_JSON(layers, vocab, extra)                                                           \
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": "   \
    "256, \"intermediate_size\": 512, \"num_hidden_layers\": " layers ", "                        \
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": " vocab ", "         \
    "\"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "     \
    "\"tie_word_embeddings\": false" extra "}"

int main(void)
{
    if (!smollm2_path(tok, sizeof tok))
        return 77;
    snprintf(tmp, sizeof tmp, "/tmp/plume-dummy-XXXXXX");
    if (!mkdtemp(tmp)) {
        printf("FAIL: mkdtemp\n");
        return 1;
    }
    fill_cpu = plume_builtin_cpu;
    fill_cpu.weight_fill = host_fill;
    write_config("llama", LLAMA_JSON("2", "49152",
                                     ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": "
                                     "8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                                     "\"original_max_position_embeddings\": 1024}"));
    write_config("qwen3",
                 "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
                 "\"hidden_size\": 256, \"intermediate_size\": 512, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 64, "
                 "\"vocab_size\": 50000, \"max_position_embeddings\": 2048, \"rms_norm_eps\": "
                 "1e-06, \"rope_theta\": 1000000.0, \"tie_word_embeddings\": true}");
    write_config("deep", LLAMA_JSON("24", "49152", ""));
    write_config("olmoe",
                 "{\"architectures\": [\"OlmoeForCausalLM\"], \"model_type\": \"olmoe\", "
                 "\"hidden_size\": 128, \"intermediate_size\": 64, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 4, \"num_experts\": 8, "
                 "\"num_experts_per_tok\": 2, \"norm_topk_prob\": false, \"vocab_size\": 49152, "
                 "\"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-05, \"rope_theta\": "
                 "10000.0, \"tie_word_embeddings\": false}");
#define QWEN3MOE_JSON(only)                                                                        \
    "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", "              \
    "\"hidden_size\": 128, \"intermediate_size\": 256, \"moe_intermediate_size\": 64, "            \
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "           \
    "\"head_dim\": 32, \"num_experts\": 8, \"num_experts_per_tok\": 2, \"norm_topk_prob\": true, " \
    "\"decoder_sparse_step\": 1, \"mlp_only_layers\": [" only "], \"vocab_size\": 49152, "      \
    "\"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "    \
    "\"tie_word_embeddings\": false}"
    write_config("qwen3moe", QWEN3MOE_JSON(""));
    write_config("qwen3moe_dense1", QWEN3MOE_JSON("1"));
    write_config("qwen2moe",
                 "{\"architectures\": [\"Qwen2MoeForCausalLM\"], \"model_type\": \"qwen2_moe\", "
                 "\"hidden_size\": 128, \"intermediate_size\": 256, \"moe_intermediate_size\": "
                 "64, \"shared_expert_intermediate_size\": 128, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_experts\": 4, "
                 "\"num_experts_per_tok\": 2, \"norm_topk_prob\": false, \"decoder_sparse_step\": "
                 "1, \"mlp_only_layers\": [], \"vocab_size\": 49152, \"max_position_embeddings\": "
                 "2048, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "
                 "\"tie_word_embeddings\": false}");
    write_config("mixtral",
                 "{\"architectures\": [\"MixtralForCausalLM\"], \"model_type\": \"mixtral\", "
                 "\"hidden_size\": 128, \"intermediate_size\": 64, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_local_experts\": "
                 "4, \"num_experts_per_tok\": 2, \"vocab_size\": 49152, "
                 "\"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-05, \"rope_theta\": "
                 "1000000.0, \"tie_word_embeddings\": false}");
    write_config("gptoss",
                 "{\"architectures\": [\"GptOssForCausalLM\"], \"model_type\": \"gpt_oss\", "
                 "\"hidden_size\": 128, \"intermediate_size\": 64, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 32, "
                 "\"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"vocab_size\": 49152, "
                 "\"max_position_embeddings\": 2048, \"sliding_window\": 16, "
                 "\"layer_types\": [\"sliding_attention\", \"full_attention\"]}");
    write_config("odd",
                 "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 288, "
                 "\"intermediate_size\": 512, \"num_hidden_layers\": 1, \"num_attention_heads\": "
                 "4, \"num_key_value_heads\": 2, \"vocab_size\": 49152, \"max_position_embeddings\": 2048}");
    write_config("small_vocab", LLAMA_JSON("2", "1000", ""));
    write_config("gemma",
                 "{\"architectures\": [\"Gemma3ForCausalLM\"], \"model_type\": \"gemma3_text\", "
                 "\"hidden_size\": 256, \"intermediate_size\": 512, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 1, \"head_dim\": 64, "
                 "\"vocab_size\": 49152, \"max_position_embeddings\": 2048}");
    char p[600];
    snprintf(p, sizeof p, "%s/empty", tmp);
    mkdir(p, 0700);

    check_rounding();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/llama", tmp);
    const char *dtypes[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q4_K_M", "Q6_K"};
    for (int i = 0; i < 8; i++)
        check_scale(dir, dtypes[i]);
    for (int i = 0; i < 8; i++) {
        check_same("qwen3", dtypes[i], true);
        check_same("llama", dtypes[i], false);
    }
    check_seed();
    const char *moe_dtypes[] = {"F32", "BF16", "Q8_0", "Q4_0", "Q4_1"};
    for (int i = 0; i < 5; i++) {
        check_same("olmoe", moe_dtypes[i], true);
        check_same("qwen3moe", moe_dtypes[i], true);
        check_same("qwen2moe", moe_dtypes[i], true);
        check_same("mixtral", moe_dtypes[i], false);
    }
    { /* a dense layer: dummy weights load it, the GGUF writer refuses it */
        plume_settings *s = settings("Q8_0", NULL, NULL);
        snprintf(dir, sizeof dir, "%s/qwen3moe_dense1", tmp);
        int32_t nv = 0;
        float *l = logits_of(dir, &plume_builtin_dummy, s, NULL, &nv);
        CHECK(l && nv == 49152, "qwen3moe with a dense layer: dummy weights do not load");
        free(l);
        snprintf(p, sizeof p, "%s/dense1.gguf", tmp);
        plume_dummy_gguf_report r;
        plume_error e2;
        const int rc2 = plume_dummy_to_gguf(dir, s, p, &r, &e2);
        CHECK(rc2 != 0 && strstr(e2.msg, "dense MLP layer"),
              "writer with a dense MoE layer: rc %d '%s'", rc2, rc2 ? e2.msg : "");
        plume_settings_free(s);
    }

    expect_error("empty", settings("Q4_0", NULL, NULL), "no config.json");
    expect_error("llama", settings("Q3_K_XL", NULL, NULL), "is not F32, F16, BF16 or a GGUF preset");
    expect_error("gemma", settings("F16", NULL, NULL), "dummy weights cover llama");
    expect_error("gptoss", settings("F16", NULL, NULL), "make_moe_dummy_gguf.py --arch gpt-oss");
    /* rows of 288: pure Q4_K has no whole 256-blocks; Q4_K_M falls back to Q5_0, which the
     * generator does not make */
    expect_error("odd", settings("Q4_K_S", NULL, "true"), "the generator cannot make");
    expect_error("odd", settings("Q4_K_M", NULL, NULL), "would be Q5_0");
    plume_settings *nt;
    plume_error err;
    plume_settings_new("load_format", &nt, &err);
    plume_settings_set(nt, "tokenizer", "/nonexistent/tok.gguf", &err);
    expect_error("llama", nt, "does not exist");
    plume_settings_new("load_format", &nt, &err);
    expect_error("llama", nt, "no tokenizer.json");
    /* a vocabulary larger than the config's: the loader refuses it */
    plume_settings *sv = settings("F16", NULL, NULL);
    snprintf(dir, sizeof dir, "%s/small_vocab", tmp);
    plume_load_params lp = plume_load_defaults();
    lp.format = &plume_builtin_dummy;
    lp.format_settings = sv;
    plume_model *m = NULL;
    int rc = plume_model_load_ex(dir, &lp, &m, &err);
    CHECK(rc != 0 && strstr(err.msg, "vocabulary"), "a 1000-token vocab with SmolLM2's "
          "tokenizer: rc %d '%s'", rc, rc ? err.msg : "");
    plume_model_free(m);
    snprintf(p, sizeof p, "%s/small.gguf", tmp);
    plume_dummy_gguf_report rep;
    rc = plume_dummy_to_gguf(dir, sv, p, &rep, &err);
    CHECK(rc != 0 && strstr(err.msg, "more than the config's vocab_size"),
          "writer with a 1000-token vocab: rc %d '%s'", rc, rc ? err.msg : "");
    plume_settings_free(sv);

    while (kept_list) {
        kept *k = kept_list;
        kept_list = k->next;
        free(k->mem);
        free(k);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", tmp);
    if (failures) {
        printf("%d failures\n", failures);
        return 1;
    }
    printf("all dummy checks passed\n");
    return 0;
}
