/* plume quantize MODEL OUT.gguf --to gguf --type MIX: llama-quantize's
 * presets with plume's reference quantizers (quant/gguf_model_quant.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "plume/tensor.h"
#include "plume/quantize_gguf.h"

static const char usage[] =
    "usage: plume quantize MODEL OUT.gguf --to gguf --type TYPE [options]\n"
    "\n"
    "Writes a GGUF file of one of llama.cpp's llama-quantize presets from a float\n"
    "model: a Hugging Face directory (llama/qwen2, F32/F16/BF16 safetensors,\n"
    "byte-level BPE tokenizer) or an F32/F16/BF16 GGUF.  Each tensor gets the type\n"
    "llama-quantize gives it without an importance matrix (more bits for attn_v\n"
    "and ffn_down in some layers, Q6_K or Q8_0 for the head, a legacy type when a\n"
    "row length is not a multiple of 256; docs/quantization.md), quantized by\n"
    "plume's reference quantizers.  The metadata of a GGUF input is copied; for\n"
    "an HF directory the hyperparameters and tokenizer are written as GGUF keys\n"
    "and llama's q/k rows permuted as convert_hf_to_gguf.py does.\n"
    "\n";

typedef struct prog {
    bool quiet;
} prog;

static void on_progress(void *user, const plume_gguf_quant_progress *p)
{
    (void)user;
    char fb[96] = "";
    if (p->wanted != p->to)
        snprintf(fb, sizeof fb, "  (%s wanted; %lld not a multiple of %zu)",
                 plume_dtype_name(p->wanted), (long long)p->ne0,
                 plume_dtype_block_elems(p->wanted));
    fprintf(stderr, "[%3d/%3d] %-28s %6lld x %-6lld %-5s -> %-6s %6.2f s%s\n", p->index + 1, p->n,
            p->name, (long long)p->ne0, (long long)p->rows, plume_dtype_name(p->from),
            plume_dtype_name(p->to), p->seconds, fb);
}

int cmd_quantize_gguf(int argc, char **argv)
{
    const char *pos[2] = {0}, *type = NULL, *to = "gguf";
    long long threads = 0;
    bool force = false, quiet = false, json = false;
    const cli_option opts[] = {
        CLI_OPT_STR("--to", &to, "gguf", "write a GGUF file (without it: plume quantize --help)"),
        CLI_OPT_STR("--type", &type, "TYPE",
                    "Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S, Q3_K_M, Q2_K, Q6_K, Q8_0,\n"
                    "Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4_MOE (required)"),
        CLI_OPT_INT("--threads", &threads, 0, 1024, "N", "threads for the quantizers [all cores]"),
        CLI_OPT_FLAG("--force", &force, "replace OUT.gguf if it exists"),
        CLI_OPT_FLAG("--quiet", &quiet, "no progress on stderr (default: a line per tensor)"),
        CLI_OPT_FLAG("--json", &json, "print a JSON summary on stdout"),
    };
    const cli_command cmd = {"quantize --to gguf", usage, NULL, 18, opts, CLI_N_OPTIONS(opts), 2};
    const int n_pos = cli_parse_options(&cmd, argc, argv, pos);
    if (strcmp(to, "gguf") != 0) { /* cmd_quantize came here for a --to gguf; this is another */
        fprintf(stderr, "plume quantize: --to must be gguf here, got '%s'\n", to);
        return 2;
    }
    if (n_pos != 2)
        return cli_usage_error(&cmd, "plume quantize: give MODEL and OUT.gguf");
    if (!type) {
        fprintf(stderr, "plume quantize: --to gguf needs --type, one of %s\n", plume_gguf_mix_names());
        return 2;
    }
    if (!plume_gguf_mix_known(type)) {
        fprintf(stderr, "plume quantize: unknown --type '%s'; choose one of %s\n", type,
                plume_gguf_mix_names());
        return 2;
    }
    struct stat sb;
    if (stat(pos[1], &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "plume quantize: %s is a directory; give the path of the .gguf file "
                            "to write\n", pos[1]);
            return 2;
        }
        struct stat si;
        if (stat(pos[0], &si) == 0 && si.st_dev == sb.st_dev && si.st_ino == sb.st_ino) {
            fprintf(stderr, "plume quantize: OUT.gguf is the input; write to another file\n");
            return 2;
        }
        if (!force) {
            fprintf(stderr, "plume quantize: %s exists; use --force to replace it\n", pos[1]);
            return 2;
        }
    }
    plume_gguf_quant_opts o = {type, (int)threads, quiet ? NULL : on_progress, NULL};
    plume_gguf_quant_report rep;
    plume_error err = {0};
    if (plume_quantize_to_gguf(pos[0], pos[1], &o, &rep, &err)) {
        fprintf(stderr, "plume quantize: %s\n", err.msg);
        return 1;
    }
    if (!quiet)
        fprintf(stderr,
                "quantized %d of %d tensors to %s (%d fell back to a legacy type) in %.1f s; "
                "%s %.1f MiB\n",
                rep.n_quantized, rep.n_tensors, type, rep.n_fallback, rep.seconds, pos[1],
                (double)rep.bytes_written / (1 << 20));
    if (json)
        printf("{\"type\": \"%s\", \"tensors\": %d, \"quantized\": %d, \"fallback\": %d, "
               "\"seconds\": %.3f, \"bytes\": %llu}\n",
               type, rep.n_tensors, rep.n_quantized, rep.n_fallback, rep.seconds,
               (unsigned long long)rep.bytes_written);
    return 0;
}
