/* `plume quantize`: making a quantized HF checkpoint from a float one with
 * a linear method's quantizer (linear.h quant_begin/quantize), calibrated
 * on a text, layer by layer as GPTQ's reference driver does. */
#ifndef PLUME_QUANTIZE_H
#define PLUME_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"
#include "plume/linear.h"
#include "plume/registry.h"
#include "plume/settings.h"

/* Where the quantizer is, for a progress display. */
typedef struct plume_quant_progress {
    int layer, n_layer;          /* layer being quantized (0-based) of n_layer */
    const char *linear;          /* "self_attn.q_proj" just done, or NULL at a layer's start */
    int linear_index, n_linear;  /* linears done in this layer, of n_linear */
    double loss;                 /* its loss (-1 without calibration) */
    double elapsed_s;
} plume_quant_progress;

typedef struct plume_quantize_opts {
    const plume_linear_vtable *method;   /* the provider with quant_begin/quantize */
    const plume_settings *settings;      /* the method's options */
    const char *const *calib_paths;      /* calibration texts (n_calib of them, 0: none) */
    int n_calib;
    int32_t n_samples;                   /* windows of seq_len tokens, at most */
    int32_t seq_len;
    int n_threads;                       /* 0: plume_cpu_count() */
    bool float_f16;                      /* unquantized tensors stored as F16 (else F32) */
    void (*progress)(void *user, const plume_quant_progress *p);
    void *user;
} plume_quantize_opts;

/* What a run did. */
typedef struct plume_quantize_report {
    int32_t n_samples, seq_len;          /* the calibration actually used */
    int64_t n_tokens;
    int n_linears;
    double total_loss;                   /* Σ of the linears' losses (-1 without calibration) */
    double seconds;
    uint64_t bytes_written;              /* model.safetensors */
} plume_quantize_report;

/* Quantizes every decoder-layer linear of the float HF checkpoint in_dir
 * (F32/F16/BF16 weights; embeddings, norms and the head stay float) into
 * out_dir (an existing directory): model.safetensors, config.json with the
 * method's quantization_config, quantize_config.json, and the tokenizer and
 * generation files copied.  With calibration text, the hidden states of
 * n_samples windows of seq_len tokens go through the layers in order; each
 * linear's Hessian comes from inputs that already passed through the
 * quantized linears before it (in its layer too: q/k/v, then o, then
 * gate/up, then down — the reference's true-sequential order).  The texts
 * are tokenized with special tokens recognised, so chat transcripts
 * (ChatML markup and all) calibrate the chat format too. */
PLUME_API int plume_quantize_model(const char *in_dir, const char *out_dir, plume_registry *reg,
                         const plume_quantize_opts *o, plume_quantize_report *rep,
                         plume_error *err);

#endif
