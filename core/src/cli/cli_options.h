/* A subcommand's options as one table: each entry names an option, its
 * kind and where its value goes, and one function parses argv against it
 * (the flags, values and positionals every subcommand parsed with its own
 * if-chain of cli_flag / cli_opt / cli_unknown). */
#ifndef PLUME_CLI_OPTIONS_H
#define PLUME_CLI_OPTIONS_H

#include <stdbool.h>

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
    double lo, hi; /* CLI_INT, CLI_FLOAT: the range */
} cli_option;

/* The entries of a table array. */
#define CLI_N_OPTIONS(opts) ((int)(sizeof(opts) / sizeof((opts)[0])))

/* Table entries, one per kind (dest as that kind says). */
#define CLI_OPT_FLAG(name, dest) {(name), CLI_FLAG, (dest), 0, 0}
#define CLI_OPT_STR(name, dest) {(name), CLI_STR, (dest), 0, 0}
#define CLI_OPT_INT(name, dest, lo, hi) {(name), CLI_INT, (dest), (lo), (hi)}
#define CLI_OPT_FLOAT(name, dest, lo, hi) {(name), CLI_FLOAT, (dest), (lo), (hi)}
#define CLI_OPT_LIST(name, dest) {(name), CLI_LIST, (dest), 0, 0}

/* Parses argv[1..argc) of `plume <cmd>` against the n options of opts.
 * --help or -h prints help on stdout and returns 1 (the caller exits 0).
 * A value option takes `--name V` or `--name=V` (a missing value: cli_opt's
 * error, exit 2); a bad number: cli_int / cli_float's error, exit 2; a list
 * past its max: "plume <cmd>: at most N <what>", exit 2.  Other arguments
 * are positionals, stored in pos[0..max_pos) and counted in *n_pos; one
 * starting with "--" that no entry names, or one past max_pos, is
 * cli_unknown(cmd, arg) (exit 2).  Returns 0 when argv was parsed. */
int cli_parse_options(const char *cmd, int argc, char **argv, const char *help,
                      const cli_option *opts, int n, const char **pos, int max_pos, int *n_pos);

#endif
