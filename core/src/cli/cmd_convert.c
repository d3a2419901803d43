/* plume convert MODEL.gguf --to hf OUT/ */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "plume/convert.h"

static const char usage[] =
    "usage: plume convert MODEL.gguf --to hf OUT_DIR [--dtype f32|f16]\n"
    "\n"
    "Writes a Hugging Face model directory from a GGUF file, so that tools that\n"
    "want HF checkpoints (e.g. a quantizer) can use a GGUF-only model:\n"
    "  model.safetensors       every tensor dequantized to f32 and stored as --dtype,\n"
    "                          renamed to HF names (token_embd -> model.embed_tokens,\n"
    "                          blk.N.attn_q -> model.layers.N.self_attn.q_proj, ...);\n"
    "                          for llama the Q/K row permutation that llama.cpp's\n"
    "                          converter applied is undone (qwen2 GGUFs are not\n"
    "                          permuted); no lm_head when the embeddings are tied\n"
    "  config.json             architecture and hyperparameters\n"
    "  generation_config.json  bos/eos ids\n"
    "  tokenizer.json          byte-level BPE built from the GGUF vocabulary and merges,\n"
    "                          with the pre-tokenizer named by tokenizer.ggml.pre\n"
    "  tokenizer_config.json   bos/eos/pad/unk tokens, add_bos_token, chat template\n"
    "\n"
    "Supported: llama and qwen2 GGUFs whose tensors are F32, F16, BF16 or a GGUF\n"
    "quantization plume reads (Q4_0 ... Q8_0, the K-quants, IQ4_NL, IQ4_XS, MXFP4),\n"
    "with a byte-level BPE (\"gpt2\") tokenizer.  SentencePiece\n"
    "(\"llama\") tokenizers are refused with an error.  The output is one\n"
    "model.safetensors file (no sharding).\n"
    "\n"
    "options:\n";

static void log_line(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
}

int cmd_convert(int argc, char **argv)
{
    const char *pos[2] = {0}, *to = NULL, *dtype = "f32";
    bool force = false, quiet = false;
    const cli_option opts[] = {
        CLI_OPT_STR("--to", &to, "hf", "output format (only hf)"),
        CLI_OPT_STR("--dtype", &dtype, "f32|f16",
                    "storage type of the weights (default f32: the exact\n"
                    "dequantized values; f16 halves the size and rounds each\n"
                    "weight to binary16)"),
        CLI_OPT_FLAG("--force", &force, "write into OUT_DIR even if it already holds files"),
        CLI_OPT_FLAG("--quiet", &quiet, "no progress on stderr"),
    };
    const cli_command cmd = {"convert", usage, NULL, 20, opts, CLI_N_OPTIONS(opts), 2};
    if (cli_parse_options(&cmd, argc, argv, pos) != 2 || !to)
        return cli_usage_error(&cmd, "plume convert: give MODEL.gguf, --to hf and OUT_DIR");
    if (strcmp(to, "hf") != 0) {
        fprintf(stderr, "plume convert: --to %s is not supported (only hf)\n", to);
        return 2;
    }
    plume_convert_opts o = {0};
    if (strcmp(dtype, "f32") == 0) {
        o.dtype = PLUME_CONVERT_F32;
    } else if (strcmp(dtype, "f16") == 0) {
        o.dtype = PLUME_CONVERT_F16;
    } else {
        fprintf(stderr, "plume convert: --dtype must be f32 or f16, got '%s'\n", dtype);
        return 2;
    }
    int st = cli_prepare_out_dir("convert", pos[1]);
    if (st < 0)
        return 1;
    if (st == 1 && !force) {
        fprintf(stderr,
                "plume convert: %s is not empty; use --force to write into it (existing "
                "model files are replaced)\n",
                pos[1]);
        return 1;
    }
    if (!quiet)
        o.log = log_line;
    double t0 = plume_clock_seconds();
    plume_error err = {0};
    if (plume_convert_gguf_to_hf(pos[0], pos[1], &o, &err)) {
        fprintf(stderr, "plume convert: %s\n", err.msg);
        if (st == 2)
            rmdir(pos[1]); /* only succeeds if nothing was written */
        return 1;
    }
    if (!quiet)
        fprintf(stderr, "converted %s -> %s in %.1f s\n", pos[0], pos[1], plume_clock_seconds() - t0);
    return 0;
}
