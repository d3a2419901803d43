/* Shared helpers of the CPU backend tests: deterministic random data and
 * random but valid weight rows of every supported type. */
#ifndef PLUME_CPU_TEST_UTIL_H
#define PLUME_CPU_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "plume/fp16.h"
#include "plume/tensor.h"

/* For the benchmark programs: the kernels of the level named by argv[1]
 * (default: the best this CPU runs), or NULL after printing why on stderr
 * (not a level, or not one this CPU runs). */
static inline const plume_kernels *tu_level_arg(int argc, char **argv)
{
    plume_cpu_level level = plume_cpu_level_max();
    plume_error err;
    if (argc > 1 && plume_cpu_level_parse(argv[1], &level, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    const plume_kernels *k = plume_kernels_for(level);
    if (!k)
        fprintf(stderr, "%s: this CPU does not run level %s\n", argv[0], plume_cpu_level_name(level));
    return k;
}

static uint64_t tu_state = 0x9E3779B97F4A7C15ull;

static inline uint32_t tu_u32(void)
{
    tu_state ^= tu_state << 13;
    tu_state ^= tu_state >> 7;
    tu_state ^= tu_state << 17;
    return (uint32_t)(tu_state >> 16);
}

/* Uniform in [lo, hi). */
static inline float tu_uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)(tu_u32() & 0xFFFFFF) / 16777216.0f;
}

static inline void tu_fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tu_uniform(lo, hi);
}

static inline void tu_put_f16(uint8_t *p, float f)
{
    uint16_t h = plume_fp32_to_fp16(f);
    memcpy(p, &h, 2);
}

/* Fills n_rows rows of K values of type `type` with random, valid data
 * (finite f16 scales); returns the malloc'd buffer and the row bytes. */
static inline uint8_t *tu_weights(uint32_t type, int64_t K, int n_rows, size_t *rb_out)
{
    const size_t rb = plume_dtype_row_bytes(type, K);
    uint8_t *w = malloc(rb * (size_t)n_rows + 1);
    for (size_t i = 0; i < rb * (size_t)n_rows; i++)
        w[i] = (uint8_t)tu_u32();
    const size_t bb = plume_dtype_block_bytes(type);
    const int64_t nblk = (int64_t)(rb * (size_t)n_rows / bb);
    for (int64_t b = 0; b < nblk; b++) {
        uint8_t *p = w + (size_t)b * bb;
        switch (type) {
        case PLUME_DTYPE_F32: {
            float f = tu_uniform(-1, 1);
            memcpy(p, &f, 4);
            break;
        }
        case PLUME_DTYPE_F16: tu_put_f16(p, tu_uniform(-1, 1)); break;
        case PLUME_DTYPE_BF16: {
            uint16_t h = plume_fp32_to_bf16(tu_uniform(-1, 1));
            memcpy(p, &h, 2);
            break;
        }
        case PLUME_DTYPE_Q4_0:
        case PLUME_DTYPE_Q8_0: tu_put_f16(p, tu_uniform(-0.02f, 0.02f)); break;
        case PLUME_DTYPE_Q4_1:
            tu_put_f16(p, tu_uniform(0.001f, 0.02f));
            tu_put_f16(p + 2, tu_uniform(-0.1f, 0.1f));
            break;
        case PLUME_DTYPE_Q6_K: tu_put_f16(p + 208, tu_uniform(-0.002f, 0.002f)); break;
        case PLUME_DTYPE_Q5_0:
        case PLUME_DTYPE_IQ4_NL: tu_put_f16(p, tu_uniform(-0.01f, 0.01f)); break;
        case PLUME_DTYPE_Q5_1:
            tu_put_f16(p, tu_uniform(0.0005f, 0.01f));
            tu_put_f16(p + 2, tu_uniform(-0.1f, 0.1f));
            break;
        case PLUME_DTYPE_Q4_K:
        case PLUME_DTYPE_Q5_K:
            tu_put_f16(p, tu_uniform(0.0001f, 0.002f));
            tu_put_f16(p + 2, tu_uniform(0.0001f, 0.002f));
            break;
        case PLUME_DTYPE_Q2_K:
            tu_put_f16(p + 80, tu_uniform(0.0005f, 0.005f));
            tu_put_f16(p + 82, tu_uniform(0.0005f, 0.005f));
            break;
        case PLUME_DTYPE_Q3_K: tu_put_f16(p + 108, tu_uniform(-0.002f, 0.002f)); break;
        case PLUME_DTYPE_IQ4_XS: tu_put_f16(p, tu_uniform(-0.0005f, 0.0005f)); break;
        case PLUME_DTYPE_MXFP4: p[0] = (uint8_t)(118 + tu_u32() % 6); break; /* 2^-10..2^-5 */
        case PLUME_DTYPE_Q8_K: {
            float f = tu_uniform(-0.01f, 0.01f);
            memcpy(p, &f, 4);
            break;
        }
        }
    }
    *rb_out = rb;
    return w;
}

