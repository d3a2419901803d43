/* Accessors and the human-readable description behind `plume info`. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model/model_internal.h"

const plume_tokenizer *plume_model_tokenizer(const plume_model *m) { return m->tok; }
int32_t plume_model_n_vocab(const plume_model *m) { return m->cfg.n_vocab; }
/* The context the model is meant to run at: max_position_embeddings,
 * stretched where the scaling says that field is the original length:
 * dynamic x factor (transformers scales past max_position_embeddings),
 * yarn at least original context x factor.  Linear and llama3 configs
 * (Gemma 3, Llama 3.1) already give the long length there. */
static int32_t effective_ctx(const plume_model_config *c)
{
    double n = c->n_ctx_train;
    if (c->rope.type == PLUME_ROPE_SCALING_DYNAMIC)
        n *= c->rope.factor;
    else if (c->rope.type == PLUME_ROPE_SCALING_YARN)
        n = fmax(n, (double)c->rope.orig_ctx * c->rope.factor);
    return n > INT32_MAX ? INT32_MAX : n < 1 ? c->n_ctx_train : (int32_t)n;
}

int32_t plume_model_n_ctx_train(const plume_model *m) { return effective_ctx(&m->cfg); }
const char *plume_model_arch(const plume_model *m) { return m->cfg.arch_name; }
int64_t plume_model_n_params(const plume_model *m) { return m->n_params; }
int64_t plume_model_weight_bytes(const plume_model *m) { return m->weight_bytes; }

/* What one token reads of the experts' total: n_expert_used of n_expert. */
static int64_t active_experts(const plume_model *m, int64_t total)
{
    return m->cfg.n_expert > 0 ? total / m->cfg.n_expert * m->cfg.n_expert_used : 0;
}

int64_t plume_model_n_params_per_token(const plume_model *m)
{
    /* n_params counts the embedding once, and a separate head once more */
    const int64_t vocab_embd = (int64_t)m->cfg.n_vocab * m->cfg.n_embd;
    return m->n_params - vocab_embd * (m->cfg.tied_embeddings ? 1 : 2) - m->expert_params +
           active_experts(m, m->expert_params);
}

int64_t plume_model_decode_bytes(const plume_model *m)
{
    return m->weight_bytes - m->expert_bytes + active_experts(m, m->expert_bytes) -
           m->embd_unread_bytes;
}

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

