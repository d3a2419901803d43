/* The hyperparameter keys every GGUF plume writes carries (<arch>.vocab_size,
 * context_length, embedding_length, block_count, feed_forward_length,
 * attention heads and lengths, rope dimension and base, RMS epsilon), as
 * convert_hf_to_gguf.py writes them. */
#ifndef PLUME_QUANT_GGUF_HPARAMS_H
#define PLUME_QUANT_GGUF_HPARAMS_H

#include "formats/gguf_writer.h"
#include "model/config.h"

/* Adds the keys of c under the architecture prefix arch to w. */
void gguf_write_hparams(gguf_writer *w, const char *arch, const plume_model_config *c);

#endif
