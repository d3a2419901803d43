/* Converting a GGUF model to a Hugging Face directory (`plume convert`). */
#ifndef PLUME_CONVERT_H
#define PLUME_CONVERT_H

#include <stddef.h>

#include "plume/api.h"
#include "plume/error.h"

typedef enum plume_convert_dtype {
    PLUME_CONVERT_F32 = 0, /* exact values of the dequantized weights */
    PLUME_CONVERT_F16 = 1, /* each weight rounded to IEEE binary16 */
} plume_convert_dtype;

/* Progress of a conversion: a free-form line (no newline) for the user. */
typedef void (*plume_convert_log_fn)(void *user, const char *line);

typedef struct plume_convert_opts {
    plume_convert_dtype dtype;
    plume_convert_log_fn log; /* may be NULL */
    void *user;
} plume_convert_opts;

/* Converts the GGUF file at gguf_path into the existing directory out_dir:
 * model.safetensors (tensors renamed GGUF -> HF per formats.md §3.4,
 * dequantized to f32 and stored as opts->dtype, llama's Q/K row
 * permutation of §3.5 undone; no lm_head when the embeddings are tied),
 * config.json, generation_config.json, tokenizer.json (byte-level BPE from
 * tokenizer.ggml.tokens/token_type/merges) and tokenizer_config.json.
 * Everything is checked before the first file is written: an architecture,
 * tensor, tensor type or tokenizer this converter does not handle is an
 * error naming it. */
PLUME_API int plume_convert_gguf_to_hf(const char *gguf_path, const char *out_dir,
                             const plume_convert_opts *opts, plume_error *err);

#endif
