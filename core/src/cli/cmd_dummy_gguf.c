/* `plume dummy-gguf CONFIG_DIR OUT.gguf`: random weights for a config as a
 * GGUF file (plume/dummy_gguf.h), for benchmarks at real sizes without a
 * download, and for running the very same weights in another engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "plume/dummy_gguf.h"

static const char help[] =
    "usage: plume dummy-gguf CONFIG_DIR OUT.gguf [--type T] [--pure] [--seed N]\n"
    "                        [--tokenizer FILE.gguf]\n"
    "\n"
    "Writes a model with seeded random weights (docs/dummy-weights.md) shaped by\n"
    "CONFIG_DIR/config.json (llama, qwen2, qwen3, and the mixtures of experts\n"
    "mixtral, qwen3_moe, qwen2_moe, olmoe) as a GGUF file that plume and llama.cpp\n"
    "load, streamed tensor by tensor (bounded memory at any size).  The weights are\n"
    "bit for bit those of `--load-format dummy` with the same type, pure and seed\n"
    "(for llama, q/k rows permuted as convert_hf_to_gguf.py does; experts as the\n"
    "3-D ffn_*_exps tensors, the router kept in F32 under a preset).  gpt-oss:\n"
    "bench/make_moe_dummy_gguf.py --arch gpt-oss.\n"
    "\n"
    "  --type T            F16 (default), BF16, F32, or a llama-quantize preset:\n"
    "                      Q4_0, Q4_1, Q8_0, Q4_K_M, Q4_K_S, Q6_K (each tensor the\n"
    "                      preset's type for it; generatable: F32, F16, BF16, Q8_0,\n"
    "                      Q4_0, Q4_1, Q4_K, Q6_K)\n"
    "  --pure              every matrix in the preset's base type (llama-quantize --pure)\n"
    "  --seed N            the generator's seed (default 0)\n"
    "  --tokenizer F.gguf  borrow this GGUF's tokenizer; its token list is padded with\n"
    "                      [PAD<i>] up to the config's vocab_size (default:\n"
    "                      models/SmolLM2-135M-Instruct.Q4_1.gguf)\n";

int cmd_dummy_gguf(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL}, *type = "F16", *seed = NULL,
               *tok = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    bool pure = false;
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        cli_exit_if_help(argv, i, help);
        if (cli_opt(argc, argv, &i, "--type", &v)) {
            type = v;
        } else if (cli_opt(argc, argv, &i, "--seed", &v)) {
            seed = v;
        } else if (cli_opt(argc, argv, &i, "--tokenizer", &v)) {
            tok = v;
        } else if (strcmp(argv[i], "--pure") == 0) {
            pure = true;
        } else if (argv[i][0] == '-' || npos == 2) {
            fprintf(stderr, "plume dummy-gguf: unexpected argument '%s'\n\n%s", argv[i], help);
            return 2;
        } else {
            pos[npos++] = argv[i];
        }
    }
    if (npos != 2) {
        fprintf(stderr, "plume dummy-gguf: give CONFIG_DIR and OUT.gguf\n\n%s", help);
        return 2;
    }
    plume_error err = {0};
    plume_settings *s = NULL;
    if (plume_settings_new("dummy-gguf", &s, &err) ||
        plume_settings_set(s, "dtype", type, &err) ||
        plume_settings_set(s, "pure", pure ? "true" : "false", &err) ||
        plume_settings_set(s, "tokenizer", tok, &err) ||
        (seed && plume_settings_set(s, "seed", seed, &err))) {
        fprintf(stderr, "plume dummy-gguf: %s\n", err.msg);
        plume_settings_free(s);
        return 1;
    }
    plume_dummy_gguf_report rep;
    int rc = plume_dummy_to_gguf(pos[0], s, pos[1], &rep, &err);
    plume_settings_free(s);
    if (rc) {
        fprintf(stderr, "plume dummy-gguf: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "plume dummy-gguf: wrote %s: %d tensors, %.2f GB in %.1f s\n", pos[1],
            rep.n_tensors, (double)rep.bytes_written / 1e9, rep.seconds);
    return 0;
}
