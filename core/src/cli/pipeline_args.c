#include "cli/pipeline_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void add(const char *cmd, const char *opt, const char **arr, size_t *n, const char *v)
{
    if (*n == CLI_MAX_PLUGIN_ARGS || !v[0]) {
        fprintf(stderr, "plume %s: %s takes a non-empty value, at most %d times\n", cmd, opt,
                CLI_MAX_PLUGIN_ARGS);
        exit(2);
    }
    arr[(*n)++] = v;
}

bool cli_pipeline_opt(const char *cmd, int argc, char **argv, int *i, cli_pipeline_opts *o)
{
    const char *v;
    if (cli_opt(argc, argv, i, "--pipeline", &v)) {
        o->pipeline = v;
    } else if (cli_opt(argc, argv, i, "--model", &v) || cli_opt(argc, argv, i, "-m", &v)) {
        o->model = v;
    } else if (cli_opt(argc, argv, i, "--plugin-dir", &v)) {
        add(cmd, "--plugin-dir", o->plugin_dirs, &o->n_plugin_dirs, v);
    } else if (cli_opt(argc, argv, i, "--plugin", &v)) {
        add(cmd, "--plugin", o->plugins, &o->n_plugins, v);
    } else if (cli_load_format_opt(argc, argv, i, o)) {
        return true;
    } else {
        return false;
    }
    return true;
}

void cli_print_error(const char *cmd, const char *pipeline_file, const char *msg)
{
    size_t n = pipeline_file ? strlen(pipeline_file) : 0;
    if (n && strncmp(msg, pipeline_file, n) == 0 && msg[n] == ':')
        fprintf(stderr, "%s\n", msg);
    else
        fprintf(stderr, "plume %s: %s\n", cmd, msg[0] ? msg : "failed");
}

int cli_registry(const char *cmd, const cli_pipeline_opts *o, plume_registry **out)
{
    plume_error err = {0};
    plume_registry *r = NULL;
    if (plume_registry_create(&r, &err))
        goto fail;
    for (size_t i = 0; i < o->n_plugin_dirs; i++)
        if (plume_registry_add_search_dir(r, o->plugin_dirs[i], &err))
            goto fail;
    if (plume_registry_add_default_search_path(r, &err))
        goto fail;
    for (size_t i = 0; i < o->n_plugins; i++)
        if (plume_registry_load(r, o->plugins[i], &err))
            goto fail;
    *out = r;
    return 0;
fail:
    cli_print_error(cmd, NULL, err.msg);
    plume_registry_free(r);
    return -1;
}

int cli_pipeline_resolve(const char *cmd, const cli_pipeline_opts *o, plume_registry **reg,
                         plume_pipeline **p)
{
    *reg = NULL;
    *p = NULL;
    if (!o->pipeline && !o->model) {
        fprintf(stderr, "plume %s: give --pipeline FILE or --model PATH (see plume %s --help)\n",
                cmd, cmd);
        return -1;
    }
    if (cli_registry(cmd, o, reg))
        return -1;
    plume_error err = {0};
    bool dummy = o->dummy[0] || o->dummy[1] || o->dummy[2] || o->dummy[3];
    int rc = o->pipeline || o->load_format || dummy
                 ? cli_load_format_resolve(cmd, o, *reg, p, &err)
                 : plume_pipeline_for_model(*reg, o->model, p, &err);
    if (rc) {
        cli_print_error(cmd, o->pipeline, err.msg);
        plume_pipeline_free(*p);
        plume_registry_free(*reg);
        *p = NULL;
        *reg = NULL;
        return -1;
    }
    return 0;
}
