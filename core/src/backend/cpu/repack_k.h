/* Repacked layouts of the other GGUF block types (Q5_0, Q5_1, IQ4_NL, the
 * K-quants Q2_K..Q6_K, IQ4_XS and MXFP4) for the mm_r kernels: the same
 * idea as repack.h (16 rows interleaved, one row per 32-bit lane, 4
 * consecutive weights of a row per lane), generalized so that every
 * format keeps about its GGUF size: the bits above the low 4 (or 2) stay
 * packed, and the K-quants keep their small integer scales, with the
 * super-block's f16 d (and dmin) stored once per 256 weights.
 *
 * Every format is read as 32-weight blocks of unsigned integers u (each
 * weight w = scale · (u + corr), or scale · level[u] for IQ4 and MXFP4,
 * + min), decoded from the GGUF blocks (formats.md §3.2; gguf-py quants.py
 * dequantize_blocks, mirrored by core/src/formats/dtype.c).
 *
 * A group (16 rows × K) is nb = K/32 blocks of plume_rpk_block_bytes.  The
 * K-quants have one record per super-block of 256 weights, stored just
 * before its 8 blocks, so that a kernel reads its group front to back as
 * one stream (plume_rpk_block_off, plume_rpk_super_off):
 *   d f16[16] (row r at 2r), and dmin f16[16] after it (Q2_K, Q4_K, Q5_K).
 * A block is, in order:
 *   lo  4-bit formats: 4 slices of 64 bytes as repack.h's nib: slice h,
 *       bytes 4r+i: u[4h+i] & 0xF in the low nibble, u[16+4h+i] & 0xF in
 *       the high one.  So weight-group g (weights 4g..4g+3, g = 0..7) is
 *       slice g&3 shifted right by 4·(g>>2), & 0xF.
 *       2-bit formats (Q2_K, Q3_K): 2 slices of 64 bytes: slice k, byte
 *       4r+i, bits 2m..2m+1 hold u[4(4k+m)+i] & 3 (m = 0..3).
 *   hi  the bits of u above lo (u >> lo_bits): 1 bit (Q5_0, Q5_1, Q5_K,
 *       Q3_K): one slice of 64 bytes, byte 4r+i bit g = that bit of
 *       u[4g+i]; 2 bits (Q6_K): 2 slices, slice k byte 4r+i bits 2m..2m+1
 *       = the 2 bits of u[4(4k+m)+i].
 *   sc  per-row scales of the block (row r at the offsets given):
 *       D16   Q5_0, IQ4_NL  d f16 at 2r                w = d·(u+corr)
 *       DM16  Q5_1          d f16 at 2r, m f16 at 32+2r  w = d·u + m
 *       K32M  Q4_K, Q5_K    sc u8 at r, mn u8 at 16+r    w = (D·sc)·u − Dmin·mn
 *       K16   Q6_K, Q3_K    sc0 i8 at r, sc1 i8 at 16+r  w = (D·sc_h)·(u+corr)
 *       K16M  Q2_K          b0 u8 at r, b1 u8 at 16+r    w = (D·(b_h&15))·u − Dmin·(b_h>>4)
 *       K32   IQ4_XS        sc i8 at r                   w = (D·sc)·level[u]
 *       E8    MXFP4         e u8 at r                    w = 2^(e−128)·level[u]
 *       (D, Dmin: the super-block's; _h: weights 0..15 use the first, 16..31
 *       the second; Q3_K's sc are its 6-bit scales − 32.)
 *
 * The kernels compute, per block and token (a ≈ da·q; isum16 the sums of
 * q over each 16, s = da·Σq over 32, s16 = da·isum16):
 *   i0 = Σ_{i<16} u_i·q_i + corr·isum16[0], i1 likewise over 16..31 (exact
 *   integers; IQ4, MXFP4: level[u] in place of u + corr)
 *   one scale per 32:  facc += float(i0 + i1) · (dd · da)
 *   two (per 16):      facc += float(i0) · (dd0 · da); facc += float(i1) · (dd1 · da)
 *   min per 32:        macc += mm · s        min per 16: macc += mm0·s16[0]; macc += mm1·s16[1]
 *   y = facc + macc, with dd = D·sc (or d) and mm = −Dmin·mn (or m) in f32.
 * Every level does these float steps in this order for each token. */
#ifndef PLUME_CPU_REPACK_K_H
#define PLUME_CPU_REPACK_K_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/dispatch.h"
#include "backend/cpu/repack.h"
#include "plume/fp16.h"

