/* Dummy checkpoints (`load_format: dummy`): an HF config.json is enough.
 * The checkpoint lists the tensors the config implies, under their HF
 * names, in the types its settings choose; their contents are
 * plume/dummy_fill.h's seeded random blocks (norms 1, biases 0), made in
 * host memory the first time a tensor is looked up, or never, when the
 * loader has the backend fill them on its device (plume_dummy_set_deferred).
 * Mixtures of experts (mixtral, qwen3_moe, qwen2_moe, olmoe) list a router
 * and one matrix per expert and projection; the GGUF writer joins each
 * projection's experts into llama.cpp's 3-D tensor (group).
 *
 * Settings (the pipeline's `load_format: { method: dummy, ... }`):
 *   dtype      F32, F16, BF16, or a llama-quantize preset (Q4_0, Q4_1, Q8_0,
 *              Q4_K_M, Q4_K_S, Q6_K; gguf_mix.h decides each tensor's type)
 *              (default F16)
 *   pure       true: every matrix in the preset's base type, as
 *              llama-quantize --pure (default false)
 *   seed       the generator's seed (default 0, PLUME_DUMMY_SEED)
 *   tokenizer  a .gguf whose vocabulary to borrow, or a tokenizer.json
 *              (default: tokenizer.json next to config.json) */
#ifndef PLUME_MODEL_DUMMY_H
#define PLUME_MODEL_DUMMY_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h"
#include "plume/dummy_fill.h"
#include "plume/error.h"
#include "plume/settings.h"
#include "plume/tensor.h"

typedef struct plume_dummy plume_dummy;

/* One tensor of the plan. */
typedef struct plume_dummy_tensor {
    plume_tensor t;        /* HF name, type, shape; data NULL until made */
    char hf[112];          /* the HF name (t.name points here) */
    char gguf[72];         /* the GGUF name */
    bool random;           /* a matrix of random blocks (else a constant vector) */
    float value;           /* a constant vector's value (norms 1, biases 0) */
    char qk;               /* 'q' / 'k': a projection llama's GGUF permutes */
    /* mixture-of-experts: one expert's matrix of a 3-D GGUF tensor (gguf
     * names it): group > 0 on the first expert's entry (the tensor has
     * group experts, their entries consecutive, in order), -1 on the
     * others; 0: a tensor of its own */
    int32_t group;
    plume_fill_spec spec;  /* random: how its blocks are made */
    void *mem;             /* host copy, once made */
} plume_dummy_tensor;

/* Reads dir/config.json and plans the tensors under settings s (NULL:
 * defaults).  Errors name the setting or config field that is wrong. */
int plume_dummy_open(const char *dir, const plume_settings *s, plume_dummy **out,
                     plume_error *err);
void plume_dummy_close(plume_dummy *d);

/* The config the plan follows. */
const plume_model_config *plume_dummy_config(const plume_dummy *d);
/* The tokenizer source (a .gguf or a tokenizer.json path). */
const char *plume_dummy_tokenizer_path(const plume_dummy *d);
/* The seed, and the dtype setting as written ("Q4_0"). */
uint64_t plume_dummy_seed(const plume_dummy *d);
const char *plume_dummy_dtype(const plume_dummy *d);
/* The llama.cpp file type (general.file_type) of the dtype. */
uint32_t plume_dummy_file_type(const plume_dummy *d);

size_t plume_dummy_n(const plume_dummy *d);
/* The i-th tensor, in llama.cpp's GGUF order (token_embd, layers, output). */
const plume_dummy_tensor *plume_dummy_at(const plume_dummy *d, size_t i);
/* By HF name; NULL when the plan has no such tensor. */
const plume_dummy_tensor *plume_dummy_find(const plume_dummy *d, const char *hf_name);

/* deferred true: lookups through the weight format leave random matrices
 * unmade (data NULL) for a backend's weight_fill; vectors are always made. */
void plume_dummy_set_deferred(plume_dummy *d, bool deferred);
/* Makes t's host copy if it has none (t from this checkpoint). */
int plume_dummy_make(plume_dummy *d, const plume_tensor *t, plume_error *err);
/* The plan entry of a tensor view this checkpoint handed out, else NULL. */
const plume_dummy_tensor *plume_dummy_entry(const plume_dummy *d, const plume_tensor *t);

#endif