static const uint32_t TU_TYPES[] = {PLUME_DTYPE_Q4_0, PLUME_DTYPE_Q4_1, PLUME_DTYPE_Q8_0,
                                    PLUME_DTYPE_Q4_K, PLUME_DTYPE_Q6_K, PLUME_DTYPE_F16,
                                    PLUME_DTYPE_BF16, PLUME_DTYPE_F32};
#define TU_N_TYPES (sizeof TU_TYPES / sizeof TU_TYPES[0])

/* Every type with a repacked (mm_r) kernel, in PLUME_KR_* order. */
static const uint32_t TU_RP_TYPES[] = {
    PLUME_DTYPE_Q4_0, PLUME_DTYPE_Q4_1, PLUME_DTYPE_Q8_0, PLUME_DTYPE_Q5_0,
    PLUME_DTYPE_Q5_1, PLUME_DTYPE_IQ4_NL, PLUME_DTYPE_Q4_K, PLUME_DTYPE_Q5_K,
    PLUME_DTYPE_Q6_K, PLUME_DTYPE_Q2_K, PLUME_DTYPE_Q3_K, PLUME_DTYPE_IQ4_XS,
    PLUME_DTYPE_MXFP4};
#define TU_N_RP_TYPES (sizeof TU_RP_TYPES / sizeof TU_RP_TYPES[0])

/* Index of a weight type in plume_kernels.mm_q / mm_f. */
static inline int tu_kq(uint32_t type)
{
    switch (type) {
    case PLUME_DTYPE_Q4_0: return PLUME_KQ_Q4_0;
    case PLUME_DTYPE_Q4_1: return PLUME_KQ_Q4_1;
    case PLUME_DTYPE_Q8_0: return PLUME_KQ_Q8_0;
    case PLUME_DTYPE_Q4_K: return PLUME_KQ_Q4_K;
    default: return PLUME_KQ_Q6_K;
    }
}

static inline int tu_kf(uint32_t type)
{
    return type == PLUME_DTYPE_F32 ? PLUME_KF_F32 : type == PLUME_DTYPE_F16 ? PLUME_KF_F16 : PLUME_KF_BF16;
}

/* The kernel tables of every level this CPU runs; prints why others are
 * skipped (once). */
static inline int tu_levels(const plume_kernels **out)
{
    static int printed;
    int n = 0;
    for (int l = 0; l < PLUME_CPU_LEVEL_COUNT; l++) {
        char why[128];
        const plume_kernels *k = plume_kernels_for((plume_cpu_level)l);
        if (k) {
            out[n++] = k;
        } else if (!printed) {
            if (plume_cpu_level_supported((plume_cpu_level)l, why, sizeof why))
                snprintf(why, sizeof why, "not built for this architecture");
            printf("# skipping level %s: CPU lacks %s\n", plume_cpu_level_name((plume_cpu_level)l),
                   why);
        }
    }
    printed = 1;
    return n;
}


/* softmax(q·kᵀ·scale)·v in double over the positions lo..hi-1 of one kv
 * head of a cache: position p's key and value are the hd floats at
 * k + slot·stride and v + slot·stride, slot = table[p / bs]·bs + p % bs
 * (table NULL: slot = p).  sink (-INFINITY: none) is one more logit in the
 * softmax, with no value.  want: hd doubles. */
static inline void tu_attn_ref(const float *q, const float *k, const float *v, size_t stride,
                               const int32_t *table, int bs, int lo, int hi, int hd,
                               double scale, double sink, double *want)
{
    double *sc = malloc(sizeof(double) * (size_t)(hi - lo)), mx = sink, sum = 0;
    for (int d = 0; d < hd; d++)
        want[d] = 0;
    for (int p = lo; p < hi; p++) {
        const size_t slot = table ? (size_t)table[p / bs] * bs + p % bs : (size_t)p;
        double s = 0;
        for (int d = 0; d < hd; d++)
            s += (double)q[d] * k[slot * stride + d];
        sc[p - lo] = s * scale;
        mx = fmax(mx, sc[p - lo]);
    }
    for (int p = lo; p < hi; p++) {
        const size_t slot = table ? (size_t)table[p / bs] * bs + p % bs : (size_t)p;
        const double e = exp(sc[p - lo] - mx);
        sum += e;
        for (int d = 0; d < hd; d++)
            want[d] += e * v[slot * stride + d];
    }
    sum += exp(sink - mx);
    for (int d = 0; d < hd; d++)
        want[d] /= sum;
    free(sc);
}

#endif
