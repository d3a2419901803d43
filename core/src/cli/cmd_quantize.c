/* plume quantize MODEL_DIR OUT_DIR --method gptq|rtn ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_options.h"
#include "plume/registry.h"
#include "plume/quantize.h"

static const char usage[] =
    "usage: plume quantize MODEL_DIR OUT_DIR [options]\n"
    "\n"
    "Quantizes the linear layers of a float Hugging Face checkpoint (F32/F16/BF16;\n"
    "make one from a GGUF with `plume convert MODEL.gguf --to hf DIR`) and writes\n"
    "a GPTQ checkpoint that plume, vLLM and transformers load: model.safetensors\n"
    "(qweight/qzeros/scales/g_idx per layer, everything else float), config.json\n"
    "with quantization_config, quantize_config.json, and the tokenizer files.\n"
    "\n"
    "  --method gptq  the GPTQ algorithm (Frantar et al.) as its reference code does\n"
    "                 it: each decoder layer in order, Hessians H = 2/n·Σxxᵀ from\n"
    "                 calibration activations that already went through the\n"
    "                 quantized layers (and, inside a layer, q/k/v -> o -> gate/up\n"
    "                 -> down), dampening, Cholesky of H⁻¹, column updates in lazy\n"
    "                 blocks of 128, optional act-order (--desc-act)\n"
    "  --method rtn   round-to-nearest with the same quantizer and packing (the\n"
    "                 baseline); --calib is optional and only reports the error\n"
    "  --method awq   AWQ (Lin et al.), written as an AutoAWQ GEMM checkpoint\n"
    "                 (quant-awq plugin; 4-bit with zero points, --calib required):\n"
    "                 per layer, input-channel scales searched on the calibration\n"
    "                 activations and folded into the preceding norm or linear,\n"
    "                 then a clipping search, then min-max rounding; --sym,\n"
    "                 --desc-act, --damp and --format do not apply\n"
    "\n"
    "options (defaults in brackets):\n";

static const char after[] =
    "\n"
    "plume quantize MODEL OUT.gguf --to gguf --type Q4_K_M|...: a GGUF of a\n"
    "llama-quantize preset instead (see `plume quantize --to gguf --help`).\n";

typedef struct progress_state {
    bool tty;
    bool verbose; /* a line per linear with its loss */
} progress_state;

/* One line per layer; on a terminal, a bar redrawn as each linear finishes. */
static void on_progress(void *user, const plume_quant_progress *p)
{
    progress_state *s = user;
    enum { W = 30 };
    int done = p->layer * p->n_linear + p->linear_index;
    int total = p->n_layer * p->n_linear;
    int fill = total ? done * W / total : 0;
    char bar[W + 1];
    for (int i = 0; i < W; i++)
        bar[i] = i < fill ? '#' : '-';
    bar[W] = 0;
    if (!p->linear) {
        if (s->tty)
            fprintf(stderr, "\r\033[Klayer %d/%d [%s] %5.1f s", p->layer + 1, p->n_layer, bar,
                    p->elapsed_s);
        return;
    }
    if (s->verbose)
        fprintf(stderr, "%slayer %d %-17s loss %.6g\n", s->tty ? "\r\033[K" : "", p->layer,
                p->linear, p->loss);
    else if (s->tty)
        fprintf(stderr, "\r\033[Klayer %d/%d [%s] %-17s loss %-9.3g %5.1f s", p->layer + 1,
                p->n_layer, bar, p->linear, p->loss, p->elapsed_s);
    if (p->linear_index == p->n_linear) {
        if (s->tty)
            fputc('\n', stderr);
        else
            fprintf(stderr, "layer %d/%d [%s] done, %.1f s\n", p->layer + 1, p->n_layer, bar,
                    p->elapsed_s);
    }
}

/* The output must not be the input, nor hold a sharded checkpoint's index
 * (the loader would read it instead of the new model.safetensors). */
