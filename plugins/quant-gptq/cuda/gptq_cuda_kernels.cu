/* quant-gptq CUDA kernels: a dequantizing GEMV for decode, a dequantize-to-
 * scratch kernel for the cuBLAS prefill path, and two small helpers.
 * Written in C style (no templates/classes): each kernel body is a
 * __forceinline__ function whose width parameters are literals at the call
 * sites below, so every variant is fully specialised by constant folding.
 * Device layout and launch geometry: gptq_cuda_internal.h. */
#ifndef GPTQ_CUDA_EMU /* tests/gptq/cuda/test_gptq_cuda_emu.c runs this file's kernels on the CPU */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif
#include <stdint.h>

#include "gptq_cuda_internal.h"

#define NCOL GPTQ_CUDA_GEMV_NCOL
#define NSL GPTQ_CUDA_GEMV_NSLICE
#define KT GPTQ_CUDA_GEMV_KT
#define MAXTOK GPTQ_CUDA_GEMV_MAXTOK
#define GEMV_THREADS (NCOL * NSL)
#define DQ_THREADS 128

/* Code j (0 ≤ j < UNIT_CODES(B)) of a unit whose words are w0, w1, w2: the
 * bit stream of formats.md §1.2 (code j at bit B·j; for B = 3 codes 10 and
 * 21 straddle two words).  With B and j literals this folds to one or two
 * shifts and a mask. */
static __device__ __forceinline__ uint32_t code_at(const int B, uint32_t w0, uint32_t w1,
                                                   uint32_t w2, const int j)
{
    const int p = B * j, wi = p >> 5, sh = p & 31;
    const uint32_t lo = wi == 0 ? w0 : (wi == 1 ? w1 : w2);
    uint32_t v = lo >> sh;
    if (sh + B > 32) /* only for B = 3; then sh > 0 and wi < 2 */
        v |= (wi == 0 ? w1 : w2) << (32 - sh);
    return v & ((1u << B) - 1u);
}

/* scale·(q − zero) with zb = 2^23 + zero: 2^23 + q is built by OR-ing q into
 * the mantissa of 2^23 (exact for q < 2^23), and (2^23 + q) − (2^23 + zero)
 * is an exact small integer, so the result is the correctly rounded
 * product scale·(q − zero), bit-identical to the CPU reference's
 * sc * ((float)q - z). */
static __device__ __forceinline__ float dequant1(uint32_t q, float zb, float s)
{
    return (__uint_as_float(0x4B000000u | q) - zb) * s;
}

/* ---- GEMV (decode) ----
 *
 * Block (NCOL, NSL): thread (tx, sl) owns output column n = blockIdx.x·NCOL
 * + tx and, inside every KT-row tile, the sl-th contiguous run of
 * KT/UC/NSL units.  A warp is 32 consecutive columns, so each packed word
 * load is 32 consecutive int32 of one qweight row (128 B, coalesced), and
 * every packed word of the layer is read exactly once by exactly one thread
 * per launch.  Activations of the tile (TT tokens, zero-padded past T and
 * past the end of the split) are staged in shared memory as xs[kk][TT];
 * all threads of a warp read the same xs entry (broadcast).
 *
 * Groups: sorted rows make gs non-decreasing, so a thread walking k upward
 * reloads (scale, zero) only when k reaches gnext = gend[current group];
 * k, gnext and the group are the same for every thread of a slice, so the
 * branch never diverges.
 *
 * Synchronisation: both __syncthreads of the tile loop are reached by
 * every thread (the loop bounds depend on blockIdx only; inactive columns
 * past N skip only the arithmetic).  The first barrier keeps a tile's
 * readers ahead of the next tile's writers, the second publishes the
 * tile.  The slice reduction uses a separate shared array and one more
 * barrier. */
#define UB 4 /* units loaded before any is used (memory-level parallelism) */

