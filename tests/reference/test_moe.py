#!/usr/bin/env python3
"""plume vs an independent float64 numpy forward (moe_oracle.py) on tiny
random mixture-of-experts models (make_moe_model.py): Mixtral (8 experts,
top-2), Qwen3-MoE (8 experts, top-4, renormalized; and a variant with a
dense layer and raw top-k probabilities), OLMoE (8 experts, top-3, q/k
norms over the whole projections) and OLMoE in transformers 5's fused
expert layout.

For every variant, in HF form and (where llama.cpp has one) GGUF form:
  * prefill: the logits of all N = 80 positions in one chunk within TOL =
    1e-4 of the oracle (max |diff| printed);
  * decode: one token per forward, bit-identical to the prefill;
  * chunks of 5 batched with another sequence (placed first), bit-identical
    to the run alone: a row's experts run over however many rows share
    them, and its bits do not change;
  * `plume generate`: the prefill's last logits bit for bit, and an
    8-token greedy continuation equal to the oracle's.
f32 weights, f32 activations (PLUME_CPU_ACTIVATIONS=f32).

Refusals by name: MoE families plume does not run (gpt_oss, qwen2_moe,
deepseek_v3 in HF; gpt-oss, qwen2moe in GGUF), and a GPTQ-quantized MoE
checkpoint.

Exit 0 pass, 1 fail, 77 skip (binaries or packages missing).
"""

import json
import os
import subprocess
import sys
import tempfile

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

import make_moe_model  # noqa: E402
import moe_oracle  # noqa: E402
from test_families import check, plume_logits, engine_run, oracle_greedy, FAILS  # noqa: E402
import test_families  # noqa: E402

TOOL, PLUME = test_families.TOOL, test_families.PLUME
TOL = 1e-4
N = 80
GEN = 8


def run_variant(variant, tmp):
    fx = make_moe_model.make(os.path.join(tmp, variant), variant)
    orc = moe_oracle.load_hf(fx["hf"])
    nv = fx["config"]["vocab_size"]
    rng = np.random.default_rng(7)
    ids = [int(t) for t in rng.integers(0, nv - 3, N)]
    ref = orc.logits(ids)
    want_gen = oracle_greedy(orc, ids, GEN)
    forms = [("hf", fx["hf"])] + ([("gguf", fx["gguf"])] if fx["gguf"] else [])
    for form, path in forms:
        tag = "%s %s" % (variant, form)
        pre, msg = plume_logits(path, ids, N, 0, tmp, nv)
        if not check(pre is not None, "%s: prefill of %d runs (%s)" % (tag, N, msg)):
            continue
        diff = float(np.abs(pre - ref).max())
        check(diff < TOL, "%s: prefill logits of all %d positions vs the oracle: max |diff| "
              "%.2e (tol %g, logit spread %.1f)" % (tag, N, diff, TOL,
                                                     float(ref.max() - ref.min())))
        dec, msg = plume_logits(path, ids, 1, 0, tmp, nv)
        check(dec is not None and np.array_equal(dec, pre),
              "%s: decode (one token per forward) bit-identical to the prefill %s" % (tag, msg))
        bat, msg = plume_logits(path, ids, 5, 1, tmp, nv)
        check(bat is not None and np.array_equal(bat, pre),
              "%s: chunks of 5 batched with another sequence bit-identical to alone %s"
              % (tag, msg))
        eng, gen, msg = engine_run(path, ids, GEN, tmp)
        check(eng is not None and np.array_equal(eng, pre[-1].astype(np.float32)),
              "%s: plume generate gives the prefill's last logits bit for bit %s" % (tag, msg))
        check(gen == want_gen, "%s: %d-token greedy continuation equals the oracle's: %s"
              % (tag, GEN, gen))


def refusals(tmp):
    fx = make_moe_model.make(os.path.join(tmp, "refuse"), "olmoe")
    hf = fx["hf"]
    with open(os.path.join(hf, "config.json")) as f:
        base = json.load(f)
    for mt, arch in (("gpt_oss", "GptOssForCausalLM"), ("qwen2_moe", "Qwen2MoeForCausalLM"),
                     ("deepseek_v3", "DeepseekV3ForCausalLM")):
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump(dict(base, model_type=mt, architectures=[arch]), f)
        p = subprocess.run([PLUME, "info", hf], capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and mt in p.stderr and "mixture-of-experts" in p.stderr,
              "HF %s refused by name: %s" % (mt, p.stderr.strip()[:200]))
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(dict(base, quantization_config=dict(quant_method="gptq", bits=4, group_size=32,
                                                      sym=True, desc_act=False)), f)
    p = subprocess.run([PLUME, "info", hf], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "mixture-of-experts" in p.stderr and "gptq" in p.stderr,
          "a GPTQ mixture-of-experts checkpoint refused: %s" % p.stderr.strip()[:200])
    import make_tiny_model as mtm
    tok = mtm.build_tokenizer()
    c = fx["config"]
    for arch in ("gpt-oss", "qwen2moe"):
        path = os.path.join(tmp, "refuse", "%s.gguf" % arch)
        orig = gguf.GGUFWriter.__init__

        def init(self, p, a, *args, _arch=arch, **kw):
            orig(self, p, _arch, *args, **kw)
        gguf.GGUFWriter.__init__ = init
        try:
            make_moe_model.write_gguf(path, c, make_moe_model.gguf_tensors(c, fx["weights"]), tok)
        finally:
            gguf.GGUFWriter.__init__ = orig
        p = subprocess.run([PLUME, "info", path], capture_output=True, text=True, timeout=60)
        err = p.stderr.strip()
        check(p.returncode != 0 and arch in err and "mixture-of-experts" in err and
              len(err.splitlines()) == 1, "GGUF %s refused by name in one line: %s"
              % (arch, err[:200]))


def main():
    for b in (TOOL, PLUME):
        if not os.access(b, os.X_OK):
            print("SKIP: %s not built" % b)
            return 77
    only = sys.argv[1:] or list(make_moe_model.VARIANTS)
    with tempfile.TemporaryDirectory(prefix="plume-moe-") as tmp:
        for v in only:
            run_variant(v, tmp)
        if not sys.argv[1:]:
            refusals(tmp)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
