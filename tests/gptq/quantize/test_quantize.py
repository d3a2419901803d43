#!/usr/bin/env python3
"""Tests `plume quantize` and loading GPTQ checkpoints end to end.

    test_quantize.py TINY_GGUF [--part tiny|smollm2|all]

TINY_GGUF is the build's tiny random llama; its directory's hf/ holds the
same network as an F32 HF checkpoint (tests/reference/make_tiny_model.py).
The plume binary is $PLUME_BIN, else $PLUME_BUILD_ROOT/core/src/cli/plume.

tiny:    GPTQ as the reference does it: layer 0's q_proj quantized by plume
         (with and without act-order) has the codes, scales and g_idx of
         formats.md §1.7's fasterquant transcribed here in numpy (float64)
         and run on a Hessian computed here from the same windows.
         RTN and GPTQ on the same calibration windows: GPTQ's output error
         (--verbose losses) is below RTN's on every layer-0 q/k/v projection
         (identical inputs in both runs) and in total.  For several configs
         (4-bit g32 sym gptq; 8-bit asym act-order gptq_v2; 3-bit one group;
         2-bit asym RTN) the checkpoint's config.json quantization_config and
         quantize_config.json round-trip the options, the tensors have the
         shapes of formats.md §1.1, and plume's logits on the checkpoint equal
         its logits on a float checkpoint made here by dequantizing the
         tensors with numpy from the layout facts (§1.2, §1.3, §1.5) — with
         float activations to 1e-4, with the default int8 activations to a
         loose bound.  A qwen2 fixture (q/k/v biases, tied head) quantized the
         same way, and a checkpoint split into two shards with an index, give
         the same logits as their float / single-file counterparts, and so
         does a checkpoint with lm_head: true whose head the test quantized
         and packed itself; two
         --calib texts give more windows than one.  Bad input gets the
         documented errors (GGUF input, gptq without --calib, --bits 5,
         --damp 0, OUT_DIR = MODEL_DIR, a directory as --calib, GPTQ tensors
         without a config, a missing q/k/v bias, dynamic, awq, marlin, bits
         disagreeing with the tensors).
smollm2: models/SmolLM2-135M-Instruct.Q4_1.gguf -> plume convert (f32) ->
         plume quantize --method gptq 4-bit g128 (a short calibration) ->
         the chat answer names Paris and the KL divergence against the f32
         base on the held-out text is small.

Exit 0 pass, 1 fail, 77 skip (binary, packages or model missing).
"""

import json
import math
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "..", "reference")
sys.path.insert(0, REF)

import _venv  # noqa: E402

_venv.require("numpy", "safetensors.numpy")

import numpy as np  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

import make_tiny_model  # noqa: E402
from harness import BUILD_ROOT, DATA, SMOL, check, plume_logits, run  # noqa: E402
import harness  # noqa: E402

CALIB = os.path.join(DATA, "calib.txt")
CALIB_CHAT = os.path.join(DATA, "calib-chat.txt")
HELDOUT = os.path.join(DATA, "eval-heldout.txt")


def quantize(src, out, *opts):
    r = run("quantize", src, out, "--force", "--verbose", "--json", *opts)
    losses = {}
    for m in re.finditer(r"layer (\d+) (\S+)\s+loss (\S+)", r.stderr):
        losses[(int(m.group(1)), m.group(2))] = float(m.group(3))
    return json.loads(r.stdout), losses


# ---- GPTQ layout facts (formats.md §1), written independently of plume ----

def unpack_bits(words, bits, count, axis):
    """Codes of a little-endian bit stream of int32 words along axis:
    code i sits at bit bits*i of the concatenated words (for 2/4/8 bits code
    j of a word at bits [bits*j, bits*j+bits); for 3 bits codes cross words,
    §1.2's 3-word layout)."""
    w = np.moveaxis(words.view(np.uint32), axis, 0).astype(np.uint64)
    out = np.zeros((count,) + w.shape[1:], dtype=np.int64)
    for i in range(count):
        pos = bits * i
        r, sh = pos // 32, pos % 32
        v = w[r] >> np.uint64(sh)
        if sh + bits > 32:
            v = v | (w[r + 1] << np.uint64(32 - sh))
        out[i] = (v & np.uint64((1 << bits) - 1)).astype(np.int64)
    return np.moveaxis(out, 0, axis)