static __device__ __forceinline__ void gemv_body(const int B, const int TT, const gptq_cuda_dev L,
                                                 const float *__restrict__ x, const int T,
                                                 float *__restrict__ y,
                                                 float *__restrict__ partial,
                                                 const int tiles_per_split, float *xs, float *red)
{
    const int UC = GPTQ_CUDA_UNIT_CODES(B), UW = GPTQ_CUDA_UNIT_WORDS(B);
    const int64_t K = L.K, N = L.N;
    const int tx = threadIdx.x, sl = threadIdx.y, tid = sl * NCOL + tx;
    const int64_t n = (int64_t)blockIdx.x * NCOL + tx;
    const bool active = n < N;
    const int64_t kbeg = (int64_t)blockIdx.y * tiles_per_split * KT;
    const int64_t kend = min(K, kbeg + (int64_t)tiles_per_split * KT);
    const int upt = KT / UC / NSL; /* units per slice per tile */

    float acc[MAXTOK]; /* only acc[0..TT) is used; TT is a literal after inlining */
#pragma unroll
    for (int t = 0; t < TT; t++)
        acc[t] = 0.0f;
    int64_t gnext = -1; /* forces a load at the first row */
    float s = 0.0f, zb = 0.0f;

    for (int64_t kt0 = kbeg; kt0 < kend; kt0 += KT) {
        const int rows = (int)min((int64_t)KT, kend - kt0);
        __syncthreads();
        for (int i = tid; i < TT * KT; i += GEMV_THREADS) {
            const int t = i / KT, kk = i - t * KT; /* consecutive threads: consecutive k */
            float v = 0.0f;
            if (t < T && kk < rows) {
                const int64_t k = kt0 + kk;
                const int64_t src = L.perm ? (int64_t)L.perm[k] : k;
                v = x[(int64_t)t * K + src];
            }
            xs[kk * TT + t] = v;
        }
        __syncthreads();
        /* kt0 and kt0 + rows are multiples of UC: kt0 is kbeg + a multiple
         * of KT, and kt0 + rows is either that + KT or kend, which is K
         * (a multiple of the pack alignment = UC) or a multiple of KT. */
        const int64_t u0 = kt0 / UC + (int64_t)sl * upt;
        const int64_t u1 = min(u0 + upt, (kt0 + rows) / UC);
        if (active) {
            for (int64_t u = u0; u < u1; u += UB) {
                uint32_t w[UB][3];
#pragma unroll
                for (int b = 0; b < UB; b++) {
                    w[b][0] = w[b][1] = w[b][2] = 0u;
                    if (u + b < u1) {
                        const int32_t *wp = L.qweight + (u + b) * UW * N + n;
                        w[b][0] = (uint32_t)wp[0];
                        if (UW > 1) {
                            w[b][1] = (uint32_t)wp[N];
                            w[b][2] = (uint32_t)wp[2 * N];
                        }
                    }
                }
#pragma unroll
                for (int b = 0; b < UB; b++) {
                    if (u + b >= u1)
                        break;
                    const int64_t kb = (u + b) * UC;
                    const float *xr = xs + (kb - kt0) * TT;
#pragma unroll
                    for (int j = 0; j < UC; j++) {
                        const int64_t k = kb + j;
                        if (k >= gnext) {
                            const int32_t g = L.gs[k];
                            gnext = L.gend[g];
                            s = L.scales[(int64_t)g * N + n];
                            zb = 8388608.0f + (float)L.zeros[(int64_t)g * N + n];
                        }
                        const float wv = dequant1(code_at(B, w[b][0], w[b][1], w[b][2], j), zb, s);
                        if (TT >= 4) {
                            const float4 *x4 = (const float4 *)(xr + j * TT);
#pragma unroll
                            for (int h = 0; h < TT / 4; h++) {
                                const float4 xv = x4[h];
                                acc[4 * h + 0] = fmaf(wv, xv.x, acc[4 * h + 0]);
                                acc[4 * h + 1] = fmaf(wv, xv.y, acc[4 * h + 1]);
                                acc[4 * h + 2] = fmaf(wv, xv.z, acc[4 * h + 2]);
                                acc[4 * h + 3] = fmaf(wv, xv.w, acc[4 * h + 3]);
                            }
                        } else {
#pragma unroll
                            for (int t = 0; t < TT; t++)
                                acc[t] = fmaf(wv, xr[j * TT + t], acc[t]);
                        }
                    }
                }
            }
        }
    }

    /* slices 1..NSL-1 hand their sums to slice 0 */
    if (sl > 0) {
#pragma unroll
        for (int t = 0; t < TT; t++)
            red[((sl - 1) * TT + t) * NCOL + tx] = acc[t];
    }
    __syncthreads();
    if (sl == 0 && active) {
#pragma unroll
        for (int t = 0; t < TT; t++) {
            if (t >= T)
                break;
            float v = acc[t];
            for (int s2 = 1; s2 < NSL; s2++)
                v += red[((s2 - 1) * TT + t) * NCOL + tx];
            if (partial)
                partial[((int64_t)blockIdx.y * T + t) * N + n] = v;
            else
                y[(int64_t)t * N + n] = L.bias ? v + L.bias[n] : v;
        }
    }
}

