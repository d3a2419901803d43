/* plume — the CPU facts a plugin's host kernels need to match the core's:
 * which dispatch level the core runs at, and the core's per-token int8
 * activation quantizer.
 *
 * Levels are cumulative, as in the core's kernels (docs/cpu-backend.md):
 * PLUME_CPU_LEVEL_SCALAR runs anywhere; _AVX2 needs AVX2 + FMA + F16C;
 * _AVX512 needs AVX-512 F/BW/DQ/VL and AVX-512 VNNI on top; _AMX adds
 * the AMX-INT8 tiles (and the OS's permission to use them), with which the
 * core's Q4_0 and Q8_0 matmuls of many tokens run, with the avx512 level's
 * bits.  A plugin without an amx table uses its avx512 one there.  A plugin
 * compiles its AVX2 / AVX-512 kernels with function-level target
 * attributes and picks the table for plume_cpu_active_level(), so the
 * PLUME_CPU_FEATURES override reaches its kernels too. */
#ifndef PLUME_CPU_H
#define PLUME_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLUME_CPU_LEVEL_SCALAR 0
#define PLUME_CPU_LEVEL_AVX2 1
#define PLUME_CPU_LEVEL_AVX512 2
#define PLUME_CPU_LEVEL_AMX 3

/* The level the core's kernels run at in this process: the CPU's best, or
 * the one PLUME_CPU_FEATURES names (scalar, avx2, avx512, amx) when set and
 * supported.  Chosen once; thread-safe. */
PLUME_API int plume_cpu_active_level(void);

/* True when this CPU (and OS) can run kernels of the given level. */
PLUME_API bool plume_cpu_can_run(int level);

/* "scalar", "avx2", "avx512", "amx" ("?" for anything else). */
PLUME_API const char *plume_cpu_level_str(int level);

/* True when PLUME_CPU_ACTIVATIONS=f32 asked for float activations (the
 * core's reference mode); kernels that quantize activations should then
 * compute in float too. */
PLUME_API bool plume_cpu_float_activations(void);

/* The core's activation quantizer: one token's K values (K % 32 == 0) in
 * blocks of 32, each with its own scale from that block's values only:
 * x[i] ≈ d[i/32] · q[i], q in [−127, 127], and s[b] = d[b] · Σ q over
 * block b.  Bit-identical at every level. */
PLUME_API void plume_cpu_quantize_q8(const float *x, int64_t K, int8_t *q, float *d, float *s);

/* Default worker count: PLUME_THREADS when set to a positive integer (an
 * invalid value is reported on stderr once and ignored), else the number of
 * physical cores this process may run on (SMT siblings counted once, from
 * /sys/devices/system/cpu/cpuN/topology), else the online CPUs.  At least 1.
 * The forward pass uses this when it is asked for 0 threads. */
PLUME_API int plume_cpu_count(void);

/* Writes the space-separated list of the CPU features plume detected
 * ("avx2 fma f16c ...") into buf, NUL-terminated and cut to size. */
PLUME_API void plume_cpu_features_string(char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