def dequant_layer(t, prefix, bits, fmt):
    qweight, qzeros = t[prefix + ".qweight"], t[prefix + ".qzeros"]
    scales, g_idx = t[prefix + ".scales"].astype(np.float32), t[prefix + ".g_idx"]
    K, N = qweight.shape[0] * 32 // bits, qweight.shape[1]
    G = scales.shape[0]
    q = unpack_bits(qweight, bits, K, 0)               # [K][N], packed along the input dim
    z = unpack_bits(qzeros, bits, N, 1)                # [G][N], packed along the output dim
    if fmt == "gptq":
        z = z + 1                                      # v1 stores zero - 1 (§1.3)
    if not (g_idx.shape == (K,) and scales.shape == (G, N) and qzeros.shape == (G, N * bits // 32)):
        raise ValueError("%s: GPTQ tensor shapes disagree: g_idx %s, scales %s, qzeros %s for K=%d N=%d"
                         % (prefix, g_idx.shape, scales.shape, qzeros.shape, K, N))
    W = scales[g_idx] * (q - z[g_idx])                 # §1.5, [K][N]
    return np.ascontiguousarray(W.T.astype(np.float32)), g_idx, G


def dequantized_copy(qdir, fdir, bits, fmt):
    """A float HF checkpoint computing what qdir's GPTQ layers compute."""
    return harness.float_copy(qdir, fdir, lambda t, p: dequant_layer(t, p, bits, fmt)[0])


# ---- tiny ----

CONFIGS = [
    # (name, options, bits, group, sym, desc_act, format)
    ("gptq-4b-g32-sym", ["--method", "gptq", "--bits", "4", "--group-size", "32"], 4, 32, True, False, "gptq"),
    ("gptq-8b-asym-act-v2", ["--method", "gptq", "--bits", "8", "--group-size", "32", "--sym", "false",
                             "--desc-act", "--format", "gptq_v2"], 8, 32, False, True, "gptq_v2"),
    ("gptq-3b-one-group", ["--method", "gptq", "--bits", "3", "--group-size", "-1"], 3, -1, True, False, "gptq"),
    ("rtn-2b-asym-g32", ["--method", "rtn", "--bits", "2", "--group-size", "32", "--sym", "false"], 2, 32, False,
     False, "gptq"),
]


def test_tiny(tiny_hf, tmp):
    calib = ["--calib", CALIB, "--samples", "16", "--seq-len", "64"]
    rtn, lr = quantize(tiny_hf, os.path.join(tmp, "rtn"), "--method", "rtn", "--group-size", "32", *calib)
    gq, lg = quantize(tiny_hf, os.path.join(tmp, "gptq"), "--method", "gptq", "--group-size", "32", *calib)
    check(len(lr) == len(lg) == 14 and rtn["linears"] == 14, "tiny: 14 linears quantized and reported")
    for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"):
        a, b = lg[(0, name)], lr[(0, name)]
        check(b > 0 and a < b, "tiny: layer 0 %s: GPTQ output error %.4g < RTN %.4g" % (name, a, b))
    check(gq["total_loss"] < rtn["total_loss"],
          "tiny: GPTQ total output error %.4g < RTN %.4g" % (gq["total_loss"], rtn["total_loss"]))
    check(gq["samples"] == 16 and gq["seq_len"] == 64 and gq["tokens"] == 1024,
          "tiny: calibration of 16 x 64 tokens used")
    one, _ = quantize(tiny_hf, os.path.join(tmp, "rtn-one"), "--method", "rtn", "--calib", CALIB,
                      "--samples", "100000", "--seq-len", "64")
    two, _ = quantize(tiny_hf, os.path.join(tmp, "rtn-two"), "--method", "rtn", "--calib", CALIB,
                      "--calib", CALIB_CHAT, "--samples", "100000", "--seq-len", "64")
    check(two["samples"] > one["samples"] > 16,
          "tiny: two --calib texts give more windows (%d) than one (%d)" % (two["samples"], one["samples"]))

    ids = [5, 17, 42, 101, 7, 250, 33, 64, 12, 99, 180, 3]
    f32 = {"PLUME_CPU_ACTIVATIONS": "f32"}
    base = plume_logits(tiny_hf, ids, tmp, env=f32)
    for name, opts, bits, group, sym, desc, fmt in CONFIGS:
        qdir = os.path.join(tmp, name)
        extra = calib if opts[1] == "gptq" else []
        quantize(tiny_hf, qdir, *opts, *extra)
        cfg = json.load(open(os.path.join(qdir, "config.json")))
        qc = cfg.get("quantization_config", {})
        want = {"quant_method": "gptq", "bits": bits, "group_size": group, "sym": sym, "desc_act": desc,
                "checkpoint_format": fmt, "lm_head": False}
        check(all(qc.get(k) == v for k, v in want.items()),
              "%s: quantization_config round-trips %s" % (name, {k: qc.get(k) for k in want}))
        check(json.load(open(os.path.join(qdir, "quantize_config.json"))) == qc,
              "%s: quantize_config.json equals quantization_config" % name)
        t, prefixes = dequantized_copy(qdir, os.path.join(tmp, name + "-deq"), bits, fmt)
        check(len(prefixes) == 14 and all(p + ".weight" not in t for p in prefixes),
              "%s: 14 GPTQ layers, no float weights left for them" % name)
        _, g_idx, G = dequant_layer(t, "model.layers.0.mlp.down_proj", bits, fmt)
        K = 128
        check(G == (1 if group < 0 else K // group), "%s: down_proj has %d groups" % (name, G))
        monotone = bool(np.all(np.diff(g_idx) >= 0))
        check(monotone != desc, "%s: g_idx %s" % (name, "is an act-order permutation" if desc else "is k // group"))
        info = run("info", qdir).stdout
        check("quantization:   gptq, 14 linear layers" in info, "%s: plume info reports the method" % name)
        a = plume_logits(qdir, ids, tmp, env=f32)
        b = plume_logits(os.path.join(tmp, name + "-deq"), ids, tmp, env=f32)
        d = float(np.abs(a - b).max())
        check(d < 1e-4 * max(1.0, float(np.abs(b).max())),
              "%s: logits = dequantized float checkpoint's (float activations), max |diff| %.2e" % (name, d))
        c = plume_logits(qdir, ids, tmp)
        d8 = float(np.abs(c - b).max())
        check(d8 < 0.05 * float(np.abs(b).max()) + 1e-3,
              "%s: with int8 activations within 5%% of the logit range, max |diff| %.2e" % (name, d8))
        drift = float(np.abs(a - base).max())
        print("     %s: logit drift from the float model %.3g" % (name, drift))

    bias_and_shards(tmp, ids, f32, calib)
    reference_gptq(tiny_hf, tmp)
    quantized_lm_head(tmp, ids, f32)
    errors(tiny_hf, tmp)


def bias_and_shards(tmp, ids, f32, calib):
    """GPTQ layers with a bias (qwen2's q/k/v, tied head) and a checkpoint
    split into shards with an index, both against the dequantized copy."""
    fx = make_tiny_model.make(os.path.join(tmp, "fx-qwen2"), arch="qwen2", seed=11, tied=True, quant=False)
    q = os.path.join(tmp, "qwen2-gptq")
    quantize(fx["hf"], q, "--method", "gptq", "--group-size", "32", *calib)
    t, _ = dequantized_copy(q, q + "-deq", 4, "gptq")
    check("model.layers.0.self_attn.q_proj.bias" in t and "lm_head.weight" not in t,
          "qwen2: q/k/v biases kept next to the GPTQ tensors, no lm_head (tied)")
    a, b = plume_logits(q, ids, tmp, env=f32), plume_logits(q + "-deq", ids, tmp, env=f32)
    d = float(np.abs(a - b).max())
    check(d < 1e-4 * max(1.0, float(np.abs(b).max())),
          "qwen2 with biases: logits = dequantized float checkpoint's, max |diff| %.2e" % d)
    # a qwen2 GPTQ checkpoint that lost a q/k/v bias is an error, not a silent drop
    nb = os.path.join(tmp, "qwen2-nobias")
    shutil.rmtree(nb, ignore_errors=True)
    shutil.copytree(q, nb)
    tq = load_file(os.path.join(nb, "model.safetensors"))
    del tq["model.layers.1.self_attn.k_proj.bias"]
    save_file(tq, os.path.join(nb, "model.safetensors"))
    expect_error(["info", nb], r"model.layers.1.self_attn.k_proj.bias' is missing",
                 "qwen2 GPTQ checkpoint without a k_proj bias")
    # the same checkpoint in two shards with an index (formats.md §4)
    src = os.path.join(tmp, "gptq-4b-g32-sym")
    sh = os.path.join(tmp, "sharded")
    shutil.rmtree(sh, ignore_errors=True)
    shutil.copytree(src, sh)
    os.remove(os.path.join(sh, "model.safetensors"))
    t = load_file(os.path.join(src, "model.safetensors"))
    names = sorted(t)
    half = len(names) // 2
    weight_map = {}
    for i, part in enumerate((names[:half], names[half:])):
        fn = "model-%05d-of-00002.safetensors" % (i + 1)
        save_file({k: t[k] for k in part}, os.path.join(sh, fn))
        weight_map.update({k: fn for k in part})
    json.dump({"metadata": {}, "weight_map": weight_map},
              open(os.path.join(sh, "model.safetensors.index.json"), "w"))
    a, b = plume_logits(sh, ids, tmp, env=f32), plume_logits(src, ids, tmp, env=f32)
    check(bool(np.array_equal(a, b)), "sharded GPTQ checkpoint gives the same logits as the single file")


# ---- the reference algorithm, transcribed from formats.md §1.7 in float64 ----

def ref_find_params(x, maxq, sym):
    """quant.py find_params per row of x (the range always holds 0)."""
    xmin = np.minimum(x.min(1), 0)
    xmax = np.maximum(x.max(1), 0)
    if sym:
        xmax = np.maximum(np.abs(xmin), xmax)
        xmin = np.where(xmin < 0, -xmax, xmin)
    both0 = (xmin == 0) & (xmax == 0)
    xmin, xmax = np.where(both0, -1, xmin), np.where(both0, 1, xmax)
    scale = (xmax - xmin) / maxq
    zero = np.full_like(scale, (maxq + 1) // 2) if sym else np.round(-xmin / scale)
    return scale, zero


def ref_fasterquant(W, H, bits, gs, actorder=False, damp=0.01, blocksize=128):
    """gptq.py fasterquant: returns integer codes [N][K] (input order),
    the scale per row and group, and g_idx."""
    W, H = W.astype(np.float64).copy(), H.copy()
    N, K = W.shape
    maxq = 2 ** bits - 1
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    perm = np.argsort(-np.diag(H), kind="stable") if actorder else np.arange(K)
    W, H = W[:, perm], H[perm][:, perm]
    H += damp * np.mean(np.diag(H)) * np.eye(K)
    Hinv = np.linalg.cholesky(np.linalg.inv(H)).T         # upper U with H^-1 = U^T U
    codes = np.zeros((N, K), dtype=np.int64)
    scales = np.zeros((N, (K + gs - 1) // gs))
    for i1 in range(0, K, blocksize):
        i2 = min(i1 + blocksize, K)
        W1, Err1, Hinv1 = W[:, i1:i2].copy(), np.zeros((N, i2 - i1)), Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            w, d = W1[:, i], Hinv1[i, i]
            if (i1 + i) % gs == 0:
                scale, zero = ref_find_params(W[:, i1 + i:i1 + i + gs], maxq, True)
                scales[:, (i1 + i) // gs] = scale
            qi = np.clip(np.round(w / scale) + zero, 0, maxq)
            q = scale * (qi - zero)
            codes[:, i1 + i] = qi
            err = (w - q) / d
            W1[:, i:] -= np.outer(err, Hinv1[i, i:])
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    inv = np.argsort(perm)
    g_idx = (np.arange(K) // gs)[inv]                    # g_idx[perm[i]] = i // gs
    return codes[:, inv], scales, g_idx


def reference_gptq(tiny_hf, tmp):
    """Layer 0's q_proj: plume's GPTQ codes against the reference algorithm
    run here on a Hessian computed here from the same calibration windows
    (embeddings -> RMSNorm, the input of q_proj in the first layer)."""
    T = 64
    cfg = json.load(open(os.path.join(tiny_hf, "config.json")))
    w = load_file(os.path.join(tiny_hf, "model.safetensors"))
    ids = json.loads(run("tokenize", tiny_hf, open(CALIB).read(), "--no-bos", "--json").stdout)["ids"]
    ids = ids[: len(ids) // T * T]
    x = w["model.embed_tokens.weight"][ids].astype(np.float64)
    x = x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + cfg["rms_norm_eps"])
    x = x * w["model.layers.0.input_layernorm.weight"]
    H = 2.0 / len(ids) * (x.T @ x)
    W = w["model.layers.0.self_attn.q_proj.weight"]
    for act in (False, True):
        q = os.path.join(tmp, "gptq-ref")
        quantize(tiny_hf, q, "--method", "gptq", "--group-size", "32", "--calib", CALIB, "--samples",
                 "100000", "--seq-len", str(T), *(["--desc-act"] if act else []))
        codes, scales, g_idx = ref_fasterquant(W, H, 4, 32, actorder=act)
        t = load_file(os.path.join(q, "model.safetensors"))
        pc = unpack_bits(t["model.layers.0.self_attn.q_proj.qweight"], 4, W.shape[1], 0).T
        agree = float(np.mean(pc == codes))
        ps = t["model.layers.0.self_attn.q_proj.scales"].astype(np.float64).T
        sdiff = float(np.max(np.abs(ps - scales.astype(np.float16).astype(np.float64)) / np.abs(scales)))
        same_g = bool(np.array_equal(t["model.layers.0.self_attn.q_proj.g_idx"], g_idx))
        check(agree > 0.99 and sdiff < 2e-3 and same_g,
              "layer 0 q_proj%s: plume's GPTQ codes = the reference algorithm's on %.2f%% of weights, "
              "scales within %.1e, g_idx %s (float64 reference; plume's Hessian sums f32 products)"
              % (" act-order" if act else "", 100 * agree, sdiff, "equal" if same_g else "DIFFERENT"))


def pack_rows(codes, bits):
    """qweight layout (§1.2): codes [K][N] packed along K, code j of a word
    at bits [bits*j, bits*j+bits), for 2/4/8 bits."""
    pf = 32 // bits
    K, N = codes.shape
    words = np.zeros((K // pf, N), dtype=np.uint32)
    for j in range(pf):
        words |= (codes[j::pf].astype(np.uint32) << np.uint32(bits * j))
    return words.view(np.int32)


def quantized_lm_head(tmp, ids, f32):
    """A checkpoint whose config says lm_head: true and whose lm_head is GPTQ
    (RTN-quantized and packed here, 4-bit sym g32; the vocabulary padded to
    304 rows so that 4-bit packing fits) loads the head through the method."""
    src = os.path.join(tmp, "gptq-4b-g32-sym")
    d = os.path.join(tmp, "lmhead")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, d)
    t = load_file(os.path.join(d, "model.safetensors"))
    V = 304
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        w = t[name]
        t[name] = np.concatenate([w, np.zeros((V - w.shape[0], w.shape[1]), dtype=w.dtype)])
    W = t.pop("lm_head.weight").astype(np.float32)        # [N][K]
    K, gs = W.shape[1], 32
    Wg = W.T.reshape(K // gs, gs, V)                      # [G][gs][N]
    m = np.abs(Wg).max(axis=1)                             # [G][N]
    scale = np.where(m > 0, 2 * m / 15, 2 / 15).astype(np.float16).astype(np.float32)
    codes = np.clip(np.round(W.T / np.repeat(scale, gs, axis=0)) + 8, 0, 15).astype(np.int64)
    t["lm_head.qweight"] = pack_rows(codes, 4)
    t["lm_head.qzeros"] = pack_rows(np.full((V, K // gs), 7, dtype=np.int64), 4).T.copy()  # v1: zero - 1
    t["lm_head.scales"] = scale.astype(np.float16)
    t["lm_head.g_idx"] = (np.arange(K) // gs).astype(np.int32)
    save_file(t, os.path.join(d, "model.safetensors"))
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["vocab_size"] = V
    cfg["quantization_config"]["lm_head"] = True
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    json.dump(cfg["quantization_config"], open(os.path.join(d, "quantize_config.json"), "w"))
    dequantized_copy(d, d + "-deq", 4, "gptq")
    info = run("info", d).stdout
    check("15 linear layers" in info, "quantized lm_head: plume info counts it among the method's layers")
    a = plume_logits(d, ids, tmp, env=f32)
    b = plume_logits(d + "-deq", ids, tmp, env=f32)
    diff = float(np.abs(a - b).max())
    check(a.shape == (V,) and diff < 1e-4 * max(1.0, float(np.abs(b).max())),
          "quantized lm_head: logits = the dequantized float checkpoint's, max |diff| %.2e" % diff)


def expect_error(args, pattern, label, env=None):
    r = run(*args, env=env, ok=False)
    check(r.returncode != 0 and re.search(pattern, r.stderr) is not None,
          "%s: exit %d, stderr %r" % (label, r.returncode, r.stderr.strip()[:200]))


def errors(tiny_hf, tmp):
    expect_error(["quantize", os.path.join(BUILD_ROOT, "tests", "tiny.gguf"), os.path.join(tmp, "e1")],
                 r"plume convert", "quantize a GGUF says to convert it first")
    expect_error(["quantize", tiny_hf, os.path.join(tmp, "e2"), "--method", "gptq"],
                 r"--calib", "gptq without --calib asks for it")
    expect_error(["quantize", tiny_hf, os.path.join(tmp, "e3"), "--method", "rtn", "--bits", "5"],
                 r"--bits must be 2, 3, 4 or 8", "--bits 5 is refused naming --bits")
    expect_error(["quantize", tiny_hf, tiny_hf, "--method", "rtn", "--force"],
                 r"OUT_DIR is MODEL_DIR", "quantizing into the input directory is refused")
    expect_error(["quantize", tiny_hf, os.path.join(tmp, "e5"), "--method", "rtn", "--damp", "0"],
                 r"--damp must be in \(0, 1\]", "--damp 0 is refused naming --damp")
    expect_error(["quantize", tiny_hf, os.path.join(tmp, "e6"), "--method", "gptq", "--calib", tmp],
                 r"is not a readable file", "a directory as --calib is refused")
    nocfg = os.path.join(tmp, "nocfg")
    shutil.rmtree(nocfg, ignore_errors=True)
    shutil.copytree(os.path.join(tmp, "gptq"), nocfg)
    cfg = json.load(open(os.path.join(nocfg, "config.json")))
    del cfg["quantization_config"]
    json.dump(cfg, open(os.path.join(nocfg, "config.json"), "w"))
    os.remove(os.path.join(nocfg, "quantize_config.json"))
    expect_error(["info", nocfg], r"no quantization_config", "GPTQ tensors without any quantization config")
    # a checkpoint whose config asks for what plume does not do
    src = os.path.join(tmp, "gptq")
    for label, patch, pattern in [
        ("dynamic per-module overrides", {"dynamic": {"-:.*down_proj": {}}}, r"dynamic"),
        # quant-awq loads and refuses GPTQ-shaped tensors (or is not built)
        ("the awq method", {"quant_method": "awq"}, r"a GPTQ checkpoint\?|GPTQ's layout|quant-awq"),
        ("marlin format", {"checkpoint_format": "marlin"}, r"marlin"),
        ("bits that disagree with the tensors", {"bits": 8}, r"bits"),
    ]:
        d = os.path.join(tmp, "bad")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        cfg = json.load(open(os.path.join(d, "config.json")))
        cfg["quantization_config"].update(patch)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        expect_error(["info", d], pattern, "loading a checkpoint with %s" % label)


# ---- smollm2 ----

def test_smollm2(tmp):
    """convert -> GPTQ 4-bit g128 -> run.  In a sanitized build (scripts/test's
    build-asan, PLUME_TEST_SANITIZED=1) the same commands run at the same
    layer sizes on less data (calibration 64 tokens, perplexity on the first
    2 KiB of text with 64-token windows), where they check what a memory or
    UB error would break, not quantization quality: the release run checks
    that, and ASan at the full data took 20 minutes."""
    if not os.path.exists(SMOL):
        print("SKIP smollm2: %s missing (scripts/fetch-model)" % SMOL)
        return False
    sanitized = os.environ.get("PLUME_TEST_SANITIZED") == "1"
    base = os.path.join(tmp, "smol-f32")
    run("convert", SMOL, "--to", "hf", base, "--quiet")
    q = os.path.join(tmp, "smol-gptq")
    samples, seq_len = ("1", "64") if sanitized else ("4", "256")
    rep, _ = quantize(base, q, "--method", "gptq", "--bits", "4", "--group-size", "128", "--calib", CALIB,
                      "--samples", samples, "--seq-len", seq_len)
    check(rep["linears"] == 210, "smollm2: 210 linears quantized")
    size_q = os.path.getsize(os.path.join(q, "model.safetensors"))
    size_b = os.path.getsize(os.path.join(base, "model.safetensors"))
    check(size_q < 0.25 * size_b, "smollm2: checkpoint %.1f MiB vs f32 %.1f MiB" % (size_q / 2**20, size_b / 2**20))
    r = run("generate", "--model", q, "--chat", "--prompt", "What is the capital of France? Answer in one sentence.",
            "--temperature", "0", "--max-tokens", "8" if sanitized else "24", "--json")
    out = json.loads(r.stdout)
    check(len(out["token_ids"]) > 0, "smollm2: the GPTQ model generates (%d tokens)" % len(out["token_ids"]))
    if not sanitized:
        check("Paris" in out["text"], "smollm2: GPTQ answer names Paris: %r" % out["text"].strip())
    text, ctx = HELDOUT, "256"
    if sanitized:
        text, ctx = os.path.join(tmp, "heldout-2k.txt"), "64"
        with open(HELDOUT, "rb") as f, open(text, "wb") as g:
            g.write(f.read(2048))
    r = run("perplexity", "--model", q, "--text", text, "--ctx", ctx, "--kl-base", base)
    m = re.search(r"mean KL\(base \|\| model\) = (\S+)", r.stdout + r.stderr)
    t = re.search(r"top-1 agreement = (\S+)", r.stdout + r.stderr)
    kl, top1 = float(m.group(1)), float(t.group(1))
    if sanitized:
        check(math.isfinite(kl) and kl >= 0 and 0 <= top1 <= 100,
              "smollm2 (sanitized, small data): KL %.3f, top-1 agreement %.1f%% are well formed" % (kl, top1))
    else:
        check(kl < 1.5 and top1 > 45, "smollm2: KL vs f32 base %.3f, top-1 agreement %.1f%%" % (kl, top1))
    return True


def test_tiny_part(tiny_gguf, tmp):
    test_tiny(os.path.join(os.path.dirname(os.path.abspath(tiny_gguf)), "hf"), tmp)


if __name__ == "__main__":
    sys.exit(harness.main("plume-quantize-", test_tiny_part, test_smollm2))
