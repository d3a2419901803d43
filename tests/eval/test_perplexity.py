#!/usr/bin/env python3
"""Tests `plume perplexity`.

    test_perplexity.py TINY_GGUF [--part tiny|smollm2|all]

tiny:    on bench/data/eval-heldout.txt, plume's perplexity of the tiny
         random model (default windows and --stride) equals a numpy
         computation on tests/reference/oracle.py's float64 logits with the
         same windows and scored positions (relative 1e-3); KL divergence and
         top-1 agreement against a perturbed copy of the tiny model match
         numpy, and so do they between the tiny model in F32 and its Q8_0
         copy (a small KL, to 1e-3 relative); the model against itself
         gives KL 0 and 100% agreement.  These runs give --kv-dtype f32 (the
         oracle's exact cache); without it the model runs the default f16
         cache, which the JSON reports, against its own f32-cache self: a
         small KL > 0.
smollm2: perplexity of models/SmolLM2-135M-Instruct.Q4_1.gguf on the
         held-out text (ctx 128, 4 windows): with f32 activations it equals
         the float64 oracle's on the same windows (relative 1e-5); on the
         default int8 path it is within 3% in log PPL; KL divergence of the
         int8 path against the model's exact f32 conversion (plume convert,
         a genuinely different run) is within [0.5, 1.5] x the oracle's KL
         against its emulation of the int8 rounding, top-1 agreement >= 90%;
         the same through --pipeline, whose kv_cache.dtype (f32) is used.
         All with an f32 KV cache, as the oracle has.

The plume binary is $PLUME_BIN, else $PLUME_BUILD_ROOT/core/src/cli/plume.
Exit 0 pass, 1 fail, 77 skip (binary, packages or model missing).
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import _venv  # noqa: E402

_venv.require("numpy", "gguf")

import numpy as np  # noqa: E402
import gguf  # noqa: E402,F401

import oracle  # noqa: E402

from harness import DATA, PLUME, SMOL, check  # noqa: E402
import harness  # noqa: E402

TEXT = os.path.join(DATA, "eval-heldout.txt")
REL = 1e-3



def ppl(model, *args, env=None, kv="f32"):
    """plume perplexity's JSON; kv: --kv-dtype (f32, the oracles' exact cache;
    None: none given, the default)."""
    kv_args = ["--kv-dtype", kv] if kv else []
    r = subprocess.run([PLUME, "perplexity", "--model", model, "--text", TEXT, "--json"] + kv_args
                       + list(args), capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        raise RuntimeError("plume perplexity failed (%d): %s" % (r.returncode, r.stderr))
    return json.loads(r.stdout)


def tokens(model):
    """The text's ids as plume perplexity tokenizes it (the tiny model adds no BOS)."""
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    r = subprocess.run([PLUME, "tokenize", model, text, "--no-special", "--json"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["ids"]


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def windows(ids, ctx, stride, chunks):
    """(window ids, first scored logit position) as perplexity.h defines them."""
    step = stride or ctx
    n = (len(ids) - ctx) // stride + 1 if stride else len(ids) // ctx
    first = ctx - stride - 1 if stride else ctx // 2
    return [ids[w * step: w * step + ctx] for w in range(min(n, chunks))], first


def reference(model, ids, ctx, stride, chunks, base=None, q8=False):
    """numpy PPL (and with base, KL(base || model), top-1, base PPL) on the
    windows plume uses; q8: model's linear inputs rounded as plume's int8
    activation path rounds them (for a block-quantized model)."""
    nll, kl, same, bnll = [], [], 0, []
    wins, first = windows(ids, ctx, stride, chunks)
    om = oracle.load(model)
    om.act_q8 = q8
    ob = oracle.load(base) if base else None
    for win in wins:
        lm = log_softmax(om.logits(win))
        tgt = np.array(win[first + 1:])
        nll.extend(-lm[np.arange(first, ctx - 1), tgt])
        if base:
            lb = log_softmax(ob.logits(win))
            for pos in range(first, ctx - 1):
                kl.append(float(np.sum(np.exp(lb[pos]) * (lb[pos] - lm[pos]))))
                same += int(np.argmax(lb[pos]) == np.argmax(lm[pos]))
            bnll.extend(-lb[np.arange(first, ctx - 1), tgt])
    out = {"ppl": math.exp(np.mean(nll)), "n_scored": len(nll), "n_windows": len(wins)}
    if base:
        out.update(kl=float(np.mean(kl)), top1=100.0 * same / len(kl), base_ppl=math.exp(np.mean(bnll)))
    return out


def close(a, b, rel=REL):
    return abs(a - b) <= rel * abs(b)


def perturbed_copy(tiny, out):
    """The fixture's HF copy of the tiny model with noise added to every
    weight: a different model on the same vocabulary whose predictions agree
    with the original's only in part."""
    from safetensors.numpy import load_file, save_file
    hf = os.path.join(os.path.dirname(os.path.abspath(tiny)), "hf")
    shutil.copytree(hf, out)
    rng = np.random.default_rng(1)
    w = load_file(os.path.join(hf, "model.safetensors"))
    w = {k: (v + 0.5 * v.std() * rng.standard_normal(v.shape)).astype(np.float32) for k, v in w.items()}
    save_file(w, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    return out


def test_tiny(tiny, tmp):
    ids = tokens(tiny)
    for ctx, stride, chunks in ((32, 0, 6), (32, 8, 12)):
        args = ["--ctx", str(ctx), "--chunks", str(chunks)] + (["--stride", str(stride)] if stride else [])
        got, want = ppl(tiny, *args), reference(tiny, ids, ctx, stride, chunks)
        check(got["n_scored"] == want["n_scored"] and got["n_windows"] == want["n_windows"] and
              close(got["ppl"], want["ppl"]),
              "tiny ctx %d stride %d: PPL %.5f vs numpy %.5f (%d scored)"
              % (ctx, stride, got["ppl"], want["ppl"], want["n_scored"]))
    other = perturbed_copy(tiny, os.path.join(tmp, "perturbed"))
    got = ppl(other, "--ctx", "32", "--chunks", "4", "--kl-base", tiny)
    want = reference(other, ids, 32, 0, 4, base=tiny)
    k = got["kl"]
    check(close(got["ppl"], want["ppl"]) and close(k["base_ppl"], want["base_ppl"]),
          "tiny KL run: PPL %.4f/%.4f and base PPL %.4f/%.4f match numpy"
          % (got["ppl"], want["ppl"], k["base_ppl"], want["base_ppl"]))
    check(close(k["mean"], want["kl"]), "tiny: mean KL(base||model) %.6f vs numpy %.6f" % (k["mean"], want["kl"]))
    check(abs(k["top1_pct"] - want["top1"]) <= 100.0 / want["n_scored"] + 1e-9,
          "tiny: top-1 agreement %.3f%% vs numpy %.3f%%" % (k["top1_pct"], want["top1"]))
    # two genuinely different models close together: the F32 fixture and its
    # Q8_0 copy (on plume's default int8 activations; numpy rounds them the
    # same way, which matches plume to ~5e-6 on the tiny model)
    import make_tiny_model
    q = make_tiny_model.make(os.path.join(tmp, "q8"), seed=5)
    got = ppl(q["gguf_q8_0"], "--ctx", "32", "--chunks", "4", "--kl-base", q["gguf"])
    want = reference(q["gguf_q8_0"], ids, 32, 0, 4, base=q["gguf"], q8=True)
    k = got["kl"]
    check(close(got["ppl"], want["ppl"]) and close(k["base_ppl"], want["base_ppl"]),
          "tiny F32 vs Q8_0: PPL %.5f/%.5f and base PPL %.5f/%.5f match numpy"
          % (got["ppl"], want["ppl"], k["base_ppl"], want["base_ppl"]))
    check(close(k["mean"], want["kl"]) and k["mean"] > 0,
          "tiny F32 vs Q8_0: mean KL %.6e vs numpy %.6e (relative %.1e <= %g)"
          % (k["mean"], want["kl"], abs(k["mean"] / want["kl"] - 1), REL))
    check(abs(k["top1_pct"] - want["top1"]) <= 1e-6,
          "tiny F32 vs Q8_0: top-1 agreement %.3f%% vs numpy %.3f%%" % (k["top1_pct"], want["top1"]))
    self_ = ppl(tiny, "--ctx", "32", "--chunks", "3", "--kl-base", tiny)["kl"]
    check(self_["mean"] < 1e-9 and self_["max"] < 1e-9 and self_["top1_pct"] == 100.0,
          "tiny against itself: KL %.2e, top-1 %.1f%%" % (self_["mean"], self_["top1_pct"]))
    # the default cache is f16; the KL base keeps f32, so the KL is the rounding's
    dflt = ppl(tiny, "--ctx", "32", "--chunks", "3", "--kl-base", tiny, kv=None)
    k = dflt["kl"]
    check(dflt["kv_dtype"] == "f16" and k["base_kv_dtype"] == "f32",
          "tiny, no --kv-dtype: the model's cache is %s (f16), the base's %s (f32)"
          % (dflt["kv_dtype"], k["base_kv_dtype"]))
    check(0 < k["mean"] < TINY_F16_KL and k["top1_pct"] >= 95.0,
          "tiny f16 cache against its f32 self: KL %.2e in (0, %g), top-1 %.1f%% >= 95%%"
          % (k["mean"], TINY_F16_KL, k["top1_pct"]))


TINY_F16_KL = 1e-4  # KL of the tiny model's f16 cache against its f32 one: measured 1.2e-6

# SmolLM2 (ctx 128, 4 windows, 252 scored tokens).  Measured 2026-12-03:
# f32 activations give the oracle's PPL 16.05908 to 1e-7 relative; the default
# int8 activations 15.893 (-1.0%; the numpy emulation of that rounding gives
# +1.3%) and KL(exact || int8) 0.0113 against the emulation's 0.0103 (top-1
# 95.2%).  Truncating instead of rounding in the int8 quantizer moves the PPL
# only +0.5% but the KL to 0.038 (3.7x).
SMOL_PPL_REL = 1e-5      # exact path vs the float64 oracle (measured 1.4e-7)
SMOL_INT8_LOGPPL = 0.03  # |log PPL_int8 - log PPL_oracle| over 4 windows; the bound
# scales as 1/sqrt(windows scored) (the mean of per-token differences), so 2
# windows (the sanitized build) allow 0.042.  Measured 2026-12-03 with the
# multi-query attention kernels: 4 windows 16.3045 vs 16.0591 (0.0152),
# 2 windows 9.6507 vs 9.2810 (0.0391; the KL ratio 0.98 and top-1 92.9%
# show the int8 path itself unchanged).
SMOL_KL_RATIO = (0.5, 1.5)  # KL(exact || plume int8) / KL(oracle || emulated int8)
SMOL_TOP1 = 90.0


def smol_reference(ids, ctx, chunks):
    """The oracle's PPL (float64) and its PPL and mean KL(float64 || q8)
    with activations rounded as plume's int8 path rounds them."""
    m = oracle.load(SMOL)
    wins, first = windows(ids, ctx, 0, chunks)
    lms = {}
    for q8 in (False, True):
        m.act_q8 = q8
        lms[q8] = [log_softmax(m.logits(w)) for w in wins]
    out = {}
    for q8 in (False, True):
        nll = []
        for w, lm in zip(wins, lms[q8]):
            nll.extend(-lm[np.arange(first, ctx - 1), np.array(w[first + 1:])])
        out["ppl_q8" if q8 else "ppl"] = math.exp(np.mean(nll))
        out["n_scored"] = len(nll)
    kl = [float(np.sum(np.exp(a[p]) * (a[p] - b[p])))
          for a, b in zip(lms[False], lms[True]) for p in range(first, ctx - 1)]
    out["kl_q8"] = float(np.mean(kl))
    return out


def test_smollm2(tmp):
    if not os.path.exists(SMOL):
        print("skip smollm2: %s not found (scripts/fetch-model)" % SMOL)
        return False
    # a sanitized build (PLUME_TEST_SANITIZED=1) runs the same checks on half
    # the windows: the same code paths, and its f32 kernels are 15x slower
    chunks = 2 if os.environ.get("PLUME_TEST_SANITIZED") == "1" else 4
    ids = tokens(SMOL)
    want = smol_reference(ids, 128, chunks)
    args = ["--ctx", "128", "--chunks", str(chunks), "--threads", "2"]
    exact = ppl(SMOL, *args, env={"PLUME_CPU_ACTIVATIONS": "f32"})
    check(exact["n_scored"] == want["n_scored"] and close(exact["ppl"], want["ppl"], SMOL_PPL_REL),
          "smollm2 (f32 activations): PPL %.6f vs the oracle's %.6f (relative %.1e <= %g)"
          % (exact["ppl"], want["ppl"], abs(exact["ppl"] / want["ppl"] - 1), SMOL_PPL_REL))
    # a genuinely different model: the same network with exact f32 weights
    # (plume convert) is the base; the GGUF on the default int8 path the model
    hf = os.path.join(tmp, "smol-hf")
    r = subprocess.run([PLUME, "convert", SMOL, "--to", "hf", hf], capture_output=True, text=True)
    check(r.returncode == 0, "smollm2: converted to f32 HF (%s)" % r.stderr.strip().splitlines()[-1:])
    if r.returncode != 0:
        return True
    got = ppl(SMOL, *args, "--kl-base", hf)
    k = got["kl"]
    d = abs(math.log(got["ppl"] / want["ppl"]))
    bound = SMOL_INT8_LOGPPL * math.sqrt(4 / chunks)
    check(d <= bound,
          "smollm2 (int8 activations): PPL %.4f vs the oracle's %.4f: |log ratio| %.4f <= %.3g "
          "(emulated rounding: %.4f)" % (got["ppl"], want["ppl"], d, bound, want["ppl_q8"]))
    check(close(k["base_ppl"], want["ppl"], SMOL_PPL_REL),
          "smollm2: base (f32 HF conversion) PPL %.6f vs the oracle's %.6f" % (k["base_ppl"], want["ppl"]))
    ratio = k["mean"] / want["kl_q8"]
    check(SMOL_KL_RATIO[0] <= ratio <= SMOL_KL_RATIO[1],
          "smollm2: KL(f32 || int8 activations) %.5f vs the oracle's KL(float64 || emulated int8) %.5f: "
          "ratio %.2f in [%g, %g]" % (k["mean"], want["kl_q8"], ratio, *SMOL_KL_RATIO))
    print("smollm2: top-1 agreement of the int8 path with the exact one: %.1f%%" % k["top1_pct"])
    check(k["top1_pct"] >= SMOL_TOP1, "smollm2: top-1 agreement %.1f%% >= %g%%" % (k["top1_pct"], SMOL_TOP1))
    pipe, base = os.path.join(tmp, "p.yaml"), os.path.join(tmp, "b.yaml")
    with open(pipe, "w") as f:
        f.write("model: %s\nthreads: 2\nkv_cache: { dtype: f32 }\n" % SMOL)
    with open(base, "w") as f:
        f.write("model: %s\nthreads: 2\n" % hf)
    r = subprocess.run([PLUME, "perplexity", "--pipeline", pipe, "--text", TEXT, "--ctx", "128",
                        "--chunks", str(chunks), "--kl-base", base, "--json"], capture_output=True, text=True)
    viap = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr}
    check(viap.get("ppl") == got["ppl"] and viap.get("kl", {}).get("mean") == k["mean"],
          "smollm2 via --pipeline (and --kl-base PIPELINE): same PPL and KL %s" % viap.get("ppl", viap))
    return True


if __name__ == "__main__":
    sys.exit(harness.main("plume-ppl-", test_tiny, test_smollm2))
