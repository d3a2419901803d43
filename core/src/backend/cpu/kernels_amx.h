/* The amx level's kernels: the repacked matmuls (repack.h, repack_k.h) of
 * many tokens on AMX-INT8 tiles.  kernels_avx512.c includes this file once,
 * after its avx512 kernels (whose pieces it uses), when the compiler knows
 * the tile intrinsics; the amx table is the avx512 one with these mm_r
 * entries and the tiles' int8 peak.
 *
 * A repacked block's 8 weight vectors W[g] (weights 4g..4g+3 of 16 rows,
 * one row per 32-bit lane: zr_tile's W, zk_weights') are a tile multiply's
 * second operand B, 8 rows of 64 bytes; a tile of tokens' block records (64
 * bytes apart, the values first) is its first operand A (16 tokens × 32
 * bytes).  So per block, group of 16 rows and tile of 16 tokens, one
 * tdpbsud (tdpbssd for Q4_0, unpacked to signed n − 8) gives the block's
 * 256 integer sums.  They are stored, read back a token at a time as the
 * 16-lane vectors that vpdpbusd would have made, corrected as zr_sums
 * corrects them, and get the avx512 kernels' float steps (zr_fstep,
 * zk_fsteps) and min-term steps (zr_mstep, zk_msteps) in their order.
 * Integer sums are exact, so every token's result has the avx512 level's
 * bits: tiles and tails, one token or many (test_cpu_repack checks it for
 * every format).
 *
 * Which formats: those with one scale per 32 weights.  The ones with a
 * scale per 16 (Q6_K, Q3_K, Q2_K) would need two multiplies of K = 16 a
 * block, twice the tile work, and ran no faster than vpdpbusd that way
 * (`bench_mm_r amx 64 4096`, 2026-12-06: Q6_K 125 against 119 Gweights/s,
 * Q3_K 118 against 122, Q2_K 118 against 134), so the amx table keeps
 * their avx512 kernels.
 *
 * Per group of 16 rows, pass of up to AM_TB tokens and chunk of AM_KB
 * blocks, the blocks are unpacked once for the pass's token tiles (a
 * second pass over a 96-token call, unpacking again, cost Q4_K 14%) (Q8_0's
 * bytes are used in place): the nibbles, the higher bits merged in and the
 * levels looked up, and for the repack_k.h formats their float scales.  The
 * float sums continue from chunk to chunk in y, the min terms in a scratch
 * array, and the two are added after the last chunk, as the avx512 kernels
 * add them after the last block.  Fewer than AM_MIN_TOK tokens, and a
 * call's last tokens short of a tile, run zw_mm (kernels_avx512.c): the
 * avx512 level's steps on wide tiles of 16 tokens, then its zr_mm. */
#ifndef PLUME_CPU_KERNELS_AMX_H
#define PLUME_CPU_KERNELS_AMX_H

#define AM_T 16   /* tokens per tile */
#define AM_TB 256 /* tokens per pass over a group's unpacked chunks: a call's all (matmul.c gives at most 96) */
#define AM_KB 32  /* blocks per chunk (a multiple of 8: whole super-blocks) */
_Static_assert(AM_KB % 8 == 0, "a chunk starts a super-block (am_unpack's zk_super)");
_Static_assert(AM_TB % AM_T == 0, "a pass is whole tiles");

/* The tile configuration (palette 1): C0 .. C3 16 × 16 int32 sums (four
 * blocks in flight); A0, A1 16 tokens × 32 bytes; B0, B1 8 rows × 64 bytes
 * (one block's W).  Blocks take C0 .. C3 in turn and A0/B0, A1/B1
 * alternately. */
#define AM_C0 0 /* literals: the tile intrinsics paste their number into the asm */
#define AM_C1 1
#define AM_C2 2
#define AM_C3 3
#define AM_A0 4
#define AM_A1 5
#define AM_B0 6
#define AM_B1 7
typedef struct am_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} am_cfg;

/* ldtilecfg of c.  GCC's builtin does not tell the optimizer that it reads
 * the 64 bytes, which then drops the stores that fill them: the asm's
 * memory operand keeps them. */
KX_INLINE void am_load_config(const am_cfg *c)
{
    __asm__ volatile("ldtilecfg %0" : : "m"(*c));
}

