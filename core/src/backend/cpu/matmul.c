/* y = x · Wᵀ on the CPU: the driver around the per-level kernels.
 *
 * Quantized weights: each token's activations are quantized to int8 blocks
 * of 32 (dispatch.h) into the pool's workspace, then threads take chunks of
 * output rows and run the level's integer kernel over all tokens of the
 * chunk.  Float weights (F32/F16/BF16) use the float kernels directly. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/repack_k.h"

/* Values per quantization job below which the caller quantizes alone. */
#define SERIAL_QUANT_VALUES 16384
/* Row chunks handed out per thread (dynamic balancing). */
#define CHUNKS_PER_THREAD 4
/* The same for the repacked kernels (chunks are groups of 16 rows). */
#define MR_CHUNKS_PER_THREAD 16

/* Bytes of quantized activations (a token's block records, about what
 * its row arrays take too) a repacked kernel call streams per row group,
 * at most: more tokens are taken in blocks of that many, each block's
 * activations kept in the core's L2 across the row groups of a chunk,
 * rather than all of them streamed from L3 for every row group (with 2
 * threads, a 512-token prefill's 1.3-2.4 MB of activations per pass ran
 * into L3 bandwidth). */
#define MR_TOKEN_BLOCK_BYTES (384 * 1024)

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

/* Quantizing a pass's activations, one token at a time: quantize(job, t)
 * for t in 0 .. n_tok-1, each taken by the next free thread. */
typedef struct token_job {
    void (*quantize)(const void *job, int t);
    const void *job;
    int n_tok;
    atomic_llong next;
} token_job;

static void token_worker(void *ctx, int ith, int nth)
{
    token_job *j = ctx;
    (void)ith;
    (void)nth;
    for (;;) {
        const int64_t t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (t >= j->n_tok)
            break;
        j->quantize(j->job, (int)t);
    }
}

/* Runs quantize(job, t) for the n_tok tokens of K values: on the pool when
 * it has threads to spare and the pass is large enough to pay for them,
 * else in order on this thread. */
static void quantize_tokens(plume_pool *pool, int64_t K, int n_tok,
                            void (*quantize)(const void *job, int t), const void *job)
{
    if (plume_pool_threads(pool) > 1 && (int64_t)n_tok * K >= SERIAL_QUANT_VALUES) {
        token_job tj = {.quantize = quantize, .job = job, .n_tok = n_tok};
        atomic_init(&tj.next, 0);
        plume_pool_run(pool, token_worker, &tj);
    } else {
        for (int t = 0; t < n_tok; t++)
            quantize(job, t);
    }
}

/* The pool's workspace for a pass of as many of the n_tok tokens of K
 * values as fit (bytes(step, K); step halved until it does, into *step);
 * NULL, saying so on stderr, when not even one token fits. */
static uint8_t *act_workspace(plume_pool *pool, int n_tok, int64_t K,
                              size_t (*bytes)(int n, int64_t K), int *step)
{
    int s = n_tok;
    uint8_t *ws;
    while (!(ws = plume_pool_workspace(pool, bytes(s, K))) && s > 1)
        s = (s + 1) / 2;
    if (!ws)
        fprintf(stderr, "plume: out of memory for %lld quantized activations; matmul output "
                        "set to NaN\n", (long long)K);
    *step = s;
    return ws;
}

/* Quantizes token t of the mm_job's activations. */
static void quantize_token(const void *job, int t)
{
    const mm_job *j = job;
    const int64_t nb = j->K / 32;
    j->k->quantize_q8(j->x + (size_t)t * j->K, j->K, j->aq + (size_t)t * j->K,
                      j->ad + (size_t)t * nb, j->as + (size_t)t * nb);
}