typedef void (*gemv_fn)(gptq_cuda_dev, const float *, int, float *, float *, int);

/* xs: KT rows × MAXTOK floats, float4-aligned; red: (NSL−1)·MAXTOK·NCOL. */
#define GEMV_KERNEL(B, TT)                                                                  \
    __global__ void __launch_bounds__(GEMV_THREADS)                                         \
        gptq_gemv_b##B##_t##TT(gptq_cuda_dev L, const float *__restrict__ x, int T,          \
                               float *__restrict__ y, float *__restrict__ partial, int tps) \
    {                                                                                       \
        __shared__ float4 xs4[KT * MAXTOK / 4];                                             \
        __shared__ float red[(NSL - 1) * MAXTOK * NCOL];                                    \
        gemv_body(B, TT, L, x, T, y, partial, tps, (float *)xs4, red);                      \
    }

#define GEMV_KERNELS(B) GEMV_KERNEL(B, 1) GEMV_KERNEL(B, 2) GEMV_KERNEL(B, 4) GEMV_KERNEL(B, 8)
GEMV_KERNELS(2)
GEMV_KERNELS(3)
GEMV_KERNELS(4)
GEMV_KERNELS(8)

/* file scope: constant-initialised (no guarded function-local statics) */
static const gemv_fn gemv_tab[4][4] = {
    {gptq_gemv_b2_t1, gptq_gemv_b2_t2, gptq_gemv_b2_t4, gptq_gemv_b2_t8},
    {gptq_gemv_b3_t1, gptq_gemv_b3_t2, gptq_gemv_b3_t4, gptq_gemv_b3_t8},
    {gptq_gemv_b4_t1, gptq_gemv_b4_t2, gptq_gemv_b4_t4, gptq_gemv_b4_t8},
    {gptq_gemv_b8_t1, gptq_gemv_b8_t2, gptq_gemv_b8_t4, gptq_gemv_b8_t8},
};

#ifndef GPTQ_CUDA_EMU
static gemv_fn gemv_pick(int bits, int T)
{
    const int ti = T <= 1 ? 0 : T <= 2 ? 1 : T <= 4 ? 2 : 3;
    const int bi = bits == 2 ? 0 : bits == 3 ? 1 : bits == 4 ? 2 : bits == 8 ? 3 : -1;
    return bi < 0 ? (gemv_fn)0 : gemv_tab[bi][ti];
}

#endif

