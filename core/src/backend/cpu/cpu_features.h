/* CPU feature detection and the dispatch level chosen from it.
 *
 * Levels are cumulative: scalar runs anywhere; avx2 needs AVX2 + FMA + F16C;
 * avx512 needs AVX-512 F/BW/DQ/VL plus AVX-512 VNNI (vpdpbusd) on top of the
 * avx2 requirements; amx needs AMX-TILE and AMX-INT8 (the tile multiplies
 * of kernels_avx512.c's amx table) on top of avx512, and the kernel's
 * permission to use the tile data (arch_prctl ARCH_REQ_XCOMP_PERM on Linux),
 * which detection asks for once.  NEON is reported on arm64 but has no kernels yet, so
 * arm64 runs the scalar level. */
#ifndef PLUME_CPU_FEATURES_H
#define PLUME_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

#include "plume/cpu.h"
#include "plume/error.h"

typedef enum plume_cpu_level {
    PLUME_CPU_SCALAR = 0,
    PLUME_CPU_AVX2 = 1,
    PLUME_CPU_AVX512 = 2,
    PLUME_CPU_AMX = 3,
    PLUME_CPU_LEVEL_COUNT
} plume_cpu_level;

typedef struct plume_cpu_features {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512dq, avx512vl, avx512vnni, avxvnni;
    bool amx_int8; /* AMX-TILE + AMX-INT8, with the OS's permission granted */
    bool neon;
} plume_cpu_features;

/* What this CPU (and OS, for register state) supports; detected once,
 * thread-safe. */
const plume_cpu_features *plume_cpu_features_get(void);

/* The best level the CPU supports. */
plume_cpu_level plume_cpu_level_max(void);

/* True when the CPU can run kernels of this level; when not and why is
 * non-NULL, writes the missing features ("avx512vnni ...") there. */
bool plume_cpu_level_supported(plume_cpu_level level, char *why, size_t why_size);

/* "scalar", "avx2", "avx512", "amx". */
const char *plume_cpu_level_name(plume_cpu_level level);

/* Parses a PLUME_CPU_FEATURES value ("scalar", "avx2", "avx512", "amx") into
 * *out and checks that the CPU supports it; errors say what was accepted or
 * which features are missing. */
int plume_cpu_level_parse(const char *s, plume_cpu_level *out, plume_error *err);

/* plume_cpu_features_string is SDK: plume/cpu.h. */

#endif
