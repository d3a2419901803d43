/* `plume quantize MODEL OUT.gguf --to gguf --type MIX`: a float model (an
 * HF directory or an F32/F16/BF16 GGUF) to a GGUF file of a llama-quantize
 * preset, with the reference quantizers of gguf_quant.h. */
#ifndef PLUME_GGUF_MODEL_QUANT_H
#define PLUME_GGUF_MODEL_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"

/* One tensor done. */
typedef struct plume_gguf_quant_progress {
    int index, n;             /* 0-based tensor index of n */
    const char *name;         /* GGUF name */
    int64_t ne0, rows;
    uint32_t from, to;        /* source and written ggml types */
    uint32_t wanted;          /* the preset's type before the shape fallback (== to if none) */
    double seconds;           /* this tensor */
} plume_gguf_quant_progress;

typedef struct plume_gguf_quant_opts {
    const char *mix;          /* preset name, gguf_mix.h */
    int n_threads;            /* 0: plume_cpu_count() */
    void (*progress)(void *user, const plume_gguf_quant_progress *p);
    void *user;
} plume_gguf_quant_opts;

typedef struct plume_gguf_quant_report {
    int n_tensors, n_quantized, n_fallback;
    uint64_t bytes_in_weights, bytes_written; /* float source bytes of all tensors; file size */
    double seconds;
} plume_gguf_quant_report;

/* Writes out_path (replacing it): every metadata pair of a GGUF input
 * (general.file_type and general.quantization_version set anew), or for an
 * HF directory the llama/qwen2 hyperparameters and the tokenizer (byte-level
 * BPE) as GGUF keys with llama's Q/K row permutation applied (formats.md
 * §3.3-3.5); then each tensor in the type the preset gives it.  The input
 * must be float: a quantized tensor that the preset would quantize is an
 * error.  On failure the partial file is removed. */
PLUME_API int plume_quantize_to_gguf(const char *in, const char *out_path, const plume_gguf_quant_opts *o,
                           plume_gguf_quant_report *rep, plume_error *err);

/* The preset names plume_quantize_to_gguf accepts, "Q4_K_M, Q4_K_S, ..."
 * (a static string), for messages and --help. */
PLUME_API const char *plume_gguf_mix_names(void);

/* True when name (case-insensitive) is one of plume_gguf_mix_names(). */
PLUME_API bool plume_gguf_mix_known(const char *name);

#endif
