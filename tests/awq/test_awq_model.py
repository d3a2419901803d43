#!/usr/bin/env python3
"""AWQ GEMM checkpoints end to end (the quant-awq plugin and `plume quantize
--method awq`).

    test_awq_model.py TINY_GGUF [--part tiny|smollm2|all]

TINY_GGUF is the build's tiny random llama; its directory's hf/ holds the
same network as an F32 HF checkpoint (tests/reference/make_tiny_model.py).

tiny:    An AWQ checkpoint written here with numpy from the layout facts
         (formats.md §2: AutoAWQ's min-max quantizer, qweight [K, N/8]
         packed along the output dim with the nibble order
         [0, 2, 4, 6, 1, 3, 5, 7], true zero points, F16 scales), groups 32
         and 64: plume's logits on it equal the independent numpy oracle's
         (tests/reference/oracle.py) on a float checkpoint dequantized here
         with the reverse order, and plume's own on that float checkpoint
         (float activations, 1e-4); with int8 activations within a loose
         bound.  Broken checkpoints get the documented errors: versions
         gemv / marlin / unknown, bits 8, GPTQ-shaped tensors, qzeros of the
         wrong shape, group_size disagreeing with the tensors, a g_idx.
         `plume quantize --method awq` on the tiny model: the config AutoAWQ,
         transformers and vLLM read, tensor shapes, the norms that took the
         folded scales, and the reloaded checkpoint's logits equal the
         numpy dequantization's.
smollm2: models/SmolLM2-135M-Instruct.Q4_1.gguf -> plume convert (f32) ->
         an AWQ g64 checkpoint written by numpy -> plume runs it: the chat
         answer names Paris and the KL against the f32 base is small
         (a sanitized build scores 3 of the text's 11 windows).

Exit 0 pass, 1 fail, 77 skip.
"""

import json
import math
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "reference")
sys.path.insert(0, REF)

import _venv  # noqa: E402

_venv.require("numpy", "safetensors.numpy")

import numpy as np  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

import oracle  # noqa: E402
from harness import DATA, SMOL, check, plume_logits, run  # noqa: E402
import harness  # noqa: E402

CALIB = os.path.join(DATA, "calib.txt")
HELDOUT = os.path.join(DATA, "eval-heldout.txt")
TINY_TOL = float(os.environ.get("PLUME_TINY_TOL", "1e-3"))

