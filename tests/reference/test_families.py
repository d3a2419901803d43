#!/usr/bin/env python3
"""plume vs an independent float64 numpy forward (family_oracle.py) on tiny
random models of each family and RoPE variant (make_family_model.py):
Qwen3 (untied, head_dim != hidden/heads; tied), Llama 3.2-style llama3
RoPE, linear, dynamic (NTK), YaRN (on Qwen3), Mistral and Qwen2 with
sliding windows, Gemma 3 (two config spellings), SmolLM3 (no RoPE on every
4th layer; the oracle is checked against transformers' own SmolLM3 there);
a Qwen3 GGUF split in shards and a linear-scaled GGUF with the 2023 keys.

For every variant, in HF form and (where llama.cpp has one) GGUF form:
  * prefill: the logits of every position of an N-token sequence in one
    chunk, within TOL of the oracle (max |diff| printed);
  * decode: the same sequence one token per forward, bit-identical to the
    prefill (and so within TOL);
  * chunks of 5 batched with another sequence (placed first in the batch),
    bit-identical to the run alone;
  * `plume generate` (the engine, prefix caching and all): the last prompt
    logits bit-identical to the prefill's, and its 8-token greedy
    continuation equal to the oracle's.
N is 80: past original_max_position_embeddings (32) of llama3/yarn and
past max_position_embeddings (64) of the dynamic model, so the scalings
are exercised where they matter.  f32 weights, f32 activations
(PLUME_CPU_ACTIVATIONS=f32).

Sliding windows are 16 tokens, so 80 positions run well past them (with
full attention instead, the oracle's logits move by 33 (Mistral), 15 (Qwen2)
and 6 (Gemma 3)).

Refusals by name: dbrx (the MoE families plume runs: test_moe.py and
test_gpt_oss.py), multimodal Gemma 3, longrope, su, attention
soft-capping; malformed GGUF family metadata (rope_freqs.weight of the wrong
length or not positive, a yarn factor below 1, longrope) gives one error line.

llama-cpp-python is not installed in .venv (and cannot be built offline
here), so no second engine runs these GGUFs: the GGUF half checks plume's
reading of llama.cpp's names and keys against the same oracle.

Exit 0 pass, 1 fail, 77 skip (binaries or packages missing).
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

_venv.require("numpy", "gguf", "safetensors", "tokenizers")

import numpy as np  # noqa: E402

import family_oracle  # noqa: E402
import make_family_model  # noqa: E402

BUILD_ROOT = os.environ.get("PLUME_BUILD_ROOT",
                            os.path.normpath(os.path.join(HERE, "..", "..", "build")))
TOOL = os.path.join(BUILD_ROOT, "tests", "reference", "family_logits")
PLUME = os.path.join(BUILD_ROOT, "core", "src", "cli", "plume")

# f32 engine vs float64 oracle: the tiny models' logits reach ~25; measured
# max |diff| <= ~2e-5 (printed per run).  1e-3 is far below any bug seen
# while writing this (a wrong rope band or a missing +1 moves logits by >0.1).
TOL = 1e-3
N = 80
GEN = 8

FAILS = []


def check(ok, what):
    print("%s  %s" % ("ok  " if ok else "FAIL", what), flush=True)
    if not ok:
        FAILS.append(what)
    return ok


def info_fails_in_one_line(path, needle, what):
    """check() that `plume info path` exits 1 with one error line that
    contains needle; what names the check, the start of the error follows."""
    p = subprocess.run([PLUME, "info", path], capture_output=True, text=True, timeout=60)
    err = p.stderr.strip()
    return check(p.returncode == 1 and needle in err and len(err.splitlines()) == 1,
                 "%s: %s" % (what, err[:200]))


def binaries_built():
    """Whether family_logits and plume are built (else says SKIP)."""
    for b in (TOOL, PLUME):
        if not os.access(b, os.X_OK):
            print("SKIP: %s not built" % b)
            return False
    return True


def outcome():
    """The exit status of a test over check(): 1 when a check failed, else
    0, after saying so."""
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    return 0


def plume_logits(model, ids, chunk, batch, tmp, nv):
    out = os.path.join(tmp, "lg.f32")
    env = dict(os.environ, PLUME_CPU_ACTIVATIONS="f32")
    p = subprocess.run([TOOL, model, out, str(chunk), str(batch), ",".join(map(str, ids))],
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return np.fromfile(out, dtype="<f4").astype(np.float64).reshape(len(ids), nv), ""


def engine_run(model, ids, n, tmp):
    """(last prompt logits as f32, generated ids, error) of plume generate."""
    lf = os.path.join(tmp, "eng.f32")
    env = dict(os.environ, PLUME_CPU_ACTIVATIONS="f32")
    p = subprocess.run([PLUME, "generate", "--model", model, "--prompt-ids",
                        ",".join(map(str, ids)), "--max-tokens", str(n), "--temperature", "0",
                        "--ignore-eos", "--json", "--logits-out", lf, "--threads", "2",
                        "--kv-dtype", "f32"],  # exact, as family_logits and the oracle
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        return None, None, p.stderr.strip()[-300:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    return np.fromfile(lf, dtype="<f4"), res["token_ids"], ""


def oracle_greedy(orc, ids, n):
    seq, out = list(ids), []
    for _ in range(n):
        t = int(np.argmax(orc.logits(seq)[-1]))
        out.append(t)
        seq.append(t)
    return out


def oracle_vs_transformers(hf, orc, ids, ref):
    """SmolLM3 is new to the oracle: its NoPE layers checked against
    transformers' own SmolLM3ForCausalLM (float64), and shown to matter."""
    try:
        import make_moe_model
        tf = make_moe_model.transformers_logits(hf, ids)
    except ImportError as e:
        print("skip  smollm3: transformers' logits (%s)" % e)
        return
    diff = float(np.abs(tf - ref).max())
    check(diff < 1e-4, "smollm3: the oracle vs transformers' SmolLM3ForCausalLM (float64): max "
          "|diff| %.2e" % diff)
    saved, orc.use_rope = orc.use_rope, [1] * len(orc.use_rope)
    moved = float(np.abs(orc.logits(ids) - tf).max())
    orc.use_rope = saved
    check(moved > 1.0, "smollm3: RoPE on every layer instead moves the logits by %.1f" % moved)


