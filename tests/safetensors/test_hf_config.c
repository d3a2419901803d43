/* HF config.json parsing and plume_config_validate: real-world configs
 * (SmolLM2, Qwen2.5, Mistral), defaults, and errors that name the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "formats/hf_quant_config.h"
#include "model/config.h"
#include "st_test_util.h"

/* SmolLM2-135M's config.json (abridged only of fields plume ignores). */
static const char smollm2_json[] =
    "{\n"
    "  \"architectures\": [\"LlamaForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 0,\n"
    "  \"eos_token_id\": 0,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 576,\n"
    "  \"initializer_range\": 0.041666666666666664,\n"
    "  \"intermediate_size\": 1536,\n"
    "  \"is_llama_config\": true,\n"
    "  \"max_position_embeddings\": 8192,\n"
    "  \"model_type\": \"llama\",\n"
    "  \"num_attention_heads\": 9,\n"
    "  \"num_hidden_layers\": 30,\n"
    "  \"num_key_value_heads\": 3,\n"
    "  \"pretraining_tp\": 1,\n"
    "  \"rms_norm_eps\": 1e-05,\n"
    "  \"rope_interleaved\": false,\n"
    "  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 100000,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.40.1\",\n"
    "  \"use_cache\": true,\n"
    "  \"vocab_size\": 49152\n"
    "}\n";

/* Qwen2.5-0.5B-Instruct's config.json. */
static const char qwen2_json[] =
    "{\n"
    "  \"architectures\": [\"Qwen2ForCausalLM\"],\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n"
    "  \"eos_token_id\": 151645,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 896,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 4864,\n"
    "  \"max_position_embeddings\": 32768,\n"
    "  \"max_window_layers\": 21,\n"
    "  \"model_type\": \"qwen2\",\n"
    "  \"num_attention_heads\": 14,\n"
    "  \"num_hidden_layers\": 24,\n"
    "  \"num_key_value_heads\": 2,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"sliding_window\": 32768,\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.43.1\",\n"
    "  \"use_cache\": true,\n"
    "  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 151936\n"
    "}\n";

/* Mistral-7B-Instruct-v0.3's config.json. */
static const char mistral_json[] =
    "{\n"
    "  \"architectures\": [\"MistralForCausalLM\"],\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 1,\n"
    "  \"eos_token_id\": 2,\n"
    "  \"head_dim\": 128,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 4096,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 14336,\n"
    "  \"max_position_embeddings\": 32768,\n"
    "  \"model_type\": \"mistral\",\n"
    "  \"num_attention_heads\": 32,\n"
    "  \"num_hidden_layers\": 32,\n"
    "  \"num_key_value_heads\": 8,\n"
    "  \"rms_norm_eps\": 1e-05,\n"
    "  \"rope_theta\": 1000000.0,\n"
    "  \"sliding_window\": null,\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"vocab_size\": 32768\n"
    "}\n";

/* The smallest config plume accepts: every default taken. */
static const char minimal_json[] = "{\"model_type\": \"llama\", \"vocab_size\": 100,"
                                   " \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                                   " \"num_attention_heads\": 4, \"intermediate_size\": 128,"
                                   " \"max_position_embeddings\": 256}";

static int setup(void **state)
{
    *state = tu_dir_new();
    return *state ? 0 : -1;
}

static int teardown(void **state)
{
    tu_dir_free(*state);
    return 0;
}

/* Writes text to <dir>/config.json, parses it, and returns the status;
 * path_out (when non-NULL, 1024 bytes) receives the file's path. */
static int parse(tu_dir *d, const char *text, plume_model_config *cfg, plume_error *err,
                 char *path_out)
{
    const char *path = tu_path(d, "config.json");
    assert_int_equal(tu_write_text(path, text), 0);
    if (path_out)
        snprintf(path_out, 1024, "%s", path);
    memset(err, 0, sizeof *err);
    return plume_config_from_hf_json(path, cfg, err);
}

