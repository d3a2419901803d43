#!/usr/bin/env python3
"""Tiny random models of the families beyond the Llama baseline, each as an
HF directory (config.json as transformers writes it, f32 safetensors,
tokenizer) and, where llama.cpp has a form for it, a GGUF written with
gguf-py under llama.cpp's tensor names and keys (what convert_hf_to_gguf.py
writes: llama q/k rows permuted, Llama 3.1 scaling as rope_freqs.weight,
Gemma norms stored as 1 + w).

    python make_family_model.py OUTDIR VARIANT     (VARIANT in VARIANTS)

The tokenizer is make_tiny_model's byte-level BPE (300 tokens).
"""

import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_tiny_model as mtm  # noqa: E402

BASE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, intermediate_size=128, max_position_embeddings=256, rms_norm_eps=1e-5,
            rope_theta=10000.0, tie_word_embeddings=False, torch_dtype="float32")

# name -> (model_type, config overrides, has a GGUF form)
VARIANTS = {
    # Qwen3: head_dim 32 independent of hidden/heads (64/4 = 16), untied head
    "qwen3": ("qwen3", dict(head_dim=32, rope_theta=1000000.0), True),
    "qwen3-tied": ("qwen3", dict(tie_word_embeddings=True), True),
    # Llama 3.2 style: llama3 bands around original_max_position_embeddings 32
    "llama3": ("llama", dict(rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                               high_freq_factor=4.0,
                                               original_max_position_embeddings=32),
                             rope_theta=500000.0, tie_word_embeddings=True), True),
    "linear": ("llama", dict(rope_scaling=dict(type="linear", factor=4.0)), True),
    # transformers-5 spelling: rope_parameters holding theta and scaling
    "dynamic": ("llama", dict(rope_parameters=dict(rope_type="dynamic", factor=2.0,
                                                   rope_theta=10000.0),
                              max_position_embeddings=64), False),
    "yarn": ("qwen3", dict(rope_scaling=dict(rope_type="yarn", factor=4.0,
                                             original_max_position_embeddings=32)), True),
    "mistral-swa": ("mistral", dict(sliding_window=16), True),
    # SmolLM3: Llama with no RoPE on every 4th layer (GGUF arch smollm3)
    # (pad_token_id in range: SmolLM3Config's default is 128004)
    "smollm3": ("smollm3", dict(num_hidden_layers=4, rope_theta=2000000.0,
                                tie_word_embeddings=True, pad_token_id=0), True),
    "qwen2-swa": ("qwen2", dict(use_sliding_window=True, sliding_window=16, max_window_layers=1),
                  False),
    # Gemma 3: 6 layers (llama.cpp's fixed pattern: 5 local, 1 global), a
    # 16-token window, linear scaling on the global layers (as the 4B has),
    # query_pre_attn_scalar = head_dim (what llama.cpp assumes), soft-capping
    "gemma3": ("gemma3_text", dict(num_hidden_layers=6, sliding_window=16,
                                   rope_scaling=dict(rope_type="linear", factor=2.0),
                                   rope_theta=1000000.0, rope_local_base_freq=10000.0,
                                   query_pre_attn_scalar=16, final_logit_softcapping=30.0,
                                   tie_word_embeddings=True,
                                   hidden_activation="gelu_pytorch_tanh"), True),
    # transformers-5 nested rope_parameters, layer_types, another scale
    "gemma3-v5": ("gemma3_text", dict(
        num_hidden_layers=3, sliding_window=16, query_pre_attn_scalar=24,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters=dict(full_attention=dict(rope_type="default", rope_theta=1000000.0),
                             sliding_attention=dict(rope_type="default", rope_theta=10000.0)),
        tie_word_embeddings=True, hidden_activation="gelu_pytorch_tanh"), False),
}

ARCHS = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
         "smollm3": "SmolLM3ForCausalLM",
         "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
         "gemma3_text": "Gemma3ForCausalLM"}


