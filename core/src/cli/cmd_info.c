/* plume info MODEL */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "plume/model.h"

static const char help[] =
    "usage: plume info MODEL\n"
    "\n"
    "Prints the architecture, sizes, tensor types and tokenizer of MODEL (a .gguf file\n"
    "or an HF model directory).\n";

int cmd_info(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        cli_exit_if_help(argv, i, help);
        if (argv[i][0] == '-' || path)
            cli_unknown("info", argv[i]);
        path = argv[i];
    }
    if (!path) {
        fputs(help, stderr);
        return 2;
    }
    plume_error err = {0};
    plume_model *m;
    if (plume_model_load(path, &m, &err)) {
        fprintf(stderr, "plume info: %s\n", err.msg);
        return 1;
    }
    plume_model_describe(m, stdout);
    plume_model_free(m);
    return 0;
}