static void am_configure(void)
{
    _Alignas(64) am_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = AM_C0; t <= AM_C3; t++) {
        c.rows[t] = AM_T;
        c.colsb[t] = 64;
    }
    for (int t = AM_A0; t <= AM_A1; t++) {
        c.rows[t] = AM_T;
        c.colsb[t] = 32;
    }
    for (int t = AM_B0; t <= AM_B1; t++) {
        c.rows[t] = 8;
        c.colsb[t] = 64;
    }
    am_load_config(&c);
}

/* 1 for the formats with a min term (a second float chain). */
KX_INLINE int am_has_min(const int kr)
{
    return kr == PLUME_KR_Q4_1 || (kr >= PLUME_KR_Q5_0 && plume_rpk_min_kind(plume_rpk_fmt_of(kr)));
}

/* The B operands of a group's blocks j0 .. j0+n-1 (n <= AM_KB) into wbuf,
 * 512 bytes a block (W[0] .. W[7]), and for the repack_k.h formats their
 * scales into sb (dd0, dd1, mm0, mm1 a block).  Q4_0's nibbles become
 * n − 8; Q8_0 is not unpacked. */
KX_INLINE void am_unpack(const int kr, const uint8_t *wg, int64_t j0, int64_t n, uint8_t *wbuf,
                         zk_sc *sb)
{
    __m512i W[8];
    if (kr >= PLUME_KR_Q5_0) {
        const plume_rpk_fmt f = plume_rpk_fmt_of(kr);
        const size_t bb = plume_rpk_block_bytes(f);
        const __m512i lut = zk_lut(f);
        __m512 dsb = _mm512_setzero_ps(), msb = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j++) {
            const uint8_t *b = wg + plume_rpk_block_off(f, j0 + j);
            kx_prefetch_ahead(b, bb);
            zk_super(f, wg, j0 + j, &dsb, &msb);
            zk_weights(f, b, lut, W);
            for (int g = 0; g < 8; g++)
                _mm512_store_si512(wbuf + 512 * (size_t)j + 64 * g, W[g]);
            sb[j] = zk_scales(f, b, dsb, msb);
        }
        return;
    }
    const size_t bb = plume_rp_block_bytes(kr);
    const __m512i off = kr == PLUME_KR_Q4_0 ? _mm512_set1_epi8(8) : _mm512_setzero_si512();
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *b = wg + (size_t)(j0 + j) * bb;
        kx_prefetch_ahead(b, bb);
        zr_nibbles(b, W);
        for (int g = 0; g < 8; g++)
            _mm512_store_si512(wbuf + 512 * (size_t)j + 64 * g, _mm512_sub_epi8(W[g], off));
    }
}

/* One tile multiply into sums buffer c: A = 16 tokens' bytes at q (64
 * bytes apart), B = the weight operand at w.  The tile numbers are
 * immediates. */
#define AM_MUL(kr, C, A, B, q, w, c)                       \
    do {                                                   \
        _tile_loadd(B, (w), 64);                           \
        _tile_loadd(A, (q), sizeof(plume_q8_blk));         \
        _tile_zero(C);                                     \
        if ((kr) == PLUME_KR_Q4_0)                         \
            _tile_dpbssd(C, A, B);                         \
        else                                               \
            _tile_dpbsud(C, A, B);                         \
        _tile_stored(C, (c), 64);                          \
    } while (0)

/* The float steps of one block for the tile's 16 tokens (records r) from
 * its stored sums c: b the repack.h block (its d), s the repack_k.h
 * block's scales. */
KX_INLINE void am_fold(const int kr, __m512 *facc, __m512 *macc, const int32_t *c,
                       const uint8_t *b, const zk_sc *s, const plume_q8_blk *r)
{
    if (kr >= PLUME_KR_Q5_0) {
        const plume_rpk_fmt f = plume_rpk_fmt_of(kr);
        const int corr = zk_corr(f);
        for (int t = 0; t < AM_T; t++) {
            __m512i I = _mm512_load_si512(c + 16 * t);
            if (corr)
                I = _mm512_add_epi32(_mm512_set1_epi32(corr * r[t].isum), I);
            zk_fsteps(f, I, I, s, r + t, facc + t);
            zk_msteps(f, s, r + t, macc + t);
        }
        return;
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + plume_rp_d_off(kr))));
    const __m512 mw = kr == PLUME_KR_Q4_1 ? _mm512_cvtph_ps(_mm256_loadu_si256(
                                                (const __m256i *)(b + plume_rp_d_off(kr) + 32)))
                                          : _mm512_setzero_ps();
    for (int t = 0; t < AM_T; t++) {
        __m512i I = _mm512_load_si512(c + 16 * t);
        if (kr == PLUME_KR_Q8_0) /* Q4_0's −8 is in its unpacked weights */
            I = _mm512_add_epi32(_mm512_set1_epi32(plume_rp_corr(kr) * r[t].isum), I);
        zr_fstep(I, dw, r + t, facc + t);
        if (kr == PLUME_KR_Q4_1)
            zr_mstep(mw, r + t, macc + t);
    }
}

