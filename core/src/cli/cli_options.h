/* A subcommand's options as one table: each entry names an option, its
 * kind, where its value goes and its --help text; one function parses
 * argv against the table and one prints the --help that lists it (what
 * each subcommand did with its own if-chain of cli_flag / cli_opt /
 * cli_unknown beside a help text kept by hand). */
#ifndef PLUME_CLI_OPTIONS_H
#define PLUME_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

typedef enum cli_option_kind {
    CLI_FLAG,  /* no value: sets *(bool *)dest */
    CLI_STR,   /* a value: *(const char **)dest */
    CLI_INT,   /* an integer in [lo, hi] (cli_int): *(long long *)dest */
    CLI_FLOAT, /* a number in [lo, hi] (cli_float): *(double *)dest */
    CLI_LIST,  /* a repeatable value: appended to *(cli_list *)dest */
} cli_option_kind;

/* The values of a repeatable option, at most max of them. */
typedef struct cli_list {
    const char **items;
    int n, max;
    const char *what; /* the error's words after "at most N": "--calib files" */
} cli_list;

typedef struct cli_option {
    const char *name; /* "--dtype" */
    cli_option_kind kind;
    void *dest;
    double lo, hi;    /* CLI_INT, CLI_FLOAT: the range */
    const char *arg;  /* the value in --help ("N", "f32|f16"); NULL for a flag */
    const char *help; /* what it does, for --help; '\n' between lines */
} cli_option;

/* Table entries, one per kind (dest as that kind says). */
#define CLI_OPT_FLAG(name, dest, help) {(name), CLI_FLAG, (dest), 0, 0, NULL, (help)}
#define CLI_OPT_STR(name, dest, arg, help) {(name), CLI_STR, (dest), 0, 0, (arg), (help)}
#define CLI_OPT_INT(name, dest, lo, hi, arg, help) \
    {(name), CLI_INT, (dest), (lo), (hi), (arg), (help)}
#define CLI_OPT_FLOAT(name, dest, lo, hi, arg, help) \
    {(name), CLI_FLOAT, (dest), (lo), (hi), (arg), (help)}
#define CLI_OPT_LIST(name, dest, arg, help) {(name), CLI_LIST, (dest), 0, 0, (arg), (help)}

/* A subcommand: its name, its --help around the option table, its
 * options and how many positionals it takes. */
typedef struct cli_command {
    const char *name;   /* "convert": messages say "plume convert: ..." */
    const char *usage;  /* --help before the options, ending in their heading */
    const char *after;  /* --help after the options, or NULL */
    int help_col;       /* the column where the options' texts start */
    const cli_option *opts;
    int n_opts;
    int max_pos;        /* positionals at most */
} cli_command;

/* The entries of a table array. */
#define CLI_N_OPTIONS(opts) ((int)(sizeof(opts) / sizeof((opts)[0])))

/* Writes c's --help to f: usage, then a line "  NAME ARG  text" per option
 * (its further lines indented to help_col), then after. */
void cli_help(FILE *f, const cli_command *c);

/* Parses argv[1..argc) of `plume <c->name>` against c's options and
 * returns how many positionals it stored in pos[0..max_pos).  --help or -h
 * prints cli_help on stdout and exits 0.  A value option takes `--name V`
 * or `--name=V` (a missing value: cli_opt's error, exit 2); a bad number:
 * cli_int / cli_float's error, exit 2; a list past its max: "plume <name>:
 * at most N <what>", exit 2.  An argument starting with "--" that no entry
 * names, or a positional past max_pos, is cli_unknown(name, arg) (exit 2). */
int cli_parse_options(const cli_command *c, int argc, char **argv, const char **pos);

/* A usage error: prints msg (unless NULL) and a blank line, then c's
 * --help, on stderr; returns 2, the exit status. */
int cli_usage_error(const cli_command *c, const char *msg);

#endif
