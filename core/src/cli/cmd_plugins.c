/* plume plugins: list every registered provider; --check FILE.so: what one
 * plugin file would register, or why it is rejected. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"

static const char help[] =
    "usage: plume plugins [--plugin-dir DIR]... [--plugin NAME]... [--pipeline FILE]\n"
    "       plume plugins --check FILE.so [--plugin-dir DIR]... [--plugin NAME]...\n"
    "\n"
    "Lists every registered provider: the core's own (file \"built-in\") and those of the\n"
    "plugins loaded with --plugin or by the pipeline's plugins list, with kind, name,\n"
    "plugin version, plugin file and the ABI the plugin was built for; then the plugin\n"
    "search path.\n"
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
        if (cli_flag(argv, i, "--help") || cli_flag(argv, i, "-h")) {
            fputs(help, stdout);
            return 0;
        }
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
    list(r, 0);
    printf("\nplugin path (searched in order for plume-<name>.so and <name>/plume-<name>.so):\n");
    for (size_t i = 0; i < plume_registry_n_search_dirs(r); i++)
        printf("  %s\n", plume_registry_search_dir(r, i));
    plume_pipeline_free(p);
    plume_registry_free(r);
    return 0;
}
