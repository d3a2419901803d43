/* quant-gptq: round-to-nearest (RTN) quantization of an f32 weight into the
 * GPTQ tensors, with the quantizer of formats.md §1.3 (find_params /
 * quantize of [gptq-ref] quant.py) and the act-order bookkeeping of §1.4.
 * It is the baseline for `plume quantize --method rtn` and
 * the source of test weights; it is not the GPTQ algorithm (§1.7). */
#ifndef PLUME_GPTQ_RTN_H
#define PLUME_GPTQ_RTN_H

#include <stdbool.h>
#include <stdint.h>

#include "gptq_pack.h"
#include "plume/error.h"

typedef struct gptq_qconfig {
    int bits;               /* 2, 3, 4 or 8 */
    int64_t group_size;     /* -1 (or 0): one group over all K inputs */
    bool sym;
    gptq_zero_format fmt;   /* how qzeros are stored */
} gptq_qconfig;

/* The tensors of one quantized Linear, in checkpoint layout (formats.md
 * §1.1), all malloc'd.  scales are f32 here (checkpoints usually hold F16). */
typedef struct gptq_tensors {
    int64_t K, N, G;
    int bits;
    int32_t *qweight; /* [K·bits/32][N] */
    int32_t *qzeros;  /* [G][N·bits/32] */
    float *scales;    /* [G][N] */
    int32_t *g_idx;   /* [K] */
} gptq_tensors;

/* Sets t's shape and allocates its four arrays for a K x N layer of G
 * groups at bits bits; 0, or -1 when one allocation failed (the caller says
 * so; gptq_tensors_free frees what was allocated). */
int gptq_tensors_alloc(gptq_tensors *t, int64_t K, int64_t N, int64_t G, int bits);
void gptq_tensors_free(gptq_tensors *t);

/* The quantizer's find_params (§1.3, [gptq-ref] quant.py) over the values
 * v[0..n) of one output row and group: the range always includes 0; sym:
 * zero = (maxq + 1) / 2 and the range made symmetric, [−m, m] with
 * m = max|v|, when it holds negatives; scale = range / maxq; asym: scale = (max −
 * min) / maxq, zero = round(−min / scale) (half to even, as torch.round).
 * An all-zero range becomes [−1, 1].  With v1 an asym zero of 0 is not
 * storable (§1.3), so zero = 1 and scale = max / (maxq − 1).  Shared by RTN
 * and GPTQ so that they agree bit for bit where they should. */
void gptq_find_params(const float *v, int64_t n, int maxq, bool sym, bool v1, float *scale,
                      int32_t *zero);

/* Quantizes W ([N][K], nn.Linear.weight order) group by group.  perm (NULL:
 * identity) is an act-order: perm[i] is the input channel processed i-th;
 * groups are consecutive blocks of group_size channels in that order and
 * g_idx[k] = invperm[k] / group_size (§1.4), while qweight rows stay in the
 * original input order.  Scale and zero per output row and group as §1.3's
 * find_params (range always includes 0; sym: zero = 2^(b−1); asym: zero =
 * round(−xmin/scale)); code = clamp(round(w/scale) + zero, 0, maxq).
 *
 * With fmt = GPTQ_ZERO_V1 and asym, a zero of 0 is not storable (§1.3); for
 * such a group this quantizer uses zero = 1 and scale = xmax/(maxq − 1)
 * (the range [−scale, xmax] still covers the group) — a deliberate
 * deviation so that every checkpoint it writes reads back exactly.
 * Requires K and N multiples of gptq_pack_align(bits) (32/bits; 32 for 3). */
int gptq_rtn_quantize(const float *W, int64_t N, int64_t K, const gptq_qconfig *cfg,
                      const int32_t *perm, gptq_tensors *out, plume_error *err);

#endif
