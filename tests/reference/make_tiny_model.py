#!/usr/bin/env python3
"""Writes a tiny random Llama/Qwen2 model as GGUF and as a Hugging Face directory.

    python make_tiny_model.py OUTDIR [--arch llama|qwen2] [--seed S] [--tied] [--shards N]

Output (all describe the *same* network):
  OUTDIR/tiny.gguf         F32 tensors; llama q/k rows permuted per formats.md §3.5
                           (qwen2: not permuted, llama.cpp uses NEOX rope for it)
  OUTDIR/tiny-f16.gguf     the same with 2-D weights in F16 (norms/biases stay F32)
  OUTDIR/tiny-q8_0.gguf    the same with 2-D weights in Q8_0 (gguf.quants.quantize)
  OUTDIR/hf/               config.json, model.safetensors (F32, HF names, unpermuted,
                           rotate-half convention), tokenizer.json, tokenizer_config.json,
                           generation_config.json
  OUTDIR/hf-sharded/       (only with --shards N > 1) the same split into
                           model-0000i-of-0000N.safetensors + model.safetensors.index.json

The tokenizer is a small byte-level BPE: the 256 GPT-2 byte symbols (id = byte
value), N_MERGES merged tokens learned deterministically from a fixed text, then
the specials <|endoftext|>, <|im_start|>, <|im_end|> (token_type CONTROL).

Weights are scaled so that logits have an O(1..10) spread: greedy decoding is
then far from ties and f32-vs-f64 differences cannot flip an argmax.
"""

import argparse
import collections
import json
import os
import re
import sys

import numpy as np

N_VOCAB_TARGET = 300
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
N_MERGES = N_VOCAB_TARGET - 256 - len(SPECIALS)  # 41

HPARAMS = dict(n_embd=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=16, n_ff=128,
               n_ctx=256, rope_theta=10000.0, rms_eps=1e-5)

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

CORPUS = (
    "The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox "
    "runs into the forest. In the beginning there was the word, and the word was with the "
    "model. We are testing the tokenizer: the inference engine reads these tokens, then "
    "it generates the next token, and then the next one. Hello world! Hello there, "
    "it is the end of the test and the start of another one. 1234 + 5678 = 6912."
)

# GPT-2 pre-tokenizer regex restricted to ASCII (good enough to learn merges).
_PRETOK = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def require(cond, what):
    """Raises ValueError with what when cond is false (an assert would vanish
    under python -O)."""
    if not cond:
        raise ValueError(what)


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def build_tokenizer(corpus=CORPUS):
    """Returns (tokens, token_types, merges) with merges as (left, right) pairs,
    the merges learned from corpus."""
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    words = collections.Counter(
        tuple(b2u[b] for b in w.encode("utf-8")) for w in _PRETOK.findall(corpus))
    merges = []
    for _ in range(N_MERGES):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], [-ord(ch) for ch in kv[0][0] + " " + kv[0][1]]))[0]
        merges.append(best)
        tokens.append(best[0] + best[1])
        new = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += c
        words = new
    require(len(set(tokens)) == len(tokens), "duplicate merged token")
    types = [1] * len(tokens) + [3] * len(SPECIALS)  # 1 NORMAL, 3 CONTROL
    tokens = tokens + SPECIALS
    return tokens, types, merges


def linear(rng, n_out, n_in, gain=1.0):
    """A random n_out x n_in float32 projection of unit-ish output scale."""
    return (rng.standard_normal((n_out, n_in)) * gain / np.sqrt(n_in)).astype(np.float32)


def layer_weights(w, p, rng, norm, E, F, D, H, Hkv, qkv_bias=False, qk_norm=False,
                  ffn_norms=False):
    """Adds one decoder layer's HF-named weights (prefix p) to w, drawn from
    rng in a fixed order; norm(n) draws a norm weight.  qkv_bias: q/k/v
    biases (Qwen2); qk_norm: per-head q/k norms (Qwen3, Gemma 3); ffn_norms:
    the norms around the MLP (Gemma 3)."""
    w[p + "input_layernorm.weight"] = norm(E)
    w[p + "self_attn.q_proj.weight"] = linear(rng, H * D, E, 1.5)
    w[p + "self_attn.k_proj.weight"] = linear(rng, Hkv * D, E, 1.5)
    w[p + "self_attn.v_proj.weight"] = linear(rng, Hkv * D, E)
    w[p + "self_attn.o_proj.weight"] = linear(rng, E, H * D)
    if qkv_bias:
        for n, o in (("q", H * D), ("k", Hkv * D), ("v", Hkv * D)):
            w[p + "self_attn.%s_proj.bias" % n] = (rng.standard_normal(o) * 0.5).astype(np.float32)
    if qk_norm:
        w[p + "self_attn.q_norm.weight"] = norm(D)
        w[p + "self_attn.k_norm.weight"] = norm(D)
    w[p + "post_attention_layernorm.weight"] = norm(E)
    if ffn_norms:
        w[p + "pre_feedforward_layernorm.weight"] = norm(E)
        w[p + "post_feedforward_layernorm.weight"] = norm(E)
    w[p + "mlp.gate_proj.weight"] = linear(rng, F, E)
    w[p + "mlp.up_proj.weight"] = linear(rng, F, E)
    w[p + "mlp.down_proj.weight"] = linear(rng, E, F)


