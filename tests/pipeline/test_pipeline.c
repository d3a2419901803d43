/* Pipeline parsing and validation: every error class with its exact
 * file:line:column message, defaults, relative model paths, the mapping
 * onto plume_engine_params / plume_sampling_params, settings getters. */
#include <libgen.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "plume/pipeline.h"

static const char *tiny; /* absolute path of the tiny model */

static plume_registry *reg(void)
{
    plume_registry *r;
    plume_error err = {0};
    assert_int_equal(plume_registry_create(&r, &err), 0);
    return r;
}

/* Parses text as t.yaml without looking at the model; expects msg. */
static void expect_error(const char *text, const char *msg)
{
    plume_registry *r = reg();
    plume_pipeline *p = NULL;
    plume_error err = {0};
    int rc = plume_pipeline_parse(r, text, strlen(text), "t.yaml", NULL, false, &p, &err);
    if (rc != -1 || strcmp(err.msg, msg) != 0)
        fail_msg("for\n%s\nexpected: %s\ngot (%d): %s", text, msg, rc, err.msg);
    assert_null(p);
    plume_registry_free(r);
}

/* load_format: a weight format by name (dummy: random weights from a
 * config.json) with its settings, validated by the format; auto probes. */
static void test_load_format(void **state)
{
    (void)state;
    expect_error("model: m.gguf\nload_format: dumy\n",
                 "t.yaml:2:14: load_format: no weight format 'dumy'; available: auto, gguf, "
                 "safetensors, dummy (dummy: random weights from a config.json)");
    expect_error("model: m.gguf\nload_format: { method: auto, seed: 3 }\n",
                 "t.yaml:2:14: load_format: auto takes no settings; name a format (method: "
                 "dummy) to give it settings");
    plume_registry *r = reg();
    plume_pipeline *p = NULL;
    plume_error err = {0};
    const char *bad = "model: cfg\nload_format: { method: dummy, dtype: Q9_9 }\n";
    assert_int_equal(plume_pipeline_parse(r, bad, strlen(bad), "t.yaml", NULL, false, &p, &err),
                     -1);
    assert_non_null(strstr(err.msg, "'Q9_9' is not F32, F16, BF16 or a GGUF preset"));
    const char *typo = "model: cfg\nload_format: { method: dummy, dtyp: Q4_0 }\n";
    assert_int_equal(plume_pipeline_parse(r, typo, strlen(typo), "t.yaml", NULL, false, &p, &err),
                     -1);
    assert_non_null(strstr(err.msg, "dtyp"));
    const char *ok = "model: cfg\nload_format: { method: dummy, dtype: q4_k_m, seed: 5 }\n";
    assert_int_equal(plume_pipeline_parse(r, ok, strlen(ok), "t.yaml", NULL, false, &p, &err), 0);
    const plume_settings *s = NULL;
    const plume_weight_format_vtable *f = plume_pipeline_weight_format(p, &s);
    assert_non_null(f);
    assert_string_equal(f->name, "dummy");
    int64_t seed = 0;
    assert_int_equal(plume_settings_int(s, "seed", 0, 0, 100, &seed, &err), 0);
    assert_int_equal(seed, 5);
    plume_pipeline_free(p);
    plume_registry_free(r);
}

static void test_unknown_keys(void **state)
{
    (void)state;
    expect_error("model: m.gguf\nmodle: x\n",
                 "t.yaml:2:1: unknown key 'modle'; accepted: model, backend, plugins, threads, "
                 "kv_cache, scheduler, sampling, speculative, kv_connector, load_format");
    expect_error("model: m.gguf\nsampling: { temprature: 0.5 }\n",
                 "t.yaml:2:13: unknown key 'temprature' in sampling; accepted: method, seed, "
                 "temperature, top_k, top_p, min_p, repetition_penalty, repeat_last_n, "
                 "presence_penalty, frequency_penalty");
    expect_error("model: m.gguf\nkv_cache:\n  block_size: 16\n  dtyp: f32\n",
                 "t.yaml:4:3: unknown key 'dtyp' in kv_cache; accepted: block_size, dtype, "
                 "max_tokens");
    expect_error("model: m.gguf\nscheduler: { mixed: true }\n",
                 "t.yaml:2:14: unknown key 'mixed' in scheduler; accepted: method, max_num_seqs, "
                 "max_batched_tokens, prefix_caching, mixed_batches");
    expect_error("model: m.gguf\nbackend: { method: cpu, device: 0 }\n",
                 "t.yaml:2:25: unknown key 'device' in backend; accepted: method");
}

