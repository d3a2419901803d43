#!/usr/bin/env python3
"""Tiny random mixture-of-experts models (Mixtral, Qwen3-MoE, OLMoE), each
as an HF directory and, where llama.cpp has a form for it, a GGUF.

transformers is installed in .venv without torch, so it cannot instantiate
these models; the HF directories are written here exactly as transformers'
save_pretrained writes them: config.json with the config class's fields,
model.safetensors (F32) under the checkpoint names that save_pretrained
restores through conversion_mapping.py's reverse ops (per-expert
matrices: Mixtral's block_sparse_moe.experts.E.w1/w3/w2, Qwen3-MoE's and
OLMoE's mlp.experts.E.gate_proj/up_proj/down_proj), and the tokenizer
files of make_tiny_model.  The "-fused" variant stores transformers 5's
in-memory layout instead (mlp.experts.gate_up_proj [X, 2F, E] with the
gate rows first, mlp.experts.down_proj [X, E, F]).

The GGUF follows llama.cpp's convert_hf_to_gguf.py: Mixtral is arch
"llama" (q/k rows permuted) with the experts stacked into 3-D
blk.N.ffn_{gate,up,down}_exps and the router as blk.N.ffn_gate_inp;
qwen3moe and olmoe keep q/k unpermuted (NEOX rope); keys
<arch>.expert_count, expert_used_count, expert_feed_forward_length
(qwen3moe), expert_weights_norm when the config sets norm_topk_prob.

    python make_moe_model.py OUTDIR VARIANT     (VARIANT in VARIANTS)
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_tiny_model as mtm  # noqa: E402

BASE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
            tie_word_embeddings=False, torch_dtype="float32", hidden_act="silu")

# name -> (model_type, config overrides, has a GGUF form, fused HF experts)
VARIANTS = {
    "mixtral": ("mixtral", dict(intermediate_size=96, num_local_experts=8, num_experts_per_tok=2,
                                sliding_window=None, router_jitter_noise=0.0), True, False),
    "qwen3moe": ("qwen3_moe", dict(num_hidden_layers=3, head_dim=32, intermediate_size=160,
                                   moe_intermediate_size=48, num_experts=8, num_experts_per_tok=4,
                                   norm_topk_prob=True, decoder_sparse_step=1,
                                   mlp_only_layers=[], rope_theta=1000000.0), True, False),
    # a dense MLP in layer 1 (mlp_only_layers), probabilities not renormalized
    "qwen3moe-dense1": ("qwen3_moe", dict(num_hidden_layers=3, head_dim=16, intermediate_size=80,
                                          moe_intermediate_size=32, num_experts=6,
                                          num_experts_per_tok=2, norm_topk_prob=False,
                                          decoder_sparse_step=1, mlp_only_layers=[1]),
                        False, False),
    "olmoe": ("olmoe", dict(num_hidden_layers=3, intermediate_size=32, num_experts=8,
                            num_experts_per_tok=3, norm_topk_prob=False, clip_qkv=None),
              True, False),
    # Qwen2-MoE: q/k/v bias, a shared expert gated by sigmoid, raw top-k probabilities
    "qwen2moe": ("qwen2_moe", dict(intermediate_size=96, moe_intermediate_size=40,
                                   shared_expert_intermediate_size=72, num_experts=8,
                                   num_experts_per_tok=2, norm_topk_prob=False, qkv_bias=True,
                                   decoder_sparse_step=1, mlp_only_layers=[]), True, False),
    "olmoe-fused": ("olmoe", dict(intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                                  norm_topk_prob=True, clip_qkv=None), False, True),
}

ARCHS = {"mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
         "olmoe": "OlmoeForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM"}


def config_of(variant, n_vocab, bos, eos):
    mt, over, _, _ = VARIANTS[variant]
    c = dict(BASE)
    c.update(over)
    c.update(model_type=mt, architectures=[ARCHS[mt]], vocab_size=n_vocab, bos_token_id=bos,
             eos_token_id=eos)
    return c


def n_experts(c):
    return c.get("num_local_experts") or c["num_experts"]


def ff_expert(c):
    return c.get("moe_intermediate_size") if c["model_type"] in ("qwen3_moe", "qwen2_moe") \
        else c["intermediate_size"]


def moe_layers(c):
    n = c["num_hidden_layers"]
    if c["model_type"] not in ("qwen3_moe", "qwen2_moe"):
        return list(range(n))
    only, step = c.get("mlp_only_layers") or [], c.get("decoder_sparse_step", 1)
    return [l for l in range(n) if l not in only and (l + 1) % step == 0]


def expert_names(c, l, e):
    """HF names of expert e's gate, up, down in layer l (save_pretrained's layout)."""
    if c["model_type"] == "mixtral":
        p = "model.layers.%d.block_sparse_moe.experts.%d." % (l, e)
        return p + "w1.weight", p + "w3.weight", p + "w2.weight"
    p = "model.layers.%d.mlp.experts.%d." % (l, e)
    return p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"


def router_name(c, l):
    if c["model_type"] == "mixtral":
        return "model.layers.%d.block_sparse_moe.gate.weight" % l
    return "model.layers.%d.mlp.gate.weight" % l


def random_weights(c, seed):
    """HF-named f32 weights, experts one matrix each."""
    rng = np.random.default_rng(seed)
    E, H, Hkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    D = c.get("head_dim") or E // H
    V, X, Fx = c["vocab_size"], n_experts(c), ff_expert(c)
    mt = c["model_type"]

    def lin(o, i, gain=1.0):
        return (rng.standard_normal((o, i)) * gain / np.sqrt(i)).astype(np.float32)

    def norm(n):
        return rng.uniform(0.5, 1.5, n).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((V, E)).astype(np.float32)}
    moe = moe_layers(c)
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = norm(E)
        w[p + "self_attn.q_proj.weight"] = lin(H * D, E, 1.5)
        w[p + "self_attn.k_proj.weight"] = lin(Hkv * D, E, 1.5)
        w[p + "self_attn.v_proj.weight"] = lin(Hkv * D, E)
        w[p + "self_attn.o_proj.weight"] = lin(E, H * D)
        if c.get("qkv_bias"):
            for n, o in (("q", H * D), ("k", Hkv * D), ("v", Hkv * D)):
                w[p + "self_attn.%s_proj.bias" % n] = (rng.standard_normal(o) * 0.5).astype(np.float32)
        if mt == "qwen3_moe":
            w[p + "self_attn.q_norm.weight"] = norm(D)
            w[p + "self_attn.k_norm.weight"] = norm(D)
        elif mt == "olmoe":  # over the whole projections
            w[p + "self_attn.q_norm.weight"] = norm(H * D)
            w[p + "self_attn.k_norm.weight"] = norm(Hkv * D)
        w[p + "post_attention_layernorm.weight"] = norm(E)
        if l not in moe:
            F = c["intermediate_size"]
            w[p + "mlp.gate_proj.weight"] = lin(F, E)
            w[p + "mlp.up_proj.weight"] = lin(F, E)
            w[p + "mlp.down_proj.weight"] = lin(E, F)
            continue
        w[router_name(c, l)] = lin(X, E, 3.0)  # a spread of router logits: no near-ties
        for e in range(X):
            g, u, d = expert_names(c, l, e)
            w[g], w[u], w[d] = lin(Fx, E), lin(Fx, E), lin(E, Fx, 1.5)
        if c.get("shared_expert_intermediate_size"):
            S = c["shared_expert_intermediate_size"]
            q = p + "mlp.shared_expert."
            w[q + "gate_proj.weight"], w[q + "up_proj.weight"] = lin(S, E), lin(S, E)
            w[q + "down_proj.weight"] = lin(E, S)
            w[p + "mlp.shared_expert_gate.weight"] = lin(1, E, 2.0)
    w["model.norm.weight"] = norm(E)
    w["lm_head.weight"] = lin(V, E, 5.0)  # logits spread ~40: f32 error well under 1e-4
    return w


def fuse(c, w):
    """transformers 5's in-memory expert layout (the "-fused" variants)."""
    out = dict(w)
    for l in moe_layers(c):
        gs, us, ds = [], [], []
        for e in range(n_experts(c)):
            g, u, d = expert_names(c, l, e)
            gs.append(out.pop(g))
            us.append(out.pop(u))
            ds.append(out.pop(d))
        p = "model.layers.%d.mlp." % l
        out[p + "gate.weight"] = out.pop(router_name(c, l))
        out[p + "experts.gate_up_proj"] = np.stack([np.concatenate([g, u]) for g, u in zip(gs, us)])
        out[p + "experts.down_proj"] = np.stack(ds)
    return out


