/* quant-gptq: GPTQ packing and dequantization (formats.md §1.2, §1.3, §1.5). */
#include "gptq_pack.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int gptq_check_bits(int bits, plume_error *err)
{
    if (bits == 2 || bits == 3 || bits == 4 || bits == 8)
        return 0;
    return plume_err(err, PLUME_ERR_UNSUPPORTED,
                     "gptq: bits = %d is not supported; supported: 2, 3, 4, 8", bits);
}

static int check_dims(int64_t rows, int64_t packed_dim, int bits, const char *what,
                      plume_error *err)
{
    if (gptq_check_bits(bits, err))
        return -1;
    int pf = gptq_pack_align(bits);
    if (rows < 0 || packed_dim <= 0 || packed_dim % pf != 0)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq: %s: the packed dimension (%" PRId64 ") must be a positive "
                         "multiple of %d for %d-bit codes",
                         what, packed_dim, pf, bits);
    return 0;
}

/* §1.2: code q[k][n] at bit b·k of column n's stream of qweight words
 * (for 2/4/8 bits: word k/pf, bits [b·(k%pf), ...], lowest row lowest). */
int gptq_pack_qweight(const uint8_t *codes, int64_t K, int64_t N, int bits, int32_t *qweight,
                      plume_error *err)
{
    if (check_dims(N, K, bits, "qweight (K)", err))
        return -1;
    uint32_t mask = (1u << bits) - 1u;
    memset(qweight, 0, (size_t)(gptq_packed_len(K, bits) * N) * sizeof *qweight);
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) {
            uint32_t c = codes[k * N + n];
            if (c > mask)
                return plume_err(err, PLUME_ERR_RANGE,
                                 "gptq: code %u at [%" PRId64 "][%" PRId64
                                 "] does not fit in %d bits",
                                 c, k, n, bits);
            gptq_put_field(qweight + n, N, bits, k, c);
        }
    return 0;
}

int gptq_unpack_qweight(const int32_t *qweight, int64_t K, int64_t N, int bits, uint8_t *codes,
                        plume_error *err)
{
    if (check_dims(N, K, bits, "qweight (K)", err))
        return -1;
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            codes[k * N + n] = (uint8_t)gptq_qweight_code(qweight, N, bits, k, n);
    return 0;
}

/* §1.2: stored zero of column n at bit b·n of group g's row of qzeros;
 * §1.3: v1 stored = zero − 1, v2 stored = zero. */
int gptq_pack_qzeros(const int32_t *zeros, int64_t G, int64_t N, int bits, gptq_zero_format fmt,
                     int32_t *qzeros, plume_error *err)
{
    if (check_dims(G, N, bits, "qzeros (N)", err))
        return -1;
    int64_t nw = gptq_packed_len(N, bits);
    int32_t off = fmt == GPTQ_ZERO_V1 ? 1 : 0;
    int32_t maxq = (1 << bits) - 1;
    memset(qzeros, 0, (size_t)(G * nw) * sizeof *qzeros);
    for (int64_t g = 0; g < G; g++)
        for (int64_t n = 0; n < N; n++) {
            int32_t z = zeros[g * N + n];
            int32_t st = z - off;
            if (st < 0 || st > maxq)
                return plume_err(err, PLUME_ERR_RANGE,
                                 "gptq: zero point %" PRId32 " of group %" PRId64
                                 ", column %" PRId64 " cannot be stored in the %s format "
                                 "with %d bits (stored %s must lie in [0, %" PRId32 "])",
                                 z, g, n, off ? "gptq (v1)" : "gptq_v2", bits,
                                 off ? "zero − 1" : "zero", maxq);
            gptq_put_field(qzeros + g * nw, 1, bits, n, (uint32_t)st);
        }
    return 0;
}

int gptq_unpack_qzeros(const int32_t *qzeros, int64_t G, int64_t N, int bits,
                       gptq_zero_format fmt, int32_t *zeros, plume_error *err)
{
    if (check_dims(G, N, bits, "qzeros (N)", err))
        return -1;
    int64_t nw = gptq_packed_len(N, bits);
    int32_t off = fmt == GPTQ_ZERO_V1 ? 1 : 0;
    for (int64_t g = 0; g < G; g++)
        for (int64_t n = 0; n < N; n++)
            zeros[g * N + n] = (int32_t)gptq_get_field(qzeros + g * nw, 1, bits, n) + off;
    return 0;
}

int64_t gptq_n_groups(int64_t K, int64_t group_size)
{
    if (group_size <= 0 || group_size >= K)
        return 1;
    return (K + group_size - 1) / group_size;
}

int gptq_check_layer_shape(const char *who, int64_t K, int64_t N, int64_t G, int bits,
                           int64_t group_size, plume_error *err)
{
    const int align = gptq_pack_align(bits);
    if (K <= 0 || N <= 0 || K % align || N % align)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: in_features %" PRId64 " and out_features %" PRId64
                         " must be positive multiples of %d for bits = %d",
                         who, K, N, align, bits);
    const int64_t want_g = gptq_n_groups(K, group_size);
    if (G != want_g)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "%s: scales/qzeros have %" PRId64 " groups but group_size = %" PRId64
                         " over %" PRId64 " inputs needs %" PRId64,
                         who, G, group_size, K, want_g);
    return 0;
}

void gptq_default_g_idx(int64_t K, int64_t group_size, int32_t *g_idx)
{
    for (int64_t k = 0; k < K; k++)
        g_idx[k] = group_size > 0 ? (int32_t)(k / group_size) : 0;
}

int gptq_check_g_idx(const int32_t *g_idx, int64_t K, int64_t G, plume_error *err)
{
    for (int64_t k = 0; k < K; k++)
        if (g_idx[k] < 0 || g_idx[k] >= G)
            return plume_err(err, PLUME_ERR_FORMAT,
                             "gptq: g_idx[%" PRId64 "] = %" PRId32
                             " is outside the %" PRId64 " groups of scales/qzeros",
                             k, g_idx[k], G);
    return 0;
}

int gptq_dequantize(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                    const int32_t *g_idx, int64_t K, int64_t N, int64_t G, int64_t group_size,
                    int bits, gptq_zero_format fmt, float *W, plume_error *err)
{
    if (check_dims(N, K, bits, "qweight (K)", err) || check_dims(G, N, bits, "qzeros (N)", err))
        return -1;
    if (g_idx && gptq_check_g_idx(g_idx, K, G, err))
        return -1;
    if (!g_idx && gptq_n_groups(K, group_size) > G)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: group_size %" PRId64 " needs %" PRId64 " groups, scales has %" PRId64,
                         group_size, gptq_n_groups(K, group_size), G);
    int32_t *zeros = malloc((size_t)(G * N) * sizeof *zeros);
    if (!zeros)
        return plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory");
    if (gptq_unpack_qzeros(qzeros, G, N, bits, fmt, zeros, err)) {
        free(zeros);
        return -1;
    }
    for (int64_t k = 0; k < K; k++) {
        int64_t g = g_idx ? g_idx[k] : (group_size > 0 ? k / group_size : 0);
        for (int64_t n = 0; n < N; n++) {
            int32_t q = (int32_t)gptq_qweight_code(qweight, N, bits, k, n);
            W[n * K + k] = scales[g * N + n] * (float)(q - zeros[g * N + n]);
        }
    }
    free(zeros);
    return 0;
}