static void mm_worker(void *ctx, int ith, int nth)
{
    mm_job *j = ctx;
    (void)ith;
    (void)nth;
    const plume_q8_act act = {j->aq, j->ad, j->as, j->K, NULL, NULL, NULL, NULL, 0};
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
    /* Types with no integer kernel at all (Q8_K) take the dequantizing
     * f32 path below: correct, not fast. */
    const bool deq_only = j.kq < 0 && j.kf < 0 && plume_dtype_supported(w->type);
    if ((j.kq < 0 && j.kf < 0 && !deq_only) || j.rb == 0 || (j.kq >= 0 && K % 32 != 0)) {
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
    if (deq_only || (j.kq >= 0 && plume_cpu_f32_activations())) {
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
    if (j.kq >= 0 && !(ws = act_workspace(pool, n_tok, K, act_bytes, &step))) {
        fill_nan(y, (size_t)n_tok * (size_t)N);
        return;
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
            quantize_tokens(pool, K, nt, quantize_token, &j);
        }
        atomic_init(&j.next, 0);
        plume_pool_run(pool, mm_worker, &j);
    }
}

void plume_cpu_matmul(plume_pool *pool, const plume_tensor *w, const float *x, int n_tok,
                      float *y)
{
    plume_cpu_matmul_with(plume_kernels_active(), pool, w, x, n_tok, y);
}

/* ---- prepared (repacked) weights ---- */

static int kr_index(uint32_t type)
{
    switch (type) {
    case PLUME_DTYPE_Q4_0: return PLUME_KR_Q4_0;
    case PLUME_DTYPE_Q4_1: return PLUME_KR_Q4_1;
    case PLUME_DTYPE_Q8_0: return PLUME_KR_Q8_0;
    case PLUME_DTYPE_Q5_0: return PLUME_KR_Q5_0;
    case PLUME_DTYPE_Q5_1: return PLUME_KR_Q5_1;
    case PLUME_DTYPE_IQ4_NL: return PLUME_KR_IQ4_NL;
    case PLUME_DTYPE_Q4_K: return PLUME_KR_Q4_K;
    case PLUME_DTYPE_Q5_K: return PLUME_KR_Q5_K;
    case PLUME_DTYPE_Q6_K: return PLUME_KR_Q6_K;
    case PLUME_DTYPE_Q2_K: return PLUME_KR_Q2_K;
    case PLUME_DTYPE_Q3_K: return PLUME_KR_Q3_K;
    case PLUME_DTYPE_IQ4_XS: return PLUME_KR_IQ4_XS;
    case PLUME_DTYPE_MXFP4: return PLUME_KR_MXFP4;
    default: return -1;
    }
}

int plume_cpu_weight_init(plume_cpu_weight *w, const plume_tensor *t, plume_error *err)
{
    memset(w, 0, sizeof *w);
    w->t = t;
    w->kr = -1;
    w->K = t->ne[0];
    w->N = t->ne[1];
    const int kr = kr_index(t->type);
    if (kr < 0 || t->n_dims != 2 || w->K <= 0 || w->K % 32 != 0 || w->N <= 0)
        return 0;
    const int64_t nb = w->K / 32, ng = (w->N + PLUME_RP_ROWS - 1) / PLUME_RP_ROWS;
    const size_t rb = plume_dtype_row_bytes(t->type, w->K);
    const int ext = kr >= PLUME_KR_Q5_0; /* a repack_k.h format */
    if (rb == 0 || (!ext && rb != plume_rp_src_block_bytes(kr) * (size_t)nb))
        return 0;
    w->group_bytes = plume_rp_group_bytes(kr, nb);
    const size_t bytes = (w->group_bytes * (size_t)ng + 63) / 64 * 64;
    w->packed = aligned_alloc(64, bytes);
    if (!w->packed)
        return plume_err(err, PLUME_ERR_NOMEM, "out of memory repacking '%s' (%zu MiB)",
                         t->name ? t->name : "?", bytes >> 20);
    for (int64_t g = 0; g < ng; g++) {
        uint8_t *dst = w->packed + (size_t)g * w->group_bytes;
        if (ext)
            plume_rpk_pack_group(kr, t->data, rb, w->N, g, nb, dst);
        else
            plume_rp_pack_group(kr, t->data, rb, w->N, g, nb, dst);
    }
    w->kr = kr;
    return 0;
}

void plume_cpu_weight_release(plume_cpu_weight *w)
{
    if (!w)
        return;
    free(w->packed);
    w->packed = NULL;
    w->kr = -1;
}

typedef struct mr_job {
    const plume_kernels *k;
    int n;
    const plume_cpu_weight *w[PLUME_CPU_MULTI_MAX];
    float *y[PLUME_CPU_MULTI_MAX];
    int64_t gend[PLUME_CPU_MULTI_MAX]; /* cumulative group counts */
    int64_t chunk;
    plume_q8_act act;
    int n_tok, tok_block;
    /* quantization */
    const float *x;
    int8_t *aq;
    float *ad, *as, *as16;
    int32_t *ai, *ai16;
    plume_q8_blk *blk;
    atomic_llong next;
} mr_job;

/* Token t's block records (blk[b * ldb + t]) from act's row arrays. */
static void act_token_blocks(const plume_q8_act *a, int t, plume_q8_blk *blk, int64_t ldb)
{
    const int64_t nb = a->K / 32;
    for (int64_t b = 0; b < nb; b++) {
        plume_q8_blk *r = blk + (size_t)b * (size_t)ldb + (size_t)t;
        const size_t i = (size_t)t * (size_t)nb + (size_t)b;
        memcpy(r->q, a->q + (size_t)t * (size_t)a->K + 32 * b, 32);
        r->d = a->d[i];
        r->s = a->s[i];
        r->isum = a->isum[i];
        r->isum16[0] = a->isum16[2 * i];
        r->isum16[1] = a->isum16[2 * i + 1];
        r->s16[0] = a->s16[2 * i];
        r->s16[1] = a->s16[2 * i + 1];
    }
}

/* The records' row stride for n tokens: odd, so that a tile's records in
 * successive blocks do not keep to a few cache sets (a precaution: at 96
 * tokens an odd stride measured the same as n; what the kernels needed
 * was a prefetch, kernels_avx512.c zr_recs). */
static int64_t act_ldb(int n)
{
    return (int64_t)n | 1;
}

size_t plume_cpu_act_blocks_bytes(int n, int64_t K)
{
    return sizeof(plume_q8_blk) * (size_t)act_ldb(n) * (size_t)(K / 32);
}

void plume_cpu_act_blocks(plume_q8_act *act, int n, plume_q8_blk *blk)
{
    for (int t = 0; t < n; t++)
        act_token_blocks(act, t, blk, act_ldb(n));
    act->blk = blk;
    act->ldb = act_ldb(n);
}

static void mr_quantize_token(const void *job, int t)
{
    const mr_job *j = job;
    const int64_t K = j->act.K, nb = K / 32;
    const plume_q8_out o = {.q = j->aq + (size_t)t * K, .d = j->ad + (size_t)t * nb,
                            .s = j->as + (size_t)t * nb, .isum = j->ai + (size_t)t * nb,
                            .isum16 = j->ai16 + (size_t)t * 2 * nb,
                            .s16 = j->as16 + (size_t)t * 2 * nb, .blk = j->blk + t,
                            .ldb = j->act.ldb};
    j->k->quantize_q8_sums(j->x + (size_t)t * K, K, &o);
}

static void mr_worker(void *ctx, int ith, int nth)
{
    mr_job *j = ctx;
    (void)ith;
    const int64_t total = j->gend[j->n - 1];
    /* guided: a share of what is left (long sequential streams first), down
     * to j->chunk groups at the end (balance) */
    int64_t g0 = atomic_load_explicit(&j->next, memory_order_relaxed);
    for (;;) {
        if (g0 >= total)
            break;
        int64_t c = (total - g0) / (4 * (int64_t)nth);
        if (c < j->chunk)
            c = j->chunk;
        if (!atomic_compare_exchange_weak_explicit(&j->next, &g0, g0 + c, memory_order_relaxed,
                                                   memory_order_relaxed))
            continue; /* g0 now holds the current value */
        const int64_t g1 = g0 + c < total ? g0 + c : total;
        for (int i = 0; i < j->n && g0 < g1; i++) {
            const int64_t base = i ? j->gend[i - 1] : 0;
            if (g0 >= j->gend[i])
                continue;
            const int64_t e = g1 < j->gend[i] ? g1 : j->gend[i];
            const plume_cpu_weight *w = j->w[i];
            const int64_t r0 = (g0 - base) * PLUME_RP_ROWS;
            int64_t r1 = (e - base) * PLUME_RP_ROWS;
            if (r1 > w->N)
                r1 = w->N;
            for (int t0 = 0; t0 < j->n_tok; t0 += j->tok_block) {
                const plume_q8_act a = plume_q8_act_from(&j->act, t0);
                const int nt = j->n_tok - t0 < j->tok_block ? j->n_tok - t0 : j->tok_block;
                j->k->mm_r[w->kr](w->packed + (size_t)(g0 - base) * w->group_bytes,
                                  (int)(r1 - r0), &a, nt, j->y[i] + (size_t)t0 * (size_t)w->N + r0,
                                  w->N);
            }
            g0 = e;
        }
        g0 = atomic_load_explicit(&j->next, memory_order_relaxed);
    }
}

plume_q8_act plume_q8_act_from(const plume_q8_act *a, int64_t t0)
{
    const int64_t nb = a->K / 32;
    plume_q8_act r = *a;
    r.q += t0 * a->K;
    r.d += t0 * nb;
    if (r.s)
        r.s += t0 * nb;
    if (r.isum)
        r.isum += t0 * nb;
    if (r.isum16)
        r.isum16 += 2 * t0 * nb;
    if (r.s16)
        r.s16 += 2 * t0 * nb;
    if (r.blk)
        r.blk += t0; /* token t0 of every block (stride ldb) */
    return r;
}

/* Tokens per repacked kernel call for n_tok tokens of K values:
 * MR_TOKEN_BLOCK_BYTES of their block records, a multiple of 12 (whole
 * 6-token tiles; the kernels run 16-token tiles first where they have
 * them), all n_tok when they fit (96 tokens at K =
 * 2048, 24 at 8192; at the avx512 level 192 KiB and 768 KiB were no
 * better, 2026-12-05).  At
 * the amx level twice the bytes, in multiples of 48 (3 tiles of 16) up to
 * 96: each call unpacks its weight blocks once for all its tokens, and a
 * Q4_K call ran 14% faster at 96 tokens than at 48 (`bench_mm_r amx`, K =
 * 4096).  So at K = 4096 a call takes 96 tokens, not 48: an 8B Q4_K_M
 * 512-token prefill went 30.2-36.8 → 34.9-38.5 tok/s (7 alternating
 * pairs, each 1.04-1.28x, 2026-12-06).  More did not help: 1.5 MiB of
 * records ran the 8B slower, and 192 tokens at K = 2048 ran a 1B Q4_K_M
 * no faster than 96. */
static int mr_token_block(const plume_kernels *k, int n_tok, int64_t K)
{
    const size_t per_tok = sizeof(plume_q8_blk) * (size_t)(K / 32);
    const bool amx = k->level == PLUME_CPU_AMX;
    const int64_t unit = amx ? 48 : 12;
    int64_t tb = (int64_t)((amx ? 2 : 1) * MR_TOKEN_BLOCK_BYTES / per_tok) / unit * unit;
    if (amx && tb > 2 * unit)
        tb = 2 * unit;
    if (tb < unit)
        tb = unit;
    return tb >= n_tok ? n_tok : (int)tb;
}

/* Bytes of the row arrays of n tokens of K (values, then 7 floats per
 * block), each part rounded up to 64: where the block records start. */
static size_t act_rows_bytes(int n, int64_t K)
{
    return ((size_t)n * (size_t)K + 63) / 64 * 64 +
           (7 * sizeof(float) * (size_t)n * (size_t)(K / 32) + 63) / 64 * 64;
}

size_t plume_cpu_act_bytes(int n, int64_t K)
{
    return act_rows_bytes(n, K) + plume_cpu_act_blocks_bytes(n, K) + 64;
}

void plume_cpu_quantize_rows(const plume_kernels *k, plume_pool *pool, const float *x, int n,
                             int64_t K, uint8_t *ws, plume_q8_act *act)
{
    const int64_t nb = K / 32;
    mr_job j = {.k = k, .x = x, .n_tok = n};
    j.aq = (int8_t *)ws;
    j.ad = (float *)(ws + ((size_t)n * (size_t)K + 63) / 64 * 64);
    j.as = j.ad + (size_t)n * (size_t)nb;
    j.ai = (int32_t *)(j.as + (size_t)n * (size_t)nb);
    j.ai16 = j.ai + (size_t)n * (size_t)nb;
    j.as16 = (float *)(j.ai16 + 2 * (size_t)n * (size_t)nb);
    j.blk = (plume_q8_blk *)(ws + act_rows_bytes(n, K)); /* 64-byte aligned, as ws */
    j.act = (plume_q8_act){j.aq, j.ad, j.as, K, j.ai, j.ai16, j.as16, j.blk, act_ldb(n)};
    quantize_tokens(pool, K, n, mr_quantize_token, &j);
    *act = j.act;
}

void plume_cpu_matmul_multi_with(const plume_kernels *k, plume_pool *pool,
                                 const plume_cpu_weight *const *w, int n, const float *x,
                                 int n_tok, float *const *y)
{
    if (n_tok <= 0 || n <= 0)
        return;
    if (n > PLUME_CPU_MULTI_MAX) {
        plume_cpu_matmul_multi_with(k, pool, w, PLUME_CPU_MULTI_MAX, x, n_tok, y);
        plume_cpu_matmul_multi_with(k, pool, w + PLUME_CPU_MULTI_MAX, n - PLUME_CPU_MULTI_MAX, x,
                                    n_tok, y + PLUME_CPU_MULTI_MAX);
        return;
    }
    mr_job j = {.k = k};
    const bool f32 = plume_cpu_f32_activations();
    int64_t K = -1;
    for (int i = 0; i < n; i++) {
        if (f32 || w[i]->kr < 0 || (K >= 0 && w[i]->K != K)) {
            plume_cpu_matmul_with(k, pool, w[i]->t, x, n_tok, y[i]);
            continue;
        }
        K = w[i]->K;
        j.w[j.n] = w[i];
        j.y[j.n] = y[i];
        j.gend[j.n] = (j.n ? j.gend[j.n - 1] : 0) + (w[i]->N + PLUME_RP_ROWS - 1) / PLUME_RP_ROWS;
        j.n++;
    }
    if (j.n == 0)
        return;
    const int nth = plume_pool_threads(pool);
    const int64_t total = j.gend[j.n - 1];
    j.chunk = (total + (int64_t)nth * MR_CHUNKS_PER_THREAD - 1) / ((int64_t)nth * MR_CHUNKS_PER_THREAD);
    if (j.chunk < 1)
        j.chunk = 1;
    int step = n_tok;
    uint8_t *ws = act_workspace(pool, n_tok, K, plume_cpu_act_bytes, &step);
    if (!ws) {
        for (int i = 0; i < j.n; i++)
            fill_nan(j.y[i], (size_t)n_tok * (size_t)j.w[i]->N);
        return;
    }
    float *const y0[PLUME_CPU_MULTI_MAX] = {j.y[0], j.y[1], j.y[2], j.y[3]};
    for (int t0 = 0; t0 < n_tok; t0 += step) {
        const int nt = n_tok - t0 < step ? n_tok - t0 : step;
        for (int i = 0; i < j.n; i++)
            j.y[i] = y0[i] + (size_t)t0 * (size_t)j.w[i]->N;
        j.n_tok = nt;
        j.tok_block = mr_token_block(k, nt, K);
        plume_cpu_quantize_rows(k, pool, x + (size_t)t0 * K, nt, K, ws, &j.act);
        atomic_init(&j.next, 0);
        plume_pool_run(pool, mr_worker, &j);
    }
}

void plume_cpu_matmul_multi(plume_pool *pool, const plume_cpu_weight *const *w, int n,
                            const float *x, int n_tok, float *const *y)
{
    plume_cpu_matmul_multi_with(plume_kernels_active(), pool, w, n, x, n_tok, y);
}

void plume_cpu_matmul_w(plume_pool *pool, const plume_cpu_weight *w, const float *x, int n_tok,
                        float *y)
{
    plume_cpu_matmul_multi_with(plume_kernels_active(), pool, &w, 1, x, n_tok, &y);
}