/* Parses text, which must succeed. */
static plume_model_config parse_ok(tu_dir *d, const char *text)
{
    plume_model_config cfg;
    plume_error err;
    if (parse(d, text, &cfg, &err, NULL) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(plume_config_validate(&cfg, &err), 0);
    return cfg;
}

/* Replaces the first occurrence of `from` in src with `to`; caller frees. */
static char *edit(const char *src, const char *from, const char *to)
{
    const char *at = strstr(src, from);
    assert_non_null(at);
    size_t n = strlen(src) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    assert_non_null(out);
    snprintf(out, n, "%.*s%s%s", (int)(at - src), src, to, at + strlen(from));
    return out;
}

/* Parsing src edited by (from -> to) must fail with code and a message
 * containing want and the file's path. */
static void expect_edit_fails(tu_dir *d, const char *src, const char *from, const char *to,
                              plume_status code, const char *want)
{
    char *text = edit(src, from, to);
    plume_model_config cfg;
    plume_error err;
    char path[1024];
    assert_int_equal(parse(d, text, &cfg, &err, path), -1);
    assert_true(tu_err_is(&err, code, want));
    assert_true(tu_err_is(&err, code, path));
    free(text);
}

/* The fields of a parsed config that the real configs above pin down. */
static void check_config(const plume_model_config *c, const plume_model_config *want)
{
    assert_int_equal(c->arch, want->arch);
    assert_string_equal(c->arch_name, want->arch_name);
    assert_int_equal(c->n_vocab, want->n_vocab);
    assert_int_equal(c->n_embd, want->n_embd);
    assert_int_equal(c->n_layer, want->n_layer);
    assert_int_equal(c->n_head, want->n_head);
    assert_int_equal(c->n_head_kv, want->n_head_kv);
    assert_int_equal(c->head_dim, want->head_dim);
    assert_int_equal(c->n_ff, want->n_ff);
    assert_int_equal(c->n_ctx_train, want->n_ctx_train);
    assert_true(c->rms_eps == want->rms_eps);
    assert_true(c->rope_theta == want->rope_theta);
    assert_int_equal(c->qkv_bias, want->qkv_bias);
    assert_int_equal(c->tied_embeddings, want->tied_embeddings);
}

static void test_smollm2(void **state)
{
    plume_model_config c = parse_ok(*state, smollm2_json);
    check_config(&c, &(plume_model_config){
                         .arch = PLUME_ARCH_LLAMA, .arch_name = "llama", .n_vocab = 49152,
                         .n_embd = 576, .n_layer = 30, .n_head = 9, .n_head_kv = 3,
                         .head_dim = 64, .n_ff = 1536, .n_ctx_train = 8192, .rms_eps = 1e-5f,
                         .rope_theta = 100000.0f, .qkv_bias = false, .tied_embeddings = true});
    assert_int_equal(c.rope_style, PLUME_ROPE_HALF);
}

static void test_qwen2(void **state)
{
    plume_model_config c = parse_ok(*state, qwen2_json);
    check_config(&c, &(plume_model_config){
                         .arch = PLUME_ARCH_QWEN2, .arch_name = "qwen2", .n_vocab = 151936,
                         .n_embd = 896, .n_layer = 24, .n_head = 14, .n_head_kv = 2,
                         .head_dim = 64, .n_ff = 4864, .n_ctx_train = 32768, .rms_eps = 1e-6f,
                         .rope_theta = 1000000.0f, .qkv_bias = true, .tied_embeddings = true});
    /* Qwen2 has q/k/v bias whatever attention_bias says */
    char *text = edit(qwen2_json, "\"max_window_layers\"", "\"attention_bias\": false, \"max_window_layers\"");
    c = parse_ok(*state, text);
    assert_true(c.qkv_bias);
    free(text);
}

static void test_mistral(void **state)
{
    plume_model_config c = parse_ok(*state, mistral_json);
    check_config(&c, &(plume_model_config){
                         .arch = PLUME_ARCH_LLAMA, .arch_name = "mistral", .n_vocab = 32768,
                         .n_embd = 4096, .n_layer = 32, .n_head = 32, .n_head_kv = 8,
                         .head_dim = 128, .n_ff = 14336, .n_ctx_train = 32768, .rms_eps = 1e-5f,
                         .rope_theta = 1000000.0f, .qkv_bias = false, .tied_embeddings = false});
}

static void test_defaults_and_architectures_only(void **state)
{
    plume_model_config c = parse_ok(*state, minimal_json);
    assert_int_equal(c.n_head_kv, 4);
    assert_int_equal(c.head_dim, 16);
    assert_true(c.rms_eps == 1e-6f);
    assert_true(c.rope_theta == 10000.0f);
    assert_false(c.tied_embeddings);
    assert_false(c.qkv_bias);
    assert_int_equal(c.rope_style, PLUME_ROPE_HALF);

    /* no model_type: architectures[0] decides */
    char *text = edit(qwen2_json, "\"model_type\": \"qwen2\",", "");
    c = parse_ok(*state, text);
    assert_int_equal(c.arch, PLUME_ARCH_QWEN2);
    assert_string_equal(c.arch_name, "qwen2");
    free(text);
    text = edit(mistral_json, "\"model_type\": \"mistral\",", "");
    c = parse_ok(*state, text);
    assert_string_equal(c.arch_name, "mistral");
    free(text);

    /* transformers 5 keeps rope_theta in rope_parameters */
    text = edit(minimal_json, "\"vocab_size\"",
                "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0},"
                " \"vocab_size\"");
    c = parse_ok(*state, text);
    assert_true(c.rope_theta == 500000.0f);
    free(text);
    /* null counts as absent; llama attention_bias true gives q/k/v bias */
    text = edit(minimal_json, "\"vocab_size\"",
                "\"num_key_value_heads\": null, \"head_dim\": null, \"attention_bias\": true,"
                " \"rope_scaling\": {\"rope_type\": \"default\"}, \"vocab_size\"");
    c = parse_ok(*state, text);
    assert_int_equal(c.n_head_kv, 4);
    assert_int_equal(c.head_dim, 16);
    assert_true(c.qkv_bias);
    free(text);
}

static void test_unsupported_arch_exact(void **state)
{
    tu_dir *d = *state;
    char *text = edit(smollm2_json, "\"model_type\": \"llama\"", "\"model_type\": \"gpt2\"");
    plume_model_config cfg;
    plume_error err;
    char path[1024], want[1200];
    assert_int_equal(parse(d, text, &cfg, &err, path), -1);
    snprintf(want, sizeof want,
             "%s: unsupported architecture gpt2 (supported: llama, mistral, qwen2, qwen3, "
             "gemma3_text, mixtral, qwen3_moe, qwen2_moe, olmoe, gpt_oss)",
             path);
    assert_int_equal(err.code, PLUME_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, want);
    free(text);

    text = edit(qwen2_json, "\"model_type\": \"qwen2\",", "");
    char *text2 = edit(text, "Qwen2ForCausalLM", "DbrxForCausalLM");
    assert_int_equal(parse(d, text2, &cfg, &err, path), -1);
    snprintf(want, sizeof want,
             "%s: architecture DbrxForCausalLM: this mixture-of-experts family is not "
             "supported (supported MoE families: mixtral, qwen3_moe, qwen2_moe, olmoe, gpt_oss)",
             path);
    assert_string_equal(err.msg, want);
    free(text);
    free(text2);
}

static void test_missing_and_bad_fields(void **state)
{
    tu_dir *d = *state;
    const char *s = smollm2_json;
    expect_edit_fails(d, s, "\"hidden_size\": 576,", "", PLUME_ERR_FORMAT,
                      "missing required field 'hidden_size'");
    expect_edit_fails(d, s, "\"vocab_size\": 49152", "\"x\": 1", PLUME_ERR_FORMAT,
                      "missing required field 'vocab_size'");
    expect_edit_fails(d, s, "\"num_hidden_layers\": 30,", "", PLUME_ERR_FORMAT,
                      "missing required field 'num_hidden_layers'");
    expect_edit_fails(d, s, "\"intermediate_size\": 1536,", "\"intermediate_size\": null,",
                      PLUME_ERR_FORMAT, "missing required field 'intermediate_size'");
    expect_edit_fails(d, s, "\"max_position_embeddings\": 8192,", "", PLUME_ERR_FORMAT,
                      "missing required field 'max_position_embeddings'");
    char *no_arch = edit(s, "\"model_type\": \"llama\",", "");
    expect_edit_fails(d, no_arch, "\"architectures\": [\"LlamaForCausalLM\"],", "", PLUME_ERR_FORMAT,
                      "missing required field 'model_type' (or 'architectures')");
    free(no_arch);
    expect_edit_fails(d, s, "\"hidden_size\": 576", "\"hidden_size\": \"576\"", PLUME_ERR_FORMAT,
                      "field 'hidden_size' must be an integer");
    expect_edit_fails(d, s, "\"hidden_size\": 576", "\"hidden_size\": 576.5", PLUME_ERR_FORMAT,
                      "field 'hidden_size' must be an integer");
    expect_edit_fails(d, s, "\"hidden_size\": 576", "\"hidden_size\": 4294967296", PLUME_ERR_FORMAT,
                      "field 'hidden_size' must be an integer");
    expect_edit_fails(d, s, "\"num_attention_heads\": 9", "\"num_attention_heads\": 0",
                      PLUME_ERR_FORMAT, "'num_attention_heads' must be positive");
    expect_edit_fails(d, s, "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": \"small\"",
                      PLUME_ERR_FORMAT, "field 'rms_norm_eps' must be a number");
    expect_edit_fails(d, s, "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1",
                      PLUME_ERR_FORMAT, "field 'tie_word_embeddings' must be true or false");
    /* RoPE scalings: incomplete ones and unknown types are refused by name */
    expect_edit_fails(d, s, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}",
                      PLUME_ERR_RANGE, "llama3 needs 0 < low_freq_factor < high_freq_factor");
    expect_edit_fails(d, s, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 0.5}",
                      PLUME_ERR_RANGE, "rope scaling linear needs a factor >= 1");
    expect_edit_fails(d, s, "\"rope_scaling\": null",
                      "\"rope_scaling\": {\"type\": \"longrope\", \"factor\": 2}",
                      PLUME_ERR_UNSUPPORTED, "rope_type 'longrope' is not supported");
    expect_edit_fails(d, s, "\"rope_scaling\": null",
                      "\"rope_parameters\": {\"rope_type\": \"dynamic\", \"rope_theta\": 5.0,"
                      " \"factor\": 2, \"partial_rotary_factor\": 0.5}",
                      PLUME_ERR_UNSUPPORTED, "partial_rotary_factor != 1");
    {   /* transformers-5 rope_parameters with a scaling; rope_scaling spelling */
        char *y = edit(s, "\"rope_scaling\": null",
                       "\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 5.0, "
                       "\"factor\": 4, \"original_max_position_embeddings\": 2048}");
        plume_model_config yc = parse_ok(d, y);
        assert_int_equal(yc.rope.type, PLUME_ROPE_SCALING_YARN);
        assert_true(yc.rope.theta == 5.0f && yc.rope.factor == 4.0f && yc.rope.orig_ctx == 2048);
        assert_true(yc.rope.beta_fast == 32.0f && yc.rope.beta_slow == 1.0f && yc.rope.truncate);
        free(y);
        char *l3 = edit(s, "\"rope_scaling\": null",
                        "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                        "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                        "\"original_max_position_embeddings\": 8192}");
        plume_model_config lc = parse_ok(d, l3);
        assert_int_equal(lc.rope.type, PLUME_ROPE_SCALING_LLAMA3);
        assert_true(lc.rope.theta == 100000.0f && lc.rope.orig_ctx == 8192);
        free(l3);
    }
    {   /* Qwen2's window: layers >= max_window_layers */
        char *w = edit(qwen2_json, "\"use_sliding_window\": false", "\"use_sliding_window\": true");
        plume_model_config wc = parse_ok(d, w);
        assert_true(wc.sliding_window > 0);
        assert_int_equal(plume_config_layer_window(&wc, 0), 0);
        free(w);
    }
    expect_edit_fails(d, s, "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"",
                      PLUME_ERR_UNSUPPORTED, "hidden_act gelu is not supported");
    expect_edit_fails(d, s, "\"attention_bias\": false", "\"mlp_bias\": true",
                      PLUME_ERR_UNSUPPORTED, "mlp_bias true is not supported yet");
    /* a quantized config parses: quantization_config is read by hf_quant_config.c */
    char *q = edit(s, "\"attention_bias\": false",
                   "\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}");
    plume_model_config qc = parse_ok(d, q);
    assert_int_equal(qc.n_layer, 30);
    free(q);
    /* validation failures carry the path too */
    expect_edit_fails(d, s, "\"num_key_value_heads\": 3", "\"num_key_value_heads\": 2",
                      PLUME_ERR_RANGE, "n_head_kv (num_key_value_heads) 2 does not divide n_head");
    expect_edit_fails(d, s, "\"vocab_size\": 49152", "\"vocab_size\": 0", PLUME_ERR_RANGE,
                      "n_vocab (vocab_size) must be positive, got 0");
    expect_edit_fails(d, s, "\"hidden_size\": 576", "\"hidden_size\": 9", PLUME_ERR_RANGE,
                      "head_dim 1 must be even");
}