def random_weights(arch, seed, tied, n_vocab):
    """HF-named float32 weights in HF (unpermuted, rotate-half) convention."""
    h = HPARAMS
    rng = np.random.default_rng(seed)
    E, F, D, H, Hkv = h["n_embd"], h["n_ff"], h["head_dim"], h["n_head"], h["n_head_kv"]

    def norm(n):
        return rng.uniform(0.5, 1.5, n).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((n_vocab, E)).astype(np.float32)}
    for i in range(h["n_layer"]):
        layer_weights(w, "model.layers.%d." % i, rng, norm, E, F, D, H, Hkv,
                      qkv_bias=arch == "qwen2")
    w["model.norm.weight"] = norm(E)
    if not tied:
        w["lm_head.weight"] = linear(rng, n_vocab, E, 8.0)
    return w


def permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute (formats.md §3.5): within each head
    new row 2i = old row i, new row 2i+1 = old row i + head_dim/2."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def hf_to_gguf_tensors(arch, w):
    h = HPARAMS
    out = {"token_embd.weight": w["model.embed_tokens.weight"],
           "output_norm.weight": w["model.norm.weight"]}
    if "lm_head.weight" in w:
        out["output.weight"] = w["lm_head.weight"]
    names = {"input_layernorm.weight": "attn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
             "self_attn.o_proj.weight": "attn_output.weight",
             "post_attention_layernorm.weight": "ffn_norm.weight",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight"}
    for i in range(h["n_layer"]):
        for hf, gg in names.items():
            t = w.get("model.layers.%d.%s" % (i, hf))
            if t is None:
                continue
            if arch == "llama" and hf.startswith("self_attn.q_proj"):
                t = permute(t, h["n_head"])
            elif arch == "llama" and hf.startswith("self_attn.k_proj"):
                t = permute(t, h["n_head_kv"])
            out["blk.%d.%s" % (i, gg)] = np.ascontiguousarray(t)
    return out


def add_gpt2_tokenizer(w, tokens, types, merges, pad):
    """Writes to GGUF writer w the byte-level BPE tokenizer of tokens, types
    and merges (model and pre-tokenizer gpt2), <|endoftext|> as BOS (and,
    with pad, as padding), <|im_end|> as EOS, no BOS added, and the ChatML
    template."""
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["%s %s" % m for m in merges])
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    if pad:
        w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)