/* Sums the ksplit partial results (split-major) and the bias. */
__global__ void gptq_splitk_reduce(const float *__restrict__ partial, int ksplit, int64_t TN,
                                   int64_t N, const float *__restrict__ bias,
                                   float *__restrict__ y)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < TN;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = 0.0f;
        for (int sp = 0; sp < ksplit; sp++)
            v += partial[(int64_t)sp * TN + i];
        if (bias)
            v += bias[i % N];
        y[i] = v;
    }
}

#ifndef GPTQ_CUDA_EMU
static unsigned grid_1d(int64_t count, int threads)
{
    int64_t b = (count + threads - 1) / threads;
    if (b > 4096) /* grid-stride loops take the rest */
        b = 4096;
    return (unsigned)(b < 1 ? 1 : b);
}

extern "C" cudaError_t gptq_cuda_launch_gemv(const gptq_cuda_dev *L, const float *x, int T,
                                             float *y, float *partial, int ksplit,
                                             int tiles_per_split, cudaStream_t stream)
{
    const gemv_fn fn = gemv_pick(L->bits, T);
    if (!fn || T < 1 || T > MAXTOK || ksplit < 1 || tiles_per_split < 1 || ksplit > 65535 ||
        (ksplit > 1 && !partial))
        return cudaErrorInvalidValue;
    const dim3 grid((unsigned)((L->N + NCOL - 1) / NCOL), (unsigned)ksplit);
    const dim3 block(NCOL, NSL);
    fn<<<grid, block, 0, stream>>>(*L, x, T, y, ksplit > 1 ? partial : (float *)0,
                                   tiles_per_split);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || ksplit == 1)
        return e;
    const int64_t TN = (int64_t)T * L->N;
    gptq_splitk_reduce<<<grid_1d(TN, 256), 256, 0, stream>>>(partial, ksplit, TN, L->N, L->bias,
                                                             y);
    return cudaGetLastError();
}
#endif

/* ---- dequantize to scratch (prefill) ----
 *
 * Thread = (unit u, column n): reads the unit's words once (coalesced along
 * n), writes its UC weights to rows perm[k] (original input order) of the
 * slab w[K][nb], each row write coalesced along n.  Every (k, n) of the
 * slab is written exactly once: u covers [0, K/UC), j covers the unit, and
 * perm is a bijection.  No shared memory, no barriers; inactive columns
 * return at once. */
static __device__ __forceinline__ void dequant_body(const int B, const int F16,
                                                    const gptq_cuda_dev L, const int64_t n0,
                                                    const int64_t nb, void *w)
{
    const int UC = GPTQ_CUDA_UNIT_CODES(B), UW = GPTQ_CUDA_UNIT_WORDS(B);
    const int64_t N = L.N, U = L.K / UC;
    const int64_t c = (int64_t)blockIdx.x * DQ_THREADS + threadIdx.x; /* column in the slab */
    if (c >= nb)
        return;
    const int64_t n = n0 + c;
    int32_t gprev = -1;
    float s = 0.0f, zb = 0.0f;
    for (int64_t u = blockIdx.y; u < U; u += gridDim.y) {
        const int32_t *wp = L.qweight + u * UW * N + n;
        const uint32_t w0 = (uint32_t)wp[0];
        const uint32_t w1 = UW > 1 ? (uint32_t)wp[N] : 0u;
        const uint32_t w2 = UW > 1 ? (uint32_t)wp[2 * N] : 0u;
#pragma unroll
        for (int j = 0; j < UC; j++) {
            const int64_t k = u * UC + j;
            const int32_t g = L.gs[k];
            if (g != gprev) {
                gprev = g;
                s = L.scales[(int64_t)g * N + n];
                zb = 8388608.0f + (float)L.zeros[(int64_t)g * N + n];
            }
            const float v = dequant1(code_at(B, w0, w1, w2, j), zb, s);
            const int64_t kd = L.perm ? (int64_t)L.perm[k] : k;
            if (F16)
                ((__half *)w)[kd * nb + c] = __float2half_rn(v);
            else
                ((float *)w)[kd * nb + c] = v;
        }
    }
}