/* Writes config.json (and, when qfile is non-NULL, quantize_config.json)
 * and reads the quantization config. */
static int read_qc(tu_dir *d, const char *config, const char *qfile, plume_settings **s,
                   char *method, plume_error *err)
{
    assert_int_equal(tu_write_text(tu_path(d, "config.json"), config), 0);
    unlink(tu_path(d, "quantize_config.json"));
    if (qfile)
        assert_int_equal(tu_write_text(tu_path(d, "quantize_config.json"), qfile), 0);
    memset(err, 0, sizeof *err);
    return plume_hf_quant_config(d->root, s, method, 32, err);
}

static void test_quant_config(void **state)
{
    tu_dir *d = *state;
    plume_settings *s;
    plume_error err;
    char method[32];
    const char *v;
    /* not quantized */
    assert_int_equal(read_qc(d, smollm2_json, NULL, &s, method, &err), 0);
    assert_null(s);
    assert_string_equal(method, "");
    /* config.json's quantization_config, GPTQModel's synonyms mapped */
    char *c = edit(smollm2_json, "\"attention_bias\": false",
                   "\"quantization_config\": {\"method\": \"GPTQ\", \"format\": \"gptq_v2\", "
                   "\"bits\": 4, \"group_size\": 128, \"sym\": false, \"desc_act\": true, "
                   "\"damp_percent\": 0.05, \"meta\": {\"quantizer\": [\"x\"]}, \"dynamic\": {}}");
    assert_int_equal(read_qc(d, c, NULL, &s, method, &err), 0);
    assert_non_null(s);
    assert_string_equal(method, "gptq");
    assert_int_equal(plume_settings_string(s, "checkpoint_format", NULL, &v, &err), 0);
    assert_string_equal(v, "gptq_v2");
    int64_t bits;
    bool sym, desc;
    assert_int_equal(plume_settings_int(s, "bits", 0, 0, 64, &bits, &err), 0);
    assert_int_equal(bits, 4);
    assert_int_equal(plume_settings_bool(s, "sym", true, &sym, &err), 0);
    assert_false(sym);
    assert_int_equal(plume_settings_bool(s, "desc_act", false, &desc, &err), 0);
    assert_true(desc);
    assert_false(plume_settings_has(s, "meta")); /* objects are left out */
    plume_settings_free(s);
    /* AutoGPTQ: no quantization_config, a quantize_config.json next to it */
    assert_int_equal(read_qc(d, smollm2_json,
                             "{\"bits\": 8, \"group_size\": -1, \"quant_method\": \"gptq\"}", &s,
                             method, &err),
                     0);
    assert_non_null(s);
    assert_int_equal(plume_settings_int(s, "group_size", 0, -1, 1024, &bits, &err), 0);
    assert_int_equal(bits, -1);
    plume_settings_free(s);
    /* refusals name the field */
    char *e1 = edit(smollm2_json, "\"attention_bias\": false",
                    "\"quantization_config\": {\"quant_method\": \"gptq\", \"dynamic\": "
                    "{\"-:.*down\": {}}}");
    assert_int_equal(read_qc(d, e1, NULL, &s, method, &err), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_UNSUPPORTED, "dynamic (per-module quantization overrides)"));
    char *e2 = edit(smollm2_json, "\"attention_bias\": false",
                    "\"quantization_config\": {\"quant_method\": \"gptq\", "
                    "\"checkpoint_format\": \"marlin\"}");
    assert_int_equal(read_qc(d, e2, NULL, &s, method, &err), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_UNSUPPORTED, "checkpoint_format \"marlin\""));
    char *e3 = edit(smollm2_json, "\"attention_bias\": false",
                    "\"quantization_config\": {\"bits\": 4}");
    assert_int_equal(read_qc(d, e3, NULL, &s, method, &err), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_FORMAT, "no quant_method"));
    free(c);
    free(e1);
    free(e2);
    free(e3);
}