def run_variant(variant, tmp):
    d = os.path.join(tmp, variant)
    fx = make_family_model.make(d, variant)
    cfg = fx["config"]
    orc = family_oracle.load_hf(fx["hf"])
    nv = cfg["vocab_size"]
    rng = np.random.default_rng(11)
    ids = [int(t) for t in rng.integers(0, nv - 3, N)]
    n = N
    ref = orc.logits(ids[:n])
    spread = float(ref.max() - ref.min())
    if variant == "smollm3":
        oracle_vs_transformers(fx["hf"], orc, ids[:n], ref)
    want_gen = None
    forms = [("hf", fx["hf"])] + ([("gguf", fx["gguf"])] if fx["gguf"] else [])
    if fx.get("gguf_legacy_rope"):  # rope.scale_linear, no rope.scaling.type: linear too
        forms.append(("gguf legacy rope keys", fx["gguf_legacy_rope"]))
    if fx.get("gguf_split"):  # gguf-split's shards, opened by the first
        forms.append(("gguf split", fx["gguf_split"]))
    for form, path in forms:
        tag = "%s %s" % (variant, form)
        pre, msg = plume_logits(path, ids[:n], n, 0, tmp, nv)
        if not check(pre is not None, "%s: prefill of %d runs (%s)" % (tag, n, msg)):
            continue
        diff = float(np.abs(pre - ref).max())
        check(diff < TOL, "%s: prefill logits of all %d positions vs the oracle: max |diff| "
              "%.2e (tol %g, logit spread %.1f)" % (tag, n, diff, TOL, spread))
        dec, msg = plume_logits(path, ids[:n], 1, 0, tmp, nv)
        check(dec is not None and np.array_equal(dec, pre),
              "%s: decode (one token per forward) bit-identical to the prefill %s" % (tag, msg))
        if dec is not None:
            check(float(np.abs(dec - ref).max()) < TOL, "%s: decode logits vs the oracle: max "
                  "|diff| %.2e" % (tag, float(np.abs(dec - ref).max())))
        eng, gen, msg = engine_run(path, ids[:n], GEN, tmp)
        check(eng is not None and np.array_equal(eng, pre[-1].astype(np.float32)),
              "%s: plume generate (the engine) gives the prefill's last logits bit for bit %s"
              % (tag, msg))
        if want_gen is None:
            want_gen = oracle_greedy(orc, ids[:n], GEN)
        check(gen == want_gen, "%s: %d-token greedy continuation equals the oracle's: %s"
              % (tag, GEN, gen))
        bat, msg = plume_logits(path, ids[:n], 5, 1, tmp, nv)
        check(bat is not None and np.array_equal(bat, pre),
              "%s: chunks of 5 batched with another sequence bit-identical to alone %s"
              % (tag, msg))
    shutil.rmtree(d, ignore_errors=True)


