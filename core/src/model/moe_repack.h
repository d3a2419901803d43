/* Rearranging gpt-oss's HF expert tensors into the rows plume's linears
 * read ([out][in] per expert), on the host, once at load.  Pure data
 * movement: no value changes. */
#ifndef PLUME_MODEL_MOE_REPACK_H
#define PLUME_MODEL_MOE_REPACK_H

#include <stddef.h>
#include <stdint.h>

/* For x < X, j < nc, r < R: dst[x][j][r] = src[x][r][c0 + j*step], elements
 * of esz bytes (src is [X][R][C]).  transformers' GptOssExperts keeps
 * gate_up_proj as [X][hidden][2F] with gate in the even columns and up in
 * the odd ones (modeling_gpt_oss.py _apply_gate: gate_up[..., ::2],
 * gate_up[..., 1::2]) and down_proj as [X][F][hidden] (x @ W): this gives
 * plume's [X][F][hidden] gate and up (c0 0 or 1, step 2) and [X][hidden][F]
 * down (step 1), and with R = 1 the even/odd halves of gate_up_proj_bias. */
void plume_repack_cols(const void *src, size_t esz, int64_t X, int64_t R, int64_t C, int64_t c0,
                       int64_t step, int64_t nc, void *dst);

/* n_rows rows of ggml MXFP4 blocks (17 bytes per 32 values: the E8M0
 * scale, then 16 bytes with element j in the low nibble of byte j and
 * element j+16 in its high nibble) from the OpenAI checkpoint layout that
 * transformers' integrations/mxfp4.py reads: blocks [rows][nb][16] with
 * element 2k in the low nibble of byte k and 2k+1 in its high nibble, and
 * scales [rows][nb], the same E8M0 byte (transformers: ldexp(FP4_VALUES
 * [code], scale - 127); ggml: kvalues[code] = 2 FP4_VALUES[code] times
 * 2^(e-128): the same value).  Row j of dst is source row r0 + j*step
 * (gate_up_proj_blocks interleaves gate and up rows, as convert_hf_to_gguf's
 * GptOssModel splits them with [:, ::2] and [:, 1::2]). */
void plume_mxfp4_rows_from_openai(const uint8_t *blocks, const uint8_t *scales, int64_t nb,
                                  int64_t r0, int64_t step, int64_t n_rows, uint8_t *dst);

#endif
