/* Causal grouped-query attention over a paged KV cache. */
#ifndef PLUME_PAGED_ATTENTION_H
#define PLUME_PAGED_ATTENTION_H

#include <stdint.h>

#include "backend/cpu/threadpool.h"

/* One query row's context: its position and its sequence's block table. */
typedef struct plume_attn_row {
    int32_t pos;                /* keys 0..pos are attended */
    const int32_t *block_table;
} plume_attn_row;

/* For each of n_rows query rows (q: [n_rows][n_head*head_dim]) computes
 * softmax(q·Kᵀ·scale)·V over positions 0..rows[i].pos of its sequence
 * (window > 0: only rows[i].pos - window + 1 .. rows[i].pos), whose
 * K/V rows live at slot block_table[p / block_size] * block_size +
 * p % block_size of k_layer / v_layer (kv_dim = n_head_kv*head_dim values
 * per slot, f32 or, with kv_f16, binary16).  Online softmax, one pass over the keys; scratch holds
 * nth * head_dim floats. */
void plume_paged_attention(plume_pool *pool, const float *q, const void *k_layer,
                           const void *v_layer, int kv_f16, const plume_attn_row *rows, int32_t n_rows,
                           int32_t block_size, int n_head, int n_head_kv, int head_dim, float scale,
                           int window, float *out);

#endif