def config_of(variant, n_vocab, bos, eos):
    mt, over, _ = VARIANTS[variant]
    c = dict(BASE)
    c.update(over)
    c.update(model_type=mt, architectures=[ARCHS[mt]], vocab_size=n_vocab, bos_token_id=bos,
             eos_token_id=eos, hidden_act="silu" if mt != "gemma3_text" else "gelu_pytorch_tanh")
    if mt == "qwen2":
        c["attention_bias"] = True
    return c


def random_weights(c, seed):
    rng = np.random.default_rng(seed)
    E, F, D = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    H, Hkv, V = c["num_attention_heads"], c["num_key_value_heads"], c["vocab_size"]
    gemma = c["model_type"] == "gemma3_text"

    def norm(n):  # Gemma stores w with output * (1 + w)
        return (rng.uniform(-0.5, 0.5, n) if gemma else rng.uniform(0.5, 1.5, n)).astype(np.float32)

    emb_gain = 1.0 / math.sqrt(E) if gemma else 1.0  # Gemma multiplies by sqrt(E)
    w = {"model.embed_tokens.weight": (rng.standard_normal((V, E)) * emb_gain).astype(np.float32)}
    for l in range(c["num_hidden_layers"]):
        mtm.layer_weights(w, "model.layers.%d." % l, rng, norm, E, F, D, H, Hkv,
                          qkv_bias=c.get("attention_bias"),
                          qk_norm=c["model_type"] in ("qwen3", "gemma3_text"), ffn_norms=gemma)
    w["model.norm.weight"] = norm(E)
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = mtm.linear(rng, V, E, 8.0)
    elif not gemma:
        w["model.embed_tokens.weight"] *= 2.0  # a tied head: logits with an O(1..10) spread
    return w


