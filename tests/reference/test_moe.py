#!/usr/bin/env python3
"""plume vs an independent float64 numpy forward (moe_oracle.py) on tiny
random mixture-of-experts models (make_moe_model.py): Mixtral (8 experts,
top-2), Qwen3-MoE (8 experts, top-4, renormalized; and a variant with a
dense layer and raw top-k probabilities), Qwen2-MoE (q/k/v bias, a shared
expert gated by sigmoid), OLMoE (8 experts, top-3, q/k norms over the
whole projections) and OLMoE in transformers 5's fused expert layout.

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

Quantized experts: `plume quantize --to gguf` of the Mixtral and OLMoE
GGUFs to Q8_0 and Q4_0 keeps the router (ffn_gate_inp) in F32, quantizes
the 3-D expert tensors (8 experts: attn_k/attn_v in Q8_0, as llama-quantize
does); with f32 activations plume's logits are within TOL of the oracle run
on gguf-py's dequantization of the same file; with plume's default int8
activations decode and batched chunks are bit-identical to the prefill.  An HF MoE directory is refused by `--to gguf` and by the
GPTQ/AWQ quantizer, with the way out in the message.

Refusals by name: MoE families plume does not run (phimoe, dbrx,
deepseek_v3 in HF; grok, deepseek2 in GGUF; gpt-oss has its own test,
test_gpt_oss.py), and a GPTQ-quantized MoE
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
    for mt, arch in (("phimoe", "PhimoeForCausalLM"), ("dbrx", "DbrxForCausalLM"),
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
    # a backend that answers no to PLUME_FEAT_MOE (as cuda does): one line at load
    plugins = os.path.join(test_families.BUILD_ROOT, "tests", "plugins")
    if os.path.exists(os.path.join(plugins, "plume-picky-backend.so")):
        pipe = os.path.join(tmp, "picky-moe.yaml")
        with open(pipe, "w") as f:
            f.write("model: %s\nplugins: [picky-backend]\nbackend: picky-moe\n" % fx["gguf"])
        p = subprocess.run([PLUME, "generate", "--pipeline", pipe, "--plugin-dir", plugins,
                            "--prompt", "hi", "--max-tokens", "2"],
                           capture_output=True, text=True, timeout=60)
        err = p.stderr.strip()
        check(p.returncode != 0 and len(err.splitlines()) == 1 and "picky-moe" in err and
              "mixture-of-experts" in err, "a backend without MoE support refuses the model "
              "in one line: %s" % err[:220])
    else:
        print("note: %s not built; the backend refusal is not checked" % plugins)
    mx = make_moe_model.make(os.path.join(tmp, "refuse-mixtral"), "mixtral")
    p = subprocess.run([PLUME, "convert", mx["gguf"], "--to", "hf", os.path.join(tmp, "conv")],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "mixture-of-experts" in p.stderr,
          "plume convert of a MoE GGUF refused: %s" % p.stderr.strip()[:160])
    import make_tiny_model as mtm
    tok = mtm.build_tokenizer()
    c = fx["config"]
    for arch in ("grok", "deepseek2"):
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


def logits_env(model, ids, chunk, batch, tmp, nv, f32):
    """plume_logits with the default int8 activations when not f32."""
    if f32:
        return plume_logits(model, ids, chunk, batch, tmp, nv)
    out = os.path.join(tmp, "lgq.f32")
    env = {k: v for k, v in os.environ.items() if k != "PLUME_CPU_ACTIVATIONS"}
    p = subprocess.run([TOOL, model, out, str(chunk), str(batch), ",".join(map(str, ids))],
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return np.fromfile(out, dtype="<f4").astype(np.float64).reshape(len(ids), nv), ""


def dequantized_hf(fx, path, outdir):
    """An HF directory holding the GGUF at path's weights dequantized by
    gguf-py (gguf.quants.dequantize), under fx's HF names (Mixtral's q/k
    rows unpermuted): the float model the quantized file computes."""
    import make_tiny_model as mtm
    c = fx["config"]
    g = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(
        [int(x) for x in reversed(t.shape)]) for t in gguf.GGUFReader(path).tensors}
    w = dict(fx["weights"])
    inv = {}
    for l in range(c["num_hidden_layers"]):
        inv["blk.%d.attn_q.weight" % l] = ("model.layers.%d.self_attn.q_proj.weight" % l,
                                           c["num_attention_heads"])
        inv["blk.%d.attn_k.weight" % l] = ("model.layers.%d.self_attn.k_proj.weight" % l,
                                           c["num_key_value_heads"])
        inv["blk.%d.attn_v.weight" % l] = ("model.layers.%d.self_attn.v_proj.weight" % l, 0)
        inv["blk.%d.attn_output.weight" % l] = ("model.layers.%d.self_attn.o_proj.weight" % l, 0)
        for i, gg in enumerate(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")):
            for e in range(make_moe_model.n_experts(c)):
                inv[("blk.%d.%s.weight" % (l, gg), e)] = (
                    make_moe_model.expert_names(c, l, e)[i], 0)
    inv["token_embd.weight"] = ("model.embed_tokens.weight", 0)
    inv["output.weight"] = ("lm_head.weight", 0)
    for key, (hf, heads) in inv.items():
        a = g[key[0]][key[1]] if isinstance(key, tuple) else g[key]
        if heads and c["model_type"] == "mixtral":  # undo convert_hf_to_gguf's permutation
            n = a.shape[0]
            idx = mtm.permute(np.arange(n, dtype=np.float64).reshape(n, 1), heads).ravel()
            un = np.empty_like(a)
            un[idx.astype(int)] = a
            a = un
        w[hf] = np.ascontiguousarray(a, dtype=np.float32)
    tok = mtm.build_tokenizer()
    mtm.write_hf(outdir, "llama", w, tok, False)
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    return outdir


def quantized(tmp):
    for variant in ("mixtral", "olmoe"):
        fx = make_moe_model.make(os.path.join(tmp, "q-" + variant), variant)
        nv = fx["config"]["vocab_size"]
        ids = [int(t) for t in np.random.default_rng(5).integers(0, nv - 3, 40)]
        for preset in ("Q8_0", "Q4_0"):
            tag = "%s %s" % (variant, preset)
            out = os.path.join(tmp, "q-" + variant, preset + ".gguf")
            p = subprocess.run([PLUME, "quantize", fx["gguf"], out, "--to", "gguf", "--type",
                                preset], capture_output=True, text=True, timeout=120)
            if not check(p.returncode == 0, "%s: plume quantize --to gguf %s" %
                         (tag, p.stderr.strip()[-200:])):
                continue
            types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(out).tensors}
            want_kv = "Q8_0" if make_moe_model.n_experts(fx["config"]) == 8 else preset
            ok = all(types[n] == "F32" for n in types if "ffn_gate_inp" in n) and \
                all(types[n] == preset for n in types if "_exps" in n) and \
                all(types[n] == want_kv for n in types if "attn_k.weight" in n or
                    "attn_v.weight" in n)
            check(ok, "%s: router F32, 3-D experts %s, attn_k/v %s (8 experts)" % (
                tag, preset, want_kv))
            # the quantized file's own float model, from gguf-py's dequantization
            orc = moe_oracle.load_hf(dequantized_hf(fx, out, os.path.join(tmp, "dq")))
            ref = orc.logits(ids)
            pre, msg = plume_logits(out, ids, len(ids), 0, tmp, nv)
            if check(pre is not None, "%s: prefill runs %s" % (tag, msg)):
                diff = float(np.abs(pre - ref).max())
                check(diff < TOL, "%s (f32 activations): logits vs the oracle of gguf-py's "
                      "dequantized weights: max |diff| %.2e (tol %g)" % (tag, diff, TOL))
            # plume's default: activations rounded to int8 blocks for the integer kernels
            pre, msg = logits_env(out, ids, len(ids), 0, tmp, nv, False)
            if not check(pre is not None, "%s: prefill runs (int8 activations) %s" % (tag, msg)):
                continue
            diff = float(np.abs(pre - ref).max())
            spread = float(ref.max() - ref.min())
            check(diff < 0.25 * spread, "%s (int8 activations): max |diff| %.3f vs the "
                  "dequantized oracle (a sanity bound: a quarter of the spread %.1f; routing "
                  "may flip where two experts' logits are close)" % (tag, diff, spread))
            dec, msg = logits_env(out, ids, 1, 0, tmp, nv, False)
            check(dec is not None and np.array_equal(dec, pre),
                  "%s: decode bit-identical to the prefill (int8 activations) %s" % (tag, msg))
            bat, msg = logits_env(out, ids, 5, 1, tmp, nv, False)
            check(bat is not None and np.array_equal(bat, pre),
                  "%s: batched chunks of 5 bit-identical to alone (int8 activations) %s"
                  % (tag, msg))
    hf = os.path.join(tmp, "q-olmoe", "hf")
    p = subprocess.run([PLUME, "quantize", hf, os.path.join(tmp, "x.gguf"), "--to", "gguf",
                        "--type", "Q4_0"], capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "mixture-of-experts" in p.stderr and "convert_hf_to_gguf" in
          p.stderr, "HF MoE --to gguf refused with the way out: %s" % p.stderr.strip()[:160])
    gptq = os.path.join(test_families.BUILD_ROOT, "plugins", "quant-gptq", "plume-quant-gptq.so")
    if os.path.exists(gptq):  # the quantizer loads its method's plugin first
        p = subprocess.run([PLUME, "quantize", hf, os.path.join(tmp, "gptq"), "--method", "rtn"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and "per-expert GPTQ/AWQ" in p.stderr,
              "per-expert GPTQ/RTN quantization refused: %s" % p.stderr.strip()[:160])
    else:
        print("note: %s not built; the GPTQ quantizer's refusal is not checked" % gptq)


def hostile(tmp):
    """Malformed MoE metadata or tensors: one error line naming what is wrong."""
    import make_tiny_model as mtm
    tok = mtm.build_tokenizer()
    fx = make_moe_model.make(os.path.join(tmp, "hostile"), "olmoe")
    c, w = fx["config"], fx["weights"]
    t = make_moe_model.gguf_tensors(c, w)
    short = dict(t)
    short["blk.1.ffn_up_exps.weight"] = t["blk.1.ffn_up_exps.weight"][:7]
    cases = [("experts per token above the expert count", dict(c, num_experts_per_tok=9), t,
              "olmoe.expert_used_count' (experts per token) is 9"),
             ("5000 experts", dict(c, num_experts=5000), t, "olmoe.expert_count' is 5000"),
             ("a 3-D expert tensor with 7 of 8 experts", c, short, "ffn_up_exps")]
    for what, cc, tensors, needle in cases:
        path = os.path.join(tmp, "hostile", "h.gguf")
        make_moe_model.write_gguf(path, cc, tensors, tok)
        p = subprocess.run([PLUME, "info", path], capture_output=True, text=True, timeout=60)
        err = p.stderr.strip()
        check(p.returncode == 1 and needle in err and len(err.splitlines()) == 1,
              "hostile MoE GGUF, %s: one error line: %s" % (what, err[:200]))


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
            quantized(tmp)
            refusals(tmp)
            hostile(tmp)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