def refusals(tmp):
    fx = make_family_model.make(os.path.join(tmp, "refuse"), "qwen3-tied")
    hf = fx["hf"]
    with open(os.path.join(hf, "config.json")) as f:
        base = json.load(f)
    cases = [
        ("dbrx", dict(model_type="dbrx", architectures=["DbrxForCausalLM"]),
         "mixture-of-experts"),
        ("multimodal Gemma 3", dict(model_type="gemma3",
                                    architectures=["Gemma3ForConditionalGeneration"]),
         "multimodal"),
        ("longrope", dict(rope_scaling=dict(rope_type="longrope", factor=2.0,
                                            short_factor=[1.0] * 8, long_factor=[1.0] * 8)),
         "longrope"),
        ("su", dict(rope_scaling=dict(type="su", factor=2.0)), "'su'"),
        ("attention soft-capping", dict(model_type="gemma3_text",
                                        architectures=["Gemma3ForCausalLM"],
                                        hidden_act="gelu_pytorch_tanh",
                                        attn_logit_softcapping=50.0), "attn_logit_softcapping"),
    ]
    for what, over, needle in cases:
        c = dict(base)
        c.update(over)
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump(c, f)
        p = subprocess.run([PLUME, "info", hf], capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and needle in p.stderr,
              "%s refused by name: %s" % (what, p.stderr.strip()[:200]))


def hostile_gguf(tmp):
    """Malformed family metadata in a GGUF: one error line naming what is
    wrong, never a crash or a silent default."""
    import make_tiny_model as mtm
    tok = mtm.build_tokenizer()
    d = os.path.join(tmp, "hostile")
    os.makedirs(d, exist_ok=True)
    base = make_family_model.config_of("llama3", len(tok[0]), 297, 299)
    w = make_family_model.random_weights(base, 2)
    cases = []
    t = make_family_model.gguf_tensors(base, w)
    t["rope_freqs.weight"] = t["rope_freqs.weight"][:5]
    cases.append(("rope_freqs.weight of 5 factors", base, t, "rope_freqs.weight"))
    t = make_family_model.gguf_tensors(base, w)
    t["rope_freqs.weight"] = t["rope_freqs.weight"] * 0
    cases.append(("rope_freqs.weight of zeros", base, t, "not a positive number"))
    c = dict(base, rope_scaling=dict(rope_type="yarn", factor=0.25,
                                     original_max_position_embeddings=32))
    cases.append(("yarn factor 0.25", c, make_family_model.gguf_tensors(c, w), "factor >= 1"))
    c = dict(base, rope_scaling=dict(type="longrope", factor=2.0))
    cases.append(("GGUF longrope", c, make_family_model.gguf_tensors(c, w), "longrope"))
    for what, c, tensors, needle in cases:
        path = os.path.join(d, "m.gguf")
        if (c.get("rope_scaling") or {}).get("type") == "longrope":
            import gguf
            orig = gguf.GGUFWriter.add_rope_scaling_type
            gguf.GGUFWriter.add_rope_scaling_type = lambda self, v: self.add_string(
                "llama.rope.scaling.type", "longrope")
            c = dict(c, rope_scaling=dict(type="linear", factor=2.0))
            try:
                make_family_model.write_gguf(path, c, tensors, tok)
            finally:
                gguf.GGUFWriter.add_rope_scaling_type = orig
        else:
            make_family_model.write_gguf(path, c, tensors, tok)
        info_fails_in_one_line(path, needle, "hostile GGUF, %s: one error line" % what)


def main():
    if not binaries_built():
        return 77
    only = sys.argv[1:] or list(make_family_model.VARIANTS)
    with tempfile.TemporaryDirectory(prefix="plume-families-") as tmp:
        for v in only:
            run_variant(v, tmp)
        if not sys.argv[1:]:
            refusals(tmp)
            hostile_gguf(tmp)
    return outcome()


if __name__ == "__main__":
    sys.exit(main())