static void test_unreadable_files(void **state)
{
    tu_dir *d = *state;
    plume_model_config cfg;
    plume_error err;
    assert_int_equal(parse(d, "{\"model_type\": ", &cfg, &err, NULL), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_FORMAT, "not valid JSON"));
    assert_int_equal(parse(d, "[1]", &cfg, &err, NULL), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_FORMAT, "not a JSON object"));
    assert_int_equal(parse(d, "", &cfg, &err, NULL), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_FORMAT, "not valid JSON"));
    memset(&err, 0, sizeof err);
    assert_int_equal(plume_config_from_hf_json(tu_path(d, "missing.json"), &cfg, &err), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_IO, "missing.json: cannot read"));
    assert_int_equal(plume_config_from_hf_json(NULL, &cfg, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_INVALID);
}

static void test_validate(void **state)
{
    (void)state;
    const plume_model_config good = {
        .arch = PLUME_ARCH_LLAMA, .arch_name = "llama", .n_vocab = 100, .n_embd = 64,
        .n_layer = 2, .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 128,
        .n_ctx_train = 256, .rms_eps = 1e-5f, .rope_theta = 10000.0f,
        .rope = {.theta = 10000.0f}, .rope_local = {.theta = 10000.0f},
        .rope_style = PLUME_ROPE_ADJACENT,
    };
    plume_error err;
    assert_int_equal(plume_config_validate(&good, &err), 0);
    static const struct {
        int field;
        int32_t value;
        const char *want;
    } cases[] = {
        {0, 0, "n_vocab (vocab_size) must be positive, got 0"},
        {1, -5, "n_embd (hidden_size) must be positive, got -5"},
        {2, 0, "n_layer (num_hidden_layers) must be positive"},
        {3, 0, "n_head (num_attention_heads) must be positive"},
        {4, 0, "n_head_kv (num_key_value_heads) must be positive"},
        {4, 3, "n_head_kv (num_key_value_heads) 3 does not divide n_head (num_attention_heads) 4"},
        {5, 15, "head_dim 15 must be even"},
        {5, 0, "head_dim (head_dim) must be positive"},
        {6, 0, "n_ff (intermediate_size) must be positive"},
        {7, 0, "n_ctx_train (max_position_embeddings) must be positive"},
        {5, 1 << 30, "head_dim 1073741824 * n_head 4 is too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plume_model_config c = good;
        int32_t *fields[] = {&c.n_vocab, &c.n_embd,  &c.n_layer, &c.n_head,
                             &c.n_head_kv, &c.head_dim, &c.n_ff, &c.n_ctx_train};
        *fields[cases[i].field] = cases[i].value;
        memset(&err, 0, sizeof err);
        assert_int_equal(plume_config_validate(&c, &err), -1);
        assert_true(tu_err_is(&err, PLUME_ERR_RANGE, cases[i].want));
    }
    plume_model_config c = good;
    c.rms_eps = 0.0f;
    assert_int_equal(plume_config_validate(&c, &err), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_RANGE, "rms_eps (rms_norm_eps) must be positive"));
    c = good;
    c.rope_theta = -1.0f;
    assert_int_equal(plume_config_validate(&c, &err), -1);
    assert_true(tu_err_is(&err, PLUME_ERR_RANGE, "rope_theta must be positive"));
    c = good;
    c.arch = (plume_arch)(PLUME_ARCH_GPT_OSS + 1); /* one past the last */
    assert_int_equal(plume_config_validate(&c, &err), -1);
    assert_int_equal(plume_config_validate(NULL, &err), -1);
    assert_int_equal(err.code, PLUME_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_qwen2),
        cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_defaults_and_architectures_only),
        cmocka_unit_test(test_unsupported_arch_exact),
        cmocka_unit_test(test_missing_and_bad_fields),
        cmocka_unit_test(test_quant_config),
        cmocka_unit_test(test_unreadable_files),
        cmocka_unit_test(test_validate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
