/* config.json and generation_config.json for a converted GGUF model, with
 * the fields transformers' LlamaConfig / Qwen2Config read. */
#include <stdio.h>
#include <string.h>

#include "convert/convert_internal.h"

/* A token id from GGUF metadata, or -1 when absent. */
static int64_t meta_id(const gguf_file *f, const char *key)
{
    int64_t v;
    return gguf_get_i64(f, key, &v) && v >= 0 ? v : -1;
}

static void set_id(json_t *o, const char *key, int64_t id)
{
    json_object_set_new(o, key, id >= 0 ? json_integer(id) : json_null());
}

int conv_write_config(const conv_model *cm, const char *dir, plume_error *err)
{
    const plume_model_config *c = &cm->cfg;
    const gguf_file *f = cm->gguf;
    bool qwen2 = c->arch == PLUME_ARCH_QWEN2;
    int64_t bos = meta_id(f, "tokenizer.ggml.bos_token_id");
    int64_t eos = meta_id(f, "tokenizer.ggml.eos_token_id");
    int64_t pad = meta_id(f, "tokenizer.ggml.padding_token_id");

    json_t *o = json_object();
    json_t *archs = json_array();
    json_array_append_new(archs, json_string(qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"));
    json_object_set_new(o, "architectures", archs);
    json_object_set_new(o, "model_type", json_string(qwen2 ? "qwen2" : "llama"));
    json_object_set_new(o, "vocab_size", json_integer(c->n_vocab));
    json_object_set_new(o, "hidden_size", json_integer(c->n_embd));
    json_object_set_new(o, "intermediate_size", json_integer(c->n_ff));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->n_layer));
    json_object_set_new(o, "num_attention_heads", json_integer(c->n_head));
    json_object_set_new(o, "num_key_value_heads", json_integer(c->n_head_kv));
    json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "max_position_embeddings", json_integer(c->n_ctx_train));
    json_object_set_new(o, "rms_norm_eps", json_real(conv_float_repr(c->rms_eps)));
    json_object_set_new(o, "rope_theta", json_real(conv_float_repr(c->rope_theta)));
    json_object_set_new(o, "rope_scaling", json_null());
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "initializer_range", json_real(0.02));
    if (!qwen2) {
        json_object_set_new(o, "attention_bias", json_boolean(cm->attn_bias));
        json_object_set_new(o, "mlp_bias", json_false());
        json_object_set_new(o, "pretraining_tp", json_integer(1));
    } else {
        json_object_set_new(o, "use_sliding_window", json_false());
        json_object_set_new(o, "sliding_window", json_null());
        json_object_set_new(o, "max_window_layers", json_integer(c->n_layer));
    }
    json_object_set_new(o, "attention_dropout", json_real(0.0));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(cm->tied));
    json_object_set_new(o, "torch_dtype", json_string(cm->torch_dtype));
    json_object_set_new(o, "use_cache", json_true());
    set_id(o, "bos_token_id", bos);
    set_id(o, "eos_token_id", eos);
    if (pad >= 0)
        set_id(o, "pad_token_id", pad);
    if (conv_dump_json(o, dir, "config.json", err))
        return -1;

    json_t *g = json_object();
    set_id(g, "bos_token_id", bos);
    set_id(g, "eos_token_id", eos);
    if (pad >= 0)
        set_id(g, "pad_token_id", pad);
    return conv_dump_json(g, dir, "generation_config.json", err);
}
