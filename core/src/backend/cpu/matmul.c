/* y = x · Wᵀ on the CPU: the driver around the per-level kernels.
 *
 * Quantized weights: each token's activations are quantized to int8 blocks
 * of 32 (dispatch.h) into the pool's workspace, then threads take chunks of
 * output rows and run the level's integer kernel over all tokens of the
 * chunk.  Float weights (F32/F16/BF16) use the float kernels directly. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/ops.h"

/* Values per quantization job below which the caller quantizes alone. */
#define SERIAL_QUANT_VALUES 16384
/* Row chunks handed out per thread (dynamic balancing). */
#define CHUNKS_PER_THREAD 4

static int kq_index(uint32_t type)
{
    switch (type) {
    case PLUME_DTYPE_Q4_0: return PLUME_KQ_Q4_0;
    case PLUME_DTYPE_Q4_1: return PLUME_KQ_Q4_1;
    case PLUME_DTYPE_Q8_0: return PLUME_KQ_Q8_0;
    case PLUME_DTYPE_Q4_K: return PLUME_KQ_Q4_K;
    case PLUME_DTYPE_Q6_K: return PLUME_KQ_Q6_K;
    default: return -1;
    }
}

static int kf_index(uint32_t type)
{
    switch (type) {
    case PLUME_DTYPE_F32: return PLUME_KF_F32;
    case PLUME_DTYPE_F16: return PLUME_KF_F16;
    case PLUME_DTYPE_BF16: return PLUME_KF_BF16;
    default: return -1;
    }
}

typedef struct mm_job {
    const plume_kernels *k;
    const uint8_t *w;
    size_t rb;
    int64_t K, N;
    int kq, kf;
    const float *x;
    int n_tok;
    float *y;
    int8_t *aq;
    float *ad, *as;
    int64_t chunk;
    uint32_t wtype;
    atomic_llong next;
} mm_job;

/* Quantizes token t of the job's activations. */
static void quantize_token(const mm_job *j, int t)
{
    const int64_t nb = j->K / 32;
    j->k->quantize_q8(j->x + (size_t)t * j->K, j->K, j->aq + (size_t)t * j->K,
                      j->ad + (size_t)t * nb, j->as + (size_t)t * nb);
}

static void quant_worker(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;
    (void)ith;
    (void)nth;
    for (;;) {
        const int64_t t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (t >= j->n_tok)
            break;
        quantize_token(j, (int)t);
    }
}

static void mm_worker(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;
    (void)ith;
    (void)nth;
    const plume_q8_act act = {j->aq, j->ad, j->as, j->K};
    for (;;) {
        const int64_t r0 = atomic_fetch_add_explicit(&j->next, j->chunk, memory_order_relaxed);
        if (r0 >= j->N)
            break;
        const int nr = (int)(r0 + j->chunk <= j->N ? j->chunk : j->N - r0);
        const uint8_t *w = j->w + (size_t)r0 * j->rb;
        if (j->kq >= 0)
            j->k->mm_q[j->kq](w, j->rb, nr, &act, j->n_tok, j->y + r0, j->N);
        else
            j->k->mm_f[j->kf](w, j->rb, j->K, nr, j->x, j->K, j->n_tok, j->y + r0, j->N);
    }
}

/* Reference path for quantized weights with f32 activations
 * (PLUME_CPU_ACTIVATIONS=f32): each row is dequantized into the thread's
 * slice of the workspace and dotted with every token in float.  Slower;
 * it exists so that the model's arithmetic can be checked against an f32
 * oracle without the int8 activation rounding. */
static void mm_deq_worker(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;
    (void)nth;
    float *row = (float *)j->aq + (size_t)ith * (size_t)j->K;
    for (;;) {
        const int64_t r0 = atomic_fetch_add_explicit(&j->next, j->chunk, memory_order_relaxed);
        if (r0 >= j->N)
            break;
        const int64_t r1 = r0 + j->chunk <= j->N ? r0 + j->chunk : j->N;
        for (int64_t r = r0; r < r1; r++) {
            plume_dequantize((plume_dtype)j->wtype, j->w + (size_t)r * j->rb, row, j->K);
            for (int t = 0; t < j->n_tok; t++)
                j->y[(size_t)t * j->N + r] = j->k->dot(row, j->x + (size_t)t * j->K, (int)j->K);
        }
    }
}

