/* quant-awq: AWQ GEMM packing and its conversion to GPTQ arrays. */
#include "awq_pack.h"

#include <inttypes.h>
#include <stdlib.h>


const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
const int awq_reverse_order[8] = {0, 4, 1, 5, 2, 6, 3, 7};

static int check_n(int64_t R, int64_t N, plume_error *err)
{
    if (R < 0 || N <= 0 || N % 8)
        return plume_err(err, PLUME_ERR_INVALID,
                         "awq: %" PRId64 " columns: AWQ packs 8 output columns per int32 word, "
                         "so out_features must be a positive multiple of 8",
                         N);
    return 0;
}

int awq_pack(const uint8_t *codes, int64_t R, int64_t N, int32_t *words, plume_error *err)
{
    if (check_n(R, N, err))
        return -1;
    const int64_t W = N / 8;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < W; c++) {
            uint32_t w = 0;
            for (int i = 0; i < 8; i++) {
                const uint8_t v = codes[r * N + 8 * c + awq_order[i]];
                if (v > 15)
                    return plume_err(err, PLUME_ERR_RANGE,
                                     "awq: code %u at row %" PRId64 ", column %" PRId64
                                     " does not fit in 4 bits",
                                     v, r, 8 * c + awq_order[i]);
                w |= (uint32_t)v << (4 * i);
            }
            words[r * W + c] = (int32_t)w;
        }
    return 0;
}

int awq_unpack(const int32_t *words, int64_t R, int64_t N, uint8_t *codes, plume_error *err)
{
    if (check_n(R, N, err))
        return -1;
    for (int64_t r = 0; r < R; r++)
        for (int64_t n = 0; n < N; n++)
            codes[r * N + n] = (uint8_t)awq_code(words, N, r, n);
    return 0;
}

int awq_dequantize(const int32_t *qweight, const int32_t *qzeros, const float *scales, int64_t K,
                   int64_t N, int64_t group_size, float *W, plume_error *err)
{
    if (check_n(K, N, err))
        return -1;
    if (group_size <= 0 || K % group_size)
        return plume_err(err, PLUME_ERR_INVALID,
                         "awq: group_size %" PRId64 " must be positive and divide in_features %" PRId64,
                         group_size, K);
    for (int64_t k = 0; k < K; k++) {
        const int64_t g = k / group_size;
        for (int64_t n = 0; n < N; n++)
            W[n * K + k] = ((float)awq_code(qweight, N, k, n) - (float)awq_code(qzeros, N, g, n)) *
                           scales[g * N + n];
    }
    return 0;
}

int awq_to_gptq(const int32_t *awq_qweight, const int32_t *awq_qzeros, int64_t K, int64_t N,
                int64_t G, int32_t *gptq_qweight, int32_t *gptq_qzeros, plume_error *err)
{
    if (check_n(K, N, err))
        return -1;
    if (K % 8)
        return plume_err(err, PLUME_ERR_INVALID,
                         "awq: in_features %" PRId64 " must be a multiple of 8", K);
    /* codes in GPTQ's order: qweight rows are input rows k, 8 per word along
     * k; zeros 8 consecutive columns per word (formats.md §1.2) */
    for (int64_t r = 0; r < K / 8; r++)
        for (int64_t n = 0; n < N; n++) {
            uint32_t w = 0;
            for (int j = 0; j < 8; j++)
                w |= (uint32_t)awq_code(awq_qweight, N, 8 * r + j, n) << (4 * j);
            gptq_qweight[r * N + n] = (int32_t)w;
        }
    for (int64_t g = 0; g < G; g++)
        for (int64_t c = 0; c < N / 8; c++) {
            uint32_t w = 0;
            for (int j = 0; j < 8; j++)
                w |= (uint32_t)awq_code(awq_qzeros, N, g, 8 * c + j) << (4 * j);
            gptq_qzeros[g * (N / 8) + c] = (int32_t)w;
        }
    return 0;
}
