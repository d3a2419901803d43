#!/usr/bin/env python3
"""plume dummy-gguf read back by gguf-py (an independent reader and dequantizer):

- metadata: architecture and hyperparameters from config.json, SmolLM2's tokenizer keys copied
  and its token list padded to vocab_size with [PAD<i>] tokens of type UNUSED (5), as
  convert_hf_to_gguf.py pads;
- tensor names, shapes and types: every llama.cpp tensor of the config; Q4_K_M's per-tensor types
  as llama-quantize chooses them (output Q6_K, attn_v / ffn_down Q6_K on the "more bits" layers,
  else Q4_K; norms F32); pure presets all in the base type;
- values: gguf-py's dequantization equals plume's (plume convert --to hf, which also undoes the
  q/k permutation) for every tensor of F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K_M and Q6_K files; the
  matrices have mean ~0 and std 0.02; norms are 1;
- llama3 rope scaling gives rope_freqs.weight equal to a numpy computation of llama.cpp's
  factors from the config;
- the same seed writes the same bytes, another seed other weights;
- bad input fails with a message naming what to fix.
Skips (77) without gguf/numpy/safetensors or SmolLM2's GGUF."""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from safetensors.numpy import load_file
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

ROOT = os.environ.get("PLUME_SOURCE_ROOT", ".")
BUILD = os.environ.get("PLUME_BUILD_ROOT", os.path.join(ROOT, "build"))
PLUME = os.path.join(BUILD, "core", "src", "cli", "plume")
TOK = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(TOK):
    print("SKIP: %s is missing (scripts/fetch-model fetches it)" % TOK)
    sys.exit(77)

failures = 0


def check(cond, msg):
    global failures
    if not cond:
        failures += 1
        print("FAIL: " + msg)


CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
       "intermediate_size": 512, "num_hidden_layers": 8, "num_attention_heads": 4,
       "num_key_value_heads": 2, "vocab_size": 49408, "max_position_embeddings": 2048,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False}
T = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14, "BF16": 30}


def write(d, name, cfg):
    p = os.path.join(d, name)
    os.makedirs(p, exist_ok=True)
    with open(os.path.join(p, "config.json"), "w") as f:
        json.dump(cfg, f)
    return p


def dummy_gguf(cfg_dir, out, typ, *extra):
    return subprocess.run([PLUME, "dummy-gguf", cfg_dir, out, "--type", typ, "--tokenizer", TOK]
                          + list(extra), capture_output=True, text=True)


def field(r, key):
    f = r.fields[key]
    if f.types and f.types[0].name == "STRING" and len(f.types) == 1:
        return bytes(f.parts[f.data[0]]).decode()
    return f.parts[f.data[0]][0]


def more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def expected_type(name, typ, pure, n_layer):
    if name.endswith("_norm.weight"):
        return T["F32"]
    if typ in ("F16", "BF16", "F32"):
        return T[typ]
    base = {"Q4_K_M": "Q4_K", "Q6_K": "Q6_K"}.get(typ, typ)
    if pure:
        return T[base]
    if name == "output.weight":
        return T["Q8_0"] if typ == "Q8_0" else T["Q6_K"]
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if typ == "Q4_K_M" and ("attn_v" in name or "ffn_down" in name) and more_bits(layer, n_layer):
        return T["Q6_K"]
    return T[base]


def unpermute(w, n_head):
    """GGUF rows of a llama q/k back to HF order (GGUF row 2i = HF i, 2i+1 = HF i + d/2)."""
    rows, k = w.shape
    d = rows // n_head
    return w.reshape(n_head, d // 2, 2, k).swapaxes(1, 2).reshape(rows, k)


def hf_name(g):
    m = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
         "output.weight": "lm_head.weight"}
    if g in m:
        return m[g]
    _, l, rest = g.split(".", 2)
    m = {"attn_norm.weight": "input_layernorm.weight", "ffn_norm.weight": "post_attention_layernorm.weight",
         "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
         "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
         "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
         "ffn_down.weight": "mlp.down_proj.weight"}
    return "model.layers.%s.%s" % (l, m[rest])


