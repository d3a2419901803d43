/* Choosing the kernel table (see dispatch.h). */
#include "backend/cpu/dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const plume_kernels *g_active;   /* set once under g_once, then read-only */
static bool g_f32_act;                  /* PLUME_CPU_ACTIVATIONS=f32, read with g_active */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

const plume_kernels *plume_kernels_for(plume_cpu_level level)
{
    if (!plume_cpu_level_supported(level, NULL, 0))
        return NULL;
    switch (level) {
    case PLUME_CPU_SCALAR: return plume_kernels_scalar();
    case PLUME_CPU_AVX2: return plume_kernels_avx2();
    case PLUME_CPU_AVX512: return plume_kernels_avx512();
    case PLUME_CPU_AMX: return plume_kernels_amx();
    default: return NULL;
    }
}

static void choose(void)
{
    plume_cpu_level level = plume_cpu_level_max();
    const char *env = getenv("PLUME_CPU_FEATURES");
    if (env && *env) {
        plume_error err;
        if (plume_cpu_level_parse(env, &level, &err)) {
            level = plume_cpu_level_max();
            fprintf(stderr, "plume: %s; using %s\n", err.msg, plume_cpu_level_name(level));
        }
    }
    const plume_kernels *k = plume_kernels_for(level);
    while (!k && level > PLUME_CPU_SCALAR) /* a level this build lacks */
        k = plume_kernels_for(--level);
    g_active = k ? k : plume_kernels_scalar();
    const char *act = getenv("PLUME_CPU_ACTIVATIONS");
    if (act && *act) {
        if (strcmp(act, "f32") == 0)
            g_f32_act = true;
        else if (strcmp(act, "int8") != 0)
            fprintf(stderr, "plume: PLUME_CPU_ACTIVATIONS=%s is not one of int8, f32; using int8\n",
                    act);
    }
}

bool plume_cpu_f32_activations(void)
{
    pthread_once(&g_once, choose);
    return g_f32_act;
}

const plume_kernels *plume_kernels_active(void)
{
    pthread_once(&g_once, choose);
    return g_active;
}

/* ---- the public face (plume/cpu.h) ---- */

#include "plume/cpu.h"

int plume_cpu_active_level(void) { return (int)plume_kernels_active()->level; }

bool plume_cpu_can_run(int level)
{
    return level >= 0 && level < PLUME_CPU_LEVEL_COUNT &&
           plume_cpu_level_supported((plume_cpu_level)level, NULL, 0);
}

const char *plume_cpu_level_str(int level)
{
    return level >= 0 && level < PLUME_CPU_LEVEL_COUNT ? plume_cpu_level_name((plume_cpu_level)level)
                                                       : "?";
}

bool plume_cpu_float_activations(void) { return plume_cpu_f32_activations(); }

void plume_cpu_quantize_q8(const float *x, int64_t K, int8_t *q, float *d, float *s)
{
    plume_kernels_active()->quantize_q8(x, K, q, d, s);
}
