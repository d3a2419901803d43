#!/usr/bin/env python3
"""Proves the numpy oracle (oracle.py) and the tiny fixtures (make_tiny_model.py).

For llama and qwen2, tied and untied:
  * the GGUF copy (llama: q/k permuted, adjacent-pair rope) and the HF copy
    (unpermuted, rotate-half rope) give the same logits (< 1e-9, float64);
    the sharded HF copy gives bit-identical logits to the single-file one;
  * the KV-cached path (prefill + one-token decode) equals a full recompute;
  * the F16 / Q8_0 GGUF copies give logits close to F32 and the same argmax;
  * the fixtures have teeth: the wrong rope pairing, or dropping the qwen2
    biases, changes the logits a lot; greedy decoding is far from ties;
  * the GGUF tokenizer metadata and tokenizer.json encode text identically.
If the real SmolLM2 GGUF is present, the oracle must continue
"The capital of France is" with " Paris".

Exit 0 pass, 1 fail, 77 skip (a package is missing).
"""

import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _venv  # noqa: E402

_venv.require("numpy", "gguf", "safetensors", "tokenizers")

import numpy as np  # noqa: E402

import make_tiny_model
import oracle

FAILS = []
PROMPT = [297, 5, 120, 256, 270, 33, 44, 299, 1, 200, 150, 77, 298, 10]  # includes specials


