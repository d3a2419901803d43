/* The activation buffers of the Llama-family layer pass, one row per
 * position: shared by the forward pass's runner and the quantizer's
 * calibration pass. */
#ifndef PLUME_MODEL_ACTIVATIONS_H
#define PLUME_MODEL_ACTIVATIONS_H

#include <stddef.h>

#include "model/config.h"

typedef struct plume_acts {
    float *x;     /* [n][n_embd] the residual stream */
    float *xn;    /* [n][max(n_embd, q_dim)] normed input, then a projection's output */
    float *q;     /* [n][q_dim] */
    float *k, *v; /* [n][kv_dim] */
    float *attn;  /* [n][q_dim] */
    float *gate;  /* [n][n_ff], SwiGLU's result in place */
    float *up;    /* [n][n_ff] */
} plume_acts;

/* Allocates every buffer for n positions of a model shaped c: 0, or -1
 * (nothing left allocated) when out of memory. */
int plume_acts_alloc(const plume_model_config *c, size_t n, plume_acts *a);

/* Frees them; a zeroed struct is a no-op. */
void plume_acts_free(plume_acts *a);

#endif