def main():
    if not os.access(PLUME, os.X_OK):
        print("SKIP: %s is not built" % PLUME)
        return 77
    tok = GGUFReader(TOK)
    n_tok = len(tok.fields["tokenizer.ggml.tokens"].data)
    with tempfile.TemporaryDirectory() as d:
        cdir = write(d, "tiny", CFG)
        for typ, pure in [("Q4_K_M", False), ("Q4_0", False), ("Q8_0", False), ("Q4_1", True),
                          ("Q6_K", True), ("Q4_K_M", True), ("F16", False), ("BF16", False)]:
            out = os.path.join(d, "%s%s.gguf" % (typ, "-pure" if pure else ""))
            p = dummy_gguf(cdir, out, typ, *(["--pure"] if pure else []))
            if p.returncode != 0:
                check(False, "dummy-gguf %s: %s" % (typ, p.stderr))
                continue
            r = GGUFReader(out)
            check(field(r, "general.architecture") == "llama", "architecture")
            check(field(r, "llama.block_count") == 8 and field(r, "llama.embedding_length") == 256
                  and field(r, "llama.attention.head_count_kv") == 2, "hyperparameters")
            toks = r.fields["tokenizer.ggml.tokens"]
            ttype = r.fields["tokenizer.ggml.token_type"]
            check(len(toks.data) == CFG["vocab_size"] and len(ttype.data) == CFG["vocab_size"],
                  "%s: %d tokens, want vocab_size %d" % (typ, len(toks.data), CFG["vocab_size"]))
            last = bytes(toks.parts[toks.data[-1]]).decode()
            check(last == "[PAD%d]" % (CFG["vocab_size"] - 1), "last token %r" % last)
            check(int(ttype.parts[ttype.data[-1]][0]) == 5, "padding token type (want UNUSED 5)")
            first = bytes(toks.parts[toks.data[100]]).decode()
            want = bytes(tok.fields["tokenizer.ggml.tokens"].parts[tok.fields["tokenizer.ggml.tokens"].data[100]]).decode()
            check(first == want, "token 100 %r, SmolLM2 has %r" % (first, want))
            for k in ("tokenizer.ggml.model", "tokenizer.ggml.pre"):
                check(field(r, k) == field(tok, k), "%s not copied" % k)
            check(len(r.fields["tokenizer.ggml.merges"].data) == len(tok.fields["tokenizer.ggml.merges"].data),
                  "merges not copied")
            names = [t.name for t in r.tensors]
            want_names = ["token_embd.weight"] + ["blk.%d.%s" % (l, s) for l in range(8) for s in (
                "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                "ffn_down.weight")] + ["output_norm.weight", "output.weight"]
            check(sorted(names) == sorted(want_names), "%s tensor names: %s" % (typ, names[:5]))
            for t in r.tensors:
                et = expected_type(t.name, typ, pure, 8)
                check(int(t.tensor_type) == et, "%s%s %s: type %d, want %d" % (
                    typ, " pure" if pure else "", t.name, int(t.tensor_type), et))
            # values: gguf-py against plume's own dequantization (plume convert --to hf)
            hf = os.path.join(d, "hf-" + os.path.basename(out))
            p = subprocess.run([PLUME, "convert", out, "--to", "hf", hf, "--dtype", "f32"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                check(False, "plume convert %s: %s" % (out, p.stderr))
                continue
            st = load_file(os.path.join(hf, "model.safetensors"))
            worst = 0.0
            for t in r.tensors:
                v = dequantize(t.data, t.tensor_type).astype(np.float32)
                v = v.reshape(-1, int(t.shape[0])) if len(t.shape) == 2 else v.reshape(-1)
                if t.name.endswith(("attn_q.weight", "attn_k.weight")):
                    v = unpermute(v, 4 if "attn_q" in t.name else 2)
                ref = st[hf_name(t.name)].reshape(v.shape)
                worst = max(worst, float(np.abs(v - ref).max()))
                if t.name.endswith("_norm.weight"):
                    check(np.all(v == 1.0), "%s %s: norms are not 1" % (typ, t.name))
                else:
                    sd, mean = float(v.std()), float(v.mean())
                    check(abs(sd - 0.02) < 0.0024 and abs(mean) < 0.002,
                          "%s %s: mean %g std %g" % (typ, t.name, mean, sd))
            check(worst == 0.0, "%s: gguf-py and plume dequantize differently (max %g)" % (typ, worst))
            print("ok %s%s: %d tensors, gguf-py == plume (max diff %g)" % (
                typ, " pure" if pure else "", len(r.tensors), worst))
        # the command line: --load-format dummy gives the file's logits and greedy tokens
        q = os.path.join(d, "cli.gguf")
        dummy_gguf(cdir, q, "Q4_0", "--seed", "3")
        runs = []
        for src in (["--model", q], ["--model", cdir, "--load-format", "dummy", "--dummy-dtype",
                                     "Q4_0", "--dummy-seed", "3", "--dummy-tokenizer", TOK]):
            lo = os.path.join(d, "logits-%d.bin" % len(runs))
            p = subprocess.run([PLUME, "generate"] + src + [
                "--prompt-ids", "1,2,3,4,5", "--max-tokens", "6", "--temperature", "0", "--json",
                "--logits-out", lo], capture_output=True, text=True)
            check(p.returncode == 0, "generate %s: %s" % (src, p.stderr))
            if p.returncode == 0:
                runs.append((json.loads(p.stdout)["token_ids"], np.fromfile(lo, dtype=np.float32)))
        if len(runs) == 2:
            check(runs[0][0] == runs[1][0], "greedy tokens differ: %s vs %s" % (runs[0][0], runs[1][0]))
            rng = float(runs[0][1].max() - runs[0][1].min())
            diff = float(np.abs(runs[0][1] - runs[1][1]).max())
            check(diff <= 1e-5 * rng, "CLI logits differ by %g (range %g)" % (diff, rng))
        p = subprocess.run([PLUME, "generate", "--model", cdir, "--dummy-seed", "3", "--prompt-ids",
                            "1", "--max-tokens", "1"], capture_output=True, text=True)
        check(p.returncode != 0 and "go with --load-format dummy" in p.stderr,
              "--dummy-seed alone: %s" % p.stderr)
        # the benches that load --model themselves take the same options, and refuse them alone
        dummy = ["--load-format", "dummy", "--dummy-dtype", "Q4_0", "--dummy-tokenizer", TOK]
        for bench in (["roofline"], ["context", "--depths", "8", "--steps", "2"]):
            p = subprocess.run([PLUME, "bench"] + bench + ["--model", cdir, "--reps", "1",
                                                           "--threads", "1", "--json"] + dummy,
                               capture_output=True, text=True)
            check(p.returncode == 0, "bench %s --load-format dummy: %s" % (bench[0], p.stderr))
            if p.returncode == 0:
                out = json.loads(p.stdout)
                dec = out["decode"]["tok_s"] if bench[0] == "roofline" else out["rows"][0]["decode_tok_s"]
                check(dec > 0, "bench %s on dummy weights: decode %s" % (bench[0], dec))
                # Q4_0: the int8 roofline; its % against the vpdpbusd peak is the same below
                # the amx level and larger at it (the tiles' peak is higher)
                pre = out["prefill"] if bench[0] == "roofline" else out["rows"][0]
                pct, vec = ((pre["roofline_pct"], pre["vec_roofline_pct"]) if bench[0] == "roofline"
                            else (pre["prefill_pct"], pre["prefill_vec_pct"]))
                lvl = out["machine"]["level"]
                check(pct > 0 and (vec > pct if lvl == "amx" else vec == pct),
                      "bench %s at %s: prefill %s%% of the roofline, %s%% of the dot one"
                      % (bench[0], lvl, pct, vec))
            p = subprocess.run([PLUME, "bench"] + bench + ["--model", cdir, "--reps", "1",
                                                           "--dummy-dtype", "Q4_0"],
                               capture_output=True, text=True)
            check(p.returncode != 0 and "go with --load-format dummy" in p.stderr,
                  "bench %s --dummy-dtype alone: %s" % (bench[0], p.stderr))
        # seeds
        a, b, c = (os.path.join(d, x) for x in ("a.gguf", "b.gguf", "c.gguf"))
        dummy_gguf(cdir, a, "Q4_0")
        dummy_gguf(cdir, b, "Q4_0", "--seed", "0")
        dummy_gguf(cdir, c, "Q4_0", "--seed", "1")
        h = [hashlib.sha256(open(x, "rb").read()).hexdigest() for x in (a, b, c)]
        check(h[0] == h[1], "seed 0 twice gives different files")
        check(h[0] != h[2], "seed 0 and seed 1 give the same file")
        # llama3 rope scaling: rope_freqs.weight as llama.cpp computes the factors
        cfg3 = dict(CFG, rope_theta=500000.0, rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 1024})
        out = os.path.join(d, "llama3.gguf")
        p = dummy_gguf(write(d, "llama3", cfg3), out, "Q8_0")
        check(p.returncode == 0, "llama3 config: %s" % p.stderr)
        if p.returncode == 0:
            r = GGUFReader(out)
            rf = [t for t in r.tensors if t.name == "rope_freqs.weight"]
            check(len(rf) == 1, "no rope_freqs.weight for llama3 scaling")
            if rf:
                hd = 64
                base = 500000.0 ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
                wl = 2 * np.pi / base
                lo_wl, hi_wl = 1024 / 1.0, 1024 / 4.0
                smooth = (1024 / wl - 1.0) / (4.0 - 1.0)
                fac = np.where(wl < hi_wl, 1.0, np.where(wl > lo_wl, 8.0, 1.0 / ((1 - smooth) / 8.0 + smooth)))
                got = np.array(rf[0].data, dtype=np.float64)
                check(np.allclose(got, fac, rtol=1e-5), "rope_freqs %s != %s" % (got[:4], fac[:4]))
        # bad input
        p = dummy_gguf(os.path.join(d, "nowhere"), os.path.join(d, "x.gguf"), "Q4_0")
        check(p.returncode != 0 and "no config.json" in p.stderr, "missing config: %s" % p.stderr)
        p = dummy_gguf(cdir, os.path.join(d, "x.gguf"), "Q9_9")
        check(p.returncode != 0 and "GGUF preset" in p.stderr, "bad type: %s" % p.stderr)
        p = subprocess.run([PLUME, "dummy-gguf", cdir, os.path.join(d, "x.gguf"), "--tokenizer",
                            os.path.join(cdir, "config.json")], capture_output=True, text=True)
        check(p.returncode != 0 and "must come from a .gguf" in p.stderr, "json tokenizer: %s" % p.stderr)
        check(not os.path.exists(os.path.join(d, "x.gguf")), "a failed write left a file")
        small = write(d, "small", dict(CFG, vocab_size=1000))
        p = dummy_gguf(small, os.path.join(d, "x.gguf"), "Q4_0")
        check(p.returncode != 0 and "vocab_size" in p.stderr and str(n_tok) in p.stderr,
              "small vocab: %s" % p.stderr)
    if failures:
        print("%d failures" % failures)
        return 1
    print("all dummy-gguf checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
