/* `plume dummy-gguf CONFIG_DIR OUT.gguf`: a dummy-weight model
 * (model/dummy.h) written as a GGUF file that llama.cpp loads, streamed
 * tensor by tensor in bounded memory. */
#ifndef PLUME_DUMMY_GGUF_H
#define PLUME_DUMMY_GGUF_H

#include <stdint.h>

#include "plume/api.h"
#include "plume/error.h"
#include "plume/settings.h"

typedef struct plume_dummy_gguf_report {
    int n_tensors;
    uint64_t bytes_written;
    double seconds;
} plume_dummy_gguf_report;

/* Writes out_path (replacing it; removed again on failure) from the config
 * in dir and the dummy settings s (model/dummy.h: dtype, pure, seed, and
 * tokenizer, which must be a .gguf here: its tokenizer.* metadata is copied,
 * the token list padded with [PAD<i>] tokens up to the config's vocab_size
 * as convert_hf_to_gguf.py pads).  Keys as convert_hf_to_gguf.py writes
 * them; llama GGUFs get its q/k row permutation and, for llama3 rope
 * scaling, rope_freqs.weight.  Each tensor's bytes are exactly what the
 * dummy loader makes for it under the same settings (GGUF rows of a
 * permuted q/k are the HF rows they came from).  A mixture-of-experts
 * config (n_expert > 0) is refused with an error naming
 * bench/make_moe_dummy_gguf.py, which writes MoE GGUFs. */
PLUME_API int plume_dummy_to_gguf(const char *dir, const plume_settings *s, const char *out_path,
                                  plume_dummy_gguf_report *rep, plume_error *err);

#endif
