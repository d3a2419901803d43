/* The tensors of a quantized checkpoint collected while quantizing, and
 * writing them with the checkpoint's other files. */
#ifndef PLUME_QUANT_OUTPUT_H
#define PLUME_QUANT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/error.h"
#include "plume/linear.h"
#include "plume/tensor.h"

typedef struct quant_out_tensor {
    char name[192];
    const plume_tensor *src;   /* a float tensor copied from the input, or NULL */
    plume_quant_tensor q;      /* a method's tensor (data owned) when src is NULL */
} quant_out_tensor;

typedef struct quant_output {
    quant_out_tensor *t;
    size_t n, cap;
    bool float_f16;            /* float tensors (copied and methods' float ones) as F16 */
} quant_output;

/* Adds an input tensor copied as float (F16 or F32 per out->float_f16). */
int quant_output_copy(quant_output *out, const plume_tensor *src, plume_error *err);
/* Takes over a method's tensor for layer prefix (its data is freed by
 * quant_output_free, also on failure). */
int quant_output_take(quant_output *out, const char *prefix, plume_quant_tensor *q,
                      plume_error *err);
void quant_output_free(quant_output *out);

/* Writes out_dir/model.safetensors; *bytes gets its size. */
int quant_output_write(quant_output *out, const char *out_dir, uint64_t *bytes,
                       plume_error *err);

/* Writes out_dir/config.json (in_dir's with quantization_config set to the
 * JSON object text qconfig, and torch_dtype float16 when float_f16),
 * out_dir/quantize_config.json (that object), and copies the tokenizer and
 * generation files in_dir has. */
int quant_output_configs(const char *in_dir, const char *out_dir, const char *qconfig,
                         bool float_f16, plume_error *err);

#endif
