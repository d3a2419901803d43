#!/usr/bin/env python3
"""`plume quantize MODEL OUT.gguf --to gguf --type PRESET` end to end.

    test_quantize_gguf.py TINY_GGUF [--part tiny|smollm2|all]

tiny:    two tiny random models written here by make_tiny_model.py: a llama
         with 256-wide rows (every K-quant applies; untied head; 4 layers) and
         a qwen2 with 96-wide rows (q/k/v biases, tied head: every K-quant
         falls back).  Each is quantized from its F32 GGUF to every preset:
         - each tensor's type is the one llama-quantize's rules give
           (transcribed below from llama.cpp src/llama-quant.cpp, independently
           of core/src/quant/gguf_mix.c);
         - gguf-py reads the file; quantized from the HF directory (three
           presets) it has the same tensor bytes and tokenizer arrays as
           from the GGUF (so the HF path's names, llama's q/k permutation,
           qwen2's biases and the tokenizer are right);
         - plume runs it: with float activations its logits equal those of
           the numpy oracle on gguf-py's dequantization of the file (1e-3
           relative: f32 vs f64 arithmetic), so plume computes the bytes as
           gguf-py reads them;
         - the distance to the f32 model's logits (oracle, both) is within a
           bound derived from the weight errors: a linear map with weight
           error E of relative size r = |E|/|W| (Frobenius, measured here
           per tensor through gguf-py) changes its output by ~r relative;
           to first order the errors of the matmuls on the path add, so
           |dlogits|/|logits| <= 2 * (r_head + sum over layers of the
           largest attention r + the largest MLP r) (2: slack for the
           nonlinearities); checked at 2 prompts.
smollm2: models/SmolLM2-135M-Instruct-f16 if scripts/make-f16-model made
         it, else the same made here (HF, f16; plume convert of the
         downloaded Q4_1 GGUF, so its weights lie on Q4_1's grid):
         - quantized to Q4_1 it gives the downloaded llama.cpp Q4_1 file's
           tensors byte for byte (types, the Q8_0 tied embedding, the q/k
           permutation, the codes) and its tokenizer keys;
         - quantized to Q4_K_M: the 576-wide fallbacks; its next-token
           distributions on bench/data/eval-heldout.txt stay close to the
           f16 base's (mean KL < 0.3, top-1 agreement > 70%; the greedy chat
           answer is printed, not checked: its first token is a near tie);
           its perplexity on
           bench/data/eval-heldout.txt is within 20% of the Q4_1 GGUF's (the
           base is on Q4_1's grid, which Q4_K_M's grids do not contain: it
           pays a re-quantization that Q4_1 does not; measured ~14%).
         A sanitized build (PLUME_TEST_SANITIZED=1) checks the KL and
         top-1 on the first 3 of the 5 windows and leaves the perplexity
         ratio to the release run.

Exit 0 pass, 1 fail, 77 skip (binary, packages or model missing).
"""

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "..", "reference")
sys.path.insert(0, REF)

import _venv  # noqa: E402

_venv.require("numpy", "gguf")

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402

import make_tiny_model  # noqa: E402
import oracle  # noqa: E402
from harness import DATA, SOURCE_ROOT, check, plume_logits, run  # noqa: E402
import harness  # noqa: E402

PRESETS = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_M", "Q4_K_S", "Q4_K_M",
           "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS"]
BASE = {"Q4_0": T.Q4_0, "Q4_1": T.Q4_1, "Q5_0": T.Q5_0, "Q5_1": T.Q5_1, "Q8_0": T.Q8_0,
        "Q2_K": T.Q2_K, "Q3_K_M": T.Q3_K, "Q4_K_S": T.Q4_K, "Q4_K_M": T.Q4_K,
        "Q5_K_S": T.Q5_K, "Q5_K_M": T.Q5_K, "Q6_K": T.Q6_K, "IQ4_NL": T.IQ4_NL,
        "IQ4_XS": T.IQ4_XS}
FALLBACK = {T.IQ4_XS: T.IQ4_NL, T.Q2_K: T.Q4_0, T.Q3_K: T.Q4_0, T.Q4_K: T.Q5_0,
            T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0}


def blk(t):
    return gguf.GGML_QUANT_SIZES[t][0]


