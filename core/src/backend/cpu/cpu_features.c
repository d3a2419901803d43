/* CPU feature detection (cpuid through GCC/clang's __builtin_cpu_supports,
 * which also checks that the OS saves the vector registers). */
#include "backend/cpu/cpu_features.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static plume_cpu_features g_features;       /* written once under g_once */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* AMX-TILE and AMX-INT8 in cpuid (leaf 7: edx bits 24 and 25), the tile
 * state enabled in XCR0 (bits 17 and 18), and Linux's permission for this
 * process to use the tile data (granted once for all its threads; without
 * it the first tile instruction faults).  False elsewhere. */
static bool amx_usable(void)
{
#if defined(__x86_64__) && defined(__linux__) && defined(SYS_arch_prctl)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
        return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
        return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17))
        return false;
    const long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static void detect(void)
{
    plume_cpu_features *f = &g_features;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f->avx2 = __builtin_cpu_supports("avx2");
    f->fma = __builtin_cpu_supports("fma");
    f->f16c = __builtin_cpu_supports("f16c");
    f->avx512f = __builtin_cpu_supports("avx512f");
    f->avx512bw = __builtin_cpu_supports("avx512bw");
    f->avx512dq = __builtin_cpu_supports("avx512dq");
    f->avx512vl = __builtin_cpu_supports("avx512vl");
    f->avx512vnni = __builtin_cpu_supports("avx512vnni");
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
    f->avxvnni = __builtin_cpu_supports("avxvnni");
#endif
    f->amx_int8 = f->avx512vnni && amx_usable();
#elif defined(__aarch64__)
    f->neon = true; /* mandatory in AArch64 */
#endif
}

const plume_cpu_features *plume_cpu_features_get(void)
{
    pthread_once(&g_once, detect);
    return &g_features;
}

static void add_missing(char *why, size_t size, bool have, const char *name)
{
    if (have || !why)
        return;
    size_t len = strlen(why);
    snprintf(why + len, size - len, "%s%s", len ? " " : "", name);
}

bool plume_cpu_level_supported(plume_cpu_level level, char *why, size_t why_size)
{
    const plume_cpu_features *f = plume_cpu_features_get();
    if (why && why_size)
        why[0] = '\0';
    bool ok = true;
    if (level >= PLUME_CPU_AVX2) {
        add_missing(why, why_size, f->avx2, "avx2");
        add_missing(why, why_size, f->fma, "fma");
        add_missing(why, why_size, f->f16c, "f16c");
        ok = ok && f->avx2 && f->fma && f->f16c;
    }
    if (level >= PLUME_CPU_AVX512) {
        add_missing(why, why_size, f->avx512f, "avx512f");
        add_missing(why, why_size, f->avx512bw, "avx512bw");
        add_missing(why, why_size, f->avx512dq, "avx512dq");
        add_missing(why, why_size, f->avx512vl, "avx512vl");
        add_missing(why, why_size, f->avx512vnni, "avx512vnni");
        ok = ok && f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl && f->avx512vnni;
    }
    if (level >= PLUME_CPU_AMX) {
        add_missing(why, why_size, f->amx_int8, "amx-int8");
        ok = ok && f->amx_int8;
    }
    if (level >= PLUME_CPU_LEVEL_COUNT)
        ok = false;
    return ok;
}

plume_cpu_level plume_cpu_level_max(void)
{
    plume_cpu_level best = PLUME_CPU_SCALAR;
    for (int l = PLUME_CPU_AVX2; l < PLUME_CPU_LEVEL_COUNT; l++)
        if (plume_cpu_level_supported((plume_cpu_level)l, NULL, 0))
            best = (plume_cpu_level)l;
    return best;
}

const char *plume_cpu_level_name(plume_cpu_level level)
{
    switch (level) {
    case PLUME_CPU_SCALAR: return "scalar";
    case PLUME_CPU_AVX2: return "avx2";
    case PLUME_CPU_AVX512: return "avx512";
    case PLUME_CPU_AMX: return "amx";
    default: return "unknown";
    }
}

int plume_cpu_level_parse(const char *s, plume_cpu_level *out, plume_error *err)
{
    for (int l = 0; l < PLUME_CPU_LEVEL_COUNT; l++) {
        if (strcmp(s, plume_cpu_level_name((plume_cpu_level)l)) != 0)
            continue;
        char why[128];
        if (!plume_cpu_level_supported((plume_cpu_level)l, why, sizeof why))
            return plume_err(err, PLUME_ERR_UNSUPPORTED,
                             "PLUME_CPU_FEATURES=%s asks for more than this CPU has (missing: %s); "
                             "the best level here is %s",
                             s, why, plume_cpu_level_name(plume_cpu_level_max()));
        *out = (plume_cpu_level)l;
        return 0;
    }
    return plume_err(err, PLUME_ERR_INVALID,
                     "PLUME_CPU_FEATURES=%s is not a level; use scalar, avx2, avx512 or amx", s);
}

void plume_cpu_features_string(char *buf, size_t size)
{
    const plume_cpu_features *f = plume_cpu_features_get();
    buf[0] = '\0';
    const struct { bool have; const char *name; } all[] = {
        {f->avx2, "avx2"},         {f->fma, "fma"},           {f->f16c, "f16c"},
        {f->avx512f, "avx512f"},   {f->avx512bw, "avx512bw"}, {f->avx512dq, "avx512dq"},
        {f->avx512vl, "avx512vl"}, {f->avx512vnni, "avx512vnni"}, {f->avxvnni, "avxvnni"},
        {f->amx_int8, "amx-int8"}, {f->neon, "neon"},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        add_missing(buf, size, !all[i].have, all[i].name);
}
