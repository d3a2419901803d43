/* The weight-format and backend slots are real, through the API: with the
 * fixture plugins (PLUME_FIXTURE_PLUGIN_DIR) on the tiny model (argv[1]:
 * tiny.gguf, its HF copy in hf/ beside it),
 *   - st-counting (a wrapper of the built-in safetensors) wins the probe for
 *     an HF directory holding its marker file, plume_model_load_ex with the
 *     registry opens the model through it (its log shows the open and the
 *     tensor lookups), and the logits equal those of the same directory
 *     loaded without the plugin; a directory without the marker stays the
 *     built-in's;
 *   - backends that refuse a feature in supports() make the load (F32
 *     weights) and the engine's KV cache (f16) fail with a message naming
 *     the backend and what it cannot run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "plume/engine.h"
#include "plume/model.h"
#include "plume/registry.h"

static const char *g_gguf;
static char g_hf[4096], g_tmp[64], g_marked[4200], g_log[4200];

static plume_registry *fixture_registry(const char *plugin)
{
    const char *dir = getenv("PLUME_FIXTURE_PLUGIN_DIR");
    assert_non_null(dir);
    plume_registry *reg = NULL;
    plume_error err = {0};
    assert_int_equal(plume_registry_create(&reg, &err), 0);
    assert_int_equal(plume_registry_add_search_dir(reg, dir, &err), 0);
    if (plume_registry_load(reg, plugin, &err))
        fail_msg("loading %s: %s", plugin, err.msg);
    return reg;
}

static char *read_log(void)
{
    FILE *f = fopen(g_log, "r");
    if (!f)
        return calloc(1, 1);
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static size_t count_lines(const char *log, const char *prefix)
{
    size_t n = 0, len = strlen(prefix);
    for (const char *p = log; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
        n += strncmp(p, prefix, len) == 0;
    return n;
}

/* The logits after a fixed prompt. */
static float *logits_of(plume_model *m)
{
    static const int32_t prompt[] = {84, 104, 101, 32, 113, 117, 105, 99, 107};
    plume_context *c = NULL;
    plume_error err = {0};
    assert_int_equal(plume_context_create(m, 64, &c, &err), 0);
    float *lg = malloc(sizeof(float) * (size_t)plume_model_n_vocab(m));
    assert_non_null(lg);
    if (plume_decode(c, prompt, sizeof prompt / sizeof *prompt, lg, &err))
        fail_msg("decode: %s", err.msg);
    plume_context_free(c);
    return lg;
}

static void weight_format_wins_probe_and_loads(void **state)
{
    (void)state;
    plume_registry *reg = fixture_registry("st-counting");
    plume_error err = {0};
    const plume_weight_format_vtable *fmt = plume_registry_probe_format(reg, g_marked, &err);
    assert_non_null(fmt);
    assert_string_equal(fmt->name, "st-counting");
    fmt = plume_registry_probe_format(reg, g_hf, &err);
    assert_non_null(fmt);
    assert_string_equal(fmt->name, "safetensors");

    unlink(g_log);
    plume_load_params lp = plume_load_defaults();
    lp.registry = reg;
    lp.n_threads = 2;
    plume_model *m = NULL;
    if (plume_model_load_ex(g_marked, &lp, &m, &err))
        fail_msg("load through st-counting: %s", err.msg);
    char *log = read_log();
    char open_line[4300];
    snprintf(open_line, sizeof open_line, "open %s\n", g_marked);
    assert_non_null(strstr(log, open_line));
    assert_int_equal(count_lines(log, "open "), 1);
    /* the loader looked up the embedding and every layer's tensors through it */
    assert_non_null(strstr(log, "find model.embed_tokens.weight\n"));
    assert_non_null(strstr(log, "find model.layers.1.mlp.down_proj.weight\n"));
    assert_true(count_lines(log, "find ") >= 20);
    free(log);

    /* the same network as the directory loaded without the plugin */
    plume_model *ref = NULL;
    plume_load_params rp = plume_load_defaults();
    rp.n_threads = 2;
    if (plume_model_load_ex(g_hf, &rp, &ref, &err))
        fail_msg("load without the plugin: %s", err.msg);
    assert_int_equal(plume_model_n_vocab(m), plume_model_n_vocab(ref));
    float *a = logits_of(m), *b = logits_of(ref);
    assert_memory_equal(a, b, sizeof(float) * (size_t)plume_model_n_vocab(m));
    free(a);
    free(b);
    /* the description lists the checkpoint through the plugin's format */
    FILE *d = tmpfile();
    assert_non_null(d);
    plume_model_describe(m, d);
    char desc[4096] = "";
    rewind(d);
    desc[fread(desc, 1, sizeof desc - 1, d)] = '\0';
    fclose(d);
    assert_non_null(strstr(desc, "(st-counting)"));
    assert_non_null(strstr(desc, "F32"));
    plume_model_free(ref);
    plume_model_free(m);
    log = read_log();
    assert_int_equal(count_lines(log, "close"), 1);
    free(log);

    /* without the marker the built-in opens it: nothing goes through the wrapper */
    unlink(g_log);
    if (plume_model_load_ex(g_hf, &lp, &m, &err))
        fail_msg("load of the unmarked directory: %s", err.msg);
    plume_model_free(m);
    log = read_log();
    assert_int_equal(count_lines(log, "open "), 0);
    free(log);
    plume_registry_free(reg);
}

