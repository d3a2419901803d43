/* The AWQ searches (Lin et al. 2023; formats.md §2.5 and AutoAWQ's
 * awq/quantize/quantizer.py _search_best_scale / _compute_best_clip, read
 * and rewritten): per-input-channel scales for a group of linears sharing
 * an input, and per-(row, group) clipping ranges.  Both are scored by the
 * output error on the calibration tokens, measured exactly through their
 * Hessian H = (2/n)·Σ x xᵀ: for a weight change D (rows [N][K]),
 * Σ_t |x_t Dᵀ|² · 2/n = Σ_rows d H dᵀ — what AutoAWQ computes by running
 * the tokens through the linears, at a cost independent of their number. */
#ifndef PLUME_QUANT_AWQ_SEARCH_H
#define PLUME_QUANT_AWQ_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "plume/backend.h"
#include "plume/error.h"

/* AutoAWQ's 4-bit min-max quantizer with zero points (formats.md §2.3), as
 * the checkpoint stores it (scales rounded to F16): out = what w [N][K]
 * dequantizes to, per row and group of gs inputs (K a multiple of gs). */
void awq_fake_quant(const float *w, int64_t N, int64_t K, int64_t gs, float *out);

/* A Hessian ready for quadratic forms.  With a backend (bvt, b non-NULL)
 * the products D·H run as f32 matrix products there; else in plain C. */
typedef struct awq_hess awq_hess;
int awq_hess_create(const double *H, int64_t K, const plume_backend_vtable *bvt, plume_backend *b,
                    awq_hess **out, plume_error *err);
void awq_hess_free(awq_hess *h);
/* *loss = Σ_r D[r] H D[r]ᵀ over rows r < n_rows of D [n_rows][K]. */
int awq_hess_loss(awq_hess *h, const float *D, int64_t n_rows, double *loss, plume_error *err);

/* What a scale search found. */
typedef struct awq_scale_result {
    double ratio;      /* the best α of the grid, or -1 when no scaling (s = 1) won */
    double loss;       /* output error of the chosen scales */
    double loss_plain; /* output error of plain round-to-nearest (s = 1) */
} awq_scale_result;

/* The scale search for the linears whose rows are stacked in W [N][K] (all
 * taking the same input, e.g. q, k and v): x_mean[k] = mean |x_k| over the
 * calibration tokens.  For α in {0, 1/20, ..., 19/20} (AutoAWQ's
 * duo_scaling): s = max(x_mean^α / (w_mean^(1−α) + 1e-4), 1e-4), where
 * w_mean[k] = mean over rows of |W[n][k]| / max |W[n][group of k]|, then
 * s /= sqrt(max s · min s) (non-finite entries -> 1); the error of
 * W → Q(W·diag s)·diag(1/s) is scored with h.  One more candidate, s = 1,
 * keeps plain rounding when no α beats it (AutoAWQ always scales; this
 * only ever lowers the error).  s [K] gets the winner. */
int awq_search_scales(const float *W, int64_t N, int64_t K, int64_t gs, const float *x_mean,
                      awq_hess *h, float *s, awq_scale_result *res, plume_error *err);

/* The clipping search on W [N][K] (already scaled) with the Hessian H [K][K]
 * of its (scaled) input: for each row and group, max_val = amax·(1 − i/20)
 * for i < 10, W clamped to ±max_val and quantized; the max_val with the
 * least error d H_gg dᵀ of that group's outputs (d = Q(clamped) − W) wins,
 * and W is clamped to it in place.  *before / *after (may be NULL): the
 * error summed over groups without clipping / with the chosen clip. */
int awq_search_clip(float *W, int64_t N, int64_t K, int64_t gs, const double *H, double *before,
                    double *after, plume_error *err);

#endif