enum { PLUME_SK_D16, PLUME_SK_DM16, PLUME_SK_K32M, PLUME_SK_K16, PLUME_SK_K16M, PLUME_SK_K32, PLUME_SK_E8 };

/* The 16 IQ4_NL / IQ4_XS levels (gguf-py IQ4_NL.kvalues). */
static const int8_t PLUME_IQ4_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

typedef struct plume_rpk_fmt {
    uint8_t lo_bits; /* 4 or 2 */
    uint8_t hi_bits; /* 0, 1 or 2 */
    uint8_t sk;      /* PLUME_SK_* */
    int8_t corr;     /* added to u (0: none); the level formats use lv instead */
    const int8_t *lv; /* non-NULL: w ∝ lv[u] (IQ4_NL, IQ4_XS, MXFP4) */
    uint8_t ksuper;  /* 1: a K-quant (256-weight super-blocks, d/dmin per group record) */
    uint8_t dmin;    /* 1: the super-block record also has dmin */
    uint16_t src_bytes; /* GGUF bytes per 32 weights (Q5_0..IQ4_NL, MXFP4) or per 256 (K) */
} plume_rpk_fmt;

/* Format of a PLUME_KR_* id at or above PLUME_KR_Q5_0. */
static inline plume_rpk_fmt plume_rpk_fmt_of(int kr)
{
    switch (kr) {
    case PLUME_KR_Q5_0: return (plume_rpk_fmt){4, 1, PLUME_SK_D16, -16, NULL, 0, 0, 22};
    case PLUME_KR_Q5_1: return (plume_rpk_fmt){4, 1, PLUME_SK_DM16, 0, NULL, 0, 0, 24};
    case PLUME_KR_IQ4_NL: return (plume_rpk_fmt){4, 0, PLUME_SK_D16, 0, PLUME_IQ4_LEVELS, 0, 0, 18};
    case PLUME_KR_Q4_K: return (plume_rpk_fmt){4, 0, PLUME_SK_K32M, 0, NULL, 1, 1, 144};
    case PLUME_KR_Q5_K: return (plume_rpk_fmt){4, 1, PLUME_SK_K32M, 0, NULL, 1, 1, 176};
    case PLUME_KR_Q6_K: return (plume_rpk_fmt){4, 2, PLUME_SK_K16, -32, NULL, 1, 0, 210};
    case PLUME_KR_Q2_K: return (plume_rpk_fmt){2, 0, PLUME_SK_K16M, 0, NULL, 1, 1, 84};
    case PLUME_KR_Q3_K: return (plume_rpk_fmt){2, 1, PLUME_SK_K16, -4, NULL, 1, 0, 110};
    case PLUME_KR_IQ4_XS: return (plume_rpk_fmt){4, 0, PLUME_SK_K32, 0, PLUME_IQ4_LEVELS, 1, 0, 136};
    default: /* PLUME_KR_MXFP4 */ return (plume_rpk_fmt){4, 0, PLUME_SK_E8, 0, PLUME_MXFP4_LEVELS, 0, 0, 17};
    }
}

static inline size_t plume_rpk_lo_bytes(plume_rpk_fmt f) { return (size_t)f.lo_bits * 64; }
static inline size_t plume_rpk_sc_off(plume_rpk_fmt f) { return (size_t)(f.lo_bits + f.hi_bits) * 64; }
static inline size_t plume_rpk_sc_bytes(plume_rpk_fmt f)
{
    return f.sk == PLUME_SK_DM16 ? 64 : f.sk == PLUME_SK_K32 || f.sk == PLUME_SK_E8 ? 16 : 32;
}
static inline size_t plume_rpk_block_bytes(plume_rpk_fmt f)
{
    return plume_rpk_sc_off(f) + plume_rpk_sc_bytes(f);
}
/* Bytes of one super-block record (0 for the 32-weight formats). */
static inline size_t plume_rpk_super_bytes(plume_rpk_fmt f)
{
    return f.ksuper ? (f.dmin ? 64 : 32) : 0;
}
/* Bytes of one group of nb blocks. */
static inline size_t plume_rpk_group_bytes(plume_rpk_fmt f, int64_t nb)
{
    return plume_rpk_block_bytes(f) * (size_t)nb + plume_rpk_super_bytes(f) * (size_t)(nb / 8);
}

/* Offset in its group of the record of the super-block that holds block j
 * (K-quants only: nb is then a multiple of 8). */
