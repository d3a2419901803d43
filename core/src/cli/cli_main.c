/* `plume`: the command-line front end.  main() hands argv[1] to its
 * subcommand; every subcommand uses libplume's public headers and, for the
 * HTTP commands, libplume-serve, so the process holds one copy of the core,
 * shared with the plugins it loads. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char usage[] =
    "usage: plume <command> [options]\n"
    "\n"
    "commands:\n"
    "  generate   generate text from a prompt (plume generate --model PATH --prompt TEXT)\n"
    "  serve      an OpenAI-compatible HTTP server on the model (plume serve --model PATH\n"
    "             [--host 127.0.0.1] [--port 8000]; docs/serving.md)\n"
    "  router     the front of a prefill/decode split: plume router --prefill URL\n"
    "             --decode URL (docs/disaggregation.md)\n"
    "  bench      benchmarks: roofline (the machine's limits and a model against\n"
    "             them), throughput (continuous batching), spec (speculative decoding)\n"
    "  info       describe a model: architecture, sizes, tensor types, tokenizer\n"
    "  tokenize   print the token ids of a text\n"
    "  plugins    list registered providers and plugins; --check FILE.so tests one file\n"
    "  check      validate a pipeline file and print it resolved (plume check PIPELINE.yaml)\n"
    "  convert    write a GGUF model as a Hugging Face directory\n"
    "             (plume convert MODEL.gguf --to hf OUT_DIR)\n"
    "  quantize   make a GPTQ checkpoint from a float HF directory\n"
    "             (plume quantize MODEL_DIR OUT_DIR --method gptq --calib TEXT)\n"
    "  dummy-gguf write random weights for an HF config.json as a GGUF file llama.cpp\n"
    "             loads (plume dummy-gguf CONFIG_DIR OUT.gguf --type Q4_0 --tokenizer F)\n"
    "  perplexity perplexity of a model over a text, and KL divergence against a\n"
    "             base model (plume perplexity --model PATH --text FILE)\n"
    "\n"
    "Run `plume <command> --help` for the options of a command.\n"
    "MODEL/PATH is a .gguf file or a Hugging Face model directory (config.json,\n"
    "*.safetensors, tokenizer.json).\n";

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("plume %s\n", PLUME_VERSION);
        return 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "generate") == 0)
        return cmd_generate(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0)
        return cmd_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "router") == 0)
        return cmd_router(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "tokenize") == 0)
        return cmd_tokenize(argc - 1, argv + 1);
    if (strcmp(cmd, "plugins") == 0)
        return cmd_plugins(argc - 1, argv + 1);
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 1, argv + 1);
    if (strcmp(cmd, "convert") == 0)
        return cmd_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "quantize") == 0)
        return cmd_quantize(argc - 1, argv + 1);
    if (strcmp(cmd, "dummy-gguf") == 0)
        return cmd_dummy_gguf(argc - 1, argv + 1);
    if (strcmp(cmd, "perplexity") == 0)
        return cmd_perplexity(argc - 1, argv + 1);
    fprintf(stderr, "plume: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
}