/* "none", or the scaling and its parameters, then a newline. */
static void describe_rope(const plume_model *m, const plume_rope_cfg *r, FILE *f)
{
    if (r == &m->cfg.rope && m->rope_freq_factors) {
        fprintf(f, "llama3 (rope_freqs.weight per-dimension factors)\n");
        return;
    }
    fprintf(f, "%s", plume_rope_scaling_name(r->type));
    switch (r->type) {
    case PLUME_ROPE_SCALING_NONE:
        break;
    case PLUME_ROPE_SCALING_LINEAR:
        fprintf(f, " (factor %g)", r->factor);
        break;
    case PLUME_ROPE_SCALING_DYNAMIC:
        fprintf(f, " (NTK, factor %g, base fixed for %g x %d positions)", r->factor, r->factor,
                m->cfg.n_ctx_train);
        break;
    case PLUME_ROPE_SCALING_YARN:
        fprintf(f, " (factor %g, original context %d, beta fast %g slow %g, attention x%g)",
                r->factor, r->orig_ctx, r->beta_fast, r->beta_slow,
                (double)(r == &m->cfg.rope ? m->rope_attn_mult : m->rope_local_attn_mult));
        break;
    case PLUME_ROPE_SCALING_LLAMA3:
        fprintf(f, " (factor %g, low %g high %g, original context %d)", r->factor,
                r->low_freq_factor, r->high_freq_factor, r->orig_ctx);
        break;
    }
    fputc('\n', f);
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
    static const char *const families[] = {
        [PLUME_ARCH_LLAMA] = "llama (Llama 2/3, SmolLM, Mistral)",
        [PLUME_ARCH_QWEN2] = "qwen2 (q/k/v bias)",
        [PLUME_ARCH_QWEN3] = "qwen3 (q/k norms)",
        [PLUME_ARCH_GEMMA3] = "gemma3 (Gemma 3 text: (1+w) norms, post norms, q/k norms, GELU, "
                              "scaled embeddings)",
        [PLUME_ARCH_QWEN3MOE] = "qwen3moe (q/k norms, mixture of experts)",
        [PLUME_ARCH_OLMOE] = "olmoe (q/k norms over the whole projections, mixture of experts)",
        [PLUME_ARCH_QWEN2MOE] = "qwen2moe (q/k/v bias, mixture of experts with a shared expert)",
        [PLUME_ARCH_GPT_OSS] = "gpt-oss (q/k/v/o bias, attention sinks, biased router and experts, "
                               "clamped SwiGLU)",
    };
    fprintf(f, "architecture:   %s\n", c->arch_name);
    fprintf(f, "family:         %s\n", families[c->arch]);
    fprintf(f, "backend:        %s\n", m->bvt->name);
    fprintf(f, "parameters:     %.1f M (%.1f MiB of weights)\n", (double)m->n_params / 1e6,
            (double)m->weight_bytes / (1 << 20));
    fprintf(f, "layers:         %d\n", c->n_layer);
    fprintf(f, "hidden size:    %d\n", c->n_embd);
    fprintf(f, "heads:          %d (kv %d, head dim %d)\n", c->n_head, c->n_head_kv, c->head_dim);
    fprintf(f, "mlp size:       %d\n", c->n_ff);
    if (c->n_expert > 0) {
        int n_moe = 0;
        for (int l = 0; l < c->n_layer; l++)
            n_moe += plume_config_layer_moe(c, l);
        fprintf(f, "experts:        %d per token of %d, expert mlp size %d, on %d of %d layers; "
                   "top-k probabilities %s\n",
                c->n_expert_used, c->n_expert, c->n_ff_exp, n_moe, c->n_layer,
                c->moe_norm_topk ? "renormalized" : "as they are");
        if (c->n_ff_shexp > 0)
            fprintf(f, "shared expert:  mlp size %d, gated by sigmoid\n", c->n_ff_shexp);
        fprintf(f, "read per token: %.1f MiB of weights at batch 1 (the routed experts)\n",
                (double)plume_model_decode_bytes(m) / (1 << 20));
    }
    fprintf(f, "vocabulary:     %d\n", c->n_vocab);
    fprintf(f, "context:        %d (trained)", c->n_ctx_train);
    if (effective_ctx(c) != c->n_ctx_train)
        fprintf(f, ", %d with its rope scaling", effective_ctx(c));
    fputc('\n', f);
    fprintf(f, "rope:           theta %g, %s pairs, scaling ", c->rope_theta,
            c->rope_style == PLUME_ROPE_ADJACENT ? "adjacent" : "rotate-half");
    describe_rope(m, &c->rope, f);
    if (c->sliding_window > 0) {
        int n_swa = 0;
        for (int l = 0; l < c->n_layer; l++)
            n_swa += plume_config_layer_window(c, l) > 0;
        fprintf(f, "sliding window: %d tokens on %d of %d layers", c->sliding_window, n_swa,
                c->n_layer);
        if (c->rope_local.theta != c->rope.theta || c->rope_local.type != c->rope.type) {
            fprintf(f, "; their rope: theta %g, scaling ", c->rope_local.theta);
            describe_rope(m, &c->rope_local, f);
        } else {
            fputc('\n', f);
        }
    } else {
        fprintf(f, "sliding window: none\n");
    }
    bool every4;
    const int n_nope = plume_config_nope_layers(c, &every4);
    if (n_nope > 0)
        fprintf(f, "no rope:        %d of %d layers%s\n", n_nope, c->n_layer,
                every4 ? " (every 4th)" : "");
    if (c->attn_scale > 0)
        fprintf(f, "attention scale: %g\n", c->attn_scale);
    if (c->final_softcap > 0)
        fprintf(f, "logit softcap:  %g\n", c->final_softcap);
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
    const char *src = plume_chat_template_source(t);
    if (tmpl)
        fprintf(f, "chat template:  the model's (Jinja; family %s)\n", tmpl);
    else
        fprintf(f, "chat template:  none in the file; %s\n",
                strcmp(src, "family") == 0 ? "its family's turn format is used"
                                           : "ChatML is used");
}
