/* The forward pass's element-wise and attention kernels, routed to the
 * active dispatch level. */
#include "backend/cpu/ops.h"

#include <math.h>
#include <string.h>

void plume_cpu_get_row(const plume_tensor *w, int64_t row, float *dst)
{
    size_t rb = plume_dtype_row_bytes(w->type, w->ne[0]);
    const uint8_t *src = (const uint8_t *)w->data + (size_t)row * rb;
    if (w->type == PLUME_DTYPE_F32)
        memcpy(dst, src, sizeof(float) * (size_t)w->ne[0]);
    else
        plume_dequantize((plume_dtype)w->type, src, dst, w->ne[0]);
}

void plume_cpu_rmsnorm(float *out, const float *x, const float *weight, int n, float eps)
{
    plume_kernels_active()->rmsnorm(out, x, weight, n, eps);
}

/* Angles per call on the stack up to this many pairs; larger heads rotate
 * in slices of it. */
#define ROPE_MAX_HALF 256

void plume_cpu_rope_heads(float *v, int n_heads, int head_dim, int pos, const float *inv_freq,
                          int adjacent)
{
    const plume_kernels *k = plume_kernels_active();
    const int half = head_dim / 2;
    if (half > ROPE_MAX_HALF) { /* rare: no stack table, rotate pair by pair */
        for (int h = 0; h < n_heads; h++) {
            float *hv = v + (size_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                const float angle = (float)pos * inv_freq[i];
                const float c = cosf(angle), s = sinf(angle);
                const int a = adjacent ? 2 * i : i, b = adjacent ? 2 * i + 1 : i + half;
                const float x0 = hv[a], x1 = hv[b];
                hv[a] = x0 * c - x1 * s;
                hv[b] = x0 * s + x1 * c;
            }
        }
        return;
    }
    float c[ROPE_MAX_HALF], s[ROPE_MAX_HALF];
    for (int i = 0; i < half; i++) {
        const float angle = (float)pos * inv_freq[i];
        c[i] = cosf(angle);
        s[i] = sinf(angle);
    }
    for (int h = 0; h < n_heads; h++)
        k->rope(v + (size_t)h * head_dim, head_dim, c, s, adjacent);
}

void plume_cpu_swiglu(float *x, const float *y, int n)
{
    plume_kernels_active()->swiglu(x, y, n);
}

void plume_cpu_swiglu_oai(float *x, const float *y, size_t n, float alpha, float limit)
{
    for (size_t i = 0; i < n; i++) {
        const float g = x[i] > limit ? limit : x[i]; /* clamp(max=limit); NaN stays NaN */
        const float u = y[i] < -limit ? -limit : y[i] > limit ? limit : y[i];
        x[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

void plume_cpu_geglu(float *x, const float *y, size_t n)
{
    const plume_kernels *k = plume_kernels_active();
    for (size_t i = 0; i < n; i += (size_t)1 << 30) /* the kernel counts in int */
        k->geglu(x + i, y + i, (int)(n - i < ((size_t)1 << 30) ? n - i : (size_t)1 << 30));
}
