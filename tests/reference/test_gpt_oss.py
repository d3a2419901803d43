#!/usr/bin/env python3
"""plume vs an independent float64 numpy forward (gpt_oss_oracle.py) and vs
transformers itself, on a tiny random gpt-oss checkpoint that transformers
makes (make_gpt_oss_model.py: 3 layers, sliding/full/sliding with a window
of 16, 8 experts, top-3, yarn, non-zero sinks and biases), in four forms:
HF dense, HF with OpenAI MXFP4 experts, and the GGUFs llama.cpp's own
convert_hf_to_gguf.py writes from each (F32 experts; MXFP4 experts).

  * transformers' logits (eager, f32) on the HF checkpoint agree with the
    oracle within TOL = 1e-4 relative to max |logit|;
  * the oracle with sinks dropped, the clamp lifted, or every layer full
    attention moves the logits by far more than TOL (each feature is
    exercised by the N = 80 positions, past the window of 16);
  * per form: prefill logits of all N positions within TOL (relative) of
    the oracle (the GGUFs' on gguf-py's dequantization, MXFP4 included);
    decode, prefill in chunks of 16, and chunks of 5 batched behind another
    sequence, each bit-identical to the one-chunk prefill; `plume generate`
    gives the prefill's last logits bit for bit and the oracle's 8 greedy
    tokens;
  * the MXFP4 forms with plume's default int8 activations (the integer
    MXFP4 kernel): decode and batched chunks bit-identical to the prefill;
  * `plume quantize --to gguf` Q8_0 and MXFP4_MOE of the F32 GGUF: the
    types llama-quantize gives (MXFP4_MOE's experts byte-identical to the
    converter's MXFP4 file), within TOL of the oracle on gguf-py's
    dequantization (f32 activations), decode and batched chunks
    bit-identical with int8 activations;
  * the o200k pre-tokenizer (GGUF tokenizer.ggml.pre "gpt-4o", the Split
    regex of gpt-oss's tokenizer.json) splits a varied text exactly as
    `tokenizers` does, from the HF directory and from the GGUF;
  * a backend that says no to PLUME_FEAT_ATTN_SINKS (as cuda) refuses the
    model in one line; malformed experts (a wrong expert count, a bias of
    the wrong length, MXFP4 scales of the wrong shape, a truncated file)
    are one error line, never a crash.
The oracle comparisons run with f32 activations (PLUME_CPU_ACTIVATIONS=f32).
The GGUF half needs the pinned llama-cpp-python sdist
(scripts/fetch-llama-cpp); without it that half fails, saying so.

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

_venv.require("numpy", "gguf", "safetensors", "tokenizers", "torch", "transformers")

import numpy as np  # noqa: E402
import gguf  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402

import gpt_oss_oracle  # noqa: E402
import make_gpt_oss_model  # noqa: E402
import test_families  # noqa: E402
from test_families import check, plume_logits, engine_run, oracle_greedy  # noqa: E402

TOOL, PLUME = test_families.TOOL, test_families.PLUME
TOL = 1e-4
N = 80
GEN = 8


def rel(a, ref):
    return float(np.abs(a - ref).max() / np.abs(ref).max())


def transformers_logits(hf, ids):
    from transformers import GptOssForCausalLM
    m = GptOssForCausalLM.from_pretrained(hf, dtype=torch.float32,
                                          attn_implementation="eager").eval()
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0].double().numpy()


def references(fx, ids):
    orc = gpt_oss_oracle.load_hf(fx["hf"])
    ref = orc.logits(ids)
    tf = transformers_logits(fx["hf"], ids)
    check(rel(tf, ref) < TOL, "transformers' own logits (eager, f32) vs the float64 oracle: "
          "max |diff| / max |logit| %.2e (tol %g)" % (rel(tf, ref), TOL))
    check(int(np.argmax(tf[-1])) == int(np.argmax(ref[-1])),
          "transformers' and the oracle's next token agree")
    off = {"sinks dropped": gpt_oss_oracle.Model(orc.cfg, orc.w, sinks=False),
           "clamp lifted": gpt_oss_oracle.Model(dict(orc.cfg, swiglu_limit=np.inf), orc.w),
           "every layer full attention": gpt_oss_oracle.Model(
               dict(orc.cfg, layer_types=["full_attention"] * orc.cfg["num_hidden_layers"]),
               orc.w)}
    for what, m in off.items():
        d = rel(m.logits(ids), ref)
        check(d > 100 * TOL, "the oracle with %s moves the logits by %.2e of max |logit| "
              "(the test exercises it)" % (what, d))
    return orc, ref


def run_form(tag, path, orc, ids, tmp, nv, ref=None):
    """One form against its oracle (ref: orc's logits of ids when already
    computed); returns those logits."""
    if ref is None:
        ref = orc.logits(ids)
    pre, msg = plume_logits(path, ids, N, 0, tmp, nv)
    if not check(pre is not None, "%s: prefill of %d runs %s" % (tag, N, msg)):
        return ref
    check(rel(pre, ref) < TOL, "%s: prefill logits of all %d positions vs the oracle: max |diff| "
          "/ max |logit| %.2e (tol %g, max |logit| %.1f)" % (tag, N, rel(pre, ref), TOL,
                                                              float(np.abs(ref).max())))
    for chunk, batch, what in ((1, 0, "decode (one token per forward)"),
                               (16, 0, "prefill in chunks of 16"),
                               (5, 1, "chunks of 5 batched behind another sequence")):
        got, msg = plume_logits(path, ids, chunk, batch, tmp, nv)
        check(got is not None and np.array_equal(got, pre),
              "%s: %s bit-identical to the one-chunk prefill %s" % (tag, what, msg))
    eng, gen, msg = engine_run(path, ids, GEN, tmp)
    check(eng is not None and np.array_equal(eng, pre[-1].astype(np.float32)),
          "%s: plume generate gives the prefill's last logits bit for bit %s" % (tag, msg))
    check(gen == oracle_greedy(orc, ids, GEN), "%s: %d-token greedy continuation equals the "
          "oracle's: %s" % (tag, GEN, gen))
    return ref


O200K = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
         "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
         "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}"
         "\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
TEXTS = ["Hello World's WORLD'S tHe QUICK brown fox, don't stop; it'll be OK!!\n\n  x",
         "12345 678/9  a/b/c\r\n\tTabs   and  spaces   ",
         "CamelCaseWords HTTPServer iPhone naïve café Ünïcödé ÀB",
         "日本語のテキスト 中文 한국어 emoji 🙂🙂 and ...?!"]


def pretokenizer(fx, tmp):
    """The tiny vocabulary behind gpt-oss's o200k Split pre-tokenizer: plume
    (HF directory and the GGUF's "gpt-4o") against `tokenizers`."""
    d = os.path.join(tmp, "o200k")
    shutil.copytree(fx["hf"], d)
    tj = os.path.join(d, "tokenizer.json")
    with open(tj) as f:
        j = json.load(f)
    # gpt-oss's tokenizer.json: Sequence[Split(o200k, Isolated), ByteLevel(use_regex false)]
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": O200K}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]}
    with open(tj, "w") as f:
        json.dump(j, f)
    tk = tokenizers.Tokenizer.from_file(tj)
    models = [("HF", d)] + ([("GGUF", fx["gguf"])] if fx["gguf"] else [])
    for text in TEXTS:
        want = tk.encode(text, add_special_tokens=False).ids
        for form, path in models:
            p = subprocess.run([PLUME, "tokenize", path, text, "--no-bos"], capture_output=True,
                               text=True, timeout=60)
            got = [int(x) for x in p.stdout.split()] if p.returncode == 0 else p.stderr.strip()
            check(got == want, "o200k pre-tokenizer (%s): %r -> %d tokens as tokenizers %s"
                  % (form, text[:24], len(want), "" if got == want else "(got %s)" % got))


def quantized(fx, ids, tmp, nv, preset):
    """`plume quantize --to gguf` of the F32 GGUF to a preset: Q8_0 (2-D
    weights and 3-D experts Q8_0) or MXFP4_MOE (3-D experts MXFP4, the other
    matrices Q8_0, as llama-quantize; the experts' bytes equal those of the
    MXFP4 GGUF that convert_hf_to_gguf.py wrote from gguf-py's quantization
    of the same experts); sinks, biases, norms and the router kept F32; with
    f32 activations within TOL of the oracle on gguf-py's dequantization of
    the file; with plume's default int8 activations decode and batched
    chunks bit-identical to the prefill."""
    tag = "gguf " + preset
    out = os.path.join(tmp, preset.lower() + ".gguf")
    p = subprocess.run([PLUME, "quantize", fx["gguf"], out, "--to", "gguf", "--type", preset],
                       capture_output=True, text=True, timeout=120)
    if not check(p.returncode == 0, "%s: plume quantize --to gguf %s"
                 % (tag, p.stderr.strip()[-200:])):
        return
    tensors = {t.name: t for t in gguf.GGUFReader(out).tensors}
    types = {n: t.tensor_type.name for n, t in tensors.items()}
    exps = "MXFP4" if preset == "MXFP4_MOE" else "Q8_0"
    check(all(types[n] == exps for n in types if "_exps.weight" in n) and
          all(types[n] == "Q8_0" for n in types if n.endswith(".weight") and "_exps" not in n
              and len(tensors[n].shape) == 2 and "ffn_gate_inp" not in n) and
          all(types[n] == "F32" for n in types if "sinks" in n or n.endswith(".bias") or
              "ffn_gate_inp" in n or "norm" in n),
          "%s: experts %s, other matrices Q8_0, sinks, biases, router and norms F32" % (tag, exps))
    if preset == "MXFP4_MOE" and fx["gguf_mxfp4"]:
        conv = {t.name: t for t in gguf.GGUFReader(fx["gguf_mxfp4"]).tensors}
        names = [n for n in tensors if "_exps.weight" in n]
        same = [n for n in names if np.array_equal(np.asarray(tensors[n].data),
                                                   np.asarray(conv[n].data))]
        check(len(names) > 0 and same == names, "%s: the expert tensors' bytes equal the "
              "converter's MXFP4 file (%d of %d)" % (tag, len(same), len(names)))
    ref = gpt_oss_oracle.load_gguf(out).logits(ids)
    pre, msg = plume_logits(out, ids, N, 0, tmp, nv)
    if check(pre is not None, "%s: prefill runs %s" % (tag, msg)):
        check(rel(pre, ref) < TOL, "%s (f32 activations) vs the oracle of gguf-py's "
              "dequantization: max |diff| / max |logit| %.2e (tol %g)" % (tag, rel(pre, ref), TOL))
    int8_runs(tag, out, ids, tmp, ref)


def int8_runs(tag, path, ids, tmp, ref):
    """With plume's default int8 activations (the integer kernels: Q8_0's,
    MXFP4's): decode and batched chunks of 5 bit-identical to the one-chunk
    prefill.  The distance to the oracle is printed, not checked: int8
    rounding moves this random model's logits by 2-5% of their maximum at
    the median position and up to 25% at the worst (the Q8_0 file's as much
    as the MXFP4 ones'), so a tolerance here would say little.  The
    kernels themselves are checked against the dequantized weights in
    test_cpu_repack."""
    env = {k: v for k, v in os.environ.items() if k != "PLUME_CPU_ACTIVATIONS"}
    runs = []
    for chunk, batch in ((N, 0), (1, 0), (5, 1)):
        lg = os.path.join(tmp, "q.f32")
        p = subprocess.run([TOOL, path, lg, str(chunk), str(batch), ",".join(map(str, ids))],
                           capture_output=True, text=True, env=env, timeout=300)
        runs.append(np.fromfile(lg, dtype="<f4") if p.returncode == 0 else p.stderr.strip())
    errs = [r for r in runs if isinstance(r, str)]
    if not check(not errs, "%s (int8 activations): prefill, decode and batched runs %s"
                 % (tag, errs if errs else "complete")):
        return
    check(np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2]),
          "%s (int8 activations): decode and batched chunks of 5 bit-identical to the prefill"
          % tag)
    got = runs[0].reshape(ref.shape).astype(np.float64)
    pos = np.abs(got - ref).max(axis=1) / np.abs(ref).max()
    print("note: %s (int8 activations) vs the oracle: max |diff| / max |logit| %.2e at the "
          "worst position, %.2e at the median one" % (tag, pos.max(), float(np.median(pos))))