def more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def expected_type(p, name, ne0, n_dims, n_layer, gqa, tied):
    """llama-quant.cpp llama_tensor_get_type for these presets, no imatrix."""
    if n_dims < 2 or not name.endswith("weight") or "_norm.weight" in name:
        return T.F32
    t = BASE[p]
    i = int(name.split(".")[1]) if name.startswith("blk.") else 0
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        t = T.Q8_0 if ne0 % blk(t) or t == T.Q8_0 else T.Q6_K
    elif name == "token_embd.weight":
        pass
    elif "attn_v.weight" in name:
        if p == "Q2_K":
            t = T.Q4_K if gqa >= 4 else T.Q3_K
        elif p == "Q3_K_M":
            t = T.Q5_K if i < 2 else T.Q4_K
        elif p in ("IQ4_NL", "IQ4_XS") and gqa >= 4:
            t = T.Q5_K
        elif p in ("Q4_K_M", "Q5_K_M") and more_bits(i, n_layer):
            t = T.Q6_K
        elif p == "Q4_K_S" and i < 4:
            t = T.Q5_K
    elif "ffn_down" in name:
        if p == "Q2_K":
            t = T.Q3_K
        elif p == "Q3_K_M":
            t = T.Q5_K if i < n_layer // 16 else T.Q4_K
        elif p == "Q4_K_M":
            t = T.Q6_K if more_bits(i, n_layer) else t
        elif i < n_layer // 8 and p in ("IQ4_NL", "IQ4_XS"):
            t = T.Q5_K
        elif p == "Q5_K_M" and more_bits(i, n_layer):
            t = T.Q6_K
        elif p == "Q4_K_S" and i < n_layer // 8:
            t = T.Q5_K
    elif "attn_output.weight" in name:
        if p == "Q2_K":
            t = T.Q3_K
        elif p == "Q3_K_M":
            t = T.Q4_K
    if ne0 % blk(t):
        t = FALLBACK.get(t, T.F16)
        if ne0 % blk(t):
            t = T.F16
    return t


def quantize(src, out, preset, *extra):
    r = run("quantize", src, out, "--to", "gguf", "--type", preset, "--force", "--threads", "2",
            *extra)
    return r.stderr


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def make_model(tmp, name, arch, tied, **hp):
    saved = dict(make_tiny_model.HPARAMS)
    make_tiny_model.HPARAMS.update(hp)
    try:
        return make_tiny_model.make(os.path.join(tmp, name), arch=arch, seed=11, tied=tied,
                                    quant=False)
    finally:
        make_tiny_model.HPARAMS.clear()
        make_tiny_model.HPARAMS.update(saved)


PROMPTS = [[1, 2, 3, 50, 60, 70], [200, 10, 11, 12, 13, 14, 15, 16, 17]]


def test_model(tmp, paths, label, n_layer, gqa, tied, from_hf):
    f32 = oracle.load_gguf(paths["gguf"])
    base_logits = [f32.logits(ids)[-1] for ids in PROMPTS]
    src_r = gguf.GGUFReader(paths["gguf"])
    src_w = {t.name: np.asarray(t.data, dtype=np.float64).reshape(
        tuple(int(s) for s in reversed(list(t.shape)))) for t in src_r.tensors}
    f32_env = dict(os.environ, PLUME_CPU_ACTIVATIONS="f32")
    for p in PRESETS:
        out = os.path.join(tmp, "%s-%s.gguf" % (label, p))
        log = quantize(paths["gguf"], out, p)
        check(re.search(r"\[\s*1/\s*\d+\] ", log) is not None,
              "%s %s: no per-tensor progress on stderr" % (label, p))
        r = gguf.GGUFReader(out)
        ft = r.fields["general.file_type"].contents()
        check(r.fields["general.quantization_version"].contents() == 2,
              "%s %s: quantization_version" % (label, p))
        rw, wrong = {}, []
        for t in r.tensors:
            ne = [int(s) for s in t.shape]
            want = expected_type(p, t.name, ne[0], len(ne), n_layer, gqa, tied)
            if t.tensor_type != want:
                wrong.append("%s is %s, llama-quantize gives %s" %
                             (t.name, t.tensor_type.name, want.name))
            deq = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64)
            rw[t.name] = rel(deq.reshape(src_w[t.name].shape), src_w[t.name])
        check(not wrong, "%s %s: every tensor has llama-quantize's type %s" % (label, p, wrong[:3]))
        # the derived logit distance
        head = rw.get("output.weight", rw["token_embd.weight"])
        per_layer = 0.0
        for i in range(n_layer):
            b = "blk.%d." % i
            per_layer += max(rw[b + k] for k in ("attn_q.weight", "attn_k.weight",
                                                 "attn_v.weight", "attn_output.weight"))
            per_layer += max(rw[b + k] for k in ("ffn_gate.weight", "ffn_up.weight",
                                                 "ffn_down.weight"))
        bound = 2 * (head + per_layer)
        qm = oracle.load_gguf(out)
        worst = 0.0
        for ids, bl in zip(PROMPTS, base_logits):
            ql = qm.logits(ids)[-1]
            worst = max(worst, rel(ql, bl))
            pl = plume_logits(out, ids, tmp, env=f32_env).astype(np.float64)
            d = rel(pl, ql)
            if d >= 1e-3:
                check(False, "%s %s: plume's logits (f32 activations) differ from the oracle's "
                      "on gguf-py's dequantization by %.2e" % (label, p, d))
            pi = plume_logits(out, ids, tmp).astype(np.float64)
            if not np.all(np.isfinite(pi)):
                check(False, "%s %s: non-finite logits (int8 activations)" % (label, p))
        print("%-6s %-7s file_type %2d  |dlogits|/|logits| %.4f  bound %.4f" %
              (label, p, ft, worst, bound))
        check(worst <= bound, "%s %s: logits moved %.4f from the f32 model's, bound %.4f" %
              (label, p, worst, bound))
        if from_hf and p in ("Q4_K_M", "IQ4_XS", "Q5_0"):
            out_hf = os.path.join(tmp, "%s-%s-hf.gguf" % (label, p))
            quantize(paths["hf"], out_hf, p, "--quiet")
            h = gguf.GGUFReader(out_hf)
            hb = {t.name: (t.tensor_type, bytes(np.asarray(t.data).tobytes())) for t in h.tensors}
            diff = [t.name for t in r.tensors
                    if not (t.name in hb and hb[t.name][0] == t.tensor_type and
                            hb[t.name][1] == bytes(np.asarray(t.data).tobytes()))]
            check(not diff and len(hb) == len(r.tensors),
                  "%s %s: the HF input gives the GGUF input's tensors byte for byte %s" %
                  (label, p, diff[:3]))
            for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                      "tokenizer.ggml.merges", "tokenizer.ggml.model"):
                check(h.fields[k].contents() == src_r.fields[k].contents(),
                      "%s %s: %s differs between the HF and the GGUF input" % (label, p, k))


