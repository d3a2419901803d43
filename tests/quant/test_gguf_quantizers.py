#!/usr/bin/env python3
"""plume's GGUF reference quantizers (core/src/quant/gguf_quant*.c) checked
through gguf-py, which shares no code with plume's own dequantization.

    test_gguf_quantizers.py QUANT_ROWS

QUANT_ROWS is tests/quant/quant_rows (rows of f32 in, block bytes out).
For every type the bytes of random rows (Gaussian weights with heavy-tailed
outliers, plus edge blocks: all zero, constant, one spike, tiny values) are
decoded by gguf.quants.dequantize and each weight's error is held to the
bound the type's design gives, derived below from the input alone:

  eps = 2^-11, the relative rounding of an f16 scale.
  Q8_0         d = amax/127, codes round to nearest:      |e| <= d/2 + 127·eps·d
  Q4_0/Q5_0    d = amax/2^(b-1), the extreme weight sits on code 0 and the
               other side ends one step short:             |e| <= d·(1 + 2^(b-1)·eps)
  Q4_1/Q5_1    d = (max-min)/(2^b-1), offset min:          |e| <= d/2 + (2^b-1)·eps·d + eps·|min|
  K-quants     per sub-block natural step s = range/nmax (asymmetric Q2/Q4/Q5_K,
               range from min(0, min x) to max x) or amax/(nmax/2) (symmetric
               Q3/Q6_K); the scale search may trade the extremes for the bulk
               (at most one step of clipping) and the sub-block scale (and min)
               are stored as integers times a super-block quantum q = largest
               step / levels (63 for 6-bit, 15 for 4-bit, 32/128 for Q3/Q6_K),
               which moves a code's value by at most nmax·q/2:
                                                           |e| <= s + nmax·q/2 + qmin/2
  IQ4_NL/XS    16 levels from -127 to 113 (largest gap 24) times d ~ amax/127;
               the trial scales reach amax/134, so the short side (113) may clip
               by amax·(1 - 113/134) = 0.157·amax; IQ4_XS adds 6-bit scales
               against max_scale/32:                       |e| <= 0.16·amax + 127·Q/2
  MXFP4        d = 2^(floor(log2 amax) - 3) (an exact power of two), levels
               0, ±1, ±2, ±3, ±4, ±6, ±8, ±12 times d: inside ±12d the largest gap
               is 4d (rounding 2d at most), and amax < 16d clips by less than
               4d:                                         |e| <= 4d
               ("step" for the RMS check: 2d, the mean gap over ±12d)
Over the whole array the RMS error must also stay below 0.36 of the RMS
natural step (a uniform rounding error gives 1/sqrt(12) = 0.29).

gguf-py has its own quantizers for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and MXFP4,
written after the same ggml reference: for those the bytes must be
identical.
Exit 0 pass, 1 fail, 77 skip (no numpy/gguf).
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import _venv  # noqa: E402

_venv.require("numpy", "gguf")

import numpy as np  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import quants  # noqa: E402

EPS16 = 2.0 ** -11
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def plume_quantize(tool, qtype, x, tmp):
    rows, n = x.shape
    src, dst = os.path.join(tmp, "x.f32"), os.path.join(tmp, "y.bin")
    x.astype("<f4").tofile(src)
    subprocess.run([tool, str(int(qtype)), str(n), src, dst], check=True)
    return np.fromfile(dst, dtype=np.uint8).reshape(rows, -1)


def make_rows(rng, rows, n):
    x = rng.standard_normal((rows, n)).astype(np.float32) * 0.02
    spikes = rng.random((rows, n)) < 0.01
    x[spikes] *= rng.uniform(4, 12, spikes.sum()).astype(np.float32)
    # edge blocks in the first row (positions multiple of 256 fit every type)
    x[0, 0:256] = 0.0
    x[0, 256:512] = 0.0123
    if n >= 1024:
        x[0, 512:768] = 0.0
        x[0, 512 + 77] = -3.0
        x[0, 768:1024] *= 1e-3
    return x


def groups(x, g):
    return x.reshape(-1, g)


def legacy_bound(qtype, x):
    g = groups(x.astype(np.float64), 32)
    amax = np.abs(g).max(1, keepdims=True)
    lo, hi = g.min(1, keepdims=True), g.max(1, keepdims=True)
    if qtype == T.Q8_0:
        d = amax / 127
        b = d / 2 + 127 * EPS16 * d
    elif qtype in (T.Q4_0, T.Q5_0):
        half = 8 if qtype == T.Q4_0 else 16
        d = amax / half
        b = d * (1 + half * EPS16)
    else:
        top = 15 if qtype == T.Q4_1 else 31
        d = (hi - lo) / top
        b = d / 2 + top * EPS16 * d + EPS16 * np.abs(lo)
    return np.broadcast_to(b, g.shape).reshape(x.shape), np.broadcast_to(d, g.shape).reshape(x.shape)


# (sub-block size, nmax, asymmetric, scale levels, min levels)
K_DESIGN = {
    T.Q2_K: (16, 3, True, 15, 15),
    T.Q3_K: (16, 4, False, 32, 0),   # codes -4..3: step amax/4
    T.Q4_K: (32, 15, True, 63, 63),
    T.Q5_K: (32, 31, True, 63, 63),
    T.Q6_K: (16, 32, False, 128, 0),  # codes -32..31: step amax/32
}


def k_bound(qtype, x):
    sub, nmax, asym, lv_s, lv_m = K_DESIGN[qtype]
    sb = x.astype(np.float64).reshape(-1, 256 // sub, sub)
    if asym:
        lo = np.minimum(sb.min(2), 0)
        s = (sb.max(2) - lo) / nmax
        levels = nmax
        qmin = (-lo).max(1, keepdims=True) / lv_m
    else:
        s = np.abs(sb).max(2) / nmax
        levels = 2 * nmax
        qmin = 0
    # the search may pick a scale up to ~10% above the natural one
    qs = 1.1 * s.max(1, keepdims=True) / lv_s
    b = s + levels * qs / 2 + qmin / 2 + EPS16 * np.abs(sb).max(2)
    b = np.repeat(b[:, :, None], sub, axis=2)
    return b.reshape(x.shape), np.repeat(s[:, :, None], sub, axis=2).reshape(x.shape)


def iq4_bound(qtype, x):
    g = x.astype(np.float64).reshape(-1, 8 if qtype == T.IQ4_XS else 1, 32)
    amax = np.abs(g).max(2)
    b = 0.16 * amax + EPS16 * amax
    if qtype == T.IQ4_XS:
        Q = (amax.max(1, keepdims=True) / 120) / 32
        b = b + 127 * Q / 2
    s = amax / 127 * 12  # half the largest gap, as the "step" for the RMS check
    return (np.repeat(b[:, :, None], 32, axis=2).reshape(x.shape),
            np.repeat(s[:, :, None], 32, axis=2).reshape(x.shape))


def mxfp4_bound(x):
    g = groups(x.astype(np.float64), 32)
    amax = np.abs(g).max(1, keepdims=True)
    with np.errstate(divide="ignore"):
        d = np.where(amax > 0, 2.0 ** (np.floor(np.log2(np.where(amax > 0, amax, 1))) - 3), 0)
    return (np.broadcast_to(4 * d, g.shape).reshape(x.shape),
            np.broadcast_to(2 * d, g.shape).reshape(x.shape))


TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K,
         T.IQ4_NL, T.IQ4_XS, T.MXFP4]
SAME_AS_GGUF_PY = (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    rng = np.random.default_rng(1234)
    with tempfile.TemporaryDirectory() as tmp:
        for qtype in TYPES:
            n = 1536 if qtype in K_DESIGN or qtype == T.IQ4_XS else 576
            x = make_rows(rng, 24, n)
            y = plume_quantize(tool, qtype, x, tmp)
            _, type_size = quants.GGML_QUANT_SIZES[qtype]
            blk, _ = quants.GGML_QUANT_SIZES[qtype]
            check(y.shape[1] == n // blk * type_size,
                  "%s: %d bytes a row, expected %d" % (qtype.name, y.shape[1], n // blk * type_size))
            xr = quants.dequantize(y, qtype).astype(np.float64).reshape(x.shape)
            err = np.abs(xr - x.astype(np.float64))
            if qtype in K_DESIGN:
                bound, step = k_bound(qtype, x)
            elif qtype in (T.IQ4_NL, T.IQ4_XS):
                bound, step = iq4_bound(qtype, x)
            elif qtype == T.MXFP4:
                bound, step = mxfp4_bound(x)
            else:
                bound, step = legacy_bound(qtype, x)
            ratio = float((err / np.maximum(bound, 1e-30)).max())
            rms_ratio = float(np.sqrt((err ** 2).mean()) / np.sqrt((step ** 2).mean()))
            print("%-7s max |e|/bound %.3f   rms e / rms step %.3f" % (qtype.name, ratio, rms_ratio))
            check(np.all(np.isfinite(xr)), "%s: non-finite dequantized values" % qtype.name)
            check(ratio <= 1.0, "%s: a weight's error exceeds the design bound (%.3f x)" %
                  (qtype.name, ratio))
            check(rms_ratio <= 0.36, "%s: RMS error %.3f of the RMS step (> 0.36)" %
                  (qtype.name, rms_ratio))
            # rows are independent: quantizing one row alone gives its bytes
            y1 = plume_quantize(tool, qtype, x[5:6], tmp)
            check(np.array_equal(y1[0], y[5]), "%s: a row alone quantizes differently" % qtype.name)
            if qtype in SAME_AS_GGUF_PY:
                ref = quants.quantize(x, qtype)
                same = np.array_equal(ref.reshape(y.shape), y)
                if not same:
                    diff = np.argwhere(ref.reshape(y.shape) != y)
                    print("  first differing byte (row, col):", diff[:5].tolist())
                check(same, "%s: bytes differ from gguf-py's quantizer" % qtype.name)
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        return 1
    print("all GGUF quantizers within their bounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