typedef void (*dequant_fn)(gptq_cuda_dev, int64_t, int64_t, void *);

#define DQ_KERNEL(B, F)                                                                   \
    __global__ void __launch_bounds__(DQ_THREADS)                                         \
        gptq_dequant_b##B##_h##F(gptq_cuda_dev L, int64_t n0, int64_t nb, void *w)         \
    {                                                                                     \
        dequant_body(B, F, L, n0, nb, w);                                                 \
    }
DQ_KERNEL(2, 0)
DQ_KERNEL(2, 1)
DQ_KERNEL(3, 0)
DQ_KERNEL(3, 1)
DQ_KERNEL(4, 0)
DQ_KERNEL(4, 1)
DQ_KERNEL(8, 0)
DQ_KERNEL(8, 1)

static const dequant_fn dequant_tab[4][2] = {
    {gptq_dequant_b2_h0, gptq_dequant_b2_h1},
    {gptq_dequant_b3_h0, gptq_dequant_b3_h1},
    {gptq_dequant_b4_h0, gptq_dequant_b4_h1},
    {gptq_dequant_b8_h0, gptq_dequant_b8_h1},
};

#ifndef GPTQ_CUDA_EMU
extern "C" cudaError_t gptq_cuda_launch_dequant(const gptq_cuda_dev *L, int64_t n0, int64_t nb,
                                                void *w, int f16, cudaStream_t stream)
{
    const int b = L->bits;
    const int bi = b == 2 ? 0 : b == 3 ? 1 : b == 4 ? 2 : b == 8 ? 3 : -1;
    if (bi < 0 || nb < 1 || n0 < 0 || n0 + nb > L->N)
        return cudaErrorInvalidValue;
    const int64_t U = L->K / GPTQ_CUDA_UNIT_CODES(b);
    const dim3 grid((unsigned)((nb + DQ_THREADS - 1) / DQ_THREADS),
                    (unsigned)(U < 65535 ? U : 65535));
    dequant_tab[bi][f16 ? 1 : 0]<<<grid, DQ_THREADS, 0, stream>>>(*L, n0, nb, w);
    return cudaGetLastError();
}
#endif

/* ---- helpers ---- */

__global__ void gptq_to_f16(const float *__restrict__ x, int64_t count, __half *__restrict__ xh)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x)
        xh[i] = __float2half_rn(x[i]);
}

#ifndef GPTQ_CUDA_EMU
extern "C" cudaError_t gptq_cuda_launch_to_f16(const float *x, int64_t count, void *xh,
                                               cudaStream_t stream)
{
    if (count < 1)
        return cudaSuccess;
    gptq_to_f16<<<grid_1d(count, 256), 256, 0, stream>>>(x, count, (__half *)xh);
    return cudaGetLastError();
}
#endif

__global__ void gptq_add_bias(float *__restrict__ y, const float *__restrict__ bias, int64_t TN,
                              int64_t N)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < TN;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += bias[i % N];
}

#ifndef GPTQ_CUDA_EMU
extern "C" cudaError_t gptq_cuda_launch_add_bias(float *y, const float *bias, int64_t T, int64_t N,
                                                 cudaStream_t stream)
{
    if (T < 1 || N < 1)
        return cudaSuccess;
    gptq_add_bias<<<grid_1d(T * N, 256), 256, 0, stream>>>(y, bias, T * N, N);
    return cudaGetLastError();
}
#endif

#ifndef GPTQ_CUDA_EMU
extern "C" cudaError_t gptq_cuda_kernel_probe(void)
{
    struct cudaFuncAttributes a;
    cudaError_t e = cudaFuncGetAttributes(&a, gptq_gemv_b4_t1);
    if (e == cudaSuccess)
        e = cudaFuncGetAttributes(&a, gptq_dequant_b4_h1);
    return e;
}
#endif
