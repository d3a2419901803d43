/* quant-gptq: a 4-bit (2/3/4/8-bit) group-quantized layer in GPTQ's
 * checkpoint arrays (formats.md §1), repacked at build time into the fast
 * kernels' tiles (gptq_kernels.h) in act-order permuted input order (or,
 * for layers those cannot take, a row-major layout), the CPU reference
 * kernel and the driver of the fast kernels (activation quantization,
 * threads).  This is the common repack target of the quant plugins:
 * quant-gptq builds it from GPTQ tensors, quant-awq from AWQ tensors
 * unpacked into the same arrays (plugins/quant-awq/awq_pack.h). */
#include "gptq_layer.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gptq_kernels.h"
#include "plume/cpu.h"
#include "plume/struct_size.h"

/* ---- the repacked layer ---- */

struct gptq_layer {
    int64_t K, N, G;
    int bits;
    int32_t *perm;     /* [K] act-order: xp[i] = x[perm[i]]; NULL = identity */
    int64_t nseg;      /* runs of one group in (permuted) input order */
    int64_t *seg;      /* [nseg + 1] starts, seg[nseg] = K */
    int32_t *seg_grp;  /* [nseg] */
    int64_t max_seg;
    float *bias;       /* [N] or NULL */
    /* the fast layout (gptq_kernels.h), when fast */
    bool fast;
    uint8_t *tiles;    /* [ntiles][tile_bytes], 64-byte aligned */
    int64_t ntiles;
    int64_t *seg_off;  /* [nseg] byte offset of segment s's header in a tile */
    int32_t *seg_nb;   /* [nseg] blocks of 32 in segment s */
    gptq_kgeom geom;
    /* the reference layout, when not fast */
    int fb, pf;        /* repacked field width (4 for 3-bit), fields per word */
    int64_t kw;        /* words per output row */
    uint32_t *wq;      /* [N][kw]: codes of row n in permuted input order, pf per word,
                          lowest index in the lowest bits */
    float *scale;      /* [N][G] */
    float *zero;       /* [N][G] true zero points */
};

void gptq_layer_free(gptq_layer *l)
{
    if (!l)
        return;
    free(l->perm);
    free(l->seg);
    free(l->seg_grp);
    free(l->tiles);
    free(l->seg_off);
    free(l->seg_nb);
    free(l->wq);
    free(l->scale);
    free(l->zero);
    free(l->bias);
    free(l);
}

void gptq_layer_shape(const gptq_layer *l, int64_t *K, int64_t *N)
{
    *K = l->K;
    *N = l->N;
}

bool gptq_layer_permuted(const gptq_layer *l) { return l->perm != NULL; }

bool gptq_layer_fast(const gptq_layer *l) { return l->fast; }

size_t gptq_layer_weight_bytes(const gptq_layer *l)
{
    if (l->fast)
        return (size_t)l->ntiles * l->geom.tile_bytes;
    return (size_t)(l->N * l->kw) * sizeof *l->wq + 2 * (size_t)(l->N * l->G) * sizeof(float);
}

/* Sets l->perm (NULL when g_idx is absent or non-decreasing; else a stable
 * argsort(g_idx), formats.md §1.4, vLLM exllama) and the segments of the
 * permuted input order.  0, or -1 when out of memory. */
static int layer_order(gptq_layer *l, const int32_t *g_idx, int64_t group_size)
{
    const int64_t K = l->K, G = l->G;
    bool monotone = true;
    if (g_idx)
        for (int64_t k = 1; k < K; k++)
            if (g_idx[k] < g_idx[k - 1])
                monotone = false;
    if (!monotone) {
        l->perm = malloc((size_t)K * sizeof *l->perm);
        int64_t *cnt = calloc((size_t)G + 1, sizeof *cnt);
        if (!l->perm || !cnt) {
            free(cnt);
            return -1;
        }
        for (int64_t k = 0; k < K; k++)
            cnt[g_idx[k] + 1]++;
        for (int64_t g = 0; g < G; g++)
            cnt[g + 1] += cnt[g];
        for (int64_t k = 0; k < K; k++)
            l->perm[cnt[g_idx[k]]++] = (int32_t)k;
        free(cnt);
    }
    l->seg = malloc((size_t)(K + 1) * sizeof *l->seg);
    l->seg_grp = malloc((size_t)K * sizeof *l->seg_grp);
    if (!l->seg || !l->seg_grp)
        return -1;
    l->nseg = 0;
    int32_t prev = -1;
    for (int64_t i = 0; i < K; i++) {
        const int64_t k = l->perm ? l->perm[i] : i;
        const int32_t g = g_idx ? g_idx[k] : (int32_t)(group_size > 0 ? k / group_size : 0);
        if (i == 0 || g != prev) {
            l->seg[l->nseg] = i;
            l->seg_grp[l->nseg++] = g;
        }
        prev = g;
    }
    l->seg[l->nseg] = K;
    for (int64_t s = 0; s < l->nseg; s++)
        if (l->seg[s + 1] - l->seg[s] > l->max_seg)
            l->max_seg = l->seg[s + 1] - l->seg[s];
    return 0;
}