/* Blocks in flight: block j's multiply is issued AM_LAG blocks before its
 * float steps, so that the multiply's latency and the sums' trip through
 * memory overlap other blocks' work. */
#define AM_LAG 2

/* Tokens t0 .. t0+15 of one group of 16 rows (wg), blocks j0 .. j0+n-1:
 * the B operand of block j0+i at wop + i·wstride, its scales sb[i].  The
 * float sums continue from y (first: from zero), the min terms from m;
 * after the last chunk y's rows under mask get their sum, before it the
 * float sums.  (The two chains' 32 accumulators leave the compiler a few
 * to spill; keeping the min terms in memory instead, or halving the tile
 * to 8 tokens, ran Q4_K and Q5_K 10-30% slower.) */
KX_INLINE void am_tile(const int kr, const uint8_t *wg, int64_t j0, int64_t n,
                       const uint8_t *wop, size_t wstride, const zk_sc *sb, const plume_q8_act *a,
                       int t0, float *y, int64_t ldy, __mmask16 mask, float *m, bool first, bool last)
{
    const size_t ldb = (size_t)a->ldb;
    const plume_q8_blk *r0 = a->blk + (size_t)j0 * ldb + (size_t)t0;
    const size_t bb = kr >= PLUME_KR_Q5_0 ? 0 : plume_rp_block_bytes(kr);
    const int hm = am_has_min(kr);
    _Alignas(64) int32_t c[4][AM_T * 16];
    __m512 facc[AM_T], macc[AM_T];
    for (int t = 0; t < AM_T; t++) {
        facc[t] = first ? _mm512_setzero_ps()
                        : _mm512_maskz_loadu_ps(mask, y + (size_t)(t0 + t) * ldy);
        macc[t] = first || !hm ? _mm512_setzero_ps() : _mm512_load_ps(m + 16 * t);
    }
    for (int64_t j = 0; j < n + AM_LAG; j++) {
        if (j < n) {
            const plume_q8_blk *r = r0 + (size_t)j * ldb;
            _mm_prefetch((const char *)(r + 4 * ldb), _MM_HINT_T0);
            const uint8_t *w = wop + (size_t)j * wstride;
            switch (j & 3) {
            case 0: AM_MUL(kr, AM_C0, AM_A0, AM_B0, r->q, w, c[0]); break;
            case 1: AM_MUL(kr, AM_C1, AM_A1, AM_B1, r->q, w, c[1]); break;
            case 2: AM_MUL(kr, AM_C2, AM_A0, AM_B0, r->q, w, c[2]); break;
            default: AM_MUL(kr, AM_C3, AM_A1, AM_B1, r->q, w, c[3]); break;
            }
        }
        if (j >= AM_LAG) {
            const int64_t f = j - AM_LAG;
            am_fold(kr, facc, macc, c[f & 3], wg + (size_t)(j0 + f) * bb, sb + f,
                    r0 + (size_t)f * ldb);
        }
    }
    for (int t = 0; t < AM_T; t++) {
        __m512 v = facc[t];
        if (hm && last)
            v = _mm512_add_ps(v, macc[t]);
        else if (hm)
            _mm512_store_ps(m + 16 * t, macc[t]);
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy, mask, v);
    }
}

/* Tokens from which a call runs on tiles: where the unpacking, paid once
 * per pass, is repaid against zw_mm's wide vector tiles:
 * `bench_mm_r avx512|amx N 2048`, one thread, 2-4 alternating runs,
 * 2026-12-07, Gweights/s on tiles against vpdpbusd.  Q8_0's operands need
 * no unpacking: 16 (230 against 193).  Q4_0: 32 (198-210 against
 * 198-203).  The rest: 48 (at 32 tokens Q5_0 166-180 against 178-184, Q5_K
 * 164-175 against 173-180, IQ4_XS 172-184 against 178-186; at 48 Q5_K 182-186
 * against 174, Q4_1 195 against 186-190, Q4_K 184-187 against 182-185,
 * and at 96 Q4_K 206 against 164). */
