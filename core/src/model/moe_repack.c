/* gpt-oss's HF expert tensors into plume's rows (moe_repack.h). */
#include "model/moe_repack.h"

#include <string.h>

void plume_repack_cols(const void *src, size_t esz, int64_t X, int64_t R, int64_t C, int64_t c0,
                       int64_t step, int64_t nc, void *dst)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    for (int64_t x = 0; x < X; x++)
        for (int64_t j = 0; j < nc; j++)
            for (int64_t r = 0; r < R; r++)
                memcpy(d + (((size_t)x * (size_t)nc + (size_t)j) * (size_t)R + (size_t)r) * esz,
                       s + (((size_t)x * (size_t)R + (size_t)r) * (size_t)C +
                            (size_t)(c0 + j * step)) * esz,
                       esz);
}

/* The 4-bit code of element n of an OpenAI block: adjacent pairs per byte. */
static unsigned openai_code(const uint8_t *blk, int n)
{
    return (unsigned)(blk[n / 2] >> (4 * (n & 1))) & 0x0Fu;
}

void plume_mxfp4_rows_from_openai(const uint8_t *blocks, const uint8_t *scales, int64_t nb,
                                  int64_t r0, int64_t step, int64_t n_rows, uint8_t *dst)
{
    for (int64_t j = 0; j < n_rows; j++) {
        const int64_t r = r0 + j * step;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = blocks + ((size_t)r * (size_t)nb + (size_t)b) * 16;
            uint8_t *o = dst + ((size_t)j * (size_t)nb + (size_t)b) * 17;
            o[0] = scales[(size_t)r * (size_t)nb + (size_t)b];
            for (int k = 0; k < 16; k++)
                o[1 + k] = (uint8_t)(openai_code(blk, k) | openai_code(blk, k + 16) << 4);
        }
    }
}