/* The first segment that is not a whole number of 32-input blocks, or -1
 * when the fast layout applies (which also needs K % 32 == 0). */
static int64_t first_ragged_segment(const gptq_layer *l)
{
    for (int64_t s = 0; s < l->nseg; s++)
        if ((l->seg[s + 1] - l->seg[s]) % 32)
            return s;
    return -1;
}

/* Byte offset, inside a tile, of the block holding permuted input i. */
static size_t tile_block_off(const gptq_layer *l, int64_t s, int64_t i)
{
    const size_t bb = l->geom.wide ? GPTQ_BYTE_BLOCK : GPTQ_NIB_BLOCK;
    return (size_t)l->seg_off[s] + GPTQ_HDR_BYTES + (size_t)((i - l->seg[s]) / 32) * bb;
}

/* Byte of a block holding row r's entry e (0..31), and for nibble blocks
 * whether it is the high nibble (gptq_kernels.h). */
static size_t block_byte(bool wide, int r, int e, int *high)
{
    if (wide) {
        *high = 0;
        return (size_t)(64 * (e / 4) + 4 * r + e % 4);
    }
    *high = e >= 16;
    return (size_t)(64 * ((e % 16) / 4) + 4 * r + e % 4);
}

/* Fills the fast layout from the checkpoint arrays (zeros: true zero points
 * [G][N]).  0, or -1 when out of memory. */
static int build_tiles(gptq_layer *l, const int32_t *qweight, const int32_t *zeros,
                       const float *scales)
{
    const int64_t N = l->N;
    const bool wide = l->bits == 8;
    const size_t bb = wide ? GPTQ_BYTE_BLOCK : GPTQ_NIB_BLOCK;
    l->seg_off = malloc((size_t)l->nseg * sizeof *l->seg_off);
    l->seg_nb = malloc((size_t)l->nseg * sizeof *l->seg_nb);
    if (!l->seg_off || !l->seg_nb)
        return -1;
    size_t off = 0;
    for (int64_t s = 0; s < l->nseg; s++) {
        l->seg_off[s] = (int64_t)off;
        l->seg_nb[s] = (int32_t)((l->seg[s + 1] - l->seg[s]) / 32);
        off += GPTQ_HDR_BYTES + (size_t)l->seg_nb[s] * bb;
    }
    l->ntiles = (N + GPTQ_TILE_ROWS - 1) / GPTQ_TILE_ROWS;
    l->geom = (gptq_kgeom){.nseg = l->nseg, .seg_nb = l->seg_nb, .tile_bytes = off, .wide = wide};
    l->tiles = aligned_alloc(64, (size_t)l->ntiles * off); /* off is a multiple of 64 */
    if (!l->tiles)
        return -1;
    memset(l->tiles, 0, (size_t)l->ntiles * off); /* padding rows: sc = z = 0, codes 0 */
    for (int64_t s = 0; s < l->nseg; s++)
        for (int64_t n = 0; n < N; n++) {
            float *hdr = (float *)(l->tiles + (size_t)(n / GPTQ_TILE_ROWS) * off +
                                   (size_t)l->seg_off[s]);
            const int64_t gi = l->seg_grp[s];
            hdr[n % GPTQ_TILE_ROWS] = scales[gi * N + n];
            hdr[GPTQ_TILE_ROWS + n % GPTQ_TILE_ROWS] =
                (float)zeros[gi * N + n] - (wide ? 128.0f : 0.0f);
        }
    for (int64_t s = 0; s < l->nseg; s++)
        for (int64_t i = l->seg[s]; i < l->seg[s + 1]; i++) {
            const int64_t k = l->perm ? l->perm[i] : i;
            const size_t bo = tile_block_off(l, s, i);
            const int e = (int)((i - l->seg[s]) % 32);
            for (int64_t n = 0; n < N; n++) {
                const uint32_t q = gptq_qweight_code(qweight, N, l->bits, k, n);
                int high;
                uint8_t *p = l->tiles + (size_t)(n / GPTQ_TILE_ROWS) * off + bo +
                             block_byte(wide, (int)(n % GPTQ_TILE_ROWS), e, &high);
                if (wide)
                    *p = (uint8_t)(int8_t)((int)q - 128);
                else
                    *p |= (uint8_t)(q << (high ? 4 : 0));
            }
        }
    return 0;
}

