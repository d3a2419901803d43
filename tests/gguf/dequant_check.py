#!/usr/bin/env python3
"""Cross-check plume's GGUF reader and dequantization against gguf-py.

Usage: dequant_check.py DEQUANT_DUMP_TOOL

1. Writes a GGUF file with gguf-py's GGUFWriter holding random raw blocks of
   every type plume supports (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS; Q8_K, which gguf-py cannot
   dequantize, against its formula d*qs), each in several odd shapes (1 to 7
   rows, rows of 1 to 9 blocks), dequantizes each with
   gguf.quants.dequantize and with plume (through the tool), and requires
   identical results.
2. If $PLUME_SOURCE_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf exists, does
   the same for a few of its tensors.

Exits 77 (skipped, for meson) when numpy or gguf cannot be imported by this
interpreter or by $PLUME_SOURCE_ROOT/.venv/bin/python.
"""
import os
import subprocess
import sys
import tempfile

SKIP = 77


def reexec_or_skip():
    root = os.environ.get("PLUME_SOURCE_ROOT", "")
    venv_py = os.path.join(root, ".venv", "bin", "python")
    if root and os.path.exists(venv_py) and os.path.realpath(sys.executable) != os.path.realpath(venv_py) \
            and not os.environ.get("PLUME_DEQUANT_CHECK_REEXEC"):
        os.environ["PLUME_DEQUANT_CHECK_REEXEC"] = "1"
        os.execv(venv_py, [venv_py] + sys.argv)
    print("numpy/gguf not available; skipping", file=sys.stderr)
    sys.exit(SKIP)


try:
    import numpy as np
    from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType as T
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import dequantize
except ImportError:
    reexec_or_skip()


def plume_rows(tool, path, name, rows=None):
    args = [tool, path, name] + ([str(rows)] if rows is not None else [])
    out = subprocess.run(args, check=True, stdout=subprocess.PIPE).stdout
    return np.frombuffer(out, dtype="<f4")


def random_f16(rng, n):
    return rng.uniform(-2.0, 2.0, n).astype(np.float16).view(np.uint8)


def random_blocks(rng, qtype, nblocks):
    """Random raw blocks whose f16 fields are finite (random bits elsewhere)."""
    blck, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (nblocks, size), dtype=np.uint8)
    if qtype == T.F32:
        raw = rng.standard_normal(nblocks).astype("<f4").view(np.uint8).reshape(nblocks, 4)
    elif qtype == T.F16:
        raw = random_f16(rng, nblocks).reshape(nblocks, 2)
    elif qtype == T.BF16:
        f = rng.standard_normal(nblocks).astype("<f4").view("<u4") >> 16
        raw = f.astype("<u2").view(np.uint8).reshape(nblocks, 2)
    elif qtype in (T.Q8_0, T.Q4_0, T.Q5_0, T.IQ4_NL, T.IQ4_XS):  # d first
        raw[:, 0:2] = random_f16(rng, nblocks).reshape(nblocks, 2)
    elif qtype in (T.Q4_1, T.Q5_1, T.Q4_K, T.Q5_K):  # d, m / d, dmin first
        raw[:, 0:4] = random_f16(rng, 2 * nblocks).reshape(nblocks, 4)
    elif qtype == T.Q2_K:  # d, dmin last
        raw[:, 80:84] = random_f16(rng, 2 * nblocks).reshape(nblocks, 4)
    elif qtype in (T.Q3_K, T.Q6_K):  # d last
        raw[:, size - 2:size] = random_f16(rng, nblocks).reshape(nblocks, 2)
    elif qtype == T.Q8_K:  # d f32 first
        raw[:, 0:4] = rng.uniform(-2.0, 2.0, nblocks).astype("<f4").view(np.uint8).reshape(nblocks, 4)
    else:
        raise ValueError(f"no random block generator for {qtype.name}")
    return raw


def reference(raw, qtype):
    """gguf-py's dequantization; Q8_K (which it lacks) by its definition
    d*qs (ggml-common.h block_q8_K: d f32, qs int8[256], bsums int16[16])."""
    if qtype == T.Q8_K:
        blocks = raw.reshape(-1, 292)
        d = blocks[:, 0:4].copy().view("<f4").astype(np.float32)
        qs = blocks[:, 4:260].copy().view(np.int8).astype(np.float32)
        return (d * qs).reshape(-1)
    return dequantize(raw, qtype).astype(np.float32).reshape(-1)


TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K",
         "Q5_K", "Q6_K", "Q8_K", "IQ4_NL", "IQ4_XS")
# (blocks per row, rows): odd shapes, rows a multiple of the block only
SHAPES = ((2, 3), (1, 1), (3, 5), (9, 7))


def check(name, want, got):
    if want.shape != got.shape:
        sys.exit(f"{name}: plume gave {got.size} values, gguf-py {want.size}")
    if not np.array_equal(want, got):
        bad = np.flatnonzero(want != got)
        i = bad[0]
        sys.exit(f"{name}: {bad.size} of {want.size} values differ; first at {i}: "
                 f"gguf-py {want[i]!r}, plume {got[i]!r}")
    print(f"ok {name}: {want.size} values identical")


def synthetic(tool, tmpdir):
    rng = np.random.default_rng(1234)
    path = os.path.join(tmpdir, "synthetic.gguf")
    w = GGUFWriter(path, "llama")
    w.add_uint32("test.answer", 42)
    expected = {}
    for qtype in (T[n] for n in TYPES):
        blck, _ = GGML_QUANT_SIZES[qtype]
        for nblk, rows in SHAPES:
            ne0 = nblk * max(blck, 32)
            raw = random_blocks(rng, qtype, ne0 // blck * rows).reshape(rows, -1)
            name = f"t.{qtype.name.lower()}.{nblk}x{rows}"
            w.add_tensor(name, raw, raw_dtype=qtype)  # shape given in bytes: (rows, row_bytes)
            expected[name] = reference(raw, qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for name, want in expected.items():
        check(name, want, plume_rows(tool, path, name))


def real_model(tool):
    root = os.environ.get("PLUME_SOURCE_ROOT", ".")
    path = os.path.join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        print(f"{path} absent; real-model check skipped")
        return
    reader = GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    for name, rows in (("token_embd.weight", 8), ("blk.0.ffn_down.weight", None),
                       ("blk.29.attn_q.weight", 16), ("output_norm.weight", None)):
        t = tensors[name]
        want = dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        want = want.reshape(-1, int(t.shape[0]))
        if rows is not None:
            want = want[:rows]
        check(f"{os.path.basename(path)}:{name}", want.reshape(-1), plume_rows(tool, path, name, rows))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmpdir:
        synthetic(sys.argv[1], tmpdir)
    real_model(sys.argv[1])


if __name__ == "__main__":
    main()
