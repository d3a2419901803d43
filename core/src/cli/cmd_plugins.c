/* plume plugins: list every registered provider; --check FILE.so: what one
 * plugin file would register, or why it is rejected. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"

static const char help[] =
    "usage: plume plugins [--plugin-dir DIR]... [--plugin NAME]... [--pipeline FILE]\n"
    "       plume plugins --check FILE.so [--plugin-dir DIR]... [--plugin NAME]...\n"
    "\n"
    "Lists every plugin file on the plugin search path (each one opened to read its name,\n"
    "version, ABI and providers; \"loaded\" when --plugin or the pipeline loaded it,\n"
    "\"available\" when loading it by name would pick this file, \"shadowed\" when an\n"
    "earlier file has its name, \"rejected\" with the reason when it cannot load); then every\n"
    "registered provider: the core's own (file \"built-in\") and those of the loaded plugins,\n"
    "with kind, name, plugin version, plugin file and ABI; then the search path.\n"
    "\n"
    "  --check FILE.so       load this one file and report what it would register or why\n"
    "                        it is rejected (exit 1 on rejection)\n"
    "  --plugin-dir DIR      search DIR for plume-<name>.so first (repeatable)\n"
    "  --plugin NAME         load plugin NAME from the plugin path (repeatable)\n"
    "  --pipeline FILE       load the plugins the pipeline lists (and validate it)\n";

static void list(const plume_registry *r, size_t from)
{
    printf("%-14s %-14s %-10s %-12s %-5s %s\n", "KIND", "NAME", "VERSION", "PLUGIN", "ABI",
           "FILE");
    for (size_t i = from; i < plume_registry_n_providers(r); i++) {
        plume_provider_info p;
        plume_registry_provider(r, i, &p);
        char abi[24];
        snprintf(abi, sizeof abi, "%u.%u", p.abi_major, p.abi_minor);
        printf("%-14s %-14s %-10s %-12s %-5s %s\n", plume_kind_name(p.kind), p.name,
               p.plugin_version, p.plugin, abi, p.file);
    }
}

/* One row of the plugin-file table: the file opened in a registry of its
 * own, so that what it registers and any rejection are its alone. */
typedef struct scan_ctx {
    const plume_registry *loaded; /* the command's registry */
    int rejected;
} scan_ctx;

static bool is_loaded(const plume_registry *r, const char *path)
{
    char real[PATH_MAX];
    const char *p = realpath(path, real) ? real : path;
    for (size_t i = 0; i < plume_registry_n_plugins(r); i++) {
        plume_plugin_info pi;
        plume_registry_plugin(r, i, &pi);
        if (strcmp(pi.file, p) == 0)
            return true;
    }
    return false;
}

static void scan_row(void *ctx, const char *path, const char *name, bool shadowed)
{
    scan_ctx *c = ctx;
    plume_registry *probe = NULL;
    plume_error err = {0};
    if (plume_registry_create(&probe, &err) || plume_registry_load_file(probe, path, &err)) {
        printf("%-14s %-10s %-5s %-10s %s\n    %s\n", name, "?", "?", "rejected", path, err.msg);
        c->rejected++;
        plume_registry_free(probe);
        return;
    }
    plume_plugin_info pi;
    plume_registry_plugin(probe, plume_registry_n_plugins(probe) - 1, &pi);
    char abi[24], provs[256] = "";
    snprintf(abi, sizeof abi, "%u.%u", pi.abi_major, pi.abi_minor);
    for (size_t i = plume_registry_n_providers(probe) - pi.n_providers;
         i < plume_registry_n_providers(probe); i++) {
        plume_provider_info p;
        plume_registry_provider(probe, i, &p);
        size_t len = strlen(provs);
        snprintf(provs + len, sizeof provs - len, "%s%s:%s", len ? ", " : "",
                 plume_kind_name(p.kind), p.name);
    }
    const char *status = is_loaded(c->loaded, path) ? "loaded"
                         : shadowed                 ? "shadowed"
                                                    : "available";
    printf("%-14s %-10s %-5s %-10s %s\n    %s\n", pi.name, pi.version, abi, status, path,
           provs[0] ? provs : "(registers no provider)");
    plume_registry_free(probe);
}

static int check_file(const cli_pipeline_opts *o, const char *file)
{
    plume_registry *r;
    if (cli_registry("plugins", o, &r))
        return 1;
    size_t before = plume_registry_n_providers(r), plugins_before = plume_registry_n_plugins(r);
    plume_error err = {0};
    if (plume_registry_load_file(r, file, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        plume_registry_free(r);
        return 1;
    }
    if (plume_registry_n_plugins(r) == plugins_before) {
        printf("%s: already loaded (by --plugin); nothing more would be registered\n", file);
        plume_registry_free(r);
        return 0;
    }
    plume_plugin_info pi;
    plume_registry_plugin(r, plume_registry_n_plugins(r) - 1, &pi);
    printf("%s: plume plugin '%s' %s, built for plume ABI %u.%u (this plume %s has ABI %d.%d), "
           "license %s\n  %s\nwould register %zu provider%s:\n",
           pi.file, pi.name, pi.version, pi.abi_major, pi.abi_minor, plume_version(),
           PLUME_ABI_MAJOR, PLUME_ABI_MINOR, pi.license[0] ? pi.license : "unspecified",
           pi.description, pi.n_providers, pi.n_providers == 1 ? "" : "s");
    for (size_t i = before; i < plume_registry_n_providers(r); i++) {
        plume_provider_info p;
        plume_registry_provider(r, i, &p);
        printf("  %-14s %s (interface version %u)\n", plume_kind_name(p.kind), p.name,
               p.interface_version);
    }
    plume_registry_free(r);
    return 0;
}

int cmd_plugins(int argc, char **argv)
{
    cli_pipeline_opts o = {0};
    const char *check = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_opt(argc, argv, &i, "--check", &v))
            check = v;
        else if (!cli_pipeline_opt("plugins", argc, argv, &i, &o))
            cli_unknown("plugins", argv[i]);
    }
    if (o.model) {
        fprintf(stderr, "plume plugins: --model is not an option here (see plume plugins --help)\n");
        return 2;
    }
    if (check) {
        if (o.pipeline) {
            fprintf(stderr, "plume plugins: give --check or --pipeline, not both\n");
            return 2;
        }
        return check_file(&o, check);
    }
    plume_registry *r;
    plume_pipeline *p = NULL;
    if (o.pipeline ? cli_pipeline_resolve("plugins", &o, &r, &p) : cli_registry("plugins", &o, &r))
        return 1;
    printf("plugin files on the plugin path:\n%-14s %-10s %-5s %-10s %s\n", "PLUGIN", "VERSION",
           "ABI", "STATUS", "FILE (then its providers)");
    scan_ctx ctx = {r, 0};
    if (plume_registry_scan(r, scan_row, &ctx) == 0)
        printf("  (none: add a directory with --plugin-dir DIR or PLUME_PLUGIN_PATH)\n");
    printf("\nregistered providers (built-in, and those of the loaded plugins):\n");
    list(r, 0);
    printf("\nplugin path (searched in order for plume-<name>.so and <name>/plume-<name>.so):\n");
    for (size_t i = 0; i < plume_registry_n_search_dirs(r); i++)
        printf("  %s\n", plume_registry_search_dir(r, i));
    plume_pipeline_free(p);
    plume_registry_free(r);
    return 0;
}