def test_tiny(tiny_gguf, tmp):
    a = make_model(tmp, "llama256", "llama", False, n_embd=256, n_ff=512, n_head=4, n_head_kv=2,
                   head_dim=64, n_layer=4)
    test_model(tmp, a, "llama", 4, 2, False, True)
    b = make_model(tmp, "qwen96", "qwen2", True, n_embd=96, n_ff=192, n_head=3, n_head_kv=1,
                   head_dim=32, n_layer=2)
    test_model(tmp, b, "qwen2", 2, 3, True, True)
    # errors
    out = os.path.join(tmp, "x.gguf")
    r = run("quantize", a["gguf"], out, "--to", "gguf", "--type", "Q9_K", ok=False)
    check(r.returncode == 2 and "Q4_K_M" in r.stderr, "unknown --type: %s" % r.stderr.strip())
    r = run("quantize", a["gguf"], out, "--to", "gguf", ok=False)
    check(r.returncode == 2 and "--type" in r.stderr, "missing --type: %s" % r.stderr.strip())
    q = os.path.join(tmp, "llama-Q4_0.gguf")
    r = run("quantize", q, out, "--to", "gguf", "--type", "Q4_K_M", ok=False)
    check(r.returncode == 1 and "already quantized" in r.stderr and not os.path.exists(out),
          "quantized input: %s" % r.stderr.strip())
    bad = os.path.join(tmp, "nan.gguf")
    with open(a["gguf"], "rb") as f, open(bad, "wb") as g:
        g.write(f.read())
    br = gguf.GGUFReader(bad, "r+")
    t = [t for t in br.tensors if t.name == "blk.1.ffn_up.weight"][0]
    t.data.reshape(-1)[300] = np.nan
    br.data.flush()
    del br, t
    r = run("quantize", bad, out, "--to", "gguf", "--type", "Q4_K_M", ok=False)
    check(r.returncode == 1 and "NaN" in r.stderr and "blk.1.ffn_up.weight" in r.stderr and
          not os.path.exists(out), "a NaN weight: %s" % r.stderr.strip())
    r = run("quantize", a["gguf"], q, "--to", "gguf", "--type", "Q4_0", ok=False)
    check(r.returncode == 2 and "--force" in r.stderr, "existing output: %s" % r.stderr.strip())


SMOL_F16 = os.path.join(SOURCE_ROOT, "models", "SmolLM2-135M-Instruct-f16")
HELDOUT = os.path.join(DATA, "eval-heldout.txt")


def ppl(model):
    r = run("perplexity", "--model", model, "--text", HELDOUT, "--ctx", "512", "--threads", "2")
    return float(re.search(r"PPL = ([0-9.]+)", r.stdout).group(1))


