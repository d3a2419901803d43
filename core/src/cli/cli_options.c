/* One parser for the option tables of cli_options.h. */
#include "cli/cli_options.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

/* Matches argv[*i] against o; stores its value and returns true. */
static bool take(const char *cmd, const cli_option *o, int argc, char **argv, int *i)
{
    const char *v;
    if (o->kind == CLI_FLAG) {
        if (!cli_flag(argv, *i, o->name))
            return false;
        *(bool *)o->dest = true;
        return true;
    }
    if (!cli_opt(argc, argv, i, o->name, &v))
        return false;
    switch (o->kind) {
    case CLI_STR:
        *(const char **)o->dest = v;
        break;
    case CLI_INT:
        *(long long *)o->dest = cli_int(o->name, v, (long long)o->lo, (long long)o->hi);
        break;
    case CLI_FLOAT:
        *(double *)o->dest = cli_float(o->name, v, o->lo, o->hi);
        break;
    case CLI_LIST: {
        cli_list *l = o->dest;
        if (l->n == l->max) {
            fprintf(stderr, "plume %s: at most %d %s\n", cmd, l->max, l->what);
            exit(2);
        }
        l->items[l->n++] = v;
        break;
    }
    case CLI_FLAG:
        break;
    }
    return true;
}

int cli_parse_options(const char *cmd, int argc, char **argv, const char *help,
                      const cli_option *opts, int n, const char **pos, int max_pos, int *n_pos)
{
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_flag(argv, i, "--help") || cli_flag(argv, i, "-h")) {
            fputs(help, stdout);
            return 1;
        }
        int k = 0;
        while (k < n && !take(cmd, &opts[k], argc, argv, &i))
            k++;
        if (k < n)
            continue;
        if ((argv[i][0] == '-' && argv[i][1] == '-') || *n_pos == max_pos)
            cli_unknown(cmd, argv[i]);
        pos[(*n_pos)++] = argv[i];
    }
    return 0;
}