static inline size_t plume_rpk_super_off(plume_rpk_fmt f, int64_t j)
{
    return (size_t)(j >> 3) * (plume_rpk_super_bytes(f) + 8 * plume_rpk_block_bytes(f));
}

/* Offset of block j in its group: j whole blocks, and for the K-quants the
 * records of super-blocks j/8 and before. */
static inline size_t plume_rpk_block_off(plume_rpk_fmt f, int64_t j)
{
    if (!f.ksuper)
        return (size_t)j * plume_rpk_block_bytes(f);
    return plume_rpk_super_off(f, j) + plume_rpk_super_bytes(f) + (size_t)(j & 7) * plume_rpk_block_bytes(f);
}

/* Bytes of one group of nb blocks of any repacked format (repack.h's or
 * this file's). */
static inline size_t plume_rp_group_bytes(int kr, int64_t nb)
{
    return kr >= PLUME_KR_Q5_0 ? plume_rpk_group_bytes(plume_rpk_fmt_of(kr), nb)
                               : plume_rp_block_bytes(kr) * (size_t)nb;
}

/* One row's 32-weight block j, decoded from GGUF. */
typedef struct plume_rpk_src {
    uint8_t u[32];
    uint16_t d, m;       /* D16/DM16: f16 bits */
    uint8_t sc0, sc1;    /* raw per-block scale bytes (see the table above; MXFP4's e) */
    uint16_t sd, smin;   /* K: the super-block's d and dmin (f16 bits) */
} plume_rpk_src;

static inline uint16_t plume_rpk_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Decodes block j (32 weights) of a GGUF row of format kr. */
static inline void plume_rpk_decode(int kr, const uint8_t *row, int64_t j, plume_rpk_src *o)
{
    memset(o, 0, sizeof *o);
    const int sub = (int)(j & 7);
    switch (kr) {
    case PLUME_KR_Q5_0:
    case PLUME_KR_Q5_1: {
        const int q51 = kr == PLUME_KR_Q5_1;
        const uint8_t *b = row + j * (q51 ? 24 : 22);
        o->d = plume_rpk_u16(b);
        if (q51)
            o->m = plume_rpk_u16(b + 2);
        const uint8_t *h = b + (q51 ? 4 : 2), *qs = h + 4;
        const uint32_t qh = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
        for (int i = 0; i < 16; i++) {
            o->u[i] = (uint8_t)((qs[i] & 0xF) | ((qh >> i) & 1) << 4);
            o->u[i + 16] = (uint8_t)((qs[i] >> 4) | ((qh >> (i + 16)) & 1) << 4);
        }
        break;
    }
    case PLUME_KR_IQ4_NL:
    case PLUME_KR_MXFP4: { /* the same nibble order as Q4_0 */
        const int mx = kr == PLUME_KR_MXFP4;
        const uint8_t *b = row + j * (mx ? 17 : 18), *qs = b + (mx ? 1 : 2);
        if (mx)
            o->sc0 = b[0];
        else
            o->d = plume_rpk_u16(b);
        for (int i = 0; i < 16; i++) {
            o->u[i] = qs[i] & 0xF;
            o->u[i + 16] = qs[i] >> 4;
        }
        break;
    }
    case PLUME_KR_Q4_K:
    case PLUME_KR_Q5_K: {
        const int q5 = kr == PLUME_KR_Q5_K;
        const uint8_t *b = row + (j >> 3) * (q5 ? 176 : 144), *s = b + 4;
        o->sd = plume_rpk_u16(b);
        o->smin = plume_rpk_u16(b + 2);
        if (sub < 4) { /* get_scale_min_k4 */
            o->sc0 = s[sub] & 63;
            o->sc1 = s[sub + 4] & 63;
        } else {
            o->sc0 = (uint8_t)((s[sub + 4] & 0xF) | ((s[sub - 4] >> 6) << 4));
            o->sc1 = (uint8_t)((s[sub + 4] >> 4) | ((s[sub] >> 6) << 4));
        }
        const uint8_t *qs = b + (q5 ? 48 : 16) + 32 * (sub >> 1), *qh = b + 16;
        for (int l = 0; l < 32; l++)
            o->u[l] = (uint8_t)(((qs[l] >> (4 * (sub & 1))) & 0xF) | (q5 ? ((qh[l] >> sub) & 1) << 4 : 0));
        break;
    }
    case PLUME_KR_Q6_K: {
        const uint8_t *b = row + (j >> 3) * 210;
        const int h = sub >> 2, k = sub & 3;
        const uint8_t *ql = b + 64 * h + 32 * (k & 1), *qh = b + 128 + 32 * h;
        o->sc0 = b[192 + 8 * h + 2 * k];
        o->sc1 = b[192 + 8 * h + 2 * k + 1];
        o->sd = plume_rpk_u16(b + 208);
        for (int l = 0; l < 32; l++)
            o->u[l] = (uint8_t)(((ql[l] >> (4 * (k >> 1))) & 0xF) | ((qh[l] >> (2 * k)) & 3) << 4);
        break;
    }
    case PLUME_KR_Q2_K: {
        const uint8_t *b = row + (j >> 3) * 84;
        const uint8_t *qs = b + 16 + 32 * (sub >> 2);
        o->sc0 = b[2 * sub];
        o->sc1 = b[2 * sub + 1];
        o->sd = plume_rpk_u16(b + 80);
        o->smin = plume_rpk_u16(b + 82);
        for (int l = 0; l < 32; l++)
            o->u[l] = (qs[l] >> (2 * (sub & 3))) & 3;
        break;
    }
    case PLUME_KR_Q3_K: {
        const uint8_t *b = row + (j >> 3) * 110;
        const uint8_t *hm = b, *qs = b + 32 + 32 * (sub >> 2), *s = b + 96;
        for (int h = 0; h < 2; h++) {
            const int i = 2 * sub + h;
            const int v = (((s[i % 8] >> (4 * (i / 8))) & 0xF) | ((s[8 + i % 4] >> (2 * (i / 4))) & 3) << 4) - 32;
            if (h)
                o->sc1 = (uint8_t)(int8_t)v;
            else
                o->sc0 = (uint8_t)(int8_t)v;
        }
        o->sd = plume_rpk_u16(b + 108);
        for (int l = 0; l < 32; l++)
            o->u[l] = (uint8_t)(((qs[l] >> (2 * (sub & 3))) & 3) | ((hm[l] >> sub) & 1) << 2);
        break;
    }
    default: { /* IQ4_XS */
        const uint8_t *b = row + (j >> 3) * 136;
        const unsigned sh = plume_rpk_u16(b + 2);
        const int ls = ((b[4 + sub / 2] >> (4 * (sub & 1))) & 0xF) | (int)((sh >> (2 * sub)) & 3) << 4;
        o->sc0 = (uint8_t)(int8_t)(ls - 32);
        o->sd = plume_rpk_u16(b);
        const uint8_t *qs = b + 8 + 16 * sub;
        for (int l = 0; l < 16; l++) {
            o->u[l] = qs[l] & 0xF;
            o->u[l + 16] = qs[l] >> 4;
        }
        break;
    }
    }
}

