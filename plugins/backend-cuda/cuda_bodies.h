/* backend-cuda: the bodies of every kernel, as functions of explicit
 * indices (row, head, lane, element).  cuda_kernels.cu wraps each in a
 * __global__ that derives the indices from blockIdx/threadIdx; the CPU
 * emulation (tests/backend-cuda/test_cuda_emu.c) includes this file as
 * plain C (-DCK_EMU) and calls the same functions for every index, so the
 * index arithmetic (block tables, rope pairs, quantized block walks, warp
 * reductions) is exactly what runs on the device.
 *
 * Warp-cooperative kernels (rmsnorm, the row matmul, attention) are split
 * into a per-lane part and ck_warp_sum, a butterfly over the 32 lanes
 * (lane i adds lane i^16, i^8, ..., i^1): every lane ends with the same
 * bits, and the emulation repeats the butterfly exactly.
 *
 * No shared memory and no __syncthreads: each warp (or thread) works
 * alone, which keeps the kernels few, simple and emulable. */
#ifndef PLUME_CUDA_BODIES_H
#define PLUME_CUDA_BODIES_H

#include <stddef.h>
#include <stdint.h>

/* Dummy weights' generator (plume/dummy_fill.h), on the device too. */
#if defined(__CUDACC__) && !defined(PLUME_FILL_FN)
#define PLUME_FILL_FN static __host__ __device__ inline
#endif
#include "plume/dummy_fill.h"

#define CK_WARP 32
#define CK_GEMV_ROWS 4     /* activation rows one warp of the row matmul serves */
#define CK_HD_MAX 256      /* largest head_dim the attention kernel holds */
#define CK_HD_LANE (CK_HD_MAX / CK_WARP)

/* Weight types on the device (the plume_dtype ids). */
enum { CK_F32 = 0, CK_F16 = 1, CK_Q4_0 = 2, CK_Q4_1 = 3, CK_Q8_0 = 8, CK_BF16 = 30, CK_MXFP4 = 39 };

/* A prepared matrix: N rows (out-features) of K values (in-features),
 * row_bytes apart, as the checkpoint stores them: f32, f16 or bf16 values,
 * or GGUF blocks of 32 (formats.md §3.2). */
typedef struct ck_weight {
    const uint8_t *data;
    int64_t K, N;
    int64_t row_bytes;
    int type;
} ck_weight;

/* ---- per-step metadata on the device (cuda_backend.c builds it) ---- */
typedef struct ck_step {
    const int32_t *tokens, *pos, *slots; /* [n_rows] */
    const int32_t *bt_off;               /* [n_rows]: the row's block table in tables */
    const int32_t *out_rows;             /* [n_out] */
    const int32_t *tables;               /* every sequence's block table, concatenated */
} ck_step;

/* One attention call (cuda_backend.c fills it; k and v are the layer's cache). */
typedef struct ck_attn {
    const float *q;
    const uint8_t *k, *v; /* the layer's cache */
    int kv_f16;
    int32_t block_size, n_head, n_head_kv, head_dim, window;
    int64_t slot_elems; /* n_head_kv * head_dim */
    float scale;
    float *out;
    const float *sinks; /* n_head logits that join each softmax's denominator (gpt-oss), or NULL */
} ck_attn;

/* A row matmul's activations: x in f32, and, with int8 activations, its
 * blocks quantized (q int8 [rows][K], d and s f32 [rows][K/32];
 * ck_quant_q8); q NULL: the f32 kernel. */
typedef struct ck_act {
    const float *x;
    const int8_t *q;
    const float *d, *s;
} ck_act;

/* One task of the segmented row matmul (matmul_segments): rows t0 ..
 * t0 + nt - 1 (nt <= CK_GEMV_ROWS) of x, all routed to the active segment
 * a, whose j-th weight is ws[a * n_w + j]. */
typedef struct ck_seg_task {
    int32_t a, t0, nt;
} ck_seg_task;

typedef struct ck_attn_lane {
    float m, l, acc[CK_HD_LANE];
} ck_attn_lane;

/* Host C (cuda_backend.c) sees only the types above and below; the bodies
 * are compiled by nvcc and by the emulation (-DCK_EMU). */
