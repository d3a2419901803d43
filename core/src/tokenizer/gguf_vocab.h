/* The tokenizer of a GGUF file, for the core (the model loader) and its
 * tests.  Internal: struct gguf_file is the core's parser (formats/gguf.h),
 * not SDK.  An SDK program gets a GGUF model's tokenizer from the model
 * (plume_model_load, plume_model_tokenizer) and an HF one from its files
 * (plume_tokenizer_from_hf). */
#ifndef PLUME_TOKENIZER_GGUF_VOCAB_H
#define PLUME_TOKENIZER_GGUF_VOCAB_H

#include "formats/gguf.h"
#include "plume/error.h"
#include "plume/tokenizer.h"

/* Builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata and
 * tokenizer.chat_template.  An unknown tokenizer model or pre-tokenizer name
 * is an error that names it and lists the supported ones. */
int plume_tokenizer_from_gguf(const struct gguf_file *f, plume_tokenizer **out, plume_error *err);

#endif