/* Repacks rows [16g, 16g + 16) ∩ [0, n_rows) of GGUF rows (rb bytes apart,
 * K = 32·nb values each) of format kr into group g at dst (zeroed padding
 * rows: their scales are 0, so they compute 0). */
static inline void plume_rpk_pack_group(int kr, const uint8_t *src, size_t rb, int64_t n_rows,
                                        int64_t g, int64_t nb, uint8_t *dst)
{
    const plume_rpk_fmt f = plume_rpk_fmt_of(kr);
    const size_t so = plume_rpk_sc_off(f), lob = plume_rpk_lo_bytes(f);
    memset(dst, 0, plume_rpk_group_bytes(f, nb));
    plume_rpk_src s;
    for (int r = 0; r < 16; r++) {
        const int64_t row = g * 16 + r;
        if (row >= n_rows)
            break;
        const uint8_t *rp = src + (size_t)row * rb;
        for (int64_t j = 0; j < nb; j++) {
            plume_rpk_decode(kr, rp, j, &s);
            uint8_t *b = dst + plume_rpk_block_off(f, j);
            for (int i = 0; i < 4; i++) {
                if (f.lo_bits == 4) {
                    for (int h = 0; h < 4; h++)
                        b[64 * h + 4 * r + i] = (uint8_t)((s.u[4 * h + i] & 0xF) | (s.u[16 + 4 * h + i] & 0xF) << 4);
                } else {
                    for (int k = 0; k < 2; k++)
                        for (int m = 0; m < 4; m++)
                            b[64 * k + 4 * r + i] |= (uint8_t)((s.u[4 * (4 * k + m) + i] & 3) << (2 * m));
                }
                for (int gi = 0; gi < 8; gi++) {
                    const int hv = s.u[4 * gi + i] >> f.lo_bits;
                    if (f.hi_bits == 1)
                        b[lob + 4 * r + i] |= (uint8_t)((hv & 1) << gi);
                    else if (f.hi_bits == 2)
                        b[lob + 64 * (gi >> 2) + 4 * r + i] |= (uint8_t)((hv & 3) << (2 * (gi & 3)));
                }
            }
            uint8_t *sc = b + so;
            switch (f.sk) {
            case PLUME_SK_D16: memcpy(sc + 2 * r, &s.d, 2); break;
            case PLUME_SK_DM16:
                memcpy(sc + 2 * r, &s.d, 2);
                memcpy(sc + 32 + 2 * r, &s.m, 2);
                break;
            case PLUME_SK_K32:
            case PLUME_SK_E8: sc[r] = s.sc0; break;
            default:
                sc[r] = s.sc0;
                sc[16 + r] = s.sc1;
                break;
            }
            if (f.ksuper && (j & 7) == 0) {
                uint8_t *rec = dst + plume_rpk_super_off(f, j);
                memcpy(rec + 2 * r, &s.sd, 2);
                if (f.dmin)
                    memcpy(rec + 32 + 2 * r, &s.smin, 2);
            }
        }
    }
}

