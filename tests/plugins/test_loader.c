/* The plugin loader and registry: every rejection reason with its exact
 * one-line message, staging (a failed init leaves the registry unchanged),
 * duplicates, loading by name, static plugins, lookups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plume/registry.h"

#define V "0.1.0"   /* this plume's version, as the messages print it */

static const char *fixture_dir(void)
{
    const char *d = getenv("PLUME_FIXTURE_PLUGIN_DIR");
    assert_non_null(d);
    return d;
}

static void path_of(const char *name, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/plume-%s.so", fixture_dir(), name);
}

static plume_registry *fresh(void)
{
    plume_registry *r;
    plume_error err = {0};
    assert_int_equal(plume_registry_create(&r, &err), 0);
    return r;
}

/* Loads fixture `name` by file into a fresh registry, expects a rejection
 * and compares the message with the printf-expanded expectation. */
static void expect_rejection(const char *name, const char *fmt, ...)
{
    char path[1024], expect[2048];
    path_of(name, path, sizeof path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(expect, sizeof expect, fmt, ap);
    va_end(ap);
    plume_registry *r = fresh();
    size_t np = plume_registry_n_providers(r), nplug = plume_registry_n_plugins(r);
    plume_error err = {0};
    assert_int_equal(plume_registry_load_file(r, path, &err), -1);
    assert_string_equal(err.msg, expect);
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(plume_registry_n_providers(r), np);
    assert_int_equal(plume_registry_n_plugins(r), nplug);
    plume_registry_free(r);
}

static void test_no_entry(void **state)
{
    (void)state;
    char path[1024];
    path_of("noentry", path, sizeof path);
    expect_rejection("noentry",
                     "plugin %s ('noentry', version unknown; this plume " V " has ABI 2.2): not a "
                     "plume plugin (%s: undefined symbol: plume_plugin_entry); a plume plugin "
                     "exports plume_plugin_entry, emitted by PLUME_PLUGIN_DEFINE from "
                     "<plume/plugin.h>: rebuild it with that or remove it from the plugin path",
                     path, path);
}

static void test_bad_magic(void **state)
{
    (void)state;
    char path[1024];
    path_of("badmagic", path, sizeof path);
    expect_rejection("badmagic",
                     "plugin %s ('badmagic', version unknown; this plume " V " has ABI 2.2): not a "
                     "plume plugin: its descriptor's magic is 0x12345678, expected 0x504c554d; "
                     "build it with PLUME_PLUGIN_DEFINE from <plume/plugin.h>",
                     path);
}

static void test_abi_major(void **state)
{
    (void)state;
    char path[1024];
    path_of("abimajor", path, sizeof path);
    expect_rejection("abimajor",
                     "plugin %s ('abimajor', version unknown; this plume " V " has ABI 2.2): built "
                     "for plume ABI 3.2 but this plume " V " has ABI 2.2 (the major versions "
                     "differ); rebuild the plugin against this plume's SDK (pkg-config "
                     "plume-plugin, abi_version 2.2)",
                     path);
}

static void test_abi_minor_newer(void **state)
{
    (void)state;
    char path[1024];
    path_of("abiminor", path, sizeof path);
    expect_rejection("abiminor",
                     "plugin %s ('abiminor' 0.0.1, built for plume ABI 2.%d; this plume " V " has "
                     "ABI 2.2): built for plume ABI 2.%d, newer than this plume " V "'s ABI 2.2; "
                     "upgrade plume, or rebuild the plugin against this plume's SDK (abi_version "
                     "2.2)",
                     path, PLUME_ABI_MINOR + 1, PLUME_ABI_MINOR + 1);
}

static void test_too_small(void **state)
{
    (void)state;
    char path[1024];
    path_of("toosmall", path, sizeof path);
    expect_rejection("toosmall",
                     "plugin %s ('toosmall', version unknown; this plume " V " has ABI 2.2): "
                     "descriptor of 16 bytes is smaller than the %zu bytes of plume ABI 2.0 it "
                     "claims; rebuild it with PLUME_PLUGIN_DEFINE from this plume's "
                     "<plume/plugin.h>",
                     path, sizeof(plume_plugin_desc));
}

static void test_init_fails_registry_unchanged(void **state)
{
    (void)state;
    char path[1024];
    path_of("initfail", path, sizeof path);
    expect_rejection("initfail",
                     "plugin %s ('initfail' 0.3.0, built for plume ABI 2.2; this plume " V " has "
                     "ABI 2.2): init failed: cannot open /dev/fixture0: no such device; connect "
                     "the device or set PLUME_FIXTURE_DEVICE; fix what the plugin reports, or "
                     "leave 'initfail' out of the plugins to load",
                     path);
    /* and the sampler it registered before failing is not visible */
    plume_registry *r = fresh();
    plume_error err = {0};
    assert_int_equal(plume_registry_load_file(r, path, &err), -1);
    assert_null(plume_registry_find_sampler(r, "initfail-sampler"));
    plume_registry_free(r);
}

static void test_duplicate_provider(void **state)
{
    (void)state;
    char path[1024];
    path_of("dup", path, sizeof path);
    expect_rejection("dup",
                     "plugin %s ('dup' 0.2.0, built for plume ABI 2.2; this plume " V " has ABI "
                     "2.2): sampler provider 'standard' is already registered by plugin 'core' "
                     "(built-in); rename the provider or load only one of the two plugins",
                     path);
}

static void test_bad_vtable(void **state)
{
    (void)state;
    char path[1024];
    path_of("badvtable", path, sizeof path);
    expect_rejection("badvtable",
                     "plugin %s ('badvtable' 0.2.0, built for plume ABI 2.2; this plume " V " has "
                     "ABI 2.2): sampler provider 'tiny-vtable': vtable struct_size 16 is smaller "
                     "than the %zu bytes of sampler interface version 1; set struct_size = "
                     "sizeof(the vtable) and rebuild against plume's headers",
                     /* version 1 ends at probs; later slots (rng) were appended */
                     path, offsetof(plume_sampler_vtable, probs) + sizeof(void (*)(void)));
}

static void test_misnamed(void **state)
{
    (void)state;
    char path[1024];
    path_of("misnamed", path, sizeof path);
    expect_rejection("misnamed",
                     "plugin %s ('good' 1.2.3, built for plume ABI 2.2; this plume " V " has ABI "
                     "2.2): its descriptor names it 'good' but its file name says 'misnamed'; "
                     "rename the file to plume-good.so or fix the name in PLUME_PLUGIN_DEFINE",
                     path);
}

static void test_not_a_shared_object(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/plume-text.so", fixture_dir());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not an ELF file\n", f);
    fclose(f);
    plume_registry *r = fresh();
    plume_error err = {0};
    assert_int_equal(plume_registry_load_file(r, path, &err), -1);
    char prefix[1200];
    snprintf(prefix, sizeof prefix, "plugin %s ('text', version unknown; this plume " V " has ABI "
             "2.2): dlopen failed: ", path);
    assert_memory_equal(err.msg, prefix, strlen(prefix));
    assert_non_null(strstr(err.msg, "; check that it is a shared object built for this machine"));
    plume_registry_free(r);
    remove(path);
}

