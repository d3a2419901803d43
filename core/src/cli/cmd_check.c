/* plume check PIPELINE.yaml: validate a pipeline and print it resolved. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/pipeline_args.h"

static const char help[] =
    "usage: plume check PIPELINE.yaml [--model PATH] [--plugin-dir DIR]... [--plugin NAME]...\n"
    "\n"
    "Validates a pipeline without reading any weight: loads its plugins, checks every key,\n"
    "provider and value, and lets each provider check its own settings.  Prints the\n"
    "resolved pipeline (every slot with its provider and where it comes from, every\n"
    "setting with its value, defaults marked) and exits 0; on the first problem prints\n"
    "FILE:LINE:COLUMN: what is wrong and what is accepted, and exits 1.\n"
    "\n"
    "  --model PATH          check with this model instead of the pipeline's\n"
    "  --plugin-dir DIR      search DIR for plume-<name>.so first (repeatable)\n"
    "  --plugin NAME         load plugin NAME as well (repeatable)\n";

int cmd_check(int argc, char **argv)
{
    cli_pipeline_opts o = {0};
    const char *file = NULL;
    for (int i = 1; i < argc; i++) {
        cli_exit_if_help(argv, i, help);
        if (cli_pipeline_opt("check", argc, argv, &i, &o))
            continue;
        if (argv[i][0] == '-' || file)
            cli_unknown("check", argv[i]);
        file = argv[i];
    }
    if (o.pipeline && file) {
        fprintf(stderr, "plume check: give the pipeline once (PIPELINE.yaml or --pipeline)\n");
        return 2;
    }
    if (file)
        o.pipeline = file;
    if (!o.pipeline) {
        fputs(help, stderr);
        return 2;
    }
    plume_registry *reg;
    plume_pipeline *p;
    if (cli_pipeline_resolve("check", &o, &reg, &p))
        return 1;
    plume_pipeline_print(p, stdout);
    plume_pipeline_free(p);
    plume_registry_free(reg);
    return 0;
}
