/* One parser and one --help printer for the option tables of cli_options.h. */
#include "cli/cli_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void cli_help(FILE *f, const cli_command *c)
{
    fputs(c->usage, f);
    for (int k = 0; k < c->n_opts; k++) {
        const cli_option *o = &c->opts[k];
        char label[96];
        snprintf(label, sizeof label, "%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        if ((int)strlen(label) >= c->help_col - 2) /* no room: the text goes below */
            fprintf(f, "  %s\n%*s", label, c->help_col, "");
        else
            fprintf(f, "  %-*s", c->help_col - 2, label);
        const char *h = o->help, *nl;
        while ((nl = strchr(h, '\n'))) {
            fprintf(f, "%.*s\n%*s", (int)(nl - h), h, c->help_col, "");
            h = nl + 1;
        }
        fprintf(f, "%s\n", h);
    }
    if (c->after)
        fputs(c->after, f);
}

int cli_parse_options(const cli_command *c, int argc, char **argv, const char **pos)
{
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_flag(argv, i, "--help") || cli_flag(argv, i, "-h")) {
            cli_help(stdout, c);
            exit(0);
        }
        int k = 0;
        while (k < c->n_opts && !take(c->name, &c->opts[k], argc, argv, &i))
            k++;
        if (k < c->n_opts)
            continue;
        if ((argv[i][0] == '-' && argv[i][1] == '-') || n_pos == c->max_pos)
            cli_unknown(c->name, argv[i]);
        pos[n_pos++] = argv[i];
    }
    return n_pos;
}

int cli_usage_error(const cli_command *c, const char *msg)
{
    if (msg)
        fprintf(stderr, "%s\n\n", msg);
    cli_help(stderr, c);
    return 2;
}