static void test_unknown_providers(void **state)
{
    (void)state;
    expect_error("model: m.gguf\nsampling: { method: mirostat }\n",
                 "t.yaml:2:21: sampling.method: no sampler provider 'mirostat'; available: "
                 "standard (a plugin that provides it must be listed in plugins:)");
    expect_error("model: m.gguf\nbackend: cuda\n",
                 "t.yaml:2:10: backend: no backend provider 'cuda'; available: auto, cpu (a "
                 "plugin that provides it must be listed in plugins:)");
    expect_error("model: m.gguf\nspeculative: { method: ngram, num_speculative_tokens: 5 }\n",
                 "t.yaml:2:24: speculative.method: no proposer provider 'ngram'; available: "
                 "none (a plugin that provides it must be listed in plugins:)");
    expect_error("model: m.gguf\nscheduler: { method: fair }\n",
                 "t.yaml:2:22: scheduler.method: no scheduler provider 'fair'; available: "
                 "continuous (a plugin that provides it must be listed in plugins:)");
    expect_error("model: m.gguf\nspeculative: { num_speculative_tokens: 5 }\n",
                 "t.yaml:2:1: speculative: needs a method (the proposer provider); registered: "
                 "none");
}

/* A kv_connector section names a registered provider and a role (the
 * pd-ipc plugin's own tests cover a working one: tests/pd). */
static void test_kv_connector_checked(void **state)
{
    (void)state;
    expect_error("model: m.gguf\nkv_connector: off\n",
                 "t.yaml:2:15: kv_connector must be a mapping { key: value, ... }, got a scalar");
    expect_error("model: m.gguf\nkv_connector: { role: decode }\n",
                 "t.yaml:2:1: kv_connector: needs a method (the kv-connector provider); "
                 "registered: none");
    expect_error("model: m.gguf\nkv_connector: { method: nope, role: decode }\n",
                 "t.yaml:2:25: kv_connector.method: no kv-connector provider 'nope'; available: "
                 "none (a plugin that provides it must be listed in plugins:)");
}

static void test_wrong_types(void **state)
{
    (void)state;
    expect_error("model: m.gguf\nthreads: many\n",
                 "t.yaml:2:10: threads must be an integer in [0, 4096], got 'many'");
    expect_error("model: m.gguf\nkv_cache: { block_size: \"16\" }\n",
                 "t.yaml:2:25: kv_cache.block_size must be an integer in [1, 1024], got a quoted "
                 "string");
    expect_error("model: m.gguf\nsampling: 0.5\n",
                 "t.yaml:2:11: sampling must be a mapping { key: value, ... }, got a scalar");
    expect_error("model: m.gguf\nsampling:\n",
                 "t.yaml:2:10: sampling must be a mapping { key: value, ... }, got nothing");
    expect_error("model: m.gguf\nscheduler: { prefix_caching: yes }\n",
                 "t.yaml:2:30: scheduler.prefix_caching must be true or false, got 'yes'");
    expect_error("model: m.gguf\nsampling: { top_k: [1, 2] }\n",
                 "t.yaml:2:20: sampling.top_k must be an integer in [0, 1073741824], got a list");
    expect_error("model: m.gguf\nplugins: spec-ngram\n",
                 "t.yaml:2:10: plugins must be a list of plugin names, e.g. plugins: "
                 "[spec-ngram], got a scalar");
    expect_error("model: [a, b]\n",
                 "t.yaml:1:8: model must be a path to a .gguf file or an HF model directory, got "
                 "a list");
    expect_error("model: m.gguf\nkv_cache: { dtype: bf16 }\n",
                 "t.yaml:2:20: kv_cache.dtype must be one of f32, f16, int8, got 'bf16'");
    expect_error("model: m.gguf\nsampling: { temperature: .nan }\n",
                 "t.yaml:2:26: sampling.temperature must be a number in [0.0, 100.0], got '.nan'");
}