static void test_good_by_name_and_lookups(void **state)
{
    (void)state;
    plume_registry *r = fresh();
    plume_error err = {0};
    assert_int_equal(plume_registry_load(r, "good", &err), -1); /* empty search path */
    assert_non_null(strstr(err.msg, "plugin 'good' not found: no plume-good.so in the plugin path "
                                    "(empty); add its directory with --plugin-dir DIR"));
    assert_int_equal(plume_registry_add_search_dir(r, "/nonexistent-plume-dir", &err), 0);
    assert_int_equal(plume_registry_add_search_dir(r, fixture_dir(), &err), 0);
    assert_int_equal(plume_registry_load(r, "good", &err), 0);
    assert_int_equal(plume_registry_load(r, "good", &err), 0); /* again: no-op */
    assert_int_equal(plume_registry_n_plugins(r), 2);
    const plume_sampler_vtable *s = plume_registry_find_sampler(r, "fixture-argmax");
    assert_non_null(s);
    assert_int_equal(s->struct_size, sizeof(plume_sampler_vtable));
    assert_null(s->probs); /* not set by the plugin: the core's default */
    assert_non_null(plume_registry_find_proposer(r, "fixture-repeat"));
    assert_null(plume_registry_find_proposer(r, "fixture-argmax"));
    assert_non_null(plume_registry_find_sampler(r, "standard"));
    plume_provider_info info;
    assert_non_null(plume_registry_find(r, PLUME_KIND_SAMPLER, "fixture-argmax", &info));
    assert_string_equal(info.plugin, "good");
    assert_string_equal(info.plugin_version, "1.2.3");
    assert_int_equal(info.abi_major, 2);
    char names[256];
    assert_string_equal(plume_registry_names(r, PLUME_KIND_SAMPLER, names, sizeof names),
                        "standard, fixture-argmax");
    assert_string_equal(plume_registry_names(r, PLUME_KIND_KV_CONNECTOR, names, sizeof names),
                        "none");
    /* the provider works through the registry's copy */
    plume_sampler_state *st;
    assert_int_equal(s->create(NULL, 4, 0, &st, &err), 0);
    float logits[4] = {0.1f, 3.0f, -1.0f, 0.5f};
    assert_int_equal(s->sample(st, logits, NULL, 0), 1);
    s->destroy(st);
    plume_registry_free(r);
}

