/* The hyperparameter keys of a written GGUF (gguf_hparams.h). */
#include "quant/gguf_hparams.h"

#include <stdio.h>

void gguf_write_hparams(gguf_writer *w, const char *a, const plume_model_config *c)
{
    const struct {
        const char *suffix;
        int32_t v;
    } u32s[] = {
        {"vocab_size", c->n_vocab},
        {"context_length", c->n_ctx_train},
        {"embedding_length", c->n_embd},
        {"block_count", c->n_layer},
        {"feed_forward_length", c->n_ff},
        {"attention.head_count", c->n_head},
        {"attention.head_count_kv", c->n_head_kv},
        {"attention.key_length", c->head_dim},
        {"attention.value_length", c->head_dim},
        {"rope.dimension_count", c->head_dim},
    };
    char k[128];
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) {
        snprintf(k, sizeof k, "%s.%s", a, u32s[i].suffix);
        gguf_writer_kv_u32(w, k, (uint32_t)u32s[i].v);
    }
    snprintf(k, sizeof k, "%s.rope.freq_base", a);
    gguf_writer_kv_f32(w, k, c->rope_theta);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", a);
    gguf_writer_kv_f32(w, k, c->rms_eps);
}