def write_gguf(path, arch, tensors, tok, wtype):
    import gguf

    h = HPARAMS
    tokens, types, merges = tok
    ftype = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[wtype]
    w = gguf.GGUFWriter(path, arch)
    w.add_name("plume-tiny-%s" % arch)
    w.add_file_type(int(ftype))
    if wtype == "q8_0":
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_vocab_size(len(tokens))
    w.add_context_length(h["n_ctx"])
    w.add_embedding_length(h["n_embd"])
    w.add_block_count(h["n_layer"])
    w.add_feed_forward_length(h["n_ff"])
    w.add_head_count(h["n_head"])
    w.add_head_count_kv(h["n_head_kv"])
    w.add_key_length(h["head_dim"])
    w.add_value_length(h["head_dim"])
    w.add_layer_norm_rms_eps(h["rms_eps"])
    w.add_rope_freq_base(h["rope_theta"])
    w.add_rope_dimension_count(h["head_dim"])
    add_gpt2_tokenizer(w, tokens, types, merges, pad=True)
    for name, t in tensors.items():
        if t.ndim == 1 or wtype == "f32":
            w.add_tensor(name, t.astype(np.float32))
        elif wtype == "f16":
            w.add_tensor(name, t.astype(np.float16))
        else:
            q = gguf.quants.quantize(t.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_hf(d, arch, w, tok, tied, shards=1):
    from safetensors.numpy import save_file

    h = HPARAMS
    tokens = tok[0]
    os.makedirs(d, exist_ok=True)
    bos, eos = tokens.index("<|endoftext|>"), tokens.index("<|im_end|>")
    cfg = {
        "architectures": ["LlamaForCausalLM" if arch == "llama" else "Qwen2ForCausalLM"],
        "model_type": arch,
        "vocab_size": len(tokens),
        "hidden_size": h["n_embd"],
        "num_hidden_layers": h["n_layer"],
        "num_attention_heads": h["n_head"],
        "num_key_value_heads": h["n_head_kv"],
        "head_dim": h["head_dim"],
        "intermediate_size": h["n_ff"],
        "max_position_embeddings": h["n_ctx"],
        "rms_norm_eps": h["rms_eps"],
        "rope_theta": h["rope_theta"],
        "rope_scaling": None,
        "hidden_act": "silu",
        "tie_word_embeddings": bool(tied),
        "attention_bias": arch == "qwen2",
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float32",
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos}, f, indent=2)

    names = sorted(w)
    if shards <= 1:
        save_file({k: w[k] for k in names}, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    else:
        total = sum(w[k].nbytes for k in names)
        groups, cur, acc = [], [], 0
        for k in names:  # greedy split by bytes, in name order
            if cur and acc >= total * (len(groups) + 1) / shards and len(groups) < shards - 1:
                groups.append(cur)
                cur = []
            cur.append(k)
            acc += w[k].nbytes
        groups.append(cur)
        require(len(groups) == shards, "could not split into %d shards" % shards)
        wmap = {}
        for i, g in enumerate(groups):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
            save_file({k: w[k] for k in g}, os.path.join(d, fn), metadata={"format": "pt"})
            wmap.update({k: fn for k in g})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2)
    write_hf_tokenizer(d, tok, h["n_ctx"])


def write_hf_tokenizer(d, tok, n_ctx):
    """tokenizer.json and tokenizer_config.json of tok (build_tokenizer) in d."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tokens, _types, merges = tok
    vocab = {t: i for i, t in enumerate(tokens[: len(tokens) - len(SPECIALS)])}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=list(merges)))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    for s in SPECIALS:
        require(tk.token_to_id(s) == tokens.index(s), (s, tk.token_to_id(s)))
    tk.save(os.path.join(d, "tokenizer.json"))
    tcfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(tokens.index(s)): {"content": s, "lstrip": False, "normalized": False,
                                   "rstrip": False, "single_word": False, "special": True}
            for s in SPECIALS},
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "chat_template": CHATML_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": n_ctx,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)


def make(outdir, arch="llama", seed=0, tied=False, shards=1, quant=True, alt_vocab=False):
    """Writes the fixtures; returns a dict of their paths."""
    if arch not in ("llama", "qwen2"):
        raise ValueError("arch must be llama or qwen2")
    os.makedirs(outdir, exist_ok=True)
    tok = build_tokenizer(CORPUS.upper() if alt_vocab else CORPUS)
    w = random_weights(arch, seed, tied, len(tok[0]))
    gt = hf_to_gguf_tensors(arch, w)
    paths = {"gguf": os.path.join(outdir, "tiny.gguf"), "hf": os.path.join(outdir, "hf")}
    write_gguf(paths["gguf"], arch, gt, tok, "f32")
    if quant:
        paths["gguf_f16"] = os.path.join(outdir, "tiny-f16.gguf")
        paths["gguf_q8_0"] = os.path.join(outdir, "tiny-q8_0.gguf")
        write_gguf(paths["gguf_f16"], arch, gt, tok, "f16")
        write_gguf(paths["gguf_q8_0"], arch, gt, tok, "q8_0")
    write_hf(paths["hf"], arch, w, tok, tied)
    if shards > 1:
        paths["hf_sharded"] = os.path.join(outdir, "hf-sharded")
        write_hf(paths["hf_sharded"], arch, w, tok, tied, shards)
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(description="write a tiny random model (GGUF + HF)")
    ap.add_argument("outdir")
    ap.add_argument("--arch", choices=("llama", "qwen2"), default="llama")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tied", action="store_true", help="no output.weight / lm_head (tied embeddings)")
    ap.add_argument("--shards", type=int, default=1, help="also write OUTDIR/hf-sharded with N shards")
    ap.add_argument("--no-quant", action="store_true", help="skip the F16 and Q8_0 GGUF copies")
    ap.add_argument("--alt-vocab", action="store_true",
                    help="learn the merges from the upper-cased corpus: same vocabulary size and "
                    "special tokens, different token texts from id 256 on (vocabulary-mismatch fixtures)")
    a = ap.parse_args(argv)
    paths = make(a.outdir, a.arch, a.seed, a.tied, a.shards, not a.no_quant, a.alt_vocab)
    print(json.dumps(paths, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