/* The same source linked in with -DPLUME_PLUGIN_STATIC. */
const plume_plugin_desc *plume_plugin_entry_good_init(void);

static void test_static_plugin(void **state)
{
    (void)state;
    plume_registry *r = fresh();
    plume_error err = {0};
    assert_int_equal(plume_registry_add_static(r, plume_plugin_entry_good_init, "static:good", &err),
                     0);
    plume_provider_info info;
    assert_non_null(plume_registry_find(r, PLUME_KIND_PROPOSER, "fixture-repeat", &info));
    assert_string_equal(info.file, "static:good");
    /* a second copy of the same plugin is refused, registry unchanged */
    size_t n = plume_registry_n_providers(r);
    assert_int_equal(plume_registry_add_static(r, plume_plugin_entry_good_init, "static:again", &err),
                     -1);
    assert_string_equal(err.msg, "plugin static:again ('good' 1.2.3, built for plume ABI 2.2; this "
                                 "plume " V " has ABI 2.2): a plugin named 'good' is already "
                                 "loaded from static:good; load only one of the two");
    assert_int_equal(plume_registry_n_providers(r), n);
    plume_registry_free(r);
}

/* A proposer still at interface version 1 (create took n_vocab, not the
 * host) is refused when it registers, naming what changed. */
static int v1_create(const plume_proposer_host *host, const plume_settings *s,
                     plume_proposer **out, plume_error *err)
{
    (void)host, (void)s, (void)out;
    return plume_err(err, PLUME_ERR_INTERNAL, "never called");
}
static void v1_destroy(plume_proposer *p) { (void)p; }
static int v1_propose(plume_proposer *p, const plume_propose_seq *seqs, size_t n,
                      plume_draft *drafts, plume_error *err)
{
    (void)p, (void)seqs, (void)n, (void)drafts, (void)err;
    return 0;
}
static const plume_proposer_vtable v1_proposer = {
    .struct_size = sizeof(plume_proposer_vtable),
    .interface_version = 1,
    .name = "old-proposer",
    .create = v1_create,
    .destroy = v1_destroy,
    .propose = v1_propose,
};
static int v1_proposer_init(plume_registry *reg, plume_error *err)
{
    (void)err;
    return plume_register_proposer(reg, &v1_proposer);
}
PLUME_PLUGIN_DEFINE("oldprop", "0.3.0", "a proposer of interface version 1", "MIT",
                    v1_proposer_init)

