/* backend-cuda: host-side metadata for the kernels, packed so that each
 * op copies it to the device in one transfer: a step's rows and block
 * tables, and a mixture-of-experts scatter's or segmented matmul's index
 * arrays.  Plain C (no CUDA): the CPU emulation packs with the same code. */
#ifndef PLUME_CUDA_STEP_H
#define PLUME_CUDA_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_bodies.h"
#include "plume/backend.h"

/* int32 elements ck_step_pack writes for st. */
size_t ck_step_size(const plume_step *st);

/* Writes [tokens][pos][slots][bt_off][out_rows][block tables] into h
 * (ck_step_size(st) elements): bt_off[r] is where row r's sequence's
 * table starts in the concatenated tables. */
void ck_step_pack(const plume_step *st, int32_t *h);

/* The ck_step view of a packed array at base (host or device memory). */
ck_step ck_step_view(const int32_t *base, const plume_step *st);

/* The scatter-add of idx[0..n) as destinations (ck_scatter_add): each
 * distinct value of idx once, in first-use order, in row[0..n_u); the i
 * with idx[i] == row[u], ascending, in list[start[u] .. start[u+1]).
 * row, start and list must hold n, n + 1 and n int32; at is scratch of
 * max(idx) + 2 int32, zeroed by the caller.  Returns n_u; idx values must
 * be >= 0. */
int32_t ck_scatter_plan(const int32_t *idx, int32_t n, int32_t *at, int32_t *row, int32_t *start,
                        int32_t *list);

/* The tasks of a segmented row matmul over segments off[s] .. off[s+1]
 * (n_seg + 1 ascending offsets): each non-empty segment, in order, gets
 * the next active index a, and its rows go in tasks of CK_GEMV_ROWS (the
 * last shorter).  tasks == NULL only counts.  Returns the task count;
 * *n_act gets the number of non-empty segments. */
int32_t ck_seg_plan(const int32_t *off, int32_t n_seg, ck_seg_task *tasks, int32_t *n_act);

#endif
