/* The hyperparameter keys of a written GGUF (gguf_hparams.h). */
#include "quant/gguf_hparams.h"

#include <stdio.h>

void gguf_write_hparams(gguf_writer *w, const char *a, const plume_model_config *c)
{
    char k[128];
#define U32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, a), gguf_writer_kv_u32(w, k, (uint32_t)(v)))
#define F32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, a), gguf_writer_kv_f32(w, k, (v)))
    U32("vocab_size", c->n_vocab);
    U32("context_length", c->n_ctx_train);
    U32("embedding_length", c->n_embd);
    U32("block_count", c->n_layer);
    U32("feed_forward_length", c->n_ff);
    U32("attention.head_count", c->n_head);
    U32("attention.head_count_kv", c->n_head_kv);
    U32("attention.key_length", c->head_dim);
    U32("attention.value_length", c->head_dim);
    U32("rope.dimension_count", c->head_dim);
    F32("rope.freq_base", c->rope_theta);
    F32("attention.layer_norm_rms_epsilon", c->rms_eps);
#undef U32
#undef F32
}
