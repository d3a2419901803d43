/* The options every model-running subcommand shares: --pipeline FILE or
 * --model PATH (the built-in default pipeline on that model), plus
 * --plugin-dir DIR and --plugin NAME.  One helper turns them into a
 * registry and a resolved pipeline, so every subcommand reads models,
 * plugins and providers the same way. */
#ifndef PLUME_CLI_PIPELINE_ARGS_H
#define PLUME_CLI_PIPELINE_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "plume/model.h"
#include "plume/pipeline.h"
#include "plume/registry.h"

#define CLI_MAX_PLUGIN_ARGS 32

typedef struct cli_pipeline_opts {
    const char *pipeline;      /* --pipeline FILE */
    const char *model;         /* --model PATH (overrides the pipeline's model) */
    const char *plugin_dirs[CLI_MAX_PLUGIN_ARGS];
    size_t n_plugin_dirs;
    const char *plugins[CLI_MAX_PLUGIN_ARGS];
    size_t n_plugins;
    const char *load_format;   /* --load-format NAME (the pipeline's load_format) */
    const char *dummy[4];      /* --dummy-dtype, --dummy-seed, --dummy-tokenizer, --dummy-pure */
} cli_pipeline_opts;

/* Help lines for the options above, for a subcommand's --help. */
#define CLI_PIPELINE_HELP                                                                     \
    "  --pipeline FILE       a YAML pipeline (docs/pipelines.md): model, backend, plugins,\n"   \
    "                        kv_cache, scheduler, sampling, speculative, threads\n"             \
    "  --model PATH          a .gguf file or an HF model directory; alone, runs the built-in\n" \
    "                        default pipeline on it; with --pipeline, replaces its model\n"     \
    "  --plugin-dir DIR      search DIR for plume-<name>.so first (repeatable)\n"               \
    "  --plugin NAME         load plugin NAME from the plugin path (repeatable)\n"           \
    "  --load-format dummy   random weights: --model is a directory with an HF config.json\n" \
    "                        (docs/dummy-weights.md); with it:\n"                             \
    "    --dummy-dtype T     F16 (default), BF16, F32 or a GGUF preset: Q4_0, Q4_1, Q8_0,\n"  \
    "                        Q4_K_M, ...; --dummy-pure: every matrix in the preset's type\n"  \
    "    --dummy-seed N      the generator's seed (default 0)\n"                              \
    "    --dummy-tokenizer F a .gguf whose vocabulary to borrow or a tokenizer.json\n"        \
    "                        (default: tokenizer.json beside config.json)\n"

/* Matches --pipeline, --model/-m, --plugin-dir and --plugin at argv[*i];
 * stores the value, advances *i and returns true.  Too many repeats print
 * an error and exit 2. */
bool cli_pipeline_opt(const char *cmd, int argc, char **argv, int *i, cli_pipeline_opts *o);

/* A registry with the built-ins, the search path (--plugin-dir options,
 * then PLUME_PLUGIN_PATH, the build tree's plugins, the installed
 * pluginsdir) and every --plugin loaded.  Prints "plume CMD: reason" and
 * returns -1 on failure. */
int cli_registry(const char *cmd, const cli_pipeline_opts *o, plume_registry **out);

/* cli_registry, then the pipeline: the --pipeline file (its model replaced
 * by --model when both are given) or the default pipeline on --model.
 * Neither given: prints what is needed and returns -1.  On failure prints
 * the error (pipeline errors as file:line:column: message) and frees
 * what it made. */
int cli_pipeline_resolve(const char *cmd, const cli_pipeline_opts *o, plume_registry **reg,
                         plume_pipeline **p);

/* Matches --load-format and the --dummy-* options (cli/load_format_args.c). */
bool cli_load_format_opt(int argc, char **argv, int *i, cli_pipeline_opts *o);

/* The pipeline of --pipeline (model replaced by --model) or, with
 * --load-format, the default pipeline on --model opened by that format
 * with the --dummy-* settings.  --load-format together with --pipeline or
 * without --model is an error saying what to do. */
int cli_load_format_resolve(const char *cmd, const cli_pipeline_opts *o, plume_registry *reg,
                            plume_pipeline **p, plume_error *err);

/* For a command that loads --model itself (plume_model_load_ex): with
 * --load-format, a registry (cli_registry) and the named format with the
 * --dummy-* settings, validated, into lp (registry, format,
 * format_settings); free *s and *reg after the model.  Without it, nothing
 * (NULLs).  Prints the error and returns -1 on failure. */
int cli_load_format_params(const char *cmd, const cli_pipeline_opts *o, plume_registry **reg,
                           plume_settings **s, plume_load_params *lp);

/* Loads the model at path on threads threads for a command that runs it
 * itself (the benches), with --load-format and its --dummy-* settings
 * (cli_load_format_params).  *reg is the registry that made the format,
 * or NULL: free it after the model, which holds the format's vtable.
 * Prints "plume CMD: reason" and returns -1 (*m and *reg NULL) on
 * failure. */
int cli_load_model(const char *cmd, const cli_pipeline_opts *o, const char *path, int threads,
                   plume_model **m, plume_registry **reg);

/* Prints the error as "plume CMD: msg", or msg alone when it already
 * starts with the pipeline file's name (so editors can jump to it). */
void cli_print_error(const char *cmd, const char *pipeline_file, const char *msg);

#endif