/* Load parameters for the tiny model on the fixture backend `name`. */
static plume_load_params on_picky(plume_registry *reg, const char *name)
{
    plume_load_params lp = plume_load_defaults();
    lp.registry = reg;
    lp.backend_vt = plume_registry_find_backend(reg, name);
    assert_non_null(lp.backend_vt);
    return lp;
}

static void backend_refusing_weight_type_fails_load(void **state)
{
    (void)state;
    plume_registry *reg = fixture_registry("picky-backend");
    plume_load_params lp = on_picky(reg, "picky-weights");
    plume_model *m = NULL;
    plume_error err = {0};
    assert_int_not_equal(plume_model_load_ex(g_gguf, &lp, &m, &err), 0);
    assert_null(m);
    assert_non_null(strstr(err.msg, "backend picky-weights cannot run"));
    assert_non_null(strstr(err.msg, "type F32"));
    assert_non_null(strstr(err.msg, "choose another backend"));
    plume_registry_free(reg);
}

static void backend_refusing_kv_dtype_fails_engine(void **state)
{
    (void)state;
    plume_registry *reg = fixture_registry("picky-backend");
    plume_load_params lp = on_picky(reg, "picky-kv");
    plume_model *m = NULL;
    plume_error err = {0};
    if (plume_model_load_ex(g_gguf, &lp, &m, &err))
        fail_msg("load on picky-kv: %s", err.msg);
    plume_engine_params ep = plume_engine_defaults();
    ep.kv_max_tokens = 1024;
    ep.kv_dtype = PLUME_KV_F16;
    plume_engine *e = NULL;
    assert_int_not_equal(plume_engine_create(m, &ep, &e, &err), 0);
    assert_null(e);
    assert_non_null(strstr(err.msg, "backend picky-kv cannot store the KV cache as f16"));
    assert_non_null(strstr(err.msg, "f32"));
    /* f32 is fine on it */
    ep.kv_dtype = PLUME_KV_F32;
    if (plume_engine_create(m, &ep, &e, &err))
        fail_msg("engine on picky-kv with an f32 cache: %s", err.msg);
    plume_engine_free(e);
    plume_model_free(m);
    plume_registry_free(reg);
}

static void link_into(const char *dir, const char *name)
{
    char from[4300], to[4300];
    snprintf(from, sizeof from, "%s/%s", g_hf, name);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    if (access(from, F_OK) == 0 && symlink(from, to) != 0)
        fail_msg("symlink %s -> %s failed", to, from);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/plume-slots-XXXXXX");
    if (!mkdtemp(g_tmp))
        return -1;
    snprintf(g_marked, sizeof g_marked, "%s/model", g_tmp);
    snprintf(g_log, sizeof g_log, "%s/st-counting.log", g_tmp);
    char marker[4300];
    snprintf(marker, sizeof marker, "%s/st-counting.marker", g_marked);
    if (mkdir(g_marked, 0755) != 0)
        return -1;
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                        "tokenizer_config.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        link_into(g_marked, files[i]);
    FILE *f = fopen(marker, "w");
    if (!f)
        return -1;
    fclose(f);
    setenv("PLUME_ST_COUNTING_LOG", g_log, 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s TINY.gguf (its HF copy in hf/ beside it)\n", argv[0]);
        return 2;
    }
    g_gguf = argv[1];
    const char *slash = strrchr(g_gguf, '/');
    char rel[4096];
    snprintf(rel, sizeof rel, "%.*s/hf", slash ? (int)(slash - g_gguf) : 1,
             slash ? g_gguf : ".");
    if (!realpath(rel, g_hf)) { /* absolute: the links in the marked copy point at it */
        fprintf(stderr, "%s: no HF copy of the tiny model at %s\n", argv[0], rel);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(weight_format_wins_probe_and_loads),
        cmocka_unit_test(backend_refusing_weight_type_fails_load),
        cmocka_unit_test(backend_refusing_kv_dtype_fails_engine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
