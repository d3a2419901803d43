/* Calibration statistics: the Hessian of a linear layer's input. */
#ifndef PLUME_QUANT_HESSIAN_H
#define PLUME_QUANT_HESSIAN_H

#include <stdint.h>

#include "plume/backend.h"
#include "plume/error.h"

/* H = (2/n) Σ_t x_t x_tᵀ over the n rows of x ([n][K], f32, host), into the
 * caller's H ([K][K], double, overwritten).  The products run on backend b
 * as f32 matrix products over chunks of rows, summed in double. */
int plume_hessian(const plume_backend_vtable *bvt, plume_backend *b, const float *x, int64_t n,
                  int64_t K, double *H, plume_error *err);

#endif