static void test_out_of_range(void **state)
{
    (void)state;
    expect_error("model: m.gguf\nkv_cache: { block_size: 0 }\n",
                 "t.yaml:2:25: kv_cache.block_size must be an integer in [1, 1024], got '0'");
    expect_error("model: m.gguf\nkv_cache: { block_size: 32, max_tokens: 16 }\n",
                 "t.yaml:2:41: kv_cache.max_tokens: must be at least block_size (32), got 16");
    expect_error("model: m.gguf\nsampling: { top_p: 0 }\n",
                 "t.yaml:2:20: sampling.top_p must be a number in (0.0, 1.0], got '0'");
    expect_error("model: m.gguf\nsampling: { presence_penalty: 2.5 }\n",
                 "t.yaml:2:31: sampling.presence_penalty must be a number in [-2.0, 2.0], got "
                 "'2.5'");
    expect_error("model: m.gguf\nsampling: { seed: -1 }\n",
                 "t.yaml:2:19: sampling.seed must be an integer in [0, 9223372036854775807], got "
                 "'-1'");
    expect_error("model: m.gguf\nscheduler: { max_num_seqs: 100000 }\n",
                 "t.yaml:2:28: scheduler.max_num_seqs must be an integer in [1, 65536], got "
                 "'100000'");
    expect_error("model: m.gguf\nspeculative: { method: x, num_speculative_tokens: 0 }\n",
                 "t.yaml:2:24: speculative.method: no proposer provider 'x'; available: none (a "
                 "plugin that provides it must be listed in plugins:)");
}

static void test_structure(void **state)
{
    (void)state;
    expect_error("", "t.yaml:1:1: the pipeline is empty; it needs at least model: PATH (a .gguf "
                     "file or an HF model directory)");
    expect_error("- model\n", "t.yaml:1:1: a pipeline is a mapping of keys (model, backend, "
                              "sampling, ...), got a list");
    expect_error("backend: cpu\n", "t.yaml:1:1: model is missing; add model: PATH (a .gguf file "
                                   "or an HF model directory)");
    expect_error("model: m.gguf\nmodel: n.gguf\n",
                 "t.yaml:2:1: key 'model' appears twice in this mapping; keep one");
    expect_error("model: &m m.gguf\n",
                 "t.yaml:1:8: anchors (&name) are not supported in pipelines; remove it");
    expect_error("model: !!str m.gguf\n",
                 "t.yaml:1:8: tags (!tag) are not supported in pipelines; remove it");
    expect_error("model: m.gguf\n---\nmodel: n.gguf\n",
                 "t.yaml:2:1: a pipeline file holds one YAML document; remove the second one");
    expect_error("model: m.gguf\nsampling: { [a]: 1 }\n",
                 "t.yaml:2:13: a key must be a plain name, not a list or mapping");
    /* a syntax error: libyaml's own words, at its position */
    plume_registry *r = reg();
    plume_pipeline *p;
    plume_error err = {0};
    const char *bad = "model: m.gguf\nsampling: { temperature: 0.5\n";
    assert_int_equal(plume_pipeline_parse(r, bad, strlen(bad), "t.yaml", NULL, false, &p, &err), -1);
    assert_memory_equal(err.msg, "t.yaml:3:1: not valid YAML: ", 28);
    plume_registry_free(r);
}

static void test_plugins_not_found(void **state)
{
    (void)state;
    plume_registry *r = reg();
    plume_pipeline *p;
    plume_error err = {0};
    assert_int_equal(plume_registry_add_search_dir(r, "/nonexistent-a", &err), 0);
    const char *t = "model: m.gguf\nplugins: [spec-ngram]\n";
    assert_int_equal(plume_pipeline_parse(r, t, strlen(t), "t.yaml", NULL, false, &p, &err), -1);
    char expect[1024];
    snprintf(expect, sizeof expect,
             "t.yaml:2:11: plugins[0]: plugin 'spec-ngram' not found: no plume-spec-ngram.so in "
             "the plugin path (/nonexistent-a); add its directory with --plugin-dir DIR or "
             "PLUME_PLUGIN_PATH, or install it into %s",
             PLUME_TEST_PLUGINSDIR);
    assert_string_equal(err.msg, expect);
    plume_registry_free(r);
}

