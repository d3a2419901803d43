#!/usr/bin/env python3
"""plume vs an independent float64 numpy forward (moe_oracle.py) on tiny
random mixture-of-experts models made by transformers itself, with GGUFs
written by llama.cpp's own convert_hf_to_gguf.py (make_moe_model.py):
Mixtral (8 experts, top-2), Qwen3-MoE (8 experts, top-4, renormalized; and
a variant with a dense layer and raw top-k probabilities), Qwen2-MoE (q/k/v
bias, a shared expert gated by sigmoid), OLMoE (8 experts, top-3, q/k norms
over the whole projections) and OLMoE saved in transformers 5's fused
expert layout (save_original_format=False).

For every variant:
  * transformers' own logits (float64 weights, eager attention and
    experts) of the N = 80 positions within TOL of the oracle on the saved
    checkpoint, and the same argmax at every position: a second reference;
  * GGUF form (where llama.cpp's converter has one): the architecture,
    expert keys and F32 tensors it wrote, and the oracle run on the GGUF's
    own weights (gguf-py) bit-identical to the oracle on the checkpoint;
and in HF and GGUF form, against the oracle on that form's weights:
  * prefill: the logits of all N positions in one chunk within TOL = 1e-4
    (max |diff| printed);
  * decode: one token per forward, bit-identical to the prefill;
  * chunks of 5 batched with another sequence (placed first), bit-identical
    to the run alone: a row's experts run over however many rows share
    them, and its bits do not change;
  * `plume generate`: the prefill's last logits bit for bit, and an
    8-token greedy continuation equal to the oracle's.
f32 weights, f32 activations (PLUME_CPU_ACTIVATIONS=f32).  A Qwen3-MoE
config.json with num_experts (published checkpoints) and with
num_local_experts (what transformers 5 saves) give the same bits.

Quantized experts: `plume quantize --to gguf` of the converter's Mixtral and
OLMoE GGUFs to Q8_0 and Q4_0 keeps the router (ffn_gate_inp) in F32,
quantizes the 3-D expert tensors (8 experts: attn_k/attn_v in Q8_0, as
llama-quantize does); with f32 activations plume's logits are within TOL of
the oracle run on gguf-py's dequantization of the same file; with plume's
default int8 activations decode and batched chunks are bit-identical to the
prefill.  An HF MoE directory is refused by `--to gguf` and by the GPTQ/AWQ
quantizer, with the way out in the message.

Refusals by name: MoE families plume does not run (phimoe, dbrx,
deepseek_v3 in HF; grok, deepseek2 in GGUF: copies of the converter's
OLMoE GGUF under those architectures; gpt-oss has its own test,
test_gpt_oss.py), and a GPTQ-quantized MoE checkpoint.
Hostile GGUFs (copies of the converter's OLMoE GGUF with one key or tensor
changed): one error line naming what is wrong.

Each variant's checkpoint and GGUF are made once per run and shared by the
checks.  Exit 0 pass, 1 fail, 77 skip (binaries, packages or llama.cpp's
converter missing).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _venv  # noqa: E402

_venv.require("numpy", "gguf", "safetensors", "tokenizers", "torch", "transformers")

import numpy as np  # noqa: E402
import gguf  # noqa: E402

import llamacpp_convert  # noqa: E402
import make_moe_model  # noqa: E402
import moe_oracle  # noqa: E402
from test_families import check, plume_logits, engine_run, oracle_greedy  # noqa: E402
import test_families  # noqa: E402

TOOL, PLUME = test_families.TOOL, test_families.PLUME
# plume's f32 forward vs the float64 oracle: measured max |diff| ~1e-5 at a
# logit spread of ~45.  transformers in float64 is within ~2e-5 too, not
# 1e-12: it runs RMSNorm, RoPE's cos/sin, the attention softmax and the
# router softmax in float32 whatever the weights' dtype.
TOL = 1e-4
N = 80
GEN = 8
ARCH = {"mixtral": "llama", "qwen3_moe": "qwen3moe", "olmoe": "olmoe", "qwen2_moe": "qwen2moe"}

FIXTURES = {}


def fixture(tmp, variant):
    """make_moe_model.make of variant, once per run (never modify its files:
    copy them)."""
    if variant not in FIXTURES:
        FIXTURES[variant] = make_moe_model.make(os.path.join(tmp, variant), variant)
    return FIXTURES[variant]


def check_gguf_layout(tag, path, c):
    """What llama.cpp's converter wrote: architecture, expert keys, F32
    tensors, 3-D experts [X, F, E] (numpy order) and the router."""
    r = gguf.GGUFReader(path)
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.ggml.t")}
    arch = ARCH[c["model_type"]]
    X = make_moe_model.n_experts(c)
    F = c.get("moe_intermediate_size") or c["intermediate_size"]
    want = {"general.architecture": arch, "%s.expert_count" % arch: X,
            "%s.expert_used_count" % arch: c["num_experts_per_tok"],
            "tokenizer.ggml.pre": llamacpp_convert.PRE_TOKENIZER}
    if arch in ("qwen3moe", "qwen2moe"):
        want["%s.expert_feed_forward_length" % arch] = F
    if arch == "qwen2moe":
        want["qwen2moe.expert_shared_feed_forward_length"] = \
            c["shared_expert_intermediate_size"]
    bad = {k: (kv.get(k), v) for k, v in want.items() if kv.get(k) != v}
    check(not bad, "%s: converter wrote %s (got, want where not: %s)" % (
        tag, ", ".join("%s=%s" % kv_ for kv_ in sorted(want.items())), bad))
    t = {x.name: x for x in r.tensors}
    E, L = c["hidden_size"], c["num_hidden_layers"]
    shapes = {}
    for l in range(L):
        shapes["blk.%d.ffn_gate_inp.weight" % l] = [X, E]
        shapes["blk.%d.ffn_gate_exps.weight" % l] = [X, F, E]
        shapes["blk.%d.ffn_up_exps.weight" % l] = [X, F, E]
        shapes["blk.%d.ffn_down_exps.weight" % l] = [X, E, F]
    got = {n: [int(d) for d in reversed(t[n].shape)] if n in t else None for n in shapes}
    check(got == shapes and all(x.tensor_type == gguf.GGMLQuantizationType.F32
                                for x in r.tensors),
          "%s: %d tensors, all F32; router and 3-D experts of every layer %s" % (
              tag, len(t), "as expected" if got == shapes else
              {n: g for n, g in got.items() if g != shapes[n]}))


def run_variant(variant, tmp):
    fx = fixture(tmp, variant)
    c = fx["config"]
    nv = c["vocab_size"]
    rng = np.random.default_rng(7)
    ids = [int(t) for t in rng.integers(0, nv - 3, N)]
    orc = moe_oracle.load_hf(fx["hf"])
    ref = orc.logits(ids)
    tf = make_moe_model.transformers_logits(fx["hf"], ids)
    diff = float(np.abs(tf - ref).max())
    check(diff < TOL, "%s: transformers' own logits (float64) of all %d positions vs the "
          "oracle on its checkpoint: max |diff| %.2e (tol %g)" % (variant, N, diff, TOL))
    check(np.array_equal(tf.argmax(-1), ref.argmax(-1)),
          "%s: transformers' argmax equals the oracle's at every position" % variant)
    forms = [("hf", fx["hf"], orc, ref)]
    if fx["gguf"]:
        check_gguf_layout(variant + " gguf", fx["gguf"], c)
        og = moe_oracle.load_gguf(fx["gguf"], c)
        rg = og.logits(ids)
        check(np.array_equal(rg, ref), "%s gguf: the oracle on the converter's GGUF (gguf-py) "
              "bit-identical to the oracle on the checkpoint (max |diff| %.2e): the f32 "
              "weights are carried over exactly" % (variant, float(np.abs(rg - ref).max())))
        forms.append(("gguf", fx["gguf"], og, rg))
    for form, path, o, want in forms:
        tag = "%s %s" % (variant, form)
        want_gen = oracle_greedy(o, ids, GEN)
        pre, msg = plume_logits(path, ids, N, 0, tmp, nv)
        if not check(pre is not None, "%s: prefill of %d runs (%s)" % (tag, N, msg)):
            continue
        diff = float(np.abs(pre - want).max())
        check(diff < TOL, "%s: prefill logits of all %d positions vs the oracle: max |diff| "
              "%.2e (tol %g, logit spread %.1f)" % (tag, N, diff, TOL,
                                                     float(want.max() - want.min())))
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


def expert_count_names(tmp):
    """transformers 5 saves Qwen3-MoE's expert count as num_local_experts;
    published checkpoints say num_experts (the config class aliases them)."""
    fx = fixture(tmp, "qwen3moe")
    d = os.path.join(tmp, "qwen3moe-num-experts")
    shutil.copytree(fx["hf"], d)
    c = dict(fx["config"])
    c["num_experts"] = c.pop("num_local_experts")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    nv = c["vocab_size"]
    ids = [int(t) for t in np.random.default_rng(3).integers(0, nv - 3, 12)]
    a, msg_a = plume_logits(fx["hf"], ids, len(ids), 0, tmp, nv)
    b, msg_b = plume_logits(d, ids, len(ids), 0, tmp, nv)
    check(a is not None and b is not None and np.array_equal(a, b),
          "qwen3moe: config.json with num_experts and with num_local_experts give the same "
          "logits %s%s" % (msg_a, msg_b))


def rewrite_gguf(src, dst, arch=None, kv=None, tensors=None):
    """A copy of the F32 GGUF at src, under architecture arch (its
    <arch>.* keys renamed with it), with the keys in kv set to new values
    and the tensors in tensors replaced."""
    r = gguf.GGUFReader(src)
    old = str(r.fields["general.architecture"].contents())
    new = arch or old
    w = gguf.GGUFWriter(dst, new)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        name = new + key[len(old):] if key.startswith(old + ".") else key
        sub = f.types[1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, (kv or {}).get(name, f.contents()), f.types[0], sub_type=sub)
    for t in r.tensors:
        if t.tensor_type != gguf.GGMLQuantizationType.F32:
            raise ValueError("rewrite_gguf copies F32 tensors only; %s is %s"
                             % (t.name, t.tensor_type.name))
        w.add_tensor(t.name, np.ascontiguousarray((tensors or {}).get(t.name, t.data)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def decode_bytes(tmp):
    """`plume info` counts what one decode token reads: every tensor but the
    experts, and k of the X experts' bytes, and of a token embedding
    separate from the head one row (gguf-py's sizes of the file)."""
    fx = fixture(tmp, "olmoe")
    c = fx["config"]
    X, k = make_moe_model.n_experts(c), c["num_experts_per_tok"]
    total = experts = 0
    tensors = {t.name: t for t in gguf.GGUFReader(fx["gguf"]).tensors}
    for t in tensors.values():
        total += int(t.n_bytes)
        if "_exps." in t.name:
            experts += int(t.n_bytes)
    want = total - experts + experts // X * k
    if "output.weight" in tensors:
        e = tensors["token_embd.weight"]
        want -= int(e.n_bytes) - int(e.n_bytes) // c["vocab_size"]
    p = subprocess.run([PLUME, "info", fx["gguf"]], capture_output=True, text=True, timeout=60)
    line = [l for l in p.stdout.splitlines() if l.startswith("read per token:")]
    got = float(line[0].split()[3]) if line else -1.0
    check(p.returncode == 0 and experts > 0 and abs(got - want / 2**20) < 0.051,
          "plume info: %.1f MiB read per decode token (the routed %d of %d experts), gguf-py "
          "says %.2f MiB: %s" % (got, k, X, want / 2**20, line))


def refusals(tmp):
    fx = fixture(tmp, "olmoe")
    hf = os.path.join(tmp, "refuse", "hf")
    shutil.copytree(fx["hf"], hf)
    base = fx["config"]
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
    mx = fixture(tmp, "mixtral")
    p = subprocess.run([PLUME, "convert", mx["gguf"], "--to", "hf", os.path.join(tmp, "conv")],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode != 0 and "mixture-of-experts" in p.stderr,
          "plume convert of a MoE GGUF refused: %s" % p.stderr.strip()[:160])
    for arch in ("grok", "deepseek2"):
        path = rewrite_gguf(fx["gguf"], os.path.join(tmp, "refuse", "%s.gguf" % arch), arch)
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


def quantized(tmp):
    for variant in ("mixtral", "olmoe"):
        fx = fixture(tmp, variant)
        nv = fx["config"]["vocab_size"]
        ids = [int(t) for t in np.random.default_rng(5).integers(0, nv - 3, 40)]
        for preset in ("Q8_0", "Q4_0"):
            tag = "%s %s" % (variant, preset)
            out = os.path.join(tmp, "q-%s-%s.gguf" % (variant, preset))
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
            orc = moe_oracle.load_gguf(out, fx["config"])
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
    hf = fixture(tmp, "olmoe")["hf"]
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
    """Malformed MoE metadata or tensors in a copy of the converter's OLMoE
    GGUF: one error line naming what is wrong."""
    src = fixture(tmp, "olmoe")["gguf"]
    up = {t.name: t for t in gguf.GGUFReader(src).tensors}["blk.1.ffn_up_exps.weight"]
    cases = [("experts per token above the expert count", {"olmoe.expert_used_count": 9}, None,
              "olmoe.expert_used_count' (experts per token) is 9"),
             ("5000 experts", {"olmoe.expert_count": 5000}, None, "olmoe.expert_count' is 5000"),
             ("a 3-D expert tensor with 7 of 8 experts", None,
              {"blk.1.ffn_up_exps.weight": up.data[:7]}, "ffn_up_exps")]
    for what, kv, tensors, needle in cases:
        path = rewrite_gguf(src, os.path.join(tmp, "hostile.gguf"), kv=kv, tensors=tensors)
        test_families.info_fails_in_one_line(path, needle,
                                             "hostile MoE GGUF, %s: one error line" % what)


def main():
    if not test_families.binaries_built():
        return 77
    if not llamacpp_convert.converter_dir():
        print("SKIP: llama.cpp's converter could not be fetched (offline?); run "
              "scripts/fetch-llama-cpp")
        return 77
    only = sys.argv[1:] or list(make_moe_model.VARIANTS)
    with tempfile.TemporaryDirectory(prefix="plume-moe-") as tmp:
        for v in only:
            run_variant(v, tmp)
        if not sys.argv[1:]:
            expert_count_names(tmp)
            quantized(tmp)
            decode_bytes(tmp)
            refusals(tmp)
            hostile(tmp)
    return test_families.outcome()


if __name__ == "__main__":
    sys.exit(main())
