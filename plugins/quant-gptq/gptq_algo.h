/* quant-gptq: the GPTQ algorithm (Frantar et al. 2022) for one Linear, as
 * [gptq-ref] gptq.py `fasterquant` implements it (formats.md §1.7), with the
 * quantizer of §1.3 (the same find_params as gptq_rtn.c, including its v1
 * handling of an asym zero of 0) and the act-order / static-groups / g_idx
 * bookkeeping of §1.4.  Output: the checkpoint tensors of formats.md §1.1.
 *
 * Loss convention.  For a weight W ([N][K]) and its quantization Wq,
 *     loss = Σ_n (W_n − Wq_n) · H · (W_n − Wq_n)ᵀ
 * with H the caller's calibration Hessian 2/n·Σ x xᵀ, undamped and
 * unpermuted.  With H built from n calibration rows X ([n][K]) this is
 * 2/n · ||X Wᵀ − X Wqᵀ||²_F.  The reference's per-layer "error"
 * (sum(Losses)) is Σ (w − q)²/d²/2 over the damped, dead-fixed H, i.e.
 * half of this loss plus ½·damp·||W − Wq||² (and no dead columns): it is
 * not what gptq_quantize reports. */
#ifndef PLUME_GPTQ_ALGO_H
#define PLUME_GPTQ_ALGO_H

#include <stdbool.h>
#include <stdint.h>

#include "gptq_pack.h"
#include "gptq_rtn.h"
#include "plume/error.h"

typedef struct gptq_algo_params {
    int bits;             /* 2, 3, 4 or 8 */
    int64_t group_size;   /* <= 0 (-1): one group over all K inputs */
    bool sym;
    bool desc_act;        /* act-order: process inputs by descending diag(H) */
    bool static_groups;   /* group params from the original W, before any update */
    double damp_percent;  /* damp = damp_percent · mean(diag H); reference 0.01 */
    int block_size;       /* lazy-batch width; reference 128 */
    gptq_zero_format fmt; /* how qzeros are stored */
} gptq_algo_params;

/* The reference's defaults for bits, group_size and sym: desc_act and
 * static_groups off, damp_percent 0.01, block_size 128, fmt v1. */
gptq_algo_params gptq_algo_defaults(int bits, int64_t group_size, bool sym);

/* GPTQ-quantizes W ([N][K] f32, nn.Linear.weight order) against the
 * calibration Hessian H ([K][K] double, symmetric; both triangles are read,
 * H is not modified).  Fills out (malloc'd tensors, free with
 * gptq_tensors_free; scales/qzeros rows are the groups in processing order,
 * g_idx as §1.4: invperm[k]/g with act-order, k/g with static groups or
 * without act-order), Wq ([N][K], caller-allocated) with the dequantized
 * result (bit-identical to gptq_dequantize of out), and *loss (may be NULL)
 * with the loss above.  Steps as the reference: dead inputs (H_kk == 0) get
 * H_kk = 1 and W[:, k] = 0; act-order permutation = stable sort by
 * descending diag(H); damp added to the diagonal; Hinv = the upper Cholesky
 * factor U of H⁻¹ (computed as U = V⁻¹ from H = V·Vᵀ, V upper — the same
 * matrix as cholesky → cholesky_inverse → cholesky(upper)); lazy blocks of
 * block_size columns; without static groups a group's params come from W
 * as it stands at its first column (earlier blocks' updates included, the
 * current block's in-block updates not — exactly as the reference).
 * Requires K and N positive multiples of gptq_pack_align(bits).  Errors:
 * PLUME_ERR_INVALID for bad parameters or non-finite inputs,
 * PLUME_ERR_RANGE when the damped H is not positive definite (the message
 * suggests a larger --damp), PLUME_ERR_NOMEM. */
int gptq_quantize(const float *W, int64_t N, int64_t K, const double *H,
                  const gptq_algo_params *p, gptq_tensors *out, float *Wq, double *loss,
                  plume_error *err);

/* Σ_n (W_n − Wq_n) · H · (W_n − Wq_n)ᵀ for any Wq (e.g. RTN's), with the
 * full symmetric H ([K][K]) unchanged.  NAN if scratch memory runs out. */
double gptq_output_error(const float *W, const float *Wq, int64_t N, int64_t K, const double *H);

/* In place: A ([K][K], symmetric positive definite, both triangles read)
 * becomes the upper Cholesky factor U of A⁻¹ (A⁻¹ = Uᵀ·U, lower triangle
 * zeroed).  On a non-positive pivot: -1 with PLUME_ERR_RANGE and a message
 * naming the pivot (A is then garbage).  It is the Hinv step of
 * gptq_quantize, exported for tests. */
int gptq_hinv_chol(double *A, int64_t K, plume_error *err);

#endif
