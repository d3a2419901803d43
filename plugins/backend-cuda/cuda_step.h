/* backend-cuda: a step's metadata packed into one int32 array, so that
 * step_begin copies it to the device in one transfer.  Plain C (no CUDA):
 * the CPU emulation packs steps with the same code. */
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

#endif
