/* plume_acts: allocation of the layer pass's activation buffers. */
#include "model/activations.h"

#include <stdlib.h>
#include <string.h>

int plume_acts_alloc(const plume_model_config *c, size_t n, plume_acts *a)
{
    const size_t E = (size_t)c->n_embd, Q = (size_t)c->n_head * (size_t)c->head_dim,
                 KV = (size_t)c->n_head_kv * (size_t)c->head_dim, F = (size_t)c->n_ff;
    memset(a, 0, sizeof *a);
    a->x = malloc(sizeof(float) * n * E);
    a->xn = malloc(sizeof(float) * n * (E > Q ? E : Q));
    a->q = malloc(sizeof(float) * n * Q);
    a->k = malloc(sizeof(float) * n * KV);
    a->v = malloc(sizeof(float) * n * KV);
    a->attn = malloc(sizeof(float) * n * Q);
    a->gate = malloc(sizeof(float) * n * F);
    a->up = malloc(sizeof(float) * n * F);
    if (a->x && a->xn && a->q && a->k && a->v && a->attn && a->gate && a->up)
        return 0;
    plume_acts_free(a);
    return -1;
}

void plume_acts_free(plume_acts *a)
{
    free(a->x);
    free(a->xn);
    free(a->q);
    free(a->k);
    free(a->v);
    free(a->attn);
    free(a->gate);
    free(a->up);
    memset(a, 0, sizeof *a);
}
