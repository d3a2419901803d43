#!/usr/bin/env python3
"""Compares plume's C forward pass with the numpy oracle (oracle.py).

    test_against_plume.py [--part tiny|smollm2|all] [--plume PATH]

The plume binary is --plume, else $PLUME_BIN, else
$PLUME_BUILD_ROOT/core/src/cli/plume.  It is run as

    plume generate --model PATH --prompt-ids 1,2,3 --max-tokens N --temperature 0
                   --ignore-eos --json --logits-out FILE --threads 2

(stdout: one JSON object with "token_ids", "prompt_token_ids", ...; FILE: the
last prompt position's logits as n_vocab little-endian float32).

Part "tiny": fixtures from make_tiny_model.py (llama and qwen2, tied and
untied), each as GGUF F32, HF directory and 2-shard HF directory; plume's
last-position logits must match the float64 oracle within TINY_TOL and its
16-token greedy continuation must be identical.  The F16 and Q8_0 GGUF copies
are checked too (the oracle dequantizes the same file, so only plume's
arithmetic differs; QUANT_TOL leaves room for activation quantization).

Part "smollm2": models/SmolLM2-135M-Instruct.Q4_1.gguf, 4 prompts: same
argmax, same top-5 set, max abs logit error < SMOL_TOL (2e-3), identical 32-token
greedy continuation.  A greedy divergence is accepted only at a genuine
near-tie: the oracle's logit for plume's token is within the logits tolerance
of the oracle's maximum (then later tokens cannot be compared).

Exit 0 pass, 1 fail, 77 skip (binary not built, package or model missing).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _venv  # noqa: E402

_venv.ensure()

try:
    import numpy as np
    import gguf  # noqa: F401
    import safetensors  # noqa: F401
    import tokenizers  # noqa: F401
except ImportError as e:
    print("SKIP: missing Python package: %s" % e)
    sys.exit(77)

import make_tiny_model  # noqa: E402
import oracle  # noqa: E402

SKIP = 77
SOURCE_ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))
SMOL_PATH = os.path.join(SOURCE_ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

# plume computes in float32 with the same dequantized weights as the oracle.
# Measured: a float32 numpy run of the oracle differs from float64 by ~6e-5 on
# SmolLM2 (logits up to ~35) and ~1e-5 on the tiny models (logits up to ~25).
TINY_TOL = float(os.environ.get("PLUME_TINY_TOL", "1e-3"))
# SmolLM2: 30 layers, |logits| up to ~35.  plume's f32 engine measured
# <= 3.5e-5 when this test was written; 2e-3 is ~30x the pure-f32 error, yet
# subtle bugs are larger: e.g. rms eps 1e-6 instead of 1e-5 moves these logits
# by 1.3e-2, which a loose 0.05 would hide.  When plume starts quantizing
# activations, raise it via PLUME_ORACLE_TOL (0.05 is still far below the
# top-1/top-2 gaps, >= 0.46 at the prompt ends below).
SMOL_TOL = float(os.environ.get("PLUME_ORACLE_TOL", "2e-3"))
# F16 / Q8_0 tiny copies: same weights on both sides; room for quantized dot products.
QUANT_TOL = float(os.environ.get("PLUME_QUANT_TOL", "0.5"))
# int8 activation quantization (the default CPU path) on SmolLM2: 1.5 is twice
# the 0.75 that an independent numpy simulation of per-32 int8 rounding gives.
INT8_TOL = float(os.environ.get("PLUME_INT8_TOL", "1.5"))

TINY_PROMPT = [297, 5, 120, 256, 270, 33, 44, 299, 1, 200, 150, 77, 298, 10]
TINY_N = 16

# SmolLM2 prompts, ids from the HF tokenizer rebuilt from the GGUF
# (gguf_tokenize.py; SmolLM2 adds no BOS).
SMOL_PROMPTS = [
    ("The capital of France is", [504, 3575, 282, 4649, 314]),
    ("def fibonacci(n):", [1604, 3987, 46477, 24, 94, 727]),
    ("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
     [1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198]),
    ("Once upon a time, there was a little", [6403, 1980, 253, 655, 28, 665, 436, 253, 1838]),
]
SMOL_N = 32

FAILS = []
TIMES = {"plume": 0.0, "oracle": 0.0}


def check(ok, what):
    print("%s  %s" % ("ok  " if ok else "FAIL", what), flush=True)
    if not ok:
        FAILS.append(what)
    return ok


def find_plume(arg):
    cands = [arg, os.environ.get("PLUME_BIN")]
    br = os.environ.get("PLUME_BUILD_ROOT")
    if br:
        cands.append(os.path.join(br, "core", "src", "cli", "plume"))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


class PlumeError(Exception):
    pass


def run_plume(plume, model, ids, n, tmp, activations="f32"):
    lf = os.path.join(tmp, "logits.f32")
    if os.path.exists(lf):
        os.unlink(lf)
    cmd = [plume, "generate", "--model", model, "--prompt-ids", ",".join(map(str, ids)),
           "--max-tokens", str(n), "--temperature", "0", "--ignore-eos", "--json",
           "--logits-out", lf, "--threads", "2"]
    t = time.time()
    try:
        env = dict(os.environ, PLUME_CPU_ACTIVATIONS=activations)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    except subprocess.TimeoutExpired:
        raise PlumeError("timed out: %s" % " ".join(cmd))
    TIMES["plume"] += time.time() - t
    if p.returncode != 0:
        raise PlumeError("exit %d: %s\nstderr: %s" % (p.returncode, " ".join(cmd), p.stderr[-2000:]))
    res = None
    for line in reversed(p.stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                res = json.loads(line)
                break
            except ValueError:
                pass
    if res is None:
        try:
            res = json.loads(p.stdout)
        except ValueError:
            raise PlumeError("no JSON object on stdout of %s:\n%s" % (" ".join(cmd), p.stdout[-2000:]))
    if not os.path.exists(lf):
        raise PlumeError("--logits-out file not written by %s" % " ".join(cmd))
    return res, np.fromfile(lf, dtype="<f4").astype(np.float64)


def oracle_run(model, ids, n):
    t = time.time()
    s = model.session(len(ids) + n)
    lg = s.feed(ids)[-1]
    last, gen = lg, []
    for i in range(n):
        tok = int(np.argmax(last))
        gen.append(tok)
        if i + 1 < n:
            last = s.feed([tok])[-1]
    TIMES["oracle"] += time.time() - t
    return lg, gen


def compare_greedy(model, ids, ours, theirs, tol, strict, tag):
    """True if identical, or (when not strict) they diverge at a near-tie of the oracle."""
    theirs = [int(t) for t in theirs]
    if theirs == ours:
        return check(True, "%s: greedy %d tokens identical" % (tag, len(ours)))
    if len(theirs) != len(ours):
        return check(False, "%s: plume generated %d tokens, expected %d: %s" % (tag, len(theirs), len(ours), theirs))
    k = next(i for i in range(len(ours)) if ours[i] != theirs[i])
    lg = model.logits(list(ids) + theirs[:k])[-1]
    gap = float(lg[ours[k]] - lg[theirs[k]])
    msg = ("%s: greedy diverges at step %d (oracle %d, plume %d; oracle logit gap %.3g)\n  oracle %s\n  plume  %s"
           % (tag, k, ours[k], theirs[k], gap, ours, theirs))
    if not strict and gap <= tol:
        return check(True, msg + "\n  accepted: near-tie within tolerance %g" % tol)
    return check(False, msg)


def compare_logits(tag, ol, pl, tol, top=5):
    if not check(pl.shape == ol.shape, "%s: logits file has %d values (n_vocab %d)" % (tag, pl.size, ol.size)):
        return None
    err = float(np.max(np.abs(pl - ol)))
    check(bool(np.all(np.isfinite(pl))), "%s: logits finite" % tag)
    check(err < tol, "%s: last-position logits max abs err %.3g < %g (|logits| <= %.1f)"
          % (tag, err, tol, float(np.max(np.abs(ol)))))
    check(int(np.argmax(pl)) == int(np.argmax(ol)), "%s: argmax %d == oracle %d"
          % (tag, int(np.argmax(pl)), int(np.argmax(ol))))
    ot, pt = np.argsort(-ol)[:top], np.argsort(-pl)[:top]
    diff = set(ot.tolist()) ^ set(pt.tolist())
    # a top-k set can only legitimately differ at a boundary tie of the oracle
    kth = ol[ot[-1]]
    ok = all(abs(ol[t] - kth) <= 2 * err for t in diff)
    check(ok, "%s: top-%d set %s == oracle %s%s" % (tag, top, sorted(pt.tolist()), sorted(ot.tolist()),
                                                   " (boundary tie)" if diff and ok else ""))
    return err


def part_tiny(plume):
    with tempfile.TemporaryDirectory(prefix="plume-tiny-") as tmp:
        for arch in ("llama", "qwen2"):
            for tied in (False, True):
                name = "%s-%s" % (arch, "tied" if tied else "untied")
                seed = {"llama": 1, "qwen2": 2}[arch] + (10 if tied else 0)
                paths = make_tiny_model.make(os.path.join(tmp, name), arch=arch, seed=seed,
                                             tied=tied, shards=2)
                m = oracle.load(paths["gguf"])
                ol, og = oracle_run(m, TINY_PROMPT, TINY_N)
                plume_logits = {}
                for kind, tol, strict, act in (("gguf", TINY_TOL, True, "f32"), ("hf", TINY_TOL, True, "f32"),
                                               ("hf_sharded", TINY_TOL, True, "f32"),
                                               ("gguf_f16", TINY_TOL, True, "f32"),
                                               ("gguf_q8_0", TINY_TOL, True, "f32"),
                                               ("gguf_q8_0", QUANT_TOL, False, "int8")):
                    tag = "tiny %s %s (%s activations)" % (name, kind, act)
                    try:
                        res, pl = run_plume(plume, paths[kind], TINY_PROMPT, TINY_N, tmp, act)
                    except PlumeError as e:
                        check(False, "%s: %s" % (tag, e))
                        continue
                    mk = oracle.load(paths[kind])
                    if kind.startswith("gguf_"):  # the oracle on the same quantized file
                        ol_k, og_k = oracle_run(mk, TINY_PROMPT, TINY_N)
                    else:
                        ol_k, og_k = ol, og
                    check(res.get("prompt_token_ids", TINY_PROMPT) == TINY_PROMPT,
                          "%s: prompt_token_ids echoed unchanged" % tag)
                    compare_logits(tag, ol_k, pl, tol)
                    compare_greedy(mk, TINY_PROMPT, og_k, res.get("token_ids", []), tol, strict, tag)
                    if act == "f32":
                        plume_logits[kind] = pl
                if "gguf" in plume_logits and "hf" in plume_logits:
                    e = float(np.max(np.abs(plume_logits["gguf"] - plume_logits["hf"])))
                    check(e < TINY_TOL, "tiny %s: plume GGUF vs plume HF logits %.3g" % (name, e))


def part_smollm2(plume):
    if not os.path.exists(SMOL_PATH):
        print("SKIP: %s not present" % SMOL_PATH)
        return SKIP
    t = time.time()
    m = oracle.load(SMOL_PATH)
    print("oracle: SmolLM2 loaded and dequantized in %.1f s" % (time.time() - t), flush=True)
    errs, int8_errs = [], []
    with tempfile.TemporaryDirectory(prefix="plume-smol-") as tmp:
        for text, ids in SMOL_PROMPTS:
            tag = "SmolLM2 %r" % text[:24]
            ol, og = oracle_run(m, ids, SMOL_N)
            print("%s: oracle greedy %s" % (tag, og), flush=True)
            try:
                res, pl = run_plume(plume, SMOL_PATH, ids, SMOL_N, tmp)
            except PlumeError as e:
                check(False, "%s: %s" % (tag, e))
                continue
            check(res.get("prompt_token_ids", ids) == ids, "%s: prompt_token_ids echoed unchanged" % tag)
            err = compare_logits(tag + " (f32 activations)", ol, pl, SMOL_TOL)
            if err is not None:
                errs.append(err)
            compare_greedy(m, ids, og, res.get("token_ids", []), SMOL_TOL, False, tag)
            # the default, fast path quantizes activations to int8 blocks of 32 as
            # llama.cpp does; an independent numpy simulation of that rounding moves
            # these logits by ~0.75, so the check is looser and tie-aware
            try:
                res8, pl8 = run_plume(plume, SMOL_PATH, ids, SMOL_N, tmp, "int8")
            except PlumeError as e:
                check(False, "%s int8: %s" % (tag, e))
                continue
            err8 = compare_logits(tag + " (int8 activations)", ol, pl8, INT8_TOL)
            if err8 is not None:
                int8_errs.append(err8)
            compare_greedy(m, ids, og, res8.get("token_ids", []), INT8_TOL, False, tag + " (int8)")
            for k in ("prefill_tok_s", "decode_tok_s", "finish_reason"):
                if k in res8:
                    print("  plume %s: %s" % (k, res8[k]))
    if errs:
        print("SmolLM2: max abs logit error over %d prompts: %.3g (tolerance %g)" % (len(errs), max(errs), SMOL_TOL))
    if int8_errs:
        print("SmolLM2 int8 activations: max abs logit error %.3g (tolerance %g)" % (max(int8_errs), INT8_TOL))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("tiny", "smollm2", "all"), default="all")
    ap.add_argument("--plume", help="path to the plume binary")
    a = ap.parse_args()
    plume = find_plume(a.plume)
    if plume is None:
        print("SKIP: plume binary not built")
        return SKIP
    print("plume: %s" % plume)
    t0 = time.time()
    rc = 0
    if a.part in ("tiny", "all"):
        part_tiny(plume)
    if a.part in ("smollm2", "all"):
        rc = part_smollm2(plume)
    print("%d failure(s); %.1f s total (plume %.1f s, oracle %.1f s)"
          % (len(FAILS), time.time() - t0, TIMES["plume"], TIMES["oracle"]))
    if FAILS:
        return 1
    if rc == SKIP and a.part == "smollm2":
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