def gguf_tensors(c, w):
    mt = c["model_type"]
    names = {"input_layernorm.weight": "attn_norm.weight",
             "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
             "self_attn.v_proj.bias": "attn_v.bias",
             "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
             "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
             "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
             "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
             "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight",
             "post_attention_layernorm.weight": "ffn_norm.weight",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight"}
    permute = mt == "mixtral"
    out = {"token_embd.weight": w["model.embed_tokens.weight"],
           "output_norm.weight": w["model.norm.weight"], "output.weight": w["lm_head.weight"]}
    for l in range(c["num_hidden_layers"]):
        for hf, gg in names.items():
            t = w.get("model.layers.%d.%s" % (l, hf))
            if t is None:
                continue
            if permute and hf == "self_attn.q_proj.weight":
                t = mtm.permute(t, c["num_attention_heads"])
            elif permute and hf == "self_attn.k_proj.weight":
                t = mtm.permute(t, c["num_key_value_heads"])
            out["blk.%d.%s" % (l, gg)] = np.ascontiguousarray(t, dtype=np.float32)
        if l in moe_layers(c):
            out["blk.%d.ffn_gate_inp.weight" % l] = w[router_name(c, l)]
            for i, gg in enumerate(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")):
                out["blk.%d.%s.weight" % (l, gg)] = np.stack(
                    [w[expert_names(c, l, e)[i]] for e in range(n_experts(c))])
    return out


def write_gguf(path, c, tensors, tok, wtype="f32"):
    """wtype: f32, or q4_0 / q8_0 for the 2-D and 3-D weights (gguf.quants)."""
    import gguf
    mt = c["model_type"]
    arch = {"mixtral": "llama", "qwen3_moe": "qwen3moe", "olmoe": "olmoe",
            "qwen2_moe": "qwen2moe"}[mt]
    E, H = c["hidden_size"], c["num_attention_heads"]
    D = c.get("head_dim") or E // H
    tokens, types, merges = tok
    g = gguf.GGUFWriter(path, arch)
    g.add_name("plume-moe-%s" % mt)
    ft = {"f32": gguf.LlamaFileType.ALL_F32, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
          "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[wtype]
    g.add_file_type(int(ft))
    g.add_vocab_size(c["vocab_size"])
    g.add_context_length(c["max_position_embeddings"])
    g.add_embedding_length(E)
    g.add_block_count(c["num_hidden_layers"])
    g.add_feed_forward_length(c["intermediate_size"])
    g.add_head_count(H)
    g.add_head_count_kv(c["num_key_value_heads"])
    g.add_key_length(D)
    g.add_value_length(D)
    g.add_layer_norm_rms_eps(c["rms_norm_eps"])
    g.add_rope_freq_base(c["rope_theta"])
    g.add_rope_dimension_count(D)
    g.add_expert_count(n_experts(c))
    g.add_expert_used_count(c["num_experts_per_tok"])
    if mt in ("qwen3_moe", "qwen2_moe"):
        g.add_expert_feed_forward_length(c["moe_intermediate_size"])
    if c.get("shared_expert_intermediate_size"):
        g.add_expert_shared_feed_forward_length(c["shared_expert_intermediate_size"])
    if mt != "mixtral" and c.get("norm_topk_prob") is not None:
        g.add_expert_weights_norm(bool(c["norm_topk_prob"]))
    g.add_tokenizer_model("gpt2")
    g.add_tokenizer_pre("gpt2")
    g.add_token_list(tokens)
    g.add_token_types(types)
    g.add_token_merges(["%s %s" % m for m in merges])
    g.add_bos_token_id(tokens.index("<|endoftext|>"))
    g.add_eos_token_id(tokens.index("<|im_end|>"))
    g.add_add_bos_token(False)
    g.add_chat_template(mtm.CHATML_TEMPLATE)
    qt = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0}.get(wtype)
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        # llama.cpp keeps norms and the router (ffn_gate_inp) in float
        if qt is not None and a.ndim >= 2 and "ffn_gate_inp" not in name:
            q = gguf.quants.quantize(a, qt)
            g.add_tensor(name, q, raw_shape=q.shape, raw_dtype=qt)
        else:
            g.add_tensor(name, a)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()


def make(outdir, variant, seed=1):
    """Writes OUTDIR/hf (and OUTDIR/model.gguf when the variant has a GGUF
    form); returns {"hf": dir, "gguf": path or None, "config": dict}."""
    tok = mtm.build_tokenizer()
    tokens = tok[0]
    c = config_of(variant, len(tokens), tokens.index("<|endoftext|>"), tokens.index("<|im_end|>"))
    w = random_weights(c, seed)
    hf = os.path.join(outdir, "hf")
    mtm.write_hf(hf, "llama", fuse(c, w) if VARIANTS[variant][3] else w, tok, False)
    with open(os.path.join(hf, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    gg = None
    if VARIANTS[variant][2]:
        gg = os.path.join(outdir, "model.gguf")
        write_gguf(gg, c, gguf_tensors(c, w), tok)
    return {"hf": hf, "gguf": gg, "config": c, "weights": w}


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in VARIANTS:
        sys.exit("usage: make_moe_model.py OUTDIR VARIANT (one of %s)" % ", ".join(VARIANTS))
    r = make(sys.argv[1], sys.argv[2])
    r.pop("weights")
    print(json.dumps(r, indent=2))