/* Fills the reference layout (row-major words, scale/zero [N][G]).  0, or
 * -1 when out of memory. */
static int build_rows(gptq_layer *l, const int32_t *qweight, const int32_t *zeros,
                      const float *scales)
{
    const int64_t K = l->K, N = l->N, G = l->G;
    l->pf = 32 / (l->bits == 3 ? 4 : l->bits); /* a 4-bit field for 3-bit codes */
    l->fb = 32 / l->pf;
    l->kw = (K + l->pf - 1) / l->pf;
    l->wq = calloc((size_t)(N * l->kw), sizeof *l->wq);
    l->scale = malloc((size_t)(N * G) * sizeof *l->scale);
    l->zero = malloc((size_t)(N * G) * sizeof *l->zero);
    if (!l->wq || !l->scale || !l->zero)
        return -1;
    for (int64_t i = 0; i < K; i++) {
        const int64_t k = l->perm ? l->perm[i] : i;
        for (int64_t n = 0; n < N; n++) {
            const uint32_t q = gptq_qweight_code(qweight, N, l->bits, k, n);
            l->wq[n * l->kw + i / l->pf] |= q << (l->fb * (int)(i % l->pf));
        }
    }
    for (int64_t g = 0; g < G; g++)
        for (int64_t n = 0; n < N; n++) {
            l->scale[n * G + g] = scales[g * N + n];
            l->zero[n * G + g] = (float)zeros[g * N + n];
        }
    return 0;
}

int gptq_layer_build_named(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                       const int32_t *g_idx, const float *bias, int64_t K, int64_t N, int64_t G,
                       const gptq_load_config *cfg, const char *name, gptq_layer **out,
                       plume_error *err)
{
    if (gptq_check_bits(cfg->bits, err))
        return -1;
    const int bits = cfg->bits;
    if (gptq_check_layer_shape("gptq", K, N, G, bits, cfg->group_size, err))
        return -1;
    if (cfg->desc_act && !g_idx)
        return plume_err(err, PLUME_ERR_FORMAT,
                         "gptq: desc_act = true needs a g_idx tensor, and the layer has none");
    if (g_idx && gptq_check_g_idx(g_idx, K, G, err))
        return -1;

    gptq_layer *l = calloc(1, sizeof *l);
    int32_t *zeros = malloc((size_t)(G * N) * sizeof *zeros);
    if (!l || !zeros) {
        free(l);
        free(zeros);
        return plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory");
    }
    l->K = K;
    l->N = N;
    l->G = G;
    l->bits = bits;
    if (gptq_unpack_qzeros(qzeros, G, N, bits, cfg->fmt, zeros, err))
        goto fail;
    if (bias) {
        l->bias = malloc((size_t)N * sizeof *l->bias);
        if (!l->bias)
            goto nomem;
        memcpy(l->bias, bias, (size_t)N * sizeof *bias);
    }
    if (layer_order(l, g_idx, cfg->group_size))
        goto nomem;
    const int64_t ragged = first_ragged_segment(l);
    l->fast = ragged < 0;
    if (l->fast ? build_tiles(l, qweight, zeros, scales) : build_rows(l, qweight, zeros, scales))
        goto nomem;
    if (!l->fast)
        fprintf(stderr,
                "plume: gptq: %s%s%s(%" PRId64 " inputs, %" PRId64 " outputs): group %" PRId32
                " runs over %" PRId64 " consecutive inputs%s at input %" PRId64
                ", not a multiple of 32; the fast CPU kernels need that, so this layer uses the"
                " slow reference kernel\n",
                name ? "layer " : "a layer ", name ? name : "", name ? " " : "", K, N, l->seg_grp[ragged],
                l->seg[ragged + 1] - l->seg[ragged], l->perm ? " (in act-order)" : "",
                l->seg[ragged]);
    free(zeros);
    *out = l;
    return 0;
nomem:
    plume_err(err, PLUME_ERR_NOMEM,
              "gptq: out of memory repacking a %" PRId64 "x%" PRId64 " layer", N, K);
fail:
    free(zeros);
    gptq_layer_free(l);
    return -1;
}

int gptq_layer_build(const int32_t *qweight, const int32_t *qzeros, const float *scales,
                     const int32_t *g_idx, const float *bias, int64_t K, int64_t N, int64_t G,
                     const gptq_load_config *cfg, gptq_layer **out, plume_error *err)
{
    return gptq_layer_build_named(qweight, qzeros, scales, g_idx, bias, K, N, G, cfg, NULL, out,
                                  err);
}