def refuse_backend(fx, tmp):
    plugins = os.path.join(test_families.BUILD_ROOT, "tests", "plugins")
    if not os.path.exists(os.path.join(plugins, "plume-picky-backend.so")):
        print("note: %s not built; the backend refusal is not checked" % plugins)
        return
    pipe = os.path.join(tmp, "picky-sinks.yaml")
    with open(pipe, "w") as f:
        f.write("model: %s\nplugins: [picky-backend]\nbackend: picky-sinks\n" % fx["hf"])
    p = subprocess.run([PLUME, "generate", "--pipeline", pipe, "--plugin-dir", plugins,
                        "--prompt", "hi", "--max-tokens", "2"], capture_output=True, text=True,
                       timeout=60)
    err = p.stderr.strip()
    check(p.returncode != 0 and len(err.splitlines()) == 1 and "picky-sinks" in err and
          "attention sinks" in err, "a backend without attention sinks (as cuda) refuses "
          "gpt-oss in one line: %s" % err[:220])


def one_line_error(path, needle, what):
    test_families.info_fails_in_one_line(
        path, needle, "hostile gpt-oss, %s: one error line naming %s" % (what, needle))


def hostile_hf(src, tmp, name, key, what, cut):
    """A copy of the HF directory src with tensor key cut short by cut(a)."""
    from safetensors.numpy import load_file, save_file
    d = os.path.join(tmp, name)
    shutil.copytree(src, d)
    st = os.path.join(d, "model.safetensors")
    w = load_file(st)
    w[key] = np.ascontiguousarray(cut(w[key]))
    save_file(w, st, metadata={"format": "pt"})
    one_line_error(d, key.rsplit(".", 1)[-1], what)