#define AM_MIN_TOK(kr) ((kr) == PLUME_KR_Q8_0 ? AM_T : (kr) == PLUME_KR_Q4_0 ? 2 * AM_T : 3 * AM_T)

KX_INLINE void am_mm(const int kr, const uint8_t *w, int n_rows, const plume_q8_act *a,
                     int n_tok, float *y, int64_t ldy)
{
    const int n_full = n_tok >= AM_MIN_TOK(kr) ? n_tok / AM_T * AM_T : 0;
    if (n_full > 0) {
        const int64_t nb = a->K / 32;
        const size_t gb = plume_rp_group_bytes(kr, nb);
        _Alignas(64) uint8_t wbuf[AM_KB * 512];
        zk_sc sb[AM_KB];
        _Alignas(64) float m[AM_TB * 16]; /* the min terms of a pass's tokens */
        am_configure();
        const uint8_t *wg = w;
        for (int g0 = 0; g0 < n_rows; g0 += PLUME_RP_ROWS, wg += gb) {
            const int nr = n_rows - g0 < PLUME_RP_ROWS ? n_rows - g0 : PLUME_RP_ROWS;
            const __mmask16 mask = (__mmask16)((1u << nr) - 1);
            for (int p0 = 0; p0 < n_full; p0 += AM_TB) {
                const int p1 = n_full - p0 < AM_TB ? n_full : p0 + AM_TB;
                for (int64_t j0 = 0; j0 < nb; j0 += AM_KB) {
                    const int64_t n = nb - j0 < AM_KB ? nb - j0 : AM_KB;
                    const uint8_t *wop = wbuf;
                    size_t wstride = 512;
                    if (kr == PLUME_KR_Q8_0) {
                        wop = wg + (size_t)j0 * plume_rp_block_bytes(kr);
                        wstride = plume_rp_block_bytes(kr);
                    } else {
                        am_unpack(kr, wg, j0, n, wbuf, sb);
                    }
                    for (int t = p0; t < p1; t += AM_T)
                        am_tile(kr, wg, j0, n, wop, wstride, sb, a, t, y + g0, ldy, mask,
                                m + 16 * (t - p0), j0 == 0, j0 + n == nb);
                }
            }
        }
        _tile_release();
    }
    if (n_full < n_tok) {
        plume_q8_act rest = *a;
        rest.blk += n_full; /* zr_tile and zk_tile read the records only */
        zw_mm(kr, w, n_rows, &rest, n_tok - n_full, y + (size_t)n_full * (size_t)ldy, ldy);
    }
}

#define AM_MM(name, kr) PLUME_MM_R_ENTRY(name, am_mm, kr)
AM_MM(am_mm_q4_0, PLUME_KR_Q4_0)
AM_MM(am_mm_q4_1, PLUME_KR_Q4_1)
AM_MM(am_mm_q8_0, PLUME_KR_Q8_0)
AM_MM(am_mm_q5_0, PLUME_KR_Q5_0)
AM_MM(am_mm_q5_1, PLUME_KR_Q5_1)
AM_MM(am_mm_iq4_nl, PLUME_KR_IQ4_NL)
AM_MM(am_mm_q4_k, PLUME_KR_Q4_K)
AM_MM(am_mm_q5_k, PLUME_KR_Q5_K)
AM_MM(am_mm_iq4_xs, PLUME_KR_IQ4_XS)
AM_MM(am_mm_mxfp4, PLUME_KR_MXFP4)

/* The amx level's int8 peak, the machine's: four independent chains of
 * full tile multiplies (16 × 16 × 64 products each) on two A and two B
 * tiles of zeros.  iters / 16 multiplies per chain, so that a call takes
 * about as long as the vpdpbusd loop's. */
static double amx_int8_peak(long iters)
{
    _Alignas(64) am_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.rows[t] = 16;
        c.colsb[t] = 64;
    }
    am_load_config(&c); /* which zeroes every tile */
    iters = iters / 16 > 0 ? iters / 16 : 1;
    for (long it = 0; it < iters; it++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_release();
    return 2.0 * 16.0 * 16.0 * 64.0 * 4.0 * (double)iters;
}

#endif