static void test_proposer_v1_refused(void **state)
{
    (void)state;
    plume_registry *r = fresh();
    plume_error err = {0};
    size_t n = plume_registry_n_providers(r);
    assert_int_equal(plume_registry_add_static(r, plume_plugin_entry_v1_proposer_init,
                                               "static:oldprop", &err), -1);
    assert_string_equal(err.msg,
                        "plugin static:oldprop ('oldprop' 0.3.0, built for plume ABI 2.2; this "
                        "plume " V " has ABI 2.2): proposer provider 'old-proposer': "
                        "interface_version 1 is older than this plume accepts (2..2: version 2's "
                        "create takes the host (plume_proposer_host) and each plume_propose_seq "
                        "carries the request's sampling parameters); port the plugin to the "
                        "current plume/proposer.h and rebuild");
    assert_int_equal(plume_registry_n_providers(r), n);
    assert_null(plume_registry_find_proposer(r, "old-proposer"));
    plume_registry_free(r);
}

static void test_register_outside_init(void **state)
{
    (void)state;
    plume_registry *r = fresh();
    size_t n = plume_registry_n_providers(r);
    assert_int_equal(plume_register_sampler(r, plume_registry_find_sampler(r, "standard")), -1);
    assert_int_equal(plume_registry_n_providers(r), n);
    plume_registry_free(r);
}

static void test_builtins_listed(void **state)
{
    (void)state;
    plume_registry *r = fresh();
    static const char *const expect[][2] = {{"weight-format", "gguf"},
                                            {"weight-format", "safetensors"},
                                            {"weight-format", "dummy"},
                                            {"linear", "native"},
                                            {"backend", "cpu"},
                                            {"sampler", "standard"},
                                            {"scheduler", "continuous"}};
    assert_int_equal(plume_registry_n_providers(r), 7);
    for (size_t i = 0; i < 7; i++) {
        plume_provider_info p;
        assert_int_equal(plume_registry_provider(r, i, &p), 0);
        assert_string_equal(plume_kind_name(p.kind), expect[i][0]);
        assert_string_equal(p.name, expect[i][1]);
        assert_string_equal(p.file, "built-in");
        assert_string_equal(p.plugin, "core");
    }
    assert_ptr_equal(plume_registry_best_backend(r), plume_registry_find_backend(r, "cpu"));
    plume_registry_free(r);
}

static void test_abi_matches_pkgconfig(void **state)
{
    (void)state;
    char abi[16];
    snprintf(abi, sizeof abi, "%d.%d", PLUME_ABI_MAJOR, PLUME_ABI_MINOR);
    assert_string_equal(abi, MESON_ABI_VERSION);
    uint32_t ma, mi;
    plume_abi_version(&ma, &mi);
    assert_int_equal(ma, PLUME_ABI_MAJOR);
    assert_int_equal(mi, PLUME_ABI_MINOR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_entry),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_abi_major),
        cmocka_unit_test(test_abi_minor_newer),
        cmocka_unit_test(test_too_small),
        cmocka_unit_test(test_init_fails_registry_unchanged),
        cmocka_unit_test(test_duplicate_provider),
        cmocka_unit_test(test_bad_vtable),
        cmocka_unit_test(test_misnamed),
        cmocka_unit_test(test_not_a_shared_object),
        cmocka_unit_test(test_good_by_name_and_lookups),
        cmocka_unit_test(test_static_plugin),
        cmocka_unit_test(test_proposer_v1_refused),
        cmocka_unit_test(test_register_outside_init),
        cmocka_unit_test(test_builtins_listed),
        cmocka_unit_test(test_abi_matches_pkgconfig),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