static void fill_nan(float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = NAN;
}

/* Bytes of workspace for n tokens of K quantized values. */
static size_t act_bytes(int n, int64_t K)
{
    return (size_t)n * (size_t)K + 2 * sizeof(float) * (size_t)n * (size_t)(K / 32) + 64;
}

void plume_cpu_matmul_with(const plume_kernels *k, plume_pool *pool, const plume_tensor *w,
                           const float *x, int n_tok, float *y)
{
    const int64_t K = w->ne[0], N = w->ne[1];
    if (n_tok <= 0 || N <= 0)
        return;
    mm_job j = {.k = k, .w = w->data, .rb = plume_dtype_row_bytes(w->type, K),
                .K = K, .N = N, .kq = kq_index(w->type), .kf = kf_index(w->type)};
    if ((j.kq < 0 && j.kf < 0) || j.rb == 0 || (j.kq >= 0 && K % 32 != 0)) {
        fprintf(stderr, "plume: matmul on tensor '%s' of type %s with %lld columns is not "
                        "supported; output set to NaN\n",
                w->name ? w->name : "?", plume_dtype_name(w->type), (long long)K);
        fill_nan(y, (size_t)n_tok * (size_t)N);
        return;
    }
    const int nth = plume_pool_threads(pool);
    int64_t chunk = (N + (int64_t)nth * CHUNKS_PER_THREAD - 1) / ((int64_t)nth * CHUNKS_PER_THREAD);
    j.chunk = (chunk + 3) / 4 * 4;

    /* Tokens per pass: all of them unless the workspace cannot grow. */
    int step = n_tok;
    uint8_t *ws = NULL;
    if (j.kq >= 0 && plume_cpu_f32_activations()) {
        ws = plume_pool_workspace(pool, sizeof(float) * (size_t)nth * (size_t)K);
        if (!ws) {
            fprintf(stderr, "plume: out of memory for dequantized rows; matmul output set to NaN\n");
            fill_nan(y, (size_t)n_tok * (size_t)N);
            return;
        }
        j.aq = (int8_t *)ws;
        j.wtype = w->type;
        j.x = x;
        j.y = y;
        j.n_tok = n_tok;
        atomic_init(&j.next, 0);
        plume_pool_run(pool, mm_deq_worker, &j);
        return;
    }
    if (j.kq >= 0) {
        while (!(ws = plume_pool_workspace(pool, act_bytes(step, K))) && step > 1)
            step = (step + 1) / 2;
        if (!ws) {
            fprintf(stderr, "plume: out of memory for %lld quantized activations; matmul output "
                            "set to NaN\n", (long long)K);
            fill_nan(y, (size_t)n_tok * (size_t)N);
            return;
        }
    }
    for (int t0 = 0; t0 < n_tok; t0 += step) {
        const int nt = n_tok - t0 < step ? n_tok - t0 : step;
        j.x = x + (size_t)t0 * K;
        j.y = y + (size_t)t0 * N;
        j.n_tok = nt;
        if (j.kq >= 0) {
            j.aq = (int8_t *)ws;
            j.ad = (float *)(ws + ((size_t)nt * (size_t)K + 63) / 64 * 64);
            j.as = j.ad + (size_t)nt * (size_t)(K / 32);
            if (nth > 1 && (int64_t)nt * K >= SERIAL_QUANT_VALUES) {
                atomic_init(&j.next, 0);
                plume_pool_run(pool, quant_worker, &j);
            } else {
                for (int t = 0; t < nt; t++)
                    quantize_token(&j, t);
            }
        }
        atomic_init(&j.next, 0);
        plume_pool_run(pool, mm_worker, &j);
    }
}

void plume_cpu_matmul(plume_pool *pool, const plume_tensor *w, const float *x, int n_tok,
                      float *y, float *scratch)
{
    (void)scratch;
    plume_cpu_matmul_with(plume_kernels_active(), pool, w, x, n_tok, y);
}