def check(ok, what):
    print("%s  %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILS.append(what)


def maxdiff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def top_gap(lg):
    s = np.sort(lg)[::-1]
    return float(s[0] - s[1])


def one_variant(tmp, arch, tied):
    tag = "%s/%s" % (arch, "tied" if tied else "untied")
    d = os.path.join(tmp, "%s-%s" % (arch, "tied" if tied else "untied"))
    seed = {"llama": 1, "qwen2": 2}[arch] + (10 if tied else 0)
    paths = make_tiny_model.make(d, arch=arch, seed=seed, tied=tied, shards=2)

    mg = oracle.load(paths["gguf"])
    mh = oracle.load(paths["hf"])
    ms = oracle.load(paths["hf_sharded"])
    check(mg.cfg.rope == (oracle.ROPE_ADJACENT if arch == "llama" else oracle.ROPE_HALF)
          and mh.cfg.rope == oracle.ROPE_HALF, "%s: rope conventions" % tag)
    check(mg.tied == tied and mh.tied == tied and ms.tied == tied, "%s: tied=%s detected" % (tag, tied))

    lg, lh, ls = mg.logits(PROMPT), mh.logits(PROMPT), ms.logits(PROMPT)
    check(lg.shape == (len(PROMPT), 300), "%s: logits shape %s" % (tag, lg.shape))
    e = maxdiff(lg, lh)
    check(e < 1e-9, "%s: GGUF vs HF logits max abs diff %.3g < 1e-9" % (tag, e))
    check(np.array_equal(lh, ls), "%s: HF vs sharded HF bit-identical" % tag)
    check(float(np.std(lg[-1])) > 1.0, "%s: logits spread (std %.2f)" % (tag, float(np.std(lg[-1]))))

    # KV cache: incremental decode == full recompute
    s = mg.session()
    inc = np.concatenate([s.feed(PROMPT[:5]), s.feed(PROMPT[5:6]), s.feed(PROMPT[6:])])
    e = maxdiff(inc, lg)
    check(e < 1e-10, "%s: KV-cached feed vs full recompute %.3g" % (tag, e))
    g = mg.greedy(PROMPT, 16)
    full = mg.logits(PROMPT + g[:-1])
    check(list(np.argmax(full[len(PROMPT) - 1:], axis=1)) == g, "%s: greedy == argmax of recompute" % tag)
    check(mh.greedy(PROMPT, 16) == g and ms.greedy(PROMPT, 16) == g, "%s: greedy GGUF == HF == sharded" % tag)
    gap = min(top_gap(r) for r in full[len(PROMPT) - 1:])
    # plume is compared with a 1e-3 logits tolerance; demand 10x margin
    check(gap > 1e-2, "%s: greedy far from ties (min top1-top2 gap %.3g)" % (tag, gap))

    # lower-precision copies
    # Weight rounding: F16 keeps ~11 bits (rel. error <= 2^-11); Q8_0 has step
    # amax/127 per block of 32 (rms rel. error ~0.5%), ~20x coarser, and the
    # tiny model's logits have std ~8, so allow 0.05 and 1.5 respectively.
    for key, tol in (("gguf_f16", 0.05), ("gguf_q8_0", 1.5)):
        mq = oracle.load(paths[key])
        lq = mq.logits(PROMPT)
        e = maxdiff(lq, lg)
        same = bool(np.all(np.argmax(lq, 1) == np.argmax(lg, 1)))
        check(e < tol and same, "%s: %s vs F32 max abs diff %.3g < %g, same argmax %s" % (tag, key, e, tol, same))

    # teeth: wrong rope pairing must be visible from position 1 on
    orig = mg.cfg.rope
    mg.cfg.rope = oracle.ROPE_HALF if orig == oracle.ROPE_ADJACENT else oracle.ROPE_ADJACENT
    try:
        e = maxdiff(mg.logits(PROMPT)[1:], lg[1:])
    finally:
        mg.cfg.rope = orig
    check(e > 0.1, "%s: wrong rope pairing changes logits by %.3g" % (tag, e))
    if arch == "qwen2":
        saved = [(L.bq, L.bk, L.bv) for L in mg.layers]
        for L in mg.layers:
            L.bq = L.bk = L.bv = None
        try:
            e = maxdiff(mg.logits(PROMPT), lg)
        finally:
            for L, (a, b, c) in zip(mg.layers, saved):
                L.bq, L.bk, L.bv = a, b, c
        check(e > 0.1, "%s: dropping q/k/v biases changes logits by %.3g" % (tag, e))
    return paths


def check_tokenizer(paths):
    from tokenizers import Tokenizer
    tj = Tokenizer.from_file(os.path.join(paths["hf"], "tokenizer.json"))
    texts = ["The quick brown fox jumps over the lazy dog.",
             "<|im_start|>user\nHello world!<|im_end|>\n<|im_start|>assistant\n",
             "tokens: 1234 + 5678, naïve café ✓"]
    for t in texts:
        ids = tj.encode(t).ids
        check(tj.decode(ids, skip_special_tokens=False) == t, "tokenizer.json round-trips %r" % t[:20])
    check(tj.token_to_id("<|im_start|>") == 298 and tj.get_vocab_size() == 300, "tokenizer.json specials/vocab")
    try:
        from gguf_tokenize import hf_tokenizer
        tg = hf_tokenizer(paths["gguf"])
    except Exception as e:  # transformers is pinned by scripts/install-deps: a failure is real
        check(False, "GGUF->HF tokenizer conversion with transformers failed: %r" % e)
        return
    for t in texts:
        a, b = tj.encode(t).ids, tg.encode(t).ids
        check(a == b, "GGUF tokenizer == tokenizer.json on %r (%d ids)" % (t[:20], len(a)))


def check_smollm2():
    root = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))
    p = os.path.join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(p):
        print("SKIP: %s missing (scripts/fetch-model fetches it); SmolLM2 sanity check not run" % p)
        return False
    t = time.time()
    m = oracle.load(p)
    ids = [504, 3575, 282, 4649, 314]  # "The capital of France is"
    g = m.greedy(ids, 4)
    check(g[0] == 7042, "SmolLM2: 'The capital of France is' -> %s (7042 = ' Paris'), %.1f s" % (g, time.time() - t))


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="plume-oracle-") as tmp:
        first = None
        for arch in ("llama", "qwen2"):
            for tied in (False, True):
                p = one_variant(tmp, arch, tied)
                first = first or p
        check_tokenizer(first)
    ran_smollm2 = check_smollm2() is not False
    print("%d failure(s), %.1f s" % (len(FAILS), time.time() - t0))
    return 1 if FAILS else 0 if ran_smollm2 else 77


if __name__ == "__main__":
    sys.exit(main())