def llama3_rope_factors(c):
    """convert_hf_to_gguf.py LlamaModel's rope_freqs for rope_type llama3."""
    rs = c["rope_scaling"]
    D, base = c["head_dim"], c["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, D, 2, dtype=np.float32) / D))
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < old / hi:
            out.append(1)
        elif wl > old / lo:
            out.append(factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def gguf_tensors(c, w):
    mt = c["model_type"]
    gemma = mt == "gemma3_text"
    names = {"input_layernorm.weight": "attn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
             "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight",
             "post_attention_layernorm.weight": "post_attention_norm.weight" if gemma else "ffn_norm.weight",
             "pre_feedforward_layernorm.weight": "ffn_norm.weight",
             "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight"}
    permute = mt in ("llama", "mistral", "smollm3")
    out = {"token_embd.weight": w["model.embed_tokens.weight"],
           "output_norm.weight": w["model.norm.weight"] + (1.0 if gemma else 0.0)}
    if "lm_head.weight" in w:
        out["output.weight"] = w["lm_head.weight"]
    for l in range(c["num_hidden_layers"]):
        for hf, gg in names.items():
            t = w.get("model.layers.%d.%s" % (l, hf))
            if t is None:
                continue
            if permute and hf == "self_attn.q_proj.weight":
                t = mtm.permute(t, c["num_attention_heads"])
            elif permute and hf == "self_attn.k_proj.weight":
                t = mtm.permute(t, c["num_key_value_heads"])
            if gemma and hf.endswith("norm.weight"):
                t = t + 1.0  # Gemma3Model.modify_tensors: norms + 1
            out["blk.%d.%s" % (l, gg)] = np.ascontiguousarray(t, dtype=np.float32)
    rs = c.get("rope_scaling") or {}
    if rs.get("rope_type") == "llama3":
        out["rope_freqs.weight"] = llama3_rope_factors(c)
    return out


def write_gguf(path, c, tensors, tok, wtype="f32", legacy_rope=False, split_max_tensors=0):
    """wtype f16: matrices in F16 (vectors stay F32), as for a benchmark.
    legacy_rope: linear RoPE scaling as 2023 files wrote it, the factor in
    <arch>.rope.scale_linear and no rope.scaling.type (llama.cpp reads it
    as linear).  split_max_tensors: shards of at most that many tensors, as
    gguf-split writes them (PATH-00001-of-0000N.gguf, ...; the metadata in the
    first)."""
    import gguf
    mt = c["model_type"]
    arch = {"llama": "llama", "mistral": "llama", "smollm3": "smollm3", "qwen3": "qwen3",
            "gemma3_text": "gemma3"}[mt]
    tokens, types, merges = tok
    g = gguf.GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    g.add_name("plume-family-%s" % mt)
    g.add_file_type(int(gguf.LlamaFileType.ALL_F32 if wtype == "f32" else gguf.LlamaFileType.MOSTLY_F16))
    g.add_vocab_size(c["vocab_size"])
    g.add_context_length(c["max_position_embeddings"])
    g.add_embedding_length(c["hidden_size"])
    g.add_block_count(c["num_hidden_layers"])
    g.add_feed_forward_length(c["intermediate_size"])
    g.add_head_count(c["num_attention_heads"])
    g.add_head_count_kv(c["num_key_value_heads"])
    g.add_key_length(c["head_dim"])
    g.add_value_length(c["head_dim"])
    g.add_layer_norm_rms_eps(c["rms_norm_eps"])
    g.add_rope_freq_base(c["rope_theta"])
    g.add_rope_dimension_count(c["head_dim"])
    rs = c.get("rope_scaling") or {}
    t = rs.get("rope_type", rs.get("type"))
    if t == "linear" and legacy_rope:
        g.add_float32("%s.rope.scale_linear" % arch, rs["factor"])
    elif t == "linear":
        g.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        g.add_rope_scaling_factor(rs["factor"])
    elif t == "yarn":
        g.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        g.add_rope_scaling_factor(rs["factor"])
        g.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
    if c.get("sliding_window"):
        g.add_sliding_window(c["sliding_window"])
    if c.get("final_logit_softcapping"):
        g.add_final_logit_softcapping(c["final_logit_softcapping"])
    mtm.add_gpt2_tokenizer(g, tokens, types, merges, pad=False)
    for name, a in tensors.items():
        g.add_tensor(name, a.astype(np.float16 if wtype == "f16" and a.ndim == 2 else np.float32))
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def make(outdir, variant, seed=1):
    """Writes OUTDIR/hf (and OUTDIR/model.gguf when the variant has a GGUF
    form); returns {"hf": dir, "gguf": path or None, "config": dict, and for
    linear RoPE scaling "gguf_legacy_rope": the same GGUF with the older keys,
    and for qwen3 "gguf_split": the first of its shards)."""
    tok = mtm.build_tokenizer()
    tokens = tok[0]
    c = config_of(variant, len(tokens), tokens.index("<|endoftext|>"), tokens.index("<|im_end|>"))
    w = random_weights(c, seed)
    hf = os.path.join(outdir, "hf")
    # make_tiny_model's writer gives the tokenizer files; config.json is ours
    mtm.write_hf(hf, "llama", w, tok, c["tie_word_embeddings"])
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    gg = legacy = None
    if VARIANTS[variant][2]:
        gg = os.path.join(outdir, "model.gguf")
        write_gguf(gg, c, gguf_tensors(c, w), tok)
        if (c.get("rope_scaling") or {}).get("type") == "linear":
            legacy = os.path.join(outdir, "model-legacy-rope.gguf")
            write_gguf(legacy, c, gguf_tensors(c, w), tok, legacy_rope=True)
    split = None
    if variant == "qwen3":
        write_gguf(os.path.join(outdir, "split.gguf"), c, gguf_tensors(c, w), tok,
                   split_max_tensors=7)
        shards = sorted(f for f in os.listdir(outdir) if f.startswith("split-"))
        assert len(shards) >= 3 and shards[0].endswith("-00001-of-%05d.gguf" % len(shards)), shards
        split = os.path.join(outdir, shards[0])
    return {"hf": hf, "gguf": gg, "gguf_legacy_rope": legacy, "gguf_split": split, "config": c}


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in VARIANTS:
        sys.exit("usage: make_family_model.py OUTDIR VARIANT (one of %s)" % ", ".join(VARIANTS))
    print(json.dumps(make(sys.argv[1], sys.argv[2]), indent=2))