# ---- AWQ layout facts (formats.md §2), written independently of plume ----

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]          # nibble i holds column 8c + AWQ_ORDER[i]
AWQ_REVERSE = [0, 4, 1, 5, 2, 6, 3, 7]        # column 8c + j sits in nibble AWQ_REVERSE[j]
LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def awq_quantize(W, gs):
    """AutoAWQ pseudo_quantize_tensor with zero points (§2.3), per row and
    group of gs inputs; scales rounded to f16 first (the checkpoint's)."""
    N, K = W.shape
    w = W.reshape(N, K // gs, gs).astype(np.float32)
    mx, mn = w.max(-1), w.min(-1)
    s = (np.maximum(mx - mn, 1e-5) / 15).astype(np.float16).astype(np.float32)
    z = np.clip(-np.round(mn / s), 0, 15)
    q = np.clip(np.round(w / s[..., None]) + z[..., None], 0, 15)
    return q.reshape(N, K).astype(np.uint32), z.astype(np.uint32), s


def pack(codes):
    """codes [R][N] -> int32 [R][N/8]: nibble i of word c = column 8c + AWQ_ORDER[i]."""
    R, N = codes.shape
    c = codes.reshape(R, N // 8, 8).astype(np.uint32)
    w = np.zeros((R, N // 8), dtype=np.uint32)
    for i, col in enumerate(AWQ_ORDER):
        w |= c[:, :, col] << np.uint32(4 * i)
    return w.view(np.int32)


def unpack(words):
    """int32 [R][N/8] -> codes [R][N], column j of a word at shift 4·AWQ_REVERSE[j]."""
    w = words.view(np.uint32)
    R, C = w.shape
    out = np.zeros((R, C * 8), dtype=np.int64)
    for j in range(8):
        out[:, j::8] = (w >> np.uint32(4 * AWQ_REVERSE[j])) & np.uint32(15)
    return out


def dequant(t, prefix):
    """W [N][K] of an AWQ layer (§2.3): (q − z[k//g]) · s[k//g]."""
    qw, qz, sc = t[prefix + ".qweight"], t[prefix + ".qzeros"], t[prefix + ".scales"].astype(np.float32)
    K, N, G = qw.shape[0], qw.shape[1] * 8, sc.shape[0]
    if not (qz.shape == (G, N // 8) and sc.shape == (G, N) and K % G == 0):
        raise ValueError("%s: AWQ shapes disagree: qweight %s qzeros %s scales %s"
                         % (prefix, qw.shape, qz.shape, sc.shape))
    g = np.arange(K) // (K // G)
    W = (unpack(qw) - unpack(qz)[g]) * sc[g]
    return np.ascontiguousarray(W.T.astype(np.float32))


def quant_config(gs):
    return {"quant_method": "awq", "zero_point": True, "group_size": gs, "bits": 4, "version": "gemm",
            "modules_to_not_convert": None}


def write_awq(src, dst, gs):
    """The float HF checkpoint src as an AutoAWQ GEMM checkpoint in dst."""
    os.makedirs(dst, exist_ok=True)
    t = load_file(os.path.join(src, "model.safetensors"))
    out = {}
    for k, v in t.items():
        p = k[: -len(".weight")]
        if k.endswith(".weight") and any(p.endswith(name) for name in LINEARS):
            q, z, s = awq_quantize(v.astype(np.float32), gs)
            out[p + ".qweight"] = pack(q.T)                        # [K, N/8]
            out[p + ".qzeros"] = pack(z.T)                         # [G, N/8]
            out[p + ".scales"] = np.ascontiguousarray(s.T.astype(np.float16))  # [G, N]
        else:
            out[k] = v.astype(np.float16)
    save_file(out, os.path.join(dst, "model.safetensors"))
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["quantization_config"] = quant_config(gs)
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), dst)


def dequantized_copy(qdir, fdir):
    """A float checkpoint computing what qdir's AWQ layers compute."""
    return harness.float_copy(qdir, fdir, dequant)


IDS = [5, 17, 42, 101, 7, 250, 33, 64, 12, 99, 180, 3]
F32 = {"PLUME_CPU_ACTIVATIONS": "f32"}


def check_logits(qdir, tmp, name):
    """plume on qdir against the numpy oracle and plume on a float copy."""
    deq = qdir + "-deq"
    dequantized_copy(qdir, deq)
    a = plume_logits(qdir, IDS, tmp, env=F32)
    b = plume_logits(deq, IDS, tmp, env=F32)
    d = float(np.abs(a - b).max())
    check(d < 1e-4 * max(1.0, float(np.abs(b).max())),
          "%s: logits = the dequantized float checkpoint's (float activations), max |diff| %.2e" % (name, d))
    o = oracle.load(deq).logits(IDS)[-1]
    d = float(np.abs(a - o).max())
    check(d < TINY_TOL, "%s: logits = the numpy oracle's on the numpy dequantization, max |diff| %.2e" % (name, d))
    c = plume_logits(qdir, IDS, tmp)
    d8 = float(np.abs(c - b).max())
    check(d8 < 0.05 * float(np.abs(b).max()) + 1e-3,
          "%s: with int8 activations within 5%% of the logit range, max |diff| %.2e" % (name, d8))


def expect_error(args, pattern, label):
    r = run(*args, ok=False)
    check(r.returncode != 0 and re.search(pattern, r.stderr) is not None,
          "%s: exit %d, stderr %r" % (label, r.returncode, r.stderr.strip()[-300:]))


def broken(src, tmp, label, cfg_patch=None, tensor_patch=None):
    d = os.path.join(tmp, "bad")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, d)
    if cfg_patch:
        cfg = json.load(open(os.path.join(d, "config.json")))
        cfg["quantization_config"].update(cfg_patch)
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    if tensor_patch:
        t = load_file(os.path.join(d, "model.safetensors"))
        tensor_patch(t)
        save_file(t, os.path.join(d, "model.safetensors"))
    return d


def errors(awq32, tmp):
    P = "model.layers.0.self_attn.q_proj"
    for label, patch, pattern in [
        ("version gemv", {"version": "gemv"}, r"version \"gemv\".*GEMM"),
        ("version marlin", {"version": "marlin"}, r"marlin"),
        ("an unknown version", {"version": "gemm2"}, r"unknown version \"gemm2\""),
        ("bits 8", {"bits": 8}, r"4-bit only"),
        ("a group_size the tensors do not have", {"group_size": 64}, r"group_size = 64"),
    ]:
        expect_error(["info", broken(awq32, tmp, label, cfg_patch=patch)], pattern, "AWQ config with " + label)

    def gptq_shaped(t):  # qweight [K/8, N] as GPTQ packs it
        qw = t[P + ".qweight"]
        t[P + ".qweight"] = np.zeros((qw.shape[0] // 8, qw.shape[1] * 8), dtype=np.int32)

    def bad_zeros(t):
        t[P + ".qzeros"] = np.zeros((1, 8), dtype=np.int32)

    def with_g_idx(t):
        t[P + ".g_idx"] = np.zeros(64, dtype=np.int32)

    for label, patch, pattern in [
        ("GPTQ-shaped qweight", gptq_shaped, r"GPTQ's layout"),
        ("qzeros of the wrong shape", bad_zeros, r"qzeros is \[1, 8\]"),
        ("a g_idx tensor", with_g_idx, r"g_idx"),
    ]:
        expect_error(["info", broken(awq32, tmp, label, tensor_patch=patch)], pattern, "AWQ tensors: " + label)


def quantize(src, out, *opts):
    r = run("quantize", src, out, "--force", "--verbose", "--json", *opts)
    return json.loads(r.stdout), r.stderr


def test_quantize(tiny_hf, tmp):
    q = os.path.join(tmp, "awq-made")
    rep, log = quantize(tiny_hf, q, "--method", "awq", "--group-size", "32", "--calib", CALIB,
                        "--samples", "16", "--seq-len", "64")
    check(rep["linears"] == 14 and rep["method"] == "awq", "quantize awq: 14 linears")
    check(re.search(r"layer 1/2 .*done", log) is not None or "layer 1 mlp.down_proj" in log,
          "quantize awq: progress per layer")
    cfg = json.load(open(os.path.join(q, "config.json")))["quantization_config"]
    want = quant_config(32)
    check(all(cfg.get(k) == v for k, v in want.items()) and cfg.get("w_bit") == 4 and cfg.get("q_group_size") == 32,
          "quantize awq: quantization_config %s" % cfg)
    t = load_file(os.path.join(q, "model.safetensors"))
    P = "model.layers.0.mlp.down_proj"
    check(t[P + ".qweight"].shape == (128, 8) and t[P + ".qzeros"].shape == (4, 8) and
          t[P + ".scales"].shape == (4, 64) and t[P + ".scales"].dtype == np.float16,
          "quantize awq: down_proj qweight [K, N/8], qzeros [G, N/8], scales [G, N] f16")
    src = load_file(os.path.join(tiny_hf, "model.safetensors"))
    for norm in ("input_layernorm", "post_attention_layernorm"):
        k = "model.layers.0.%s.weight" % norm
        r = t[k].astype(np.float32) / src[k]
        check(not np.allclose(r, 1.0, atol=1e-3), "quantize awq: %s took the searched scales (ratio %.3g..%.3g)"
              % (k, r.min(), r.max()))
    check_logits(q, tmp, "quantize awq")
    # the folds keep the network: its drift from the float model is that of
    # plain rounding or less (the numpy AWQ-RTN checkpoint of test_tiny);
    # a scale not folded, or folded twice, would move the logits far more
    base = plume_logits(tiny_hf, IDS, tmp, env=F32)
    rtn = plume_logits(os.path.join(tmp, "awq-g32"), IDS, tmp, env=F32)
    made = plume_logits(q, IDS, tmp, env=F32)
    d_awq, d_rtn = float(np.abs(made - base).max()), float(np.abs(rtn - base).max())
    check(d_awq < 1.25 * d_rtn, "quantize awq: logit drift from the float model %.3g (plain rounding %.3g)"
          % (d_awq, d_rtn))
    info = run("info", q).stdout
    check("quantization:   awq, 14 linear layers" in info, "quantize awq: plume info reports the method")
    expect_error(["quantize", tiny_hf, os.path.join(tmp, "e1"), "--method", "awq"], r"--calib",
                 "awq without --calib asks for it")
    expect_error(["quantize", tiny_hf, os.path.join(tmp, "e2"), "--method", "awq", "--bits", "8", "--calib", CALIB],
                 r"4-bit", "awq with --bits 8 is refused")
    expect_error(["quantize", tiny_hf, os.path.join(tmp, "e3"), "--method", "awq", "--group-size", "128",
                  "--calib", CALIB, "--samples", "2", "--seq-len", "16"],
                 r"64 inputs, not a multiple of the group size 128.*--group-size 64 divides it",
                 "awq with groups larger than a layer's inputs is refused, suggesting a size")


def test_tiny(tiny_gguf, tmp):
    tiny_hf = os.path.join(os.path.dirname(os.path.abspath(tiny_gguf)), "hf")
    for gs in (32, 64):
        d = os.path.join(tmp, "awq-g%d" % gs)
        write_awq(tiny_hf, d, gs)
        t = load_file(os.path.join(d, "model.safetensors"))
        # the writer's own round trip: packing then the reverse order gives the codes back
        q, z, s = awq_quantize(src_w := load_file(os.path.join(tiny_hf, "model.safetensors"))[
            "model.layers.0.mlp.up_proj.weight"], gs)
        check(np.array_equal(unpack(pack(q.T)), q.T) and np.array_equal(unpack(t["model.layers.0.mlp.up_proj.qzeros"]), z.T),
              "g%d: numpy pack/unpack round trip" % gs)
        del src_w
        info = run("info", d).stdout
        check("quantization:   awq, 14 linear layers" in info, "g%d: plume info reports awq" % gs)
        check_logits(d, tmp, "numpy AWQ g%d" % gs)
    errors(os.path.join(tmp, "awq-g32"), tmp)
    test_quantize(tiny_hf, tmp)


def test_smollm2(tmp):
    """A real-size AWQ checkpoint written here with numpy (min-max rounding,
    g64: SmolLM2's 576-wide layers are not whole groups of 128) from the f32
    conversion: plume loads and runs it, the chat answer names Paris and the
    KL against the f32 base is that of 4-bit rounding.  `plume quantize
    --method awq` at this size takes minutes (scripts/make-awq-model;
    measured in docs/quantization.md), so it is not run here."""
    if not os.path.exists(SMOL):
        print("SKIP smollm2: %s missing (scripts/fetch-model)" % SMOL)
        return False
    base = os.path.join(tmp, "smol-f32")
    run("convert", SMOL, "--to", "hf", base, "--quiet")
    q = os.path.join(tmp, "smol-awq")
    write_awq(base, q, 64)
    info = run("info", q).stdout
    check("quantization:   awq, 210 linear layers" in info, "smollm2: 210 AWQ layers")
    r = run("generate", "--model", q, "--chat", "--prompt", "What is the capital of France? Answer in one sentence.",
            "--temperature", "0", "--max-tokens", "24", "--json")
    out = json.loads(r.stdout)
    check("Paris" in out["text"], "smollm2: AWQ answer names Paris: %r" % out["text"].strip())
    # a sanitized build (PLUME_TEST_SANITIZED=1) scores the first 3 of the 11
    # windows: the same code under ASan (the whole text took 472 s there)
    chunks = ["--chunks", "3"] if os.environ.get("PLUME_TEST_SANITIZED") == "1" else []
    r = run("perplexity", "--model", q, "--text", HELDOUT, "--ctx", "256", "--kl-base", base, *chunks)
    m = re.search(r"mean KL\(base \|\| model\) = (\S+)", r.stdout + r.stderr)
    t = re.search(r"top-1 agreement = (\S+)", r.stdout + r.stderr)
    kl, top1 = float(m.group(1)), float(t.group(1))
    check(math.isfinite(kl) and kl < 1.2 and top1 > 50, "smollm2: KL vs f32 base %.3f, top-1 agreement %.1f%%" % (kl, top1))
    return True


if __name__ == "__main__":
    sys.exit(harness.main("plume-awq-", test_tiny, test_smollm2))
