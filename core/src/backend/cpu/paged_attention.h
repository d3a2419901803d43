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

/* Memory plume_paged_attention keeps between calls (grown, never shrunk,
 * so that a steady stream of steps allocates nothing).  Start zeroed. */
typedef struct plume_attn_scratch {
    void *tiles;
    size_t tiles_cap;
    float *part; /* split-K partials */
    size_t part_cap;
} plume_attn_scratch;
void plume_attn_scratch_free(plume_attn_scratch *s);

/* For each of n_rows query rows (q: [n_rows][n_head*head_dim]) computes
 * softmax(q·Kᵀ·scale)·V over positions 0..rows[i].pos of its sequence
 * (window > 0: only rows[i].pos - window + 1 .. rows[i].pos), whose K/V
 * rows live at slot block_table[p / block_size] * block_size + p %
 * block_size of k_layer / v_layer: stride elements per slot, head_stride
 * per kv head, of kv_type (dispatch.h: PLUME_KV_TYPE_*; elements are bytes
 * for int8, each head's scale PLUME_KV_I8_SCALE_AT(head_dim) after it).  Consecutive rows of a sequence
 * form tiles; each KV head's keys are read once per tile for its whole GQA
 * group.  With few tiles over more than one chunk of keys
 * (PLUME_ATTN_CHUNK), the chunks are spread over the threads (split-K) and
 * their partials merged in chunk order: every row's result is the same
 * bits however the rows are batched, tiled, split or threaded.  sinks:
 * NULL, or n_head logits (gpt-oss's attention sinks) that join each query
 * head's softmax denominator: O / (L + exp(sink - M)).  Returns 0, or -1
 * when s cannot grow (out of memory). */
int plume_paged_attention(plume_pool *pool, plume_attn_scratch *s, const float *q,
                          const void *k_layer, const void *v_layer, int kv_type, int64_t stride,
                          int64_t head_stride, const plume_attn_row *rows, int32_t n_rows, int32_t block_size,
                          int n_head, int n_head_kv, int head_dim, float scale, int window,
                          const float *sinks, float *out);

#endif