/* ---- the reference kernel ---- */

/* buf[i − seg[s]] = the dequantized weight of row n at permuted inputs i of
 * segment s (formats.md §1.5), from either layout. */
static void row_segment(const gptq_layer *l, int64_t n, int64_t s, float *buf)
{
    const int64_t a = l->seg[s], b = l->seg[s + 1];
    if (!l->fast) {
        const uint32_t *row = l->wq + n * l->kw, mask = (1u << l->bits) - 1u;
        const float sc = l->scale[n * l->G + l->seg_grp[s]], z = l->zero[n * l->G + l->seg_grp[s]];
        for (int64_t i = a; i < b; i++) {
            const uint32_t q = (row[i / l->pf] >> (l->fb * (int)(i % l->pf))) & mask;
            buf[i - a] = sc * ((float)q - z);
        }
        return;
    }
    const bool wide = l->geom.wide;
    const int r = (int)(n % GPTQ_TILE_ROWS);
    const uint8_t *tile = l->tiles + (size_t)(n / GPTQ_TILE_ROWS) * l->geom.tile_bytes;
    const float *hdr = (const float *)(tile + l->seg_off[s]);
    const float sc = hdr[r], z = hdr[GPTQ_TILE_ROWS + r];
    for (int64_t i = a; i < b; i++) {
        int high;
        const uint8_t byte = tile[tile_block_off(l, s, i) + block_byte(wide, r, (int)((i - a) % 32), &high)];
        const int v = wide ? (int)(int8_t)byte : high ? byte >> 4 : byte & 15;
        buf[i - a] = sc * ((float)v - z); /* 8-bit: (code − 128) − (zero − 128) */
    }
}

int gptq_forward_ref(const gptq_layer *l, const float *x, int32_t n_tok, float *y,
                     plume_error *err)
{
    if (n_tok < 0)
        return plume_err(err, PLUME_ERR_INVALID, "gptq: n_tok must be >= 0, got %" PRId32, n_tok);
    if (n_tok == 0)
        return 0;
    const int64_t K = l->K, N = l->N;
    float *buf = malloc((size_t)l->max_seg * sizeof *buf);
    float *xp = NULL;
    if (l->perm)
        xp = malloc((size_t)n_tok * (size_t)K * sizeof *xp);
    if (!buf || (l->perm && !xp)) {
        free(buf);
        free(xp);
        return plume_err(err, PLUME_ERR_NOMEM, "gptq: out of memory in forward");
    }
    const float *xs = x;
    if (l->perm) { /* gather activations into the act-order */
        for (int32_t t = 0; t < n_tok; t++)
            for (int64_t i = 0; i < K; i++)
                xp[(int64_t)t * K + i] = x[(int64_t)t * K + l->perm[i]];
        xs = xp;
    }
    for (int64_t n = 0; n < N; n++) {
        for (int32_t t = 0; t < n_tok; t++)
            y[(int64_t)t * N + n] = l->bias ? l->bias[n] : 0.0f;
        for (int64_t s = 0; s < l->nseg; s++) {
            const int64_t a = l->seg[s], b = l->seg[s + 1];
            row_segment(l, n, s, buf);
            for (int32_t t = 0; t < n_tok; t++) {
                const float *xt = xs + (int64_t)t * K + a;
                float acc = 0.0f;
                for (int64_t i = 0; i < b - a; i++)
                    acc += buf[i] * xt[i];
                y[(int64_t)t * N + n] += acc;
            }
        }
    }
    free(buf);
    free(xp);
    return 0;
}

/* ---- the fast path ---- */

/* Quantized activations of n_tok tokens in the layer's input order, in one
 * allocation (gptq_kact). */
typedef struct act_buf {
    void *mem;
    gptq_kact a;
} act_buf;

/* Permutes and quantizes every token of x (on the calling thread) with the
 * core's quantizer; S per segment, isum per block (byte layouts only).
 * 0, or -1 when out of memory. */
