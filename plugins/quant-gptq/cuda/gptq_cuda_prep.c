/* quant-gptq CUDA: host-side preparation of a layer for the device layout
 * of gptq_cuda_internal.h — checks, the act-order permutation and repack,
 * the sorted group index and group ends, the unpacked zero points.  Pure C
 * (no CUDA calls), so the CPU emulation test can use it as is. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gptq_cuda_dev.h"

void gptq_cuda_host_layout_free(gptq_cuda_host_layout *h)
{
    free(h->qweight);
    free(h->perm);
    free(h->gs);
    free(h->gend);
    free(h->zeros);
    memset(h, 0, sizeof *h);
}

int gptq_cuda_prepare(const gptq_cuda_layer_desc *d, gptq_cuda_host_layout *h, plume_error *err)
{
    memset(h, 0, sizeof *h);
    if (!d || !d->qweight || !d->qzeros || !d->scales)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq-cuda: upload needs qweight, qzeros and scales");
    if (gptq_check_bits(d->bits, err))
        return plume_err_prefix(err, "gptq-cuda");
    if (d->fmt != GPTQ_ZERO_V1 && d->fmt != GPTQ_ZERO_V2)
        return plume_err(err, PLUME_ERR_INVALID,
                         "gptq-cuda: zero format must be v1 (gptq) or v2 (gptq_v2), got %d",
                         (int)d->fmt);
    const int64_t K = d->K, N = d->N, G = d->G;
    const int bits = d->bits;
    if (gptq_check_layer_shape("gptq-cuda", K, N, G, bits, d->group_size, err))
        return -1;
    if (K > INT32_MAX / 2 || N > INT32_MAX / 2)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "gptq-cuda: a %" PRId64 "x%" PRId64 " layer is too large (each "
                         "dimension must be below 2^30)",
                         N, K);
    if (d->g_idx && gptq_check_g_idx(d->g_idx, K, G, err))
        return plume_err_prefix(err, "gptq-cuda");

    const int64_t qrows = gptq_packed_len(K, bits);
    int32_t *zeros = malloc((size_t)(G * N) * sizeof *zeros);
    h->gs = malloc((size_t)K * sizeof *h->gs);
    h->gend = calloc((size_t)G, sizeof *h->gend);
    h->zeros = malloc((size_t)(G * N) * sizeof *h->zeros);
    if (!zeros || !h->gs || !h->gend || !h->zeros) {
        plume_err(err, PLUME_ERR_NOMEM, "gptq-cuda: out of memory preparing a %" PRId64
                  "x%" PRId64 " layer", N, K);
        goto fail;
    }
    if (gptq_unpack_qzeros(d->qzeros, G, N, bits, d->fmt, zeros, err)) {
        plume_err_prefix(err, "gptq-cuda");
        goto fail;
    }
    for (int64_t i = 0; i < G * N; i++)
        h->zeros[i] = (uint16_t)zeros[i]; /* 0 ≤ zero ≤ 2^bits ≤ 256 */

    /* Act-order: a stable counting sort of the inputs by group (the CPU
     * reference's perm, formats.md §1.4), when g_idx is not monotone. */
    bool monotone = true;
    if (d->g_idx)
        for (int64_t k = 1; k < K && monotone; k++)
            monotone = d->g_idx[k] >= d->g_idx[k - 1];
    if (!monotone) {
        h->perm = malloc((size_t)K * sizeof *h->perm);
        int64_t *cnt = calloc((size_t)G + 1, sizeof *cnt);
        h->qweight = calloc((size_t)(qrows * N), sizeof *h->qweight);
        if (!h->perm || !cnt || !h->qweight) {
            free(cnt);
            plume_err(err, PLUME_ERR_NOMEM, "gptq-cuda: out of memory repacking a %" PRId64
                      "x%" PRId64 " act-order layer", N, K);
            goto fail;
        }
        for (int64_t k = 0; k < K; k++)
            cnt[d->g_idx[k] + 1]++;
        for (int64_t g = 0; g < G; g++)
            cnt[g + 1] += cnt[g];
        for (int64_t k = 0; k < K; k++)
            h->perm[cnt[d->g_idx[k]]++] = (int32_t)k;
        free(cnt);
        /* sorted row i <- input row perm[i]; same bit-stream packing */
        for (int64_t i = 0; i < K; i++)
            for (int64_t n = 0; n < N; n++)
                gptq_put_field(h->qweight + n, N, bits, i,
                               gptq_qweight_code(d->qweight, N, bits, h->perm[i], n));
    }
    for (int64_t i = 0; i < K; i++) {
        const int64_t k = h->perm ? h->perm[i] : i;
        h->gs[i] = d->g_idx ? d->g_idx[k]
                            : (int32_t)(d->group_size > 0 ? k / d->group_size : 0);
    }
    /* gend[g] = number of sorted rows with group ≤ g (gs is non-decreasing;
     * empty groups get the end of the previous one and are never looked up) */
    for (int64_t i = 0; i < K; i++)
        h->gend[h->gs[i]] = (int32_t)(i + 1);
    for (int64_t g = 1; g < G; g++)
        if (h->gend[g] < h->gend[g - 1])
            h->gend[g] = h->gend[g - 1];
    free(zeros);
    return 0;
fail:
    free(zeros);
    gptq_cuda_host_layout_free(h);
    return -1;
}

void gptq_cuda_gemv_plan(int64_t K, int64_t N, int sm_count, int64_t *ksplit,
                         int64_t *tiles_per_split)
{
    const int64_t ntiles = (K + GPTQ_CUDA_GEMV_KT - 1) / GPTQ_CUDA_GEMV_KT;
    const int64_t nbx = (N + GPTQ_CUDA_GEMV_NCOL - 1) / GPTQ_CUDA_GEMV_NCOL;
    const int64_t target = 4 * (int64_t)(sm_count > 0 ? sm_count : 1);
    int64_t ks = (target + nbx - 1) / nbx;
    if (ks > ntiles)
        ks = ntiles;
    if (ks > 1024)
        ks = 1024;
    if (ks < 1)
        ks = 1;
    const int64_t tps = (ntiles + ks - 1) / ks;
    *ksplit = (ntiles + tps - 1) / tps;
    *tiles_per_split = tps;
}

int64_t gptq_cuda_slab_cols(int64_t K, int64_t N, size_t elt, size_t reserved, size_t limit)
{
    int64_t nb = N;
    if ((size_t)K * (size_t)N * elt + reserved > limit) {
        const size_t room = limit > reserved ? limit - reserved : 0;
        nb = (int64_t)(room / ((size_t)K * elt)) / GPTQ_CUDA_SLAB_ALIGN * GPTQ_CUDA_SLAB_ALIGN;
        if (nb < GPTQ_CUDA_SLAB_ALIGN)
            nb = GPTQ_CUDA_SLAB_ALIGN;
        if (nb > N)
            nb = N;
    }
    return nb;
}
