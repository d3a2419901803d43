/* Accessors and the human-readable description behind `plume info`. */
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"

const plume_tokenizer *plume_model_tokenizer(const plume_model *m) { return m->tok; }
int32_t plume_model_n_vocab(const plume_model *m) { return m->cfg.n_vocab; }
int32_t plume_model_n_ctx_train(const plume_model *m) { return m->cfg.n_ctx_train; }
const char *plume_model_arch(const plume_model *m) { return m->cfg.arch_name; }
int64_t plume_model_n_params(const plume_model *m) { return m->n_params; }
int64_t plume_model_weight_bytes(const plume_model *m) { return m->weight_bytes; }

void plume_model_attn_shape(const plume_model *m, int32_t *n_layer, int32_t *n_head,
                            int32_t *n_head_kv, int32_t *head_dim)
{
    if (n_layer) *n_layer = m->cfg.n_layer;
    if (n_head) *n_head = m->cfg.n_head;
    if (n_head_kv) *n_head_kv = m->cfg.n_head_kv;
    if (head_dim) *head_dim = m->cfg.head_dim;
}

/* Counts tensors per type over the whole checkpoint. */
static void describe_types(const plume_model *m, FILE *f)
{
    size_t n = m->fmt->n_tensors(m->ck);
    struct { const char *name; size_t count; int64_t bytes; } seen[32];
    size_t n_seen = 0;
    for (size_t i = 0; i < n; i++) {
        const plume_tensor *t = m->fmt->tensor(m->ck, i);
        const char *name = m->st ? safetensors_dtype(m->st, t) : plume_dtype_name(t->type);
        size_t j = 0;
        while (j < n_seen && strcmp(seen[j].name, name) != 0)
            j++;
        if (j == n_seen) {
            if (n_seen == 32)
                continue;
            seen[n_seen].name = name;
            seen[n_seen].count = 0;
            seen[n_seen].bytes = 0;
            n_seen++;
        }
        seen[j].count++;
        seen[j].bytes += (int64_t)t->nbytes;
    }
    fprintf(f, "tensors:        %zu\n", n);
    for (size_t j = 0; j < n_seen; j++)
        fprintf(f, "  %-6s        %zu tensors, %.1f MiB\n", seen[j].name, seen[j].count,
                (double)seen[j].bytes / (1 << 20));
}

void plume_model_describe(const plume_model *m, void *stream)
{
    FILE *f = stream;
    const plume_model_config *c = &m->cfg;
    fprintf(f, "file:           %s (%s)\n", m->path,
            m->gguf ? "GGUF" : m->st ? "HF safetensors" : m->fmt->name);
    if (m->gguf) {
        gguf_str name;
        if (gguf_get_str(m->gguf, "general.name", &name)) /* shown up to 200 bytes */
            fprintf(f, "name:           %.*s%s\n", (int)(name.len > 200 ? 200 : name.len),
                    name.ptr, name.len > 200 ? "..." : "");
        fprintf(f, "gguf version:   %u\n", gguf_version(m->gguf));
    }
    fprintf(f, "architecture:   %s\n", c->arch_name);
    fprintf(f, "backend:        %s\n", m->bvt->name);
    fprintf(f, "parameters:     %.1f M (%.1f MiB of weights)\n", (double)m->n_params / 1e6,
            (double)m->weight_bytes / (1 << 20));
    fprintf(f, "layers:         %d\n", c->n_layer);
    fprintf(f, "hidden size:    %d\n", c->n_embd);
    fprintf(f, "heads:          %d (kv %d, head dim %d)\n", c->n_head, c->n_head_kv, c->head_dim);
    fprintf(f, "mlp size:       %d\n", c->n_ff);
    fprintf(f, "vocabulary:     %d\n", c->n_vocab);
    fprintf(f, "context:        %d (trained)\n", c->n_ctx_train);
    fprintf(f, "rope:           theta %g, %s pairs\n", c->rope_theta,
            c->rope_style == PLUME_ROPE_ADJACENT ? "adjacent" : "rotate-half");
    fprintf(f, "rms norm eps:   %g\n", c->rms_eps);
    fprintf(f, "output head:    %s\n", c->tied_embeddings ? "tied to embeddings" : "separate");
    fprintf(f, "q/k/v bias:     %s\n", c->qkv_bias ? "yes" : "no");
    if (m->quant_method[0]) {
        fprintf(f, "quantization:   %s, %d linear layers run by that method", m->quant_method,
                m->n_plugin_linears);
        static const char *const keys[] = {"bits", "group_size", "sym", "desc_act",
                                           "checkpoint_format"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            const char *v = NULL;
            if (plume_settings_has(m->quant, keys[i]) &&
                plume_settings_string(m->quant, keys[i], NULL, &v, NULL) == 0 && v)
                fprintf(f, ", %s %s", keys[i], v);
        }
        fputc('\n', f);
    }
    describe_types(m, f);
    const plume_tokenizer *t = m->tok;
    const char *tmpl = plume_chat_template_name(t);
    fprintf(f, "tokenizer:      %s (pre-tokenizer %s), %d tokens, bos %d, eos %d, add bos %s\n",
            plume_tokenizer_model(t), plume_tokenizer_pre(t), plume_tokenizer_n_vocab(t),
            plume_tokenizer_bos(t), plume_tokenizer_eos(t),
            plume_tokenizer_add_bos(t) ? "yes" : "no");
    fprintf(f, "chat template:  %s\n", tmpl ? tmpl : "none (chatml is used for --chat)");
}