static int act_quantize(const gptq_layer *l, const float *x, int32_t n_tok, act_buf *ab)
{
    const int64_t K = l->K, nb = K / 32, ns = l->nseg;
    const size_t nq = ((size_t)n_tok * (size_t)K + 63) / 64 * 64;
    const size_t nf = (size_t)n_tok * (size_t)nb;
    const size_t bytes = nq + nf * (sizeof(float) + sizeof(int32_t)) +
                         (size_t)n_tok * (size_t)ns * sizeof(float) +
                         (l->perm ? (size_t)K * sizeof(float) : 0);
    uint8_t *m = malloc(bytes);
    if (!m)
        return -1;
    int8_t *q = (int8_t *)m;
    float *d = (float *)(m + nq), *S = d + nf;
    int32_t *isum = (int32_t *)(S + (size_t)n_tok * (size_t)ns);
    float *xp = (float *)(isum + nf);
    float *sb = malloc((size_t)nb * sizeof *sb);
    if (!sb) {
        free(m);
        return -1;
    }
    for (int32_t t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * (size_t)K;
        if (l->perm) {
            for (int64_t i = 0; i < K; i++)
                xp[i] = xt[l->perm[i]];
            xt = xp;
        }
        int8_t *qt = q + (size_t)t * (size_t)K;
        plume_cpu_quantize_q8(xt, K, qt, d + (size_t)t * (size_t)nb, sb);
        float *St = S + (size_t)t * (size_t)ns;
        for (int64_t s = 0, b = 0; s < ns; s++) {
            float acc = 0.0f;
            for (int32_t j = 0; j < l->seg_nb[s]; j++)
                acc += sb[b++];
            St[s] = acc;
        }
        if (l->geom.wide)
            for (int64_t b = 0; b < nb; b++) {
                int32_t sum = 0;
                for (int i = 0; i < 32; i++)
                    sum += qt[32 * b + i];
                isum[(size_t)t * (size_t)nb + (size_t)b] = sum;
            }
    }
    free(sb);
    ab->mem = m;
    ab->a = (gptq_kact){.q = q, .d = d, .isum = isum, .S = S, .K = K, .nseg = ns};
    return 0;
}

typedef struct fwd_job {
    const gptq_layer *l;
    gptq_mm_fn mm;
    const gptq_kact *a;
    int n_tok;
    float *y;
} fwd_job;

/* Worker ith of nth: tiles [ntiles·ith/nth, ntiles·(ith+1)/nth), then the
 * bias of their rows. */
static void fwd_worker(void *ctx, int ith, int nth)
{
    const fwd_job *j = ctx;
    const gptq_layer *l = j->l;
    const int64_t j0 = l->ntiles * ith / nth, j1 = l->ntiles * (ith + 1) / nth;
    if (j0 >= j1)
        return;
    j->mm(l->tiles, &l->geom, j0, j1, l->N, j->a, j->n_tok, j->y, l->N);
    if (!l->bias)
        return;
    const int64_t r0 = j0 * GPTQ_TILE_ROWS, r1 = j1 * GPTQ_TILE_ROWS < l->N ? j1 * GPTQ_TILE_ROWS : l->N;
    for (int t = 0; t < j->n_tok; t++)
        for (int64_t r = r0; r < r1; r++)
            j->y[(size_t)t * (size_t)l->N + (size_t)r] += l->bias[r];
}

/* True when the backend offers parallel_for (a vtable new enough to have
 * the slot, and the slot set). */
static bool has_parallel_for(const plume_backend_vtable *bvt, const plume_backend *b)
{
    return b && bvt &&
           PLUME_HAS_MEMBER(plume_backend_vtable, bvt, parallel_for) &&
           bvt->parallel_for;
}

int gptq_forward_level(const gptq_layer *l, int level, const plume_backend_vtable *bvt,
                       plume_backend *b, const float *x, int32_t n_tok, float *y,
                       plume_error *err)
{
    const gptq_kernels *k = level == GPTQ_LEVEL_ACTIVE ? gptq_kernels_active() : gptq_kernels_for(level);
    if (!k)
        return plume_err(err, PLUME_ERR_UNSUPPORTED,
                         "gptq: the %s kernels cannot run on this CPU (or build)",
                         plume_cpu_level_str(level));
    if (!l->fast || plume_cpu_float_activations() || n_tok <= 0)
        return gptq_forward_ref(l, x, n_tok, y, err);
    act_buf ab;
    if (act_quantize(l, x, n_tok, &ab))
        return plume_err(err, PLUME_ERR_NOMEM,
                         "gptq: out of memory quantizing %" PRId32 " tokens of %" PRId64
                         " activations",
                         n_tok, l->K);
    fwd_job j = {.l = l, .mm = l->geom.wide ? k->mm8 : k->mm4, .a = &ab.a, .n_tok = n_tok, .y = y};
    if (has_parallel_for(bvt, b))
        bvt->parallel_for(b, fwd_worker, &j);
    else
        fwd_worker(&j, 0, 1);
    free(ab.mem);
    return 0;
}
