/* --load-format NAME and its --dummy-* settings: the pipeline key
 * load_format (docs/pipelines.md, docs/dummy-weights.md) on the command
 * line, for every subcommand that takes --model. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"

static const char *const DUMMY_OPTS[] = {"--dummy-dtype", "--dummy-seed", "--dummy-tokenizer",
                                         "--dummy-pure"};
static const char *const DUMMY_KEYS[] = {"dtype", "seed", "tokenizer", "pure"};

bool cli_load_format_opt(int argc, char **argv, int *i, cli_pipeline_opts *o)
{
    const char *v;
    if (cli_opt(argc, argv, i, "--load-format", &v)) {
        o->load_format = v;
        return true;
    }
    if (strcmp(argv[*i], "--dummy-pure") == 0) {
        o->dummy[3] = "true";
        return true;
    }
    for (int k = 0; k < 3; k++)
        if (cli_opt(argc, argv, i, DUMMY_OPTS[k], &v)) {
            o->dummy[k] = v;
            return true;
        }
    return false;
}

/* An error when a --dummy-* option comes without --load-format dummy. */
static int check_dummy_opts(const cli_pipeline_opts *o, plume_error *err)
{
    bool any_dummy = false;
    for (int k = 0; k < 4; k++)
        any_dummy = any_dummy || o->dummy[k];
    if (any_dummy && !o->load_format && o->pipeline)
        return plume_err(err, PLUME_ERR_INVALID,
                         "the --dummy-* options go with --load-format dummy; with --pipeline, "
                         "write them in its load_format section");
    if (any_dummy && (!o->load_format || strcmp(o->load_format, "dummy") != 0))
        return plume_err(err, PLUME_ERR_INVALID,
                         "the --dummy-* options go with --load-format dummy");
    return 0;
}

int cli_load_format_resolve(const char *cmd, const cli_pipeline_opts *o, plume_registry *reg,
                            plume_pipeline **p, plume_error *err)
{
    (void)cmd;
    if (check_dummy_opts(o, err))
        return -1;
    if (o->pipeline && o->load_format)
        return plume_err(err, PLUME_ERR_INVALID,
                         "--load-format does not combine with --pipeline; write load_format: "
                         "{ method: %s, ... } in the pipeline file instead",
                         o->load_format);
    if (o->pipeline)
        return plume_pipeline_load_with_model(reg, o->pipeline, o->model, p, err);
    if (!o->model)
        return plume_err(err, PLUME_ERR_INVALID,
                         "--load-format needs --model DIR (a directory with config.json)");
    plume_settings *s = NULL;
    if (plume_settings_new("load_format", &s, err))
        return -1;
    for (int k = 0; k < 4; k++)
        if (o->dummy[k] && plume_settings_set(s, DUMMY_KEYS[k], o->dummy[k], err)) {
            plume_settings_free(s);
            return -1;
        }
    int rc = plume_pipeline_for_model_as(reg, o->model, o->load_format, s, p, err);
    plume_settings_free(s);
    return rc;
}

int cli_load_format_params(const char *cmd, const cli_pipeline_opts *o, plume_registry **reg,
                           plume_settings **s, plume_load_params *lp)
{
    *reg = NULL;
    *s = NULL;
    plume_error err = {0};
    if (check_dummy_opts(o, &err)) {
        cli_print_error(cmd, NULL, err.msg);
        return -1;
    }
    if (!o->load_format)
        return 0;
    const plume_weight_format_vtable *f = NULL;
    if (cli_registry(cmd, o, reg))
        return -1;
    if (!(f = plume_registry_find_weight_format(*reg, o->load_format))) {
        char names[512];
        plume_err(&err, PLUME_ERR_INVALID, "--load-format: no weight format '%s'; available: %s",
                  o->load_format,
                  plume_registry_names(*reg, PLUME_KIND_WEIGHT_FORMAT, names, sizeof names));
        goto fail;
    }
    if (plume_settings_new("load_format", s, &err))
        goto fail;
    for (int k = 0; k < 4; k++)
        if (o->dummy[k] && plume_settings_set(*s, DUMMY_KEYS[k], o->dummy[k], &err))
            goto fail;
    if (f->validate && f->validate(*s, &err))
        goto fail;
    lp->registry = *reg;
    lp->format = f;
    lp->format_settings = *s;
    return 0;
fail:
    cli_print_error(cmd, NULL, err.msg);
    plume_settings_free(*s);
    plume_registry_free(*reg);
    *s = NULL;
    *reg = NULL;
    return -1;
}

int cli_load_model(const char *cmd, const cli_pipeline_opts *o, const char *path, int threads,
                   plume_model **m, plume_registry **reg)
{
    plume_load_params lp = plume_load_defaults();
    lp.n_threads = threads;
    plume_settings *s;
    *m = NULL;
    if (cli_load_format_params(cmd, o, reg, &s, &lp))
        return -1;
    plume_error err = {0};
    const int rc = plume_model_load_ex(path, &lp, m, &err);
    plume_settings_free(s); /* the model keeps nothing of them */
    if (rc) {
        cli_print_error(cmd, NULL, err.msg);
        plume_registry_free(*reg);
        *reg = NULL;
        *m = NULL;
        return -1;
    }
    return 0;
}
