/* plume — for a plugin's x86 host kernels: compiling part of a file for
 * one of the core's dispatch levels (plume/cpu.h).  The int8 building
 * blocks the core's own kernels are made of are in plume/cpu_x86_avx2.h
 * and plume/cpu_x86_avx512.h, to be included inside such a region, so that
 * a plugin's kernels use the same instructions without copying them.
 *
 * Use, in a file whose kernels run only after
 * plume_cpu_can_run(PLUME_CPU_LEVEL_AVX512):
 *
 *     #include "plume/cpu_x86.h"
 *     PLUME_X86_TARGET_BEGIN(PLUME_X86_TARGET_AVX512)
 *     #include "plume/cpu_x86_avx512.h"
 *     ... kernels ...
 *     PLUME_X86_TARGET_END
 *
 * Every function defined between the two macros is compiled for that
 * instruction set whatever the build's -march (GCC: target pragma inside
 * push_options/pop_options; clang: an attribute pushed on functions).
 * Header only: nothing here is linked. */
#ifndef PLUME_CPU_X86_H
#define PLUME_CPU_X86_H

/* The instruction sets of the dispatch levels, as target strings (cumulative,
 * as the levels are).  PLUME_CPU_LEVEL_AVX2 needs AVX2 + FMA + F16C; _AVX512
 * adds AVX-512 F/BW/DQ/VL and VNNI; _AMX adds the AMX tiles and their int8
 * multiply. */
#define PLUME_X86_TARGET_AVX2 "avx2,fma,f16c"
#define PLUME_X86_TARGET_AVX512 "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni"
#define PLUME_X86_TARGET_AMX                                                                  \
    "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,amx-tile,amx-int8"

/* 1 where the compiler knows the AMX tiles' target names and intrinsics
 * (GCC 11, clang 12 on): only then may PLUME_X86_TARGET_AMX be used. */
#if (defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11)
#define PLUME_X86_HAVE_AMX_TARGET 1
#else
#define PLUME_X86_HAVE_AMX_TARGET 0
#endif

#define PLUME_X86_PRAGMA(x) _Pragma(#x)

/* Starts a region whose functions are compiled for the target string t
 * (one of the PLUME_X86_TARGET_ strings, or any list the compiler knows);
 * PLUME_X86_TARGET_END ends it.  Regions do not nest. */
#if defined(__clang__)
#define PLUME_X86_TARGET_BEGIN(t)                                                             \
    PLUME_X86_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define PLUME_X86_TARGET_END PLUME_X86_PRAGMA(clang attribute pop)
#else
#define PLUME_X86_TARGET_BEGIN(t) PLUME_X86_PRAGMA(GCC push_options) PLUME_X86_PRAGMA(GCC target(t))
#define PLUME_X86_TARGET_END PLUME_X86_PRAGMA(GCC pop_options)
#endif

#endif