def test_smollm2(tmp):
    if not os.path.exists(harness.SMOL):
        print("SKIP smollm2: %s missing (scripts/fetch-model)" % harness.SMOL)
        return False
    f16 = SMOL_F16
    if not os.path.isdir(f16):
        # what scripts/make-f16-model makes, into the test's own directory
        f16 = os.path.join(tmp, "smollm2-f16")
        run("convert", harness.SMOL, "--to", "hf", f16, "--dtype", "f16", "--force")
    q41 = os.path.join(tmp, "smollm2-q4_1.gguf")
    quantize(f16, q41, "Q4_1", "--quiet")
    a, b = gguf.GGUFReader(q41), gguf.GGUFReader(harness.SMOL)
    bt = {t.name: t for t in b.tensors}
    diff = [t.name for t in a.tensors if t.name not in bt or t.tensor_type != bt[t.name].tensor_type
            or not np.array_equal(np.asarray(t.data), np.asarray(bt[t.name].data))]
    check(not diff and len(a.tensors) == len(b.tensors),
          "f16 -> Q4_1 gives the downloaded llama.cpp Q4_1 file's tensors byte for byte %s" %
          diff[:3])
    keys = ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
            "tokenizer.ggml.pre", "tokenizer.chat_template", "tokenizer.ggml.eos_token_id")
    check(all(a.fields[k].contents() == b.fields[k].contents() for k in keys),
          "the HF tokenizer written as GGUF keys equals the downloaded file's")
    out = os.path.join(tmp, "smollm2-q4_k_m.gguf")
    quantize(f16, out, "Q4_K_M", "--quiet")
    r = gguf.GGUFReader(out)
    types = {t.name: t.tensor_type for t in r.tensors}
    check(types["token_embd.weight"] == T.Q8_0, "tied head of 576-wide rows: Q8_0")
    check(types["blk.0.attn_q.weight"] == T.Q5_0, "576-wide attn_q: Q4_K falls back to Q5_0")
    check(types["blk.0.ffn_down.weight"] == T.Q6_K, "ffn_down of layer 0 (1536-wide): Q6_K")
    check(types["blk.4.ffn_down.weight"] == T.Q4_K, "ffn_down of layer 4 (no extra bits): Q4_K")
    check(types["blk.5.ffn_down.weight"] == T.Q6_K, "ffn_down of layer 5 (use_more_bits): Q6_K")
    g = run("generate", "--model", out, "--chat", "--prompt", "Which city is the capital of France?",
            "--max-tokens", "24", "--temperature", "0")
    # printed, not checked: the model's first answer token is a near tie (top 3
    # within 0.17 nats: "The", "Le", "La"), so which one a kernel level's
    # rounding picks says nothing of the quantizer; the divergence from the
    # f16 base below does
    print("Q4_K_M answer (not checked):", g.stdout.strip())
    # a sanitized build (PLUME_TEST_SANITIZED=1) scores the first 3 of the 5
    # windows and skips the Q4_1 comparison: the same code under ASan, and
    # 6 window passes (the model and its base on 3 windows) where the release
    # run makes 15 (both on 5, then Q4_1 on 5; the whole took 581 s there)
    chunks = 3 if os.environ.get("PLUME_TEST_SANITIZED") == "1" else 0
    rep = json.loads(run("perplexity", "--model", out, "--kl-base", f16, "--text", HELDOUT,
                         "--ctx", "512", "--threads", "2", "--json",
                         *(["--chunks", str(chunks)] if chunks else [])).stdout)
    kl = rep["kl"]
    print("Q4_K_M vs its f16 base over %d windows: mean KL %.4f, top-1 agreement %.1f%%" %
          (rep["n_windows"], kl["mean"], kl["top1_pct"]))
    # measured 0.16 and 81.6% on all 5 windows, 0.16 and 80.7% on the first
    # 3 (the base lies on Q4_1's grid, which Q4_K_M requantizes); a wrong
    # scale, code or fallback type gives KL > 1 and top-1 below 50%
    check(kl["mean"] < 0.3 and kl["top1_pct"] > 70,
          "Q4_K_M's next-token distributions stay close to the f16 base's")
    if chunks:
        print("sanitized build: the Q4_K_M/Q4_1 perplexity ratio is checked in the release run")
        return True
    # the KL run's own PPL is Q4_K_M's over the same windows (f16 cache)
    p_q4km, p_q41 = rep["ppl"], ppl(harness.SMOL)
    print("PPL Q4_K_M %.3f, Q4_1 %.3f" % (p_q4km, p_q41))
    check(p_q4km <= 1.20 * p_q41, "Q4_K_M perplexity %.3f within 20%% of Q4_1's %.3f" %
          (p_q4km, p_q41))
    return True


if __name__ == "__main__":
    sys.exit(harness.main("plume-quantize-gguf-", test_tiny, test_smollm2))