static void test_model_paths(void **state)
{
    (void)state;
    char dir[PATH_MAX], parent[PATH_MAX], cwd[PATH_MAX], tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", tiny);
    snprintf(dir, sizeof dir, "%s", dirname(tmp));    /* .../tests */
    snprintf(tmp, sizeof tmp, "%s", dir);
    snprintf(parent, sizeof parent, "%s", dirname(tmp)); /* the build root */
    assert_non_null(getcwd(cwd, sizeof cwd));
    plume_registry *r = reg();
    plume_pipeline *p;
    plume_error err = {0};
    /* relative to the pipeline's directory */
    const char *t = "model: tiny.gguf\n";
    if (plume_pipeline_parse(r, t, strlen(t), "t.yaml", dir, true, &p, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(plume_pipeline_model(p), tiny);
    assert_string_equal(plume_pipeline_weight_format(p, NULL)->name, "gguf");
    plume_pipeline_free(p);
    /* not there: then relative to the current directory */
    assert_int_equal(chdir(parent), 0);
    t = "model: tests/tiny.gguf\n";
    assert_int_equal(plume_pipeline_parse(r, t, strlen(t), "t.yaml", "/nonexistent-b", true, &p,
                                          &err), 0);
    assert_string_equal(plume_pipeline_model(p), tiny);
    plume_pipeline_free(p);
    /* neither */
    t = "sampling: {}\nmodel: nope.gguf\n";
    assert_int_equal(plume_pipeline_parse(r, t, strlen(t), "t.yaml", "/nonexistent-b", true, &p,
                                          &err), -1);
    assert_string_equal(err.msg, "t.yaml:2:8: model: nope.gguf does not exist (looked for it "
                                 "relative to the pipeline's directory /nonexistent-b, then the "
                                 "current directory); fix the path or run scripts/fetch-model");
    /* something no format recognises */
    t = "model: meson-info\n";
    assert_int_equal(plume_pipeline_parse(r, t, strlen(t), "t.yaml", NULL, true, &p, &err), -1);
    assert_non_null(strstr(err.msg, "t.yaml:1:8: model: no weight format recognises "));
    assert_int_equal(chdir(cwd), 0);
    plume_registry_free(r);
}

static void test_defaults_and_mapping(void **state)
{
    (void)state;
    plume_registry *r = reg();
    plume_pipeline *p;
    plume_error err = {0};
    assert_int_equal(plume_pipeline_for_model(r, tiny, &p, &err), 0);
    plume_engine_params ep, d = plume_engine_defaults();
    plume_pipeline_engine_params(p, &ep);
    assert_int_equal(ep.block_size, d.block_size);
    assert_int_equal(ep.kv_max_tokens, d.kv_max_tokens);
    assert_int_equal(ep.kv_dtype, PLUME_KV_F16); /* the default cache, as the engine's */
    assert_int_equal(d.kv_dtype, PLUME_KV_F16);
    assert_int_equal(ep.max_num_seqs, d.max_num_seqs);
    assert_int_equal(ep.max_batched_tokens, d.max_batched_tokens);
    assert_int_equal(ep.prefix_caching, d.prefix_caching);
    assert_int_equal(ep.mixed_batches, d.mixed_batches);
    assert_int_equal(plume_pipeline_threads(p), 0);
    plume_sampling_params sp, sd = plume_sampling_defaults();
    bool seed_given = true;
    assert_true(plume_pipeline_sampling_params(p, &sp, &seed_given));
    assert_false(seed_given);
    assert_true(sp.temperature == sd.temperature && sp.top_k == sd.top_k && sp.top_p == sd.top_p &&
                sp.min_p == sd.min_p && sp.repetition_penalty == sd.repetition_penalty &&
                sp.repeat_last_n == sd.repeat_last_n && sp.seed == sd.seed);
    assert_string_equal(plume_pipeline_backend(p, NULL)->name, "cpu");
    assert_string_equal(plume_pipeline_scheduler(p, NULL)->name, "continuous");
    int32_t k = 7;
    assert_null(plume_pipeline_proposer(p, NULL, &k));
    assert_int_equal(k, 0);
    assert_null(plume_pipeline_kv_connector(p, NULL, NULL));
    plume_pipeline_free(p);

    const char *t = "model: m.gguf\nthreads: 3\nbackend: auto\n"
                    "kv_cache: { block_size: 32, max_tokens: 4096 }\n"
                    "scheduler: { max_num_seqs: 8, max_batched_tokens: 256, prefix_caching: "
                    "false, mixed_batches: false }\n"
                    "sampling: { temperature: 0.7, top_k: 5, top_p: 0.5, min_p: 0.1, "
                    "repetition_penalty: 1.1, repeat_last_n: -1, seed: 42, "
                    "presence_penalty: 0.5, frequency_penalty: -1.5 }\n";
    assert_int_equal(plume_pipeline_parse(r, t, strlen(t), "t.yaml", NULL, false, &p, &err), 0);
    plume_pipeline_engine_params(p, &ep);
    assert_int_equal(ep.block_size, 32);
    assert_int_equal(ep.kv_max_tokens, 4096);
    assert_int_equal(ep.kv_dtype, PLUME_KV_F16); /* a kv_cache section without dtype */
    assert_int_equal(ep.max_num_seqs, 8);
    assert_int_equal(ep.max_batched_tokens, 256);
    assert_false(ep.prefix_caching);
    assert_false(ep.mixed_batches);
    assert_int_equal(plume_pipeline_threads(p), 3);
    assert_true(plume_pipeline_sampling_params(p, &sp, &seed_given));
    assert_true(seed_given);
    assert_int_equal(sp.seed, 42);
    assert_true(sp.temperature == 0.7f && sp.top_k == 5 && sp.top_p == 0.5f && sp.min_p == 0.1f);
    assert_true(sp.repetition_penalty == 1.1f && sp.repeat_last_n == -1);
    assert_true(sp.presence_penalty == 0.5f && sp.frequency_penalty == -1.5f);
    const plume_settings *ss;
    assert_string_equal(plume_pipeline_sampler(p, &ss)->name, "standard");
    assert_int_equal(plume_settings_count(ss), 8); /* method and seed are the pipeline's */
    assert_false(plume_settings_has(ss, "seed"));
    /* the printout */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    plume_pipeline_print(p, f);
    fclose(f);
    assert_non_null(strstr(buf, "\nbackend: cpu "));
    assert_non_null(strstr(buf, "  max_tokens: 4096\n"));
    char dtype_line[64]; /* `plume check` says f16, marked as the default */
    snprintf(dtype_line, sizeof dtype_line, "\n%-44s # default\n", "  dtype: f16");
    assert_non_null(strstr(buf, dtype_line));
    assert_non_null(strstr(buf, "  seed: 42\n"));
    assert_non_null(strstr(buf, "  temperature: 0.7\n"));
    assert_non_null(strstr(buf, "\nspeculative: off "));
    free(buf);
    plume_pipeline_free(p);
    plume_registry_free(r);
}

static void test_settings_api(void **state)
{
    (void)state;
    plume_settings *s;
    plume_error err = {0};
    assert_int_equal(plume_settings_new("speculative", &s, &err), 0);
    assert_int_equal(plume_settings_set(s, "k", "4", &err), 0);
    assert_int_equal(plume_settings_set(s, "name", "ngram", &err), 0);
    assert_int_equal(plume_settings_set(s, "k", "5", &err), -1);
    assert_string_equal(err.msg, "speculative.k is already set");
    int64_t k;
    const char *name;
    double x;
    assert_int_equal(plume_settings_int(s, "k", 1, 1, 8, &k, &err), 0);
    assert_int_equal(k, 4);
    assert_int_equal(plume_settings_string(s, "name", NULL, &name, &err), 0);
    assert_string_equal(name, "ngram");
    assert_int_equal(plume_settings_float(s, "absent", 2.5, 0, 10, &x, &err), 0);
    assert_true(x == 2.5);
    assert_int_equal(plume_settings_int(s, "k", 1, 5, 8, &k, &err), -1);
    assert_string_equal(err.msg, "(settings): speculative.k must be an integer in [5, 8], got '4'");
    assert_int_equal(plume_settings_error(s, "name", &err, "unknown method %s", "ngram"), -1);
    assert_string_equal(err.msg, "(settings): speculative.name: unknown method ngram");
    const plume_settings *child;
    assert_int_equal(plume_settings_child(s, "nothing", &child, &err), 0);
    assert_null(child);
    assert_int_equal(plume_settings_child(s, "k", &child, &err), -1);
    plume_settings_free(s);

    /* nested mappings and paths from a file */
    plume_registry *r = reg();
    plume_pipeline *p;
    const char *t = "model: m.gguf\nbackend: { method: cpu }\n";
    assert_int_equal(plume_pipeline_parse(r, t, strlen(t), "t.yaml", NULL, false, &p, &err), 0);
    plume_pipeline_free(p);
    plume_registry_free(r);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_pipeline TINY.gguf\n");
        return 2;
    }
    static char abs_tiny[PATH_MAX];
    if (!realpath(argv[1], abs_tiny)) {
        perror(argv[1]);
        return 1;
    }
    tiny = abs_tiny;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_load_format),
        cmocka_unit_test(test_unknown_providers),
        cmocka_unit_test(test_kv_connector_checked),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_plugins_not_found),
        cmocka_unit_test(test_model_paths),
        cmocka_unit_test(test_defaults_and_mapping),
        cmocka_unit_test(test_settings_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