def hostile(fx, tmp):
    hostile_hf(fx["hf_mxfp4"], tmp, "h-mxfp4", "model.layers.1.mlp.experts.down_proj_scales",
               "HF MXFP4 scales one row short", lambda a: a[:, :-1])
    hostile_hf(fx["hf"], tmp, "h-bias", "model.layers.2.mlp.experts.gate_up_proj_bias",
               "HF expert bias two values short", lambda a: a[:, :-2])
    if not fx["gguf_mxfp4"]:
        return
    for what, name, dim, val, needle in (
            ("an MXFP4 expert tensor of 7 experts", "blk.1.ffn_up_exps.weight", 2, 7,
             "ffn_up_exps"),
            ("an MXFP4 row of 48 values (not whole blocks)", "blk.0.ffn_down_exps.weight", 0, 48,
             "ffn_down_exps"),
            ("an expert bias of 95 values", "blk.0.ffn_gate_exps.bias", 0, 95,
             "ffn_gate_exps.bias")):
        path = os.path.join(tmp, "h.gguf")
        shutil.copy(fx["gguf_mxfp4"], path)
        r = gguf.GGUFReader(path, "r+")
        t = next(t for t in r.tensors if t.name == name)
        t.field.parts[3][dim] = val  # the tensor info's ne[], written through the memmap
        del r
        one_line_error(path, needle, what)
    path = os.path.join(tmp, "h-cut.gguf")
    with open(fx["gguf_mxfp4"], "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) - 3000])
    test_families.info_fails_in_one_line(
        path, "", "hostile gpt-oss, a GGUF cut 3000 bytes short: one error line")


def main():
    if not test_families.binaries_built():
        return 77
    with tempfile.TemporaryDirectory(prefix="plume-gpt-oss-") as tmp:
        fx = make_gpt_oss_model.make(os.path.join(tmp, "fx"))
        nv = fx["config"]["vocab_size"]
        ids = [int(t) for t in np.random.default_rng(7).integers(0, nv - 3, N)]
        orc, ref = references(fx, ids)
        run_form("hf", fx["hf"], orc, ids, tmp, nv, ref)
        ref_m = run_form("hf-mxfp4", fx["hf_mxfp4"], gpt_oss_oracle.load_hf(fx["hf_mxfp4"]), ids,
                         tmp, nv)
        int8_runs("hf-mxfp4", fx["hf_mxfp4"], ids, tmp, ref_m)
        if fx["gguf"]:
            for form in ("gguf", "gguf_mxfp4"):
                types = {t.tensor_type.name for t in gguf.GGUFReader(fx[form]).tensors
                         if "_exps.weight" in t.name}
                check(types == ({"MXFP4"} if form == "gguf_mxfp4" else {"F32"}),
                      "%s: convert_hf_to_gguf.py wrote the experts as %s" % (form, types))
                ref_g = run_form(form, fx[form], gpt_oss_oracle.load_gguf(fx[form]), ids, tmp, nv)
                if form == "gguf_mxfp4":
                    int8_runs(form, fx[form], ids, tmp, ref_g)
        else:
            check(False, "the GGUF forms need llama.cpp's converter from the pinned "
                  "llama-cpp-python sdist, which could not be fetched (offline?); run "
                  "scripts/fetch-llama-cpp")
        if fx["gguf"]:
            for preset in ("Q8_0", "MXFP4_MOE"):
                quantized(fx, ids, tmp, nv, preset)
        pretokenizer(fx, tmp)
        refuse_backend(fx, tmp)
        hostile(fx, tmp)
    return test_families.outcome()


if __name__ == "__main__":
    sys.exit(main())
