/* quant-gptq: round-to-nearest quantization (formats.md §1.3, §1.4). */
#include "gptq_rtn.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int gptq_tensors_alloc(gptq_tensors *t, int64_t K, int64_t N, int64_t G, int bits)
{
    t->K = K;
    t->N = N;
    t->G = G;
    t->bits = bits;
    t->qweight = malloc((size_t)(gptq_packed_len(K, bits) * N) * sizeof(int32_t));
    t->qzeros = malloc((size_t)(G * gptq_packed_len(N, bits)) * sizeof(int32_t));
    t->scales = malloc((size_t)(G * N) * sizeof(float));
    t->g_idx = malloc((size_t)K * sizeof(int32_t));
    return t->qweight && t->qzeros && t->scales && t->g_idx ? 0 : -1;
}

void gptq_tensors_free(gptq_tensors *t)
{
    if (!t)
        return;
    free(t->qweight);
    free(t->qzeros);
    free(t->scales);
    free(t->g_idx);
    memset(t, 0, sizeof *t);
}

void gptq_find_params(const float *v, int64_t n, int maxq, bool sym, bool v1, float *scale,
                        int32_t *zero)
{
    float xmin = 0.0f, xmax = 0.0f; /* range always contains 0 */
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < xmin)
            xmin = v[i];
        if (v[i] > xmax)
            xmax = v[i];
    }
    if (sym) {
        xmax = fmaxf(fabsf(xmin), xmax);
        if (xmin < 0)
            xmin = -xmax;
    }
    if (xmin == 0.0f && xmax == 0.0f) {
        xmin = -1.0f;
        xmax = 1.0f;
    }
    float s = (xmax - xmin) / (float)maxq;
    int32_t z;
    if (sym) {
        z = (maxq + 1) / 2;
    } else {
        /* torch.round: half to even, as rintf in the default rounding mode */
        z = (int32_t)rintf(-xmin / s);
        if (z < 0)
            z = 0;
        if (z > maxq)
            z = maxq;
        if (v1 && z == 0) { /* see gptq_rtn.h: zero 0 is not storable in v1 */
            z = 1;
            s = xmax / (float)(maxq - 1);
        }
    }
    *scale = s;
    *zero = z;
}

int gptq_rtn_quantize(const float *W, int64_t N, int64_t K, const gptq_qconfig *cfg,
                      const int32_t *perm, gptq_tensors *out, plume_error *err)
{
    memset(out, 0, sizeof *out);
    if (gptq_check_bits(cfg->bits, err))
        return -1;
    int bits = cfg->bits, pf = gptq_pack_align(bits), maxq = (1 << bits) - 1;
    if (K <= 0 || N <= 0 || K % pf || N % pf)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq rtn: in_features %" PRId64 " and out_features %" PRId64
                         " must be positive multiples of %d for %d bits",
                         K, N, pf, bits);
    int64_t gs = cfg->group_size > 0 && cfg->group_size < K ? cfg->group_size : K;
    int64_t G = (K + gs - 1) / gs;
    const int alloc_rc = gptq_tensors_alloc(out, K, N, G, bits);
    int32_t *zeros = malloc((size_t)(G * N) * sizeof(int32_t));
    uint8_t *codes = malloc((size_t)(K * N));
    float *row = malloc((size_t)gs * sizeof(float));
    int32_t *inv = malloc((size_t)K * sizeof(int32_t));
    int rc = -1;
    if (alloc_rc || !zeros || !codes || !row || !inv) {
        plume_err(err, PLUME_ERR_NOMEM, "gptq rtn: out of memory");
        goto done;
    }
    if (perm) {
        for (int64_t k = 0; k < K; k++)
            inv[k] = -1;
        for (int64_t i = 0; i < K; i++) {
            if (perm[i] < 0 || perm[i] >= K || inv[perm[i]] != -1) {
                plume_err(err, PLUME_ERR_INVALID,
                          "gptq rtn: perm is not a permutation of 0..%" PRId64 " (entry %" PRId64
                          ")",
                          K - 1, i);
                goto done;
            }
            inv[perm[i]] = (int32_t)i;
        }
    } else {
        for (int64_t k = 0; k < K; k++)
            inv[k] = (int32_t)k;
    }
    /* §1.4: g_idx[k] = invperm[k] // g */
    for (int64_t k = 0; k < K; k++)
        out->g_idx[k] = (int32_t)(inv[k] / gs);
    for (int64_t g = 0; g < G; g++) {
        int64_t i0 = g * gs, i1 = i0 + gs < K ? i0 + gs : K;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t i = i0; i < i1; i++)
                row[i - i0] = W[n * K + (perm ? perm[i] : i)];
            float s;
            int32_t z;
            gptq_find_params(row, i1 - i0, maxq, cfg->sym, cfg->fmt == GPTQ_ZERO_V1, &s, &z);
            out->scales[g * N + n] = s;
            zeros[g * N + n] = z;
            for (int64_t i = i0; i < i1; i++) {
                float q = rintf(row[i - i0] / s) + (float)z;
                q = q < 0 ? 0 : q > (float)maxq ? (float)maxq : q;
                int64_t k = perm ? perm[i] : i; /* Q[:, invperm]: rows in original order */
                codes[k * N + n] = (uint8_t)q;
            }
        }
    }
    if (gptq_pack_qweight(codes, K, N, bits, out->qweight, err) ||
        gptq_pack_qzeros(zeros, G, N, bits, cfg->fmt, out->qzeros, err))
        goto done;
    rc = 0;
done:
    free(zeros);
    free(codes);
    free(row);
    free(inv);
    if (rc)
        gptq_tensors_free(out);
    return rc;
}