#if defined(__CUDACC__) || defined(CK_EMU)
#ifdef CK_EMU
#include <math.h>
#include <string.h>
#include "plume/fp16.h"
#define CK_FN static inline
static inline float ck_h2f(uint16_t h) { return plume_fp16_to_fp32(h); }
static inline float ck_e8m0_half(uint8_t e) { return plume_e8m0_half_to_fp32(e); }
static inline float ck_bf2f(uint16_t h) { return plume_bf16_to_fp32(h); }
static inline void ck_ld4(const float *p, float v[4]) { memcpy(v, p, 16); }
static inline uint32_t ck_ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
/* Σ of the four signed byte products of a and b, plus c (the device's dp4a) */
static inline int32_t ck_dp4a(uint32_t a, uint32_t b, int32_t c)
{
    for (int k = 0; k < 4; k++)
        c += (int32_t)(int8_t)(uint8_t)(a >> (8 * k)) * (int32_t)(int8_t)(uint8_t)(b >> (8 * k));
    return c;
}
static inline int32_t ck_f2i_rn(float f) { return (int32_t)nearbyintf(f); }
static inline float ck_ldf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}
static inline float ck_mul_rn(float a, float b) { return a * b; }
static inline float ck_add_rn(float a, float b) { return a + b; }
static inline uint16_t ck_f2h(float f) { return plume_fp32_to_fp16(f); }
static inline uint16_t ck_ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
#else
#include <cuda_fp16.h>
#define CK_FN static __device__ __forceinline__
CK_FN float ck_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
CK_FN uint16_t ck_f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
CK_FN uint16_t ck_ld16(const uint8_t *p) { return *(const uint16_t *)p; } /* 2-aligned */
CK_FN float ck_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
CK_FN uint32_t ck_ld32(const uint8_t *p) { return *(const uint32_t *)p; } /* 4-aligned */
CK_FN int32_t ck_dp4a(uint32_t a, uint32_t b, int32_t c) { return __dp4a((int)a, (int)b, c); }
CK_FN int32_t ck_f2i_rn(float f) { return __float2int_rn(f); }
/* four floats in one 16-byte load (p 16-aligned) */
CK_FN void ck_ld4(const float *p, float v[4])
{
    const float4 f = *(const float4 *)p;
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
}
CK_FN float ck_ldf(const uint8_t *p) { return *(const float *)p; } /* 4-aligned */
/* plume_e8m0_half_to_fp32 (plume/fp16.h): 2^(e-128), subnormal for e < 2 */
CK_FN float ck_e8m0_half(uint8_t e)
{
    return __uint_as_float(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}
/* a product and a sum each rounded to f32 (never fused into an fma) */
CK_FN float ck_mul_rn(float a, float b) { return __fmul_rn(a, b); }
CK_FN float ck_add_rn(float a, float b) { return __fadd_rn(a, b); }
#endif

/* MXFP4 code q's doubled e2m1 value: {0, 1, 2, 3, 4, 6, 8, 12}, negated
 * for q >= 8 (PLUME_MXFP4_LEVELS). */
CK_FN int ck_mxfp4_level(int q)
{
    const int m = q & 7, lv = m < 5 ? m : m == 5 ? 6 : m == 6 ? 8 : 12;
    return q & 8 ? -lv : lv;
}

/* Element (o, i) of W as f32 — the block walk of the element-wise kernels
 * (embedding, the cuBLAS slab); ck_w_chunk gives the same values 32 at a
 * time.
 * Q8_0: [d f16][32 int8]; Q4_0: [d f16][16 bytes]; Q4_1: [d f16][m f16]
 * [16 bytes]; MXFP4: [e8m0][16 bytes] with element = level(q) · 2^(e-128)
 * (PLUME_MXFP4_LEVELS, gguf-py's doubled kvalues); in a 4-bit block the
 * low nibble of byte j is element j and the high nibble element j + 16. */
CK_FN float ck_w_at(const ck_weight *W, int64_t o, int64_t i)
{
    const uint8_t *row = W->data + o * W->row_bytes;
    const int j = (int)(i % 32);
    switch (W->type) {
    case CK_Q8_0: {
        const uint8_t *b = row + (i / 32) * 34;
        return ck_h2f(ck_ld16(b)) * (float)(int8_t)b[2 + j];
    }
    case CK_Q4_0: {
        const uint8_t *b = row + (i / 32) * 18;
        const int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
        return ck_h2f(ck_ld16(b)) * (float)(q - 8);
    }
    case CK_Q4_1: {
        const uint8_t *b = row + (i / 32) * 20;
        const int q = j < 16 ? (b[4 + j] & 15) : (b[4 + j - 16] >> 4);
        return ck_h2f(ck_ld16(b)) * (float)q + ck_h2f(ck_ld16(b + 2));
    }
    case CK_MXFP4: {
        const uint8_t *b = row + (i / 32) * 17;
        const int q = j < 16 ? (b[1 + j] & 15) : (b[1 + j - 16] >> 4);
        return (float)ck_mxfp4_level(q) * ck_e8m0_half(b[0]);
    }
    case CK_F32:
        return ck_ldf(row + 4 * i);
    case CK_BF16:
        return ck_bf2f(ck_ld16(row + 2 * i));
    default: /* CK_F16 */
        return ck_h2f(ck_ld16(row + 2 * i));
    }
}

/* Values 32c .. 32c + n - 1 of row o of W into w[0 .. n) (n < 32 only
 * for the last chunk of an f32/f16/bf16 row whose K is not a multiple of
 * 32; quantized rows are whole blocks): exactly ck_w_at's values, from
 * wider loads of one block (or 32 values) at a time. */
CK_FN void ck_w_chunk(const ck_weight *W, int64_t o, int64_t c, int n, float w[32])
{
    const uint8_t *row = W->data + o * W->row_bytes;
    switch (W->type) {
    case CK_Q8_0: {
        const uint8_t *b = row + c * 34;
        const float d = ck_h2f(ck_ld16(b));
        for (int i = 0; i < 32; i += 2) {
            const uint16_t v = ck_ld16(b + 2 + i);
            w[i] = d * (float)(int8_t)(uint8_t)(v & 255);
            w[i + 1] = d * (float)(int8_t)(uint8_t)(v >> 8);
        }
        return;
    }
    case CK_Q4_0: {
        const uint8_t *b = row + c * 18;
        const float d = ck_h2f(ck_ld16(b));
        for (int i = 0; i < 16; i += 2) {
            const uint16_t v = ck_ld16(b + 2 + i);
            w[i] = d * (float)((int)(v & 15) - 8);
            w[i + 16] = d * (float)((int)((v >> 4) & 15) - 8);
            w[i + 1] = d * (float)((int)((v >> 8) & 15) - 8);
            w[i + 17] = d * (float)((int)(v >> 12) - 8);
        }
        return;
    }
    case CK_Q4_1: {
        const uint8_t *b = row + c * 20;
        const float d = ck_h2f(ck_ld16(b)), m = ck_h2f(ck_ld16(b + 2));
        for (int i = 0; i < 16; i += 2) {
            const uint16_t v = ck_ld16(b + 4 + i);
            w[i] = d * (float)(v & 15) + m;
            w[i + 16] = d * (float)((v >> 4) & 15) + m;
            w[i + 1] = d * (float)((v >> 8) & 15) + m;
            w[i + 17] = d * (float)(v >> 12) + m;
        }
        return;
    }
    case CK_MXFP4: {
        const uint8_t *b = row + c * 17;
        const float d = ck_e8m0_half(b[0]);
        for (int i = 0; i < 16; i++) {
            w[i] = (float)ck_mxfp4_level(b[1 + i] & 15) * d;
            w[i + 16] = (float)ck_mxfp4_level(b[1 + i] >> 4) * d;
        }
        return;
    }
    case CK_F32:
        for (int i = 0; i < 32; i++)
            w[i] = i < n ? ck_ldf(row + 4 * (32 * c + i)) : 0.0f;
        return;
    case CK_BF16:
        for (int i = 0; i < 32; i++)
            w[i] = i < n ? ck_bf2f(ck_ld16(row + 2 * (32 * c + i))) : 0.0f;
        return;
    default: /* CK_F16 */
        for (int i = 0; i < 32; i++)
            w[i] = i < n ? ck_h2f(ck_ld16(row + 2 * (32 * c + i))) : 0.0f;
        return;
    }
}

/* Block idx of a dummy weight (plume/dummy_fill.h): row idx / nb, block
 * idx % nb (nb = ne0 / block) into dst, rows row_bytes apart: the bytes
 * plume_fill_row gives on the host. */
CK_FN void ck_fill(const plume_fill_spec *s, uint8_t *dst, int64_t row_bytes, int64_t idx)
{
    const int64_t nb = s->ne0 / s->block, r = idx / nb, b = idx % nb;
    plume_fill_block(s, r, b, dst + r * row_bytes + b * (int64_t)s->block_bytes);
}

/* The butterfly of one value per lane, in place over v[0..32) (the
 * emulation's form of the device's __shfl_xor_sync loop). */
#ifdef CK_EMU
static inline void ck_emu_warp_sum(float v[CK_WARP])
{
    for (int off = 16; off > 0; off /= 2) {
        float n[CK_WARP];
        for (int l = 0; l < CK_WARP; l++)
            n[l] = v[l] + v[l ^ off];
        memcpy(v, n, sizeof n);
    }
}
#else
CK_FN float ck_warp_sum(float v)
{
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
#endif


/* The cache slot of position p of row r's sequence. */
CK_FN int64_t ck_slot_of(const ck_step *S, int64_t r, int32_t p, int32_t block_size)
{
    return (int64_t)S->tables[S->bt_off[r] + p / block_size] * block_size + p % block_size;
}

/* ---- element-wise kernels: one thread per element idx ---- */

/* x[r][i] = table[tokens[r]][i], idx = r * dim + i. */
CK_FN void ck_embed(const ck_step *S, const ck_weight *T, float *x, int32_t dim, int64_t idx)
{
    const int64_t r = idx / dim, i = idx % dim;
    x[idx] = ck_w_at(T, S->tokens[r], i);
}

/* Rotates pair i of head h of row r; idx = (r * n_heads + h) * half + i. */
CK_FN void ck_rope(const ck_step *S, float *x, int32_t n_heads, int32_t head_dim,
                   const float *inv_freq, int adjacent, int64_t idx)
{
    const int32_t half = head_dim / 2;
    const int64_t i = idx % half, rh = idx / half, r = rh / n_heads;
    float *v = x + rh * head_dim;
    const float angle = (float)S->pos[r] * inv_freq[i];
    const float c = cosf(angle), s = sinf(angle);
    const int64_t a = adjacent ? 2 * i : i, b = adjacent ? 2 * i + 1 : i + half;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
}

/* k and v element e of row r into the row's slot; idx = r * kv_dim + e.
 * The layer base pointers k_layer/v_layer already include layer *
 * layer_stride; slot_stride is in elements here. */
CK_FN void ck_kv_store(const ck_step *S, void *k_layer, void *v_layer, int kv_f16,
                       int64_t slot_elems, const float *k, const float *v, int32_t kv_dim,
                       int64_t idx)
{
    const int64_t r = idx / kv_dim, e = idx % kv_dim;
    const int64_t at = (int64_t)S->slots[r] * slot_elems + e;
    if (kv_f16) {
        ((uint16_t *)k_layer)[at] = ck_f2h(k[idx]);
        ((uint16_t *)v_layer)[at] = ck_f2h(v[idx]);
    } else {
        ((float *)k_layer)[at] = k[idx];
        ((float *)v_layer)[at] = v[idx];
    }
}

CK_FN void ck_swiglu(float *gate, const float *up, int64_t i)
{
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
}

/* gpt-oss's clamped SwiGLU (plume_cpu_swiglu_oai): g = min(gate, limit),
 * u = clamp(up, -limit, limit), gate = g sigmoid(alpha g) (u + 1). */
CK_FN void ck_swiglu_oai(float *gate, const float *up, float alpha, float limit, int64_t i)
{
    const float g = gate[i] > limit ? limit : gate[i];
    const float u = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
    gate[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
}

CK_FN void ck_add(float *x, const float *y, int64_t i) { x[i] += y[i]; }

/* idx = r * dim + i. */
CK_FN void ck_add_bias(float *y, const float *bias, int32_t dim, int64_t idx)
{
    y[idx] += bias[idx % dim];
}

/* dst[j][d] = src[out_rows[j]][d]; idx = j * dim + d. */
CK_FN void ck_gather(const ck_step *S, float *dst, const float *src, int32_t dim, int64_t idx)
{
    const int64_t j = idx / dim, d = idx % dim;
    dst[idx] = src[(int64_t)S->out_rows[j] * dim + d];
}

/* ---- mixture-of-experts rows (gather_rows, scatter_add_rows) ---- */

/* dst[i][d] = src[idx[i]][d]; e = i * dim + d. */
CK_FN void ck_gather_rows(float *dst, const float *src, const int32_t *idx, int32_t dim, int64_t e)
{
    const int64_t i = e / dim, d = e % dim;
    dst[e] = src[(int64_t)idx[i] * dim + d];
}

/* Destination u of a scatter-add: dst[row[u]][d] += w[i] · src[i][d] for
 * the i of list[start[u] .. start[u+1]) in ascending order, each product
 * rounded, then added (the cpu's order, so the same bits); e = u * dim +
 * d.  One thread owns an element of a destination row: no atomics. */
CK_FN void ck_scatter_add(float *dst, const float *src, const int32_t *row, const int32_t *start,
                          const int32_t *list, const float *w, int32_t dim, int64_t e)
{
    const int64_t u = e / dim, d = e % dim;
    float *o = dst + (int64_t)row[u] * dim + d;
    float acc = *o;
    for (int32_t k = start[u]; k < start[u + 1]; k++) {
        const int32_t i = list[k];
        acc = ck_add_rn(acc, ck_mul_rn(w[i], src[(int64_t)i * dim + d]));
    }
    *o = acc;
}

/* For cuBLAS: x as IEEE half, and W dequantized into an f16 slab of rows
 * [o0, o0 + rows) laid out [rows][K]; idx = (o - o0) * K + i. */
CK_FN void ck_to_f16(const float *x, uint16_t *xh, int64_t i) { xh[i] = ck_f2h(x[i]); }

CK_FN void ck_dequant_slab(const ck_weight *W, int64_t o0, uint16_t *slab, int64_t idx)
{
    slab[idx] = ck_f2h(ck_w_at(W, o0 + idx / W->K, idx % W->K));
}

/* ---- rmsnorm: one warp per row ---- */

/* Lane's share of Σ x[r][i]², i = lane, lane + 32, ...: four running
 * sums (four loads in flight per lane), added pairwise at the end. */
CK_FN float ck_rms_lane(const float *x, int32_t dim, int64_t r, int lane)
{
    const float *xr = x + r * dim;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int32_t i = lane;
    for (; i + 3 * CK_WARP < dim; i += 4 * CK_WARP) {
        s0 += xr[i] * xr[i];
        s1 += xr[i + CK_WARP] * xr[i + CK_WARP];
        s2 += xr[i + 2 * CK_WARP] * xr[i + 2 * CK_WARP];
        s3 += xr[i + 3 * CK_WARP] * xr[i + 3 * CK_WARP];
    }
    for (; i < dim; i += CK_WARP)
        s0 += xr[i] * xr[i];
    return (s0 + s1) + (s2 + s3);
}

/* With the row's sum of squares: the lane's outputs (out may be x). */
CK_FN void ck_rms_write(float *out, const float *x, const float *w, int32_t dim, float eps,
                        int64_t r, int lane, float sumsq)
{
    const float inv = 1.0f / sqrtf(sumsq / (float)dim + eps);
    /* out may be x: eight loads, then their eight stores (a store before
     * the next load would keep one load in flight at a time) */
    for (int32_t i0 = lane; i0 < dim; i0 += 8 * CK_WARP) {
        float v[8];
        for (int k = 0; k < 8; k++) {
            const int32_t i = i0 + k * CK_WARP;
            v[k] = i < dim ? x[r * dim + i] * inv * w[i] : 0.0f;
        }
        for (int k = 0; k < 8; k++) {
            const int32_t i = i0 + k * CK_WARP;
            if (i < dim)
                out[r * dim + i] = v[k];
        }
    }
}

/* ---- the row matmul: one warp per (output o, group of CK_GEMV_ROWS rows) ----
 * acc[j] = lane's share of Σ_i W[o][i] · x[t0 + j][i] over the chunks of
 * 32 values c = lane, lane + 32, ... (one GGUF block each: a lane loads a
 * whole block, so a warp has 32 blocks in flight), i ascending within a
 * chunk, for j < nt.  Each row's sum has the same operations in the same
 * order whatever t0, nt and n_rows: the result of (t, o) depends only on
 * W's row o and x's row t. */
CK_FN void ck_gemv_lane(const ck_weight *W, const float *x, int64_t o, int64_t t0, int nt,
                        int lane, float acc[CK_GEMV_ROWS])
{
    for (int j = 0; j < CK_GEMV_ROWS; j++)
        acc[j] = 0.0f;
    for (int64_t c = lane; 32 * c < W->K; c += CK_WARP) {
        const int n = W->K - 32 * c < 32 ? (int)(W->K - 32 * c) : 32;
        float w[32];
        ck_w_chunk(W, o, c, n, w);
        for (int j = 0; j < CK_GEMV_ROWS; j++) {
            if (j >= nt)
                break;
            const float *xr = x + (t0 + j) * W->K + 32 * c;
            if (n == 32 && W->K % 4 == 0) /* x rows 16-aligned: 16-byte loads, same order */
                for (int i = 0; i < 32; i += 4) {
                    float v[4];
                    ck_ld4(xr + i, v);
                    for (int k = 0; k < 4; k++)
                        acc[j] += w[i + k] * v[k];
                }
            else if (n == 32)
                for (int i = 0; i < 32; i++)
                    acc[j] += w[i] * xr[i];
            else
                for (int i = 0; i < 32; i++)
                    if (i < n)
                        acc[j] += w[i] * xr[i];
        }
    }
}

/* ---- int8 activations (backend setting activations: int8; f32 is the
 * default):
 * x quantized per block of 32 as the cpu backend does it (d = amax/127,
 * q = round-to-nearest-even(x · (1/d)), s = d · Σq), and Q4_0, Q4_1 and
 * Q8_0 rows dotted with it in integers (dp4a), block by block. ---- */

/* Block b of row r of x (K values per row) into q (int8 [rows][K]), d and
 * s ([rows][K/32]); idx = r * (K/32) + b. */
CK_FN void ck_quant_q8(const float *x, int64_t K, int8_t *q, float *d, float *s, int64_t idx)
{
    const float *xb = x + idx * 32; /* rows are whole blocks: idx * 32 = r * K + 32 b */
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        amax = fmaxf(amax, fabsf(xb[i]));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    int32_t sum = 0;
    for (int i = 0; i < 32; i++) {
        const int32_t v = ck_f2i_rn(xb[i] * id);
        q[idx * 32 + i] = (int8_t)v;
        sum += v;
    }
    d[idx] = db;
    s[idx] = db * (float)sum;
    (void)K;
}

/* Two bytes at a 2-aligned p and the two after them as one word. */
CK_FN uint32_t ck_ld32_2(const uint8_t *p)
{
    return (uint32_t)ck_ld16(p) | (uint32_t)ck_ld16(p + 2) << 16;
}

/* The int8 row matmul's lane share: like ck_gemv_lane, block c = lane,
 * lane + 32, ... of W's row o against each row's int8 block, as the cpu
 * sums a block: (d_w · Σ w_q x_q) · d_x + m_w · s_x (m: Q4_0 -8 d_w, Q4_1
 * its min, Q8_0 0).  The same operations per (row, output) whatever the
 * grouping. */
CK_FN void ck_gemv_q8_lane(const ck_weight *W, const int8_t *xq, const float *xd,
                           const float *xs, int64_t o, int64_t t0, int nt, int lane,
                           float acc[CK_GEMV_ROWS])
{
    for (int j = 0; j < CK_GEMV_ROWS; j++)
        acc[j] = 0.0f;
    const int64_t nb = W->K / 32;
    const uint8_t *row = W->data + o * W->row_bytes;
    for (int64_t c = lane; c < nb; c += CK_WARP) {
        uint32_t w[8];
        float dw, mw;
        if (W->type == CK_Q8_0) {
            const uint8_t *b = row + c * 34;
            dw = ck_h2f(ck_ld16(b));
            mw = 0.0f;
            for (int m = 0; m < 8; m++)
                w[m] = ck_ld32_2(b + 2 + 4 * m);
        } else {
            const int q41 = W->type == CK_Q4_1;
            const uint8_t *b = row + c * (q41 ? 20 : 18);
            dw = ck_h2f(ck_ld16(b));
            mw = q41 ? ck_h2f(ck_ld16(b + 2)) : -8.0f * dw;
            for (int m = 0; m < 4; m++) {
                const uint32_t v = q41 ? ck_ld32(b + 4 + 4 * m) : ck_ld32_2(b + 2 + 4 * m);
                w[m] = v & 0x0F0F0F0Fu;            /* elements 4m .. 4m+3 */
                w[m + 4] = (v >> 4) & 0x0F0F0F0Fu; /* elements 16+4m .. 16+4m+3 */
            }
        }
        for (int j = 0; j < CK_GEMV_ROWS; j++) {
            if (j >= nt)
                break;
            const int64_t t = t0 + j;
            const uint8_t *xb = (const uint8_t *)(xq + t * W->K + 32 * c);
            int32_t sumi = 0;
            for (int m = 0; m < 8; m++)
                sumi = ck_dp4a(w[m], ck_ld32(xb + 4 * m), sumi);
            acc[j] += (dw * (float)sumi) * xd[t * nb + c] + mw * xs[t * nb + c];
        }
    }
}

/* ---- paged attention: one warp per (row, query head) ----
 * The warp walks the row's positions in order through the block table;
 * lane holds dimensions d = lane + 32 k of the output (online softmax, the
 * running max m and sum l the same in every lane: ck_attn_lane). */
/* Positions row r attends to: [*p0, p1]. */
CK_FN void ck_attn_range(const ck_attn *A, const ck_step *S, int64_t r, int32_t *p0, int32_t *p1)
{
    const int32_t pos = S->pos[r];
    *p1 = pos;
    *p0 = A->window > 0 && pos - A->window + 1 > 0 ? pos - A->window + 1 : 0;
}

CK_FN float ck_kv_at(const ck_attn *A, const uint8_t *base, int64_t slot, int32_t kvh, int32_t d)
{
    const int64_t at = slot * A->slot_elems + (int64_t)kvh * A->head_dim + d;
    return A->kv_f16 ? ck_h2f(((const uint16_t *)base)[at]) : ((const float *)base)[at];
}

CK_FN void ck_attn_init(ck_attn_lane *L)
{
    L->m = -INFINITY;
    L->l = 0.0f;
    for (int k = 0; k < CK_HD_LANE; k++)
        L->acc[k] = 0.0f;
}

/* Lane's share of q[r][h] · k[slot][kvh]. */
CK_FN float ck_attn_dot_lane(const ck_attn *A, int64_t r, int32_t h, int64_t slot, int lane)
{
    const int32_t kvh = h / (A->n_head / A->n_head_kv);
    const float *q = A->q + (r * A->n_head + h) * A->head_dim;
    float s = 0.0f;
    for (int32_t d = lane; d < A->head_dim; d += CK_WARP)
        s += q[d] * ck_kv_at(A, A->k, slot, kvh, d);
    return s;
}

/* Folds the position with score dot (q·k, unscaled) into the lane's state. */
CK_FN void ck_attn_update(const ck_attn *A, ck_attn_lane *L, int32_t h, int64_t slot, int lane,
                          float dot)
{
    const int32_t kvh = h / (A->n_head / A->n_head_kv);
    const float s = dot * A->scale;
    const float m = s > L->m ? s : L->m;
    const float corr = expf(L->m - m), p = expf(s - m);
    L->l = L->l * corr + p;
    for (int32_t d = lane, k = 0; d < A->head_dim; d += CK_WARP, k++)
        L->acc[k] = L->acc[k] * corr + p * ck_kv_at(A, A->v, slot, kvh, d);
    L->m = m;
}

/* out = acc / l; with sinks, e^{sink_h} joins the denominator (no value):
 * both rescaled to the larger of the running max and the sink. */
CK_FN void ck_attn_write(const ck_attn *A, const ck_attn_lane *L, int64_t r, int32_t h, int lane)
{
    float *o = A->out + (r * A->n_head + h) * A->head_dim;
    float c = 1.0f, l = L->l;
    if (A->sinks) {
        const float s = A->sinks[h], m = s > L->m ? s : L->m;
        c = expf(L->m - m);
        l = l * c + expf(s - m);
    }
    for (int32_t d = lane, k = 0; d < A->head_dim; d += CK_WARP, k++)
        o[d] = L->acc[k] * c / l;
}

#endif /* bodies */
#endif