static int check_dirs(const char *in, const char *out)
{
    struct stat a, b;
    if (stat(in, &a) == 0 && stat(out, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        fprintf(stderr, "plume quantize: OUT_DIR is MODEL_DIR; write the quantized checkpoint to "
                        "another directory\n");
        return -1;
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", out);
    if (stat(p, &b) == 0) {
        fprintf(stderr,
                "plume quantize: %s holds a sharded checkpoint's index, which loaders would read "
                "instead of the new model.safetensors; remove it and its "
                "model-*-of-*.safetensors files, or use another directory\n",
                p);
        return -1;
    }
    return 0;
}

static int set(plume_settings *s, const char *key, const char *value)
{
    plume_error err = {0};
    if (plume_settings_set(s, key, value, &err)) {
        fprintf(stderr, "plume quantize: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int cmd_quantize(int argc, char **argv)
{
    const char *pos[2] = {0}, *method = "gptq", *sym = "true", *format = "gptq",
               *dtype = "f16";
    const char *calib_files[16], *dirs[16];
    cli_list calib = {calib_files, 0, 16, "--calib files"};
    cli_list plugin_dirs = {dirs, 0, 16, "--plugin-dir options"};
    long long bits = 4, group = 128;
    double damp = 0.01;
    long long samples = 128, seq_len = 512, threads = 0;
    bool desc_act = false, force = false, quiet = false, json = false, verbose = false;
    for (int i = 1; i < argc; i++) /* --to gguf: the GGUF quantizer's own options */
        if ((strcmp(argv[i], "--to") == 0 && i + 1 < argc && strcmp(argv[i + 1], "gguf") == 0) ||
            strcmp(argv[i], "--to=gguf") == 0)
            return cmd_quantize_gguf(argc, argv);
    const cli_option opts[] = {
        CLI_OPT_STR("--method", &method, "gptq|rtn|awq", "algorithm [gptq]"),
        CLI_OPT_INT("--bits", &bits, 2, 8, "N", "2, 3, 4 or 8 [4]"),
        CLI_OPT_INT("--group-size", &group, -1, 1 << 30, "N",
                    "inputs per scale/zero group, -1 = one group per row [128]"),
        CLI_OPT_STR("--sym", &sym, "true|false",
                    "symmetric (zero point 2^(bits-1)) or asymmetric [true]"),
        CLI_OPT_FLAG("--desc-act", &desc_act,
                     "act-order: quantize inputs by descending Hessian diagonal\n"
                     "(writes a non-monotone g_idx) [off]"),
        CLI_OPT_FLOAT("--damp", &damp, 0.0, 1.0, "F",
                      "dampening, a fraction of the mean Hessian diagonal [0.01]"),
        CLI_OPT_STR("--format", &format, "gptq|gptq_v2",
                    "zero-point storage: gptq stores zero-1 (AutoGPTQ, vLLM),\n"
                    "gptq_v2 the zero itself (GPTQModel) [gptq]"),
        CLI_OPT_LIST("--calib", &calib, "FILE",
                     "calibration text; required for gptq; repeat it to mix\n"
                     "texts (bench/data/calib.txt: legal English;\n"
                     "bench/data/calib-chat.txt: SmolLM2 chat transcripts).\n"
                     "Special-token texts (<|im_start|>) count as those tokens"),
        CLI_OPT_INT("--samples", &samples, 1, 1 << 20, "N", "calibration windows, at most [128]"),
        CLI_OPT_INT("--seq-len", &seq_len, 1, 1 << 20, "N",
                    "tokens per window [512]; each text's tokens are cut into\n"
                    "consecutive windows; with more than --samples of them,\n"
                    "--samples evenly spread ones are used"),
        CLI_OPT_STR("--dtype", &dtype, "f16|f32",
                    "storage of the unquantized tensors (embeddings, norms,\n"
                    "biases) [f16, as GPTQ checkpoints on the hubs]"),
        CLI_OPT_INT("--threads", &threads, 0, 1024, "N",
                    "threads for the calibration pass [physical cores]"),
        CLI_OPT_LIST("--plugin-dir", &plugin_dirs, "DIR", "also look for the quant-gptq plugin in DIR"),
        CLI_OPT_FLAG("--force", &force, "write into OUT_DIR even if it already holds files"),
        CLI_OPT_FLAG("--quiet", &quiet, "no progress on stderr"),
        CLI_OPT_FLAG("--verbose", &verbose,
                     "a line per linear layer with its loss: the layer's\n"
                     "output error on the calibration tokens, 2/n·Σ|x(W-Wq)ᵀ|²"),
        CLI_OPT_FLAG("--json", &json, "print a JSON summary on stdout"),
    };
    const cli_command cmd = {"quantize", usage, after, 24, opts, CLI_N_OPTIONS(opts), 2};
    const int n_pos = cli_parse_options(&cmd, argc, argv, pos);
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
        fprintf(stderr, "plume quantize: --bits must be 2, 3, 4 or 8, got %lld\n", bits);
        return 2;
    }
    if (group == 0) {
        fprintf(stderr, "plume quantize: --group-size must be -1 or positive, got 0\n");
        return 2;
    }
    if (strcmp(sym, "true") != 0 && strcmp(sym, "false") != 0) {
        fprintf(stderr, "plume quantize: --sym must be true or false, got '%s'\n", sym);
        return 2;
    }
    if (damp <= 0.0) {
        fprintf(stderr, "plume quantize: --damp must be in (0, 1], got %g\n", damp);
        return 2;
    }
    if (strcmp(format, "gptq") != 0 && strcmp(format, "gptq_v2") != 0) {
        fprintf(stderr, "plume quantize: --format must be gptq or gptq_v2, got '%s'\n", format);
        return 2;
    }
    if (n_pos != 2)
        return cli_usage_error(&cmd, "plume quantize: give MODEL_DIR and OUT_DIR");
    const bool awq = strcmp(method, "awq") == 0;
    if (strcmp(method, "gptq") != 0 && strcmp(method, "rtn") != 0 && !awq) {
        fprintf(stderr, "plume quantize: --method must be gptq, rtn or awq, got '%s'\n", method);
        return 2;
    }
    if (strcmp(dtype, "f16") != 0 && strcmp(dtype, "f32") != 0) {
        fprintf(stderr, "plume quantize: --dtype must be f16 or f32, got '%s'\n", dtype);
        return 2;
    }
    plume_error err = {0};
    plume_registry *reg = NULL;
    plume_settings *s = NULL;
    int status = 1;
    if (plume_registry_create(&reg, &err))
        goto fail;
    for (int i = 0; i < plugin_dirs.n; i++)
        if (plume_registry_add_search_dir(reg, plugin_dirs.items[i], &err))
            goto fail;
    if (plume_registry_add_default_search_path(reg, &err))
        goto fail;
    /* gptq and rtn write GPTQ checkpoints (the quant-gptq plugin's "gptq"
     * method), awq AutoAWQ ones (quant-awq's "awq") */
    const char *lin = awq ? "awq" : "gptq", *plugin = awq ? "quant-awq" : "quant-gptq";
    if (!plume_registry_find_linear(reg, lin) && plume_registry_load(reg, plugin, &err))
        goto fail;
    const plume_linear_vtable *vt = plume_registry_find_linear(reg, lin);
    if (!vt) {
        plume_err(&err, PLUME_ERR_UNSUPPORTED, "plugin %s registers no \"%s\" method", plugin,
                  lin);
        goto fail;
    }
    if (plume_settings_new("plume quantize", &s, &err))
        goto fail;
    char bits_s[16], group_s[16], damp_s[32];
    snprintf(bits_s, sizeof bits_s, "%lld", bits);
    snprintf(group_s, sizeof group_s, "%lld", group);
    snprintf(damp_s, sizeof damp_s, "%.17g", damp);
    if (set(s, "method", method) || set(s, "bits", bits_s) || set(s, "group_size", group_s) ||
        set(s, "sym", sym) || set(s, "desc_act", desc_act ? "true" : "false") ||
        set(s, "damp_percent", damp_s) || set(s, "checkpoint_format", format))
        goto done;
    int st = cli_prepare_out_dir("quantize", pos[1]);
    if (st < 0)
        goto done;
    if (st == 1 && !force) {
        fprintf(stderr,
                "plume quantize: %s is not empty; use --force to write into it (existing "
                "model files are replaced)\n",
                pos[1]);
        goto done;
    }
    if (check_dirs(pos[0], pos[1]))
        goto done;
    progress_state ps = {isatty(2) != 0, verbose};
    plume_quantize_opts o = {
        .method = vt, .settings = s, .calib_paths = calib.items, .n_calib = calib.n,
        .n_samples = (int32_t)samples,
        .seq_len = (int32_t)seq_len, .n_threads = (int)threads,
        .float_f16 = strcmp(dtype, "f16") == 0, .progress = quiet ? NULL : on_progress,
        .user = &ps};
    plume_quantize_report rep;
    if (plume_quantize_model(pos[0], pos[1], reg, &o, &rep, &err)) {
        if (ps.tty && !quiet)
            fputc('\n', stderr);
        if (st == 2)
            rmdir(pos[1]);
        goto fail;
    }
    if (!quiet)
        fprintf(stderr,
                "quantized %d linears (%s, %lld bits, group %lld) in %.1f s; calibration %d x %d "
                "tokens; total loss %.6g; %s/model.safetensors %.1f MiB\n",
                rep.n_linears, method, bits, group, rep.seconds, rep.n_samples, rep.seq_len,
                rep.total_loss, pos[1], (double)rep.bytes_written / (1 << 20));
    if (json)
        printf("{\"method\": \"%s\", \"bits\": %lld, \"group_size\": %lld, \"sym\": %s, "
               "\"desc_act\": %s, \"linears\": %d, \"samples\": %d, \"seq_len\": %d, "
               "\"tokens\": %lld, \"total_loss\": %.9g, \"seconds\": %.3f, \"bytes\": %llu}\n",
               method, bits, group, awq ? "false" : sym, desc_act ? "true" : "false", rep.n_linears,
               rep.n_samples, rep.seq_len, (long long)rep.n_tokens, rep.total_loss, rep.seconds,
               (unsigned long long)rep.bytes_written);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "plume quantize: %s\n", err.msg);
done:
    plume_settings_free(s);
    plume_registry_free(reg);
    return status;
}
