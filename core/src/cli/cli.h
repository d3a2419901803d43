/* Shared pieces of the `plume` command's subcommands. */
#ifndef PLUME_CLI_H
#define PLUME_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/clock.h" /* plume_clock_seconds: the one clock */
#include "plume/model.h"


/* Each subcommand: argc/argv start at the subcommand name. Returns the exit
 * status (0 ok, 1 runtime error, 2 usage error). */
int cmd_generate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
/* plume bench throughput / spec / serve (argv starts at the benchmark's name). */
int bench_throughput(int argc, char **argv);
int bench_spec(int argc, char **argv);
int bench_serve(int argc, char **argv);
int bench_context(int argc, char **argv);

int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plugins(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
/* plume dummy-gguf (cmd_dummy_gguf.c) */
int cmd_dummy_gguf(int argc, char **argv);
/* plume quantize ... --to gguf (cmd_quantize_gguf.c) */
int cmd_quantize_gguf(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_router(int argc, char **argv);

/* This machine as plume bench measures it with the active kernels on
 * `threads` threads (medians of reps runs): streaming read bandwidth
 * (bytes/s), peak f32 FMA and int8 dot-product rates (operations/s); i8 is
 * the active level's (AMX tiles at the amx level), i8vec its vector units'
 * (vpdpbusd; the same as i8 at the other levels). */
typedef struct bench_machine {
    double bw, f32, i8, i8vec;
    char cpu[256], feats[256];
    const char *level;
} bench_machine;
/* 0, or -1 after printing why (out of memory). */
int bench_machine_measure(int threads, int reps, bench_machine *out);
/* The peak that m's linear layers are measured against: an int8 peak (the
 * level's, or with vec the vpdpbusd one) when its weights are quantized
 * (below 2 bytes per parameter), else the f32 peak.  *int8 (may be NULL)
 * says which. */
double bench_linear_peak(const bench_machine *mach, const plume_model *m, bool vec, bool *int8);
/* The options of a benchmark that measures the machine: --reps N (1 to
 * 1000), --threads/-t N (1 to 256), --json.  Matches argv[*i], stores the
 * value, advances *i past it and returns true; a bad number is cli_int's
 * error, exit 2. */
bool bench_machine_opt(int argc, char **argv, int *i, int *reps, int *threads, bool *json);
/* The median of v[0..n) (sorts v). */
double bench_median(double *v, int n);
/* The index of the largest of v[0..n) (the first, on ties): greedy decoding. */
int32_t bench_argmax(const float *v, int32_t n);

/* Option parsing: matches argv[*i] against `--name` or `--name=value`; on a
 * match stores the value (the next argument, or after '=') in *val, advances
 * *i past what it consumed and returns true.  A missing value prints an
 * error and exits with status 2. */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
/* Matches a flag without a value. */
bool cli_flag(char **argv, int i, const char *name);
/* When argv[i] is --help or -h: prints help on stdout and exits 0. */
void cli_exit_if_help(char **argv, int i, const char *help);

/* Strict number parsing: the whole string must be a number within range,
 * else an error naming the option is printed and the process exits 2. */
long long cli_int(const char *opt, const char *s, long long lo, long long hi);
double cli_float(const char *opt, const char *s, double lo, double hi);

/* A sampling option (--top-p V for the parameter "top_p"): V must be a
 * number (an integer for an integer parameter) in the range of the one
 * table (plume_sampling_param_find), else an error naming the option, the
 * range and what turns it off, and exit 2. */
double cli_sampling(const char *opt, const char *name, const char *v);

/* Matches argv[*i] against the sampling option opt (--top-p) of the
 * parameter name (top_p); on a match stores its value (checked by
 * cli_sampling) into that field of *sp and returns true. */
struct plume_sampling_params;
bool cli_sampling_opt(int argc, char **argv, int *i, const char *opt, const char *name,
                      struct plume_sampling_params *sp);

/* A length option: N or MIN-MAX, each in [1, 2^20], MIN <= MAX; else an
 * error naming `plume <cmd>` and the option, and exit 2. */
void cli_range(const char *cmd, const char *opt, const char *v, int *lo, int *hi);

/* Prints "plume <cmd>: unknown option X (see plume <cmd> --help)" and exits 2. */
void cli_unknown(const char *cmd, const char *arg) __attribute__((noreturn));

/* Makes dir an output directory: 0 when it exists and is empty, 2 when it
 * was created, 1 when it exists with entries, -1 on error (printed as
 * "plume <cmd>: ..."). */
int cli_prepare_out_dir(const char *cmd, const char *dir);

/* A --kv-dtype value (f32, f16, int8) as a plume_kv_dtype; anything else prints
 * an error naming `plume <cmd>` and the choices, and exits 2. */
int cli_kv_dtype(const char *cmd, const char *v);

#endif
