/* Pieces shared by the files of the GGUF -> HF converter. */
#ifndef PLUME_CONVERT_INTERNAL_H
#define PLUME_CONVERT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "plume/convert.h"
#include "formats/gguf.h"
#include "model/config.h"

/* What the writers need to know about the source model. */
typedef struct conv_model {
    const gguf_file *gguf;
    plume_model_config cfg;
    bool attn_bias;      /* q/k/v(/o) projections carry biases */
    bool tied;           /* no output.weight: lm_head is the embedding */
    const char *torch_dtype; /* "float32" / "float16" */
} conv_model;

/* Maps a GGUF tensor name to its HF name (formats.md §3.4); *qk is 'q' or
 * 'k' for the projections llama's converter permutes (weights and biases),
 * else 0.  False when the name has no HF counterpart. */
bool conv_gguf_name_to_hf(const char *g, int32_t n_layer, char *hf, size_t cap, char *qk);

/* Writes config.json and generation_config.json into dir. */
int conv_write_config(const conv_model *cm, const char *dir, plume_error *err);

/* Checks that the GGUF tokenizer can be written as a tokenizer.json (so
 * that nothing is written for a model that would fail half-way). */
int conv_check_tokenizer(const gguf_file *f, plume_error *err);

/* Writes tokenizer.json and tokenizer_config.json into dir. */
int conv_write_tokenizer(const conv_model *cm, const char *dir, plume_error *err);

/* The shortest decimal that reads back as the float f, as a double (so
 * that 1e-5f is written as 1e-05, not 9.99999975e-06). */
double conv_float_repr(float f);

/* Dumps root to dir/name (indented, keys in insertion order); steals root. */
int conv_dump_json(json_t *root, const char *dir, const char *name, plume_error *err);

#endif
