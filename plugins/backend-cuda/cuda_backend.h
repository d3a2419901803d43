/* backend-cuda: the "cuda" backend's vtable and what the plugin entry,
 * the bench hook and the tests reach besides it. */
#ifndef PLUME_CUDA_BACKEND_H
#define PLUME_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "plume/backend.h"

extern const plume_backend_vtable ck_backend_vtable;

/* true when device 0 exists and can run the kernels; else false with why
 * ("no CUDA device (...)" or the architecture mismatch) filled. */
bool ck_device_usable(char *why, size_t n);

/* Microbenchmarks on an instance: streaming read bandwidth over a buffer
 * of bytes (GB/s), and the cuBLAS f16 GEMM rate (n x n x n, f32
 * accumulation; TFLOP/s); reps timed runs after a warm-up. */
int ck_bench_read_bandwidth(plume_backend *b, size_t bytes, int reps, double *gbs,
                            plume_error *err);
int ck_bench_f16_gemm(plume_backend *b, int n, int reps, double *tflops, plume_error *err);

#endif