/* Row r's float factors of block j of a group (see the top comment):
 * dd0/dd1 the scales of weights 0..15 / 16..31 (equal for one-scale
 * formats), mm0/mm1 the min terms (mm1 = 0 and mm0 per 32 unless per16),
 * all as the kernels compute them in f32. */
typedef struct plume_rpk_scales {
    float dd0, dd1, mm0, mm1;
} plume_rpk_scales;

static inline float plume_rpk_f16(const uint8_t *p) { return plume_fp16_to_fp32(plume_rpk_u16(p)); }

static inline plume_rpk_scales plume_rpk_row_scales(plume_rpk_fmt f, const uint8_t *group, int64_t j, int r)
{
    const uint8_t *sc = group + plume_rpk_block_off(f, j) + plume_rpk_sc_off(f);
    const uint8_t *rec = group + plume_rpk_super_off(f, j);
    plume_rpk_scales o = {0, 0, 0, 0};
    switch (f.sk) {
    case PLUME_SK_D16: o.dd0 = o.dd1 = plume_rpk_f16(sc + 2 * r); break;
    case PLUME_SK_DM16:
        o.dd0 = o.dd1 = plume_rpk_f16(sc + 2 * r);
        o.mm0 = plume_rpk_f16(sc + 32 + 2 * r);
        break;
    case PLUME_SK_K32M:
        o.dd0 = o.dd1 = plume_rpk_f16(rec + 2 * r) * (float)sc[r];
        o.mm0 = -(plume_rpk_f16(rec + 32 + 2 * r) * (float)sc[16 + r]);
        break;
    case PLUME_SK_K16:
        o.dd0 = plume_rpk_f16(rec + 2 * r) * (float)(int8_t)sc[r];
        o.dd1 = plume_rpk_f16(rec + 2 * r) * (float)(int8_t)sc[16 + r];
        break;
    case PLUME_SK_K16M:
        o.dd0 = plume_rpk_f16(rec + 2 * r) * (float)(sc[r] & 0xF);
        o.dd1 = plume_rpk_f16(rec + 2 * r) * (float)(sc[16 + r] & 0xF);
        o.mm0 = -(plume_rpk_f16(rec + 32 + 2 * r) * (float)(sc[r] >> 4));
        o.mm1 = -(plume_rpk_f16(rec + 32 + 2 * r) * (float)(sc[16 + r] >> 4));
        break;
    case PLUME_SK_E8: o.dd0 = o.dd1 = plume_e8m0_half_to_fp32(sc[r]); break;
    default: o.dd0 = o.dd1 = plume_rpk_f16(rec + 2 * r) * (float)(int8_t)sc[r]; break;
    }
    return o;
}

/* True when the format has two scales per block (one per 16 weights). */
static inline int plume_rpk_two_scales(plume_rpk_fmt f) { return f.sk == PLUME_SK_K16 || f.sk == PLUME_SK_K16M; }
/* 0: no min term; 1: one per 32 weights (times s); 2: one per 16 (s16). */
static inline int plume_rpk_min_kind(plume_rpk_fmt f)
{
    return f.sk == PLUME_SK_DM16 || f.sk == PLUME_SK_K32M ? 1 : f.sk == PLUME_SK_K16M ? 2 : 0;
}

#endif
