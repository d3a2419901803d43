#!/usr/bin/env python3
"""Float64 numpy forward of gpt-oss, from an HF directory (dense or OpenAI
MXFP4 experts) or a GGUF written by llama.cpp's convert_hf_to_gguf.py.

Written from transformers 5.24's models/gpt_oss/modeling_gpt_oss.py and
configuration_gpt_oss.py, not from plume's C code:
  * attention: q/k/v/o with biases; rotate-half RoPE (_apply_rotary_emb
    splits each head into halves) with the config's rope (yarn: cos and sin
    times attention_factor, family_oracle.rope_params); softmax scale
    head_dim^-0.5; eager_attention_forward concatenates each head's learned
    sink logit to the scores, softmaxes, and drops the sink's column;
    layer_types alternate sliding_attention (key > query - sliding_window)
    and full_attention;
  * MLP (GptOssMLP): router logits = h W_rᵀ + b_r, top-k, softmax over the
    k values (GptOssTopKRouter); each chosen expert: gate_up = h @
    gate_up_proj[e] + bias, gate = [..., ::2] clamped above at limit, up =
    [..., 1::2] clamped to ±limit, glu = gate * sigmoid(alpha * gate),
    out = ((up + 1) * glu) @ down_proj[e] + bias (GptOssExperts), summed
    weighted by the router's probabilities;
  * RMSNorm before attention and MLP and at the end; untied lm_head.
MXFP4 experts (HF): dequantized as transformers' integrations/mxfp4.py
convert_moe_packed_tensors does (FP4_VALUES[code] * 2^(scale - 127),
element 2k in the low nibble of byte k).  GGUF: every tensor dequantized by
gguf-py (gguf.quants.dequantize, its MXFP4 included) and mapped back to
the HF layout; rope as llama.cpp runs it (yarn with truncated correction
dims: ggml_rope_yarn_corr_dims floors/ceils, whatever the HF config's
truncate said), window pattern llama.cpp's set_swa_pattern(2).

API:  m = load_hf(dir) or load_gguf(path); m.logits(ids) -> [T, n_vocab];
      Model(cfg, w, sinks=False) and cfg["swiglu_limit"] = inf switch a
      feature off (to show that the tests exercise it).
"""

import json
import os

import numpy as np

import family_oracle

FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def openai_mxfp4(blocks, scales):
    """[X, out, in/32, 16] U8 blocks + [X, out, in/32] scales -> [X, in, out]
    float64 (convert_moe_packed_tensors, which transposes to x @ W form)."""
    lo, hi = FP4_VALUES[blocks & 0x0F], FP4_VALUES[blocks >> 4]
    vals = np.stack([lo, hi], axis=-1).reshape(*blocks.shape[:-1], 32)
    vals = np.ldexp(vals, scales.astype(np.int32)[..., None] - 127)
    X, R = blocks.shape[:2]
    return np.swapaxes(vals.reshape(X, R, -1), 1, 2)


class Model:
    def __init__(self, cfg, w, sinks=True):
        self.cfg = c = cfg
        self.w = w
        self.sinks = sinks
        self.E, self.H = c["hidden_size"], c["num_attention_heads"]
        self.Hkv, self.D = c["num_key_value_heads"], c["head_dim"]
        self.eps = c.get("rms_norm_eps", 1e-5)
        self.X, self.k = c["num_local_experts"], c["num_experts_per_tok"]
        self.alpha, self.limit = c.get("swiglu_alpha", 1.702), c.get("swiglu_limit", 7.0)
        rp = dict(c["rope_parameters"])
        rp.setdefault("rope_theta", 150000.0)
        self.inv, self.af = family_oracle.rope_params(c, rp)
        n = c["num_hidden_layers"]
        self.types = c.get("layer_types") or [
            "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        ang = np.outer(pos, self.inv)
        cos, sin = (np.cos(ang) * self.af)[:, None, :], (np.sin(ang) * self.af)[:, None, :]
        a, b = x[..., :self.D // 2], x[..., self.D // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def mlp(self, h, p):
        w = self.w
        logits = h @ w[p + "router.weight"].T + w[p + "router.bias"]
        top = np.argsort(-logits, axis=-1, kind="stable")[:, :self.k]
        tv = np.take_along_axis(logits, top, axis=-1)
        pr = np.exp(tv - tv.max(axis=-1, keepdims=True))
        pr /= pr.sum(axis=-1, keepdims=True)
        gu, gub = w[p + "experts.gate_up_proj"], w[p + "experts.gate_up_proj_bias"]
        dn, dnb = w[p + "experts.down_proj"], w[p + "experts.down_proj_bias"]
        out = np.zeros_like(h)
        for e in range(self.X):
            rows, slot = np.nonzero(top == e)
            if len(rows) == 0:
                continue
            z = h[rows] @ gu[e] + gub[e]
            gate = np.minimum(z[:, ::2], self.limit)
            up = np.clip(z[:, 1::2], -self.limit, self.limit)
            glu = gate / (1 + np.exp(-gate * self.alpha))
            y = ((up + 1) * glu) @ dn[e] + dnb[e]
            np.add.at(out, rows, y * pr[rows, slot][:, None])
        return out

    def logits(self, ids):
        c, w, T = self.cfg, self.w, len(ids)
        x = w["model.embed_tokens.weight"][ids]
        pos = np.arange(T, dtype=np.float64)
        qi, ki = np.arange(T)[:, None], np.arange(T)[None, :]
        for l in range(c["num_hidden_layers"]):
            p = "model.layers.%d." % l
            mask = ki <= qi
            if self.types[l] == "sliding_attention":
                mask = mask & (ki > qi - c["sliding_window"])
            h = self.norm(x, w[p + "input_layernorm.weight"])

            def proj(n, heads):
                y = h @ w[p + "self_attn.%s_proj.weight" % n].T + w[p + "self_attn.%s_proj.bias" % n]
                return y.reshape(T, heads, self.D)
            q, k, v = proj("q", self.H), proj("k", self.Hkv), proj("v", self.Hkv)
            q, k = self.rope(q, pos), self.rope(k, pos)
            g = self.H // self.Hkv
            out = np.empty((T, self.H, self.D))
            for hh in range(self.H):
                s = (q[:, hh] @ k[:, hh // g].T) * self.D ** -0.5
                s = np.where(mask, s, -np.inf)
                sink = w[p + "self_attn.sinks"][hh] if self.sinks else -np.inf
                m = np.maximum(s.max(axis=-1, keepdims=True), sink)
                e = np.exp(s - m)
                out[:, hh] = (e @ v[:, hh // g]) / (e.sum(axis=-1, keepdims=True) + np.exp(sink - m))
            x = x + out.reshape(T, -1) @ w[p + "self_attn.o_proj.weight"].T + \
                w[p + "self_attn.o_proj.bias"]
            x = x + self.mlp(self.norm(x, w[p + "post_attention_layernorm.weight"]), p + "mlp.")
        x = self.norm(x, w["model.norm.weight"])
        return x @ w["lm_head.weight"].T


def load_hf(d, **kw):
    from safetensors.numpy import load_file
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    raw = load_file(os.path.join(d, "model.safetensors"))
    w = {}
    for k, v in raw.items():
        if k.endswith("_blocks"):
            base = k[:-len("_blocks")]
            w[base] = openai_mxfp4(v, raw[base + "_scales"])
        elif not k.endswith("_scales"):
            w[k] = v.astype(np.float64)
    return Model(cfg, w, **kw)


# llama.cpp's per-layer names -> transformers' (openai-moe.cpp, conversion/gpt_oss.py)
_GGUF_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "attn_sinks.weight": "self_attn.sinks",
    "ffn_gate_inp.weight": "mlp.router.weight", "ffn_gate_inp.bias": "mlp.router.bias",
    "ffn_down_exps.bias": "mlp.experts.down_proj_bias",
}
for _n in ("q", "k", "v"):
    _GGUF_NAMES["attn_%s.weight" % _n] = "self_attn.%s_proj.weight" % _n
    _GGUF_NAMES["attn_%s.bias" % _n] = "self_attn.%s_proj.bias" % _n
_GGUF_NAMES["attn_output.weight"] = "self_attn.o_proj.weight"
_GGUF_NAMES["attn_output.bias"] = "self_attn.o_proj.bias"


def load_gguf(path, **kw):
    """A gpt-oss GGUF as the HF model llama.cpp computes: gguf-py's
    dequantization, gate/up experts re-interleaved into gate_up_proj, config
    from the gpt-oss.* keys (yarn truncated as ggml's rope)."""
    import gguf
    r = gguf.GGUFReader(path)
    kv = family_oracle.gguf_kv(r)
    if kv("general.architecture") != "gpt-oss":
        raise ValueError("%s: not a gpt-oss GGUF" % path)
    a = "gpt-oss."
    n = int(kv(a + "block_count"))
    cfg = {
        "hidden_size": int(kv(a + "embedding_length")), "num_hidden_layers": n,
        "num_attention_heads": int(kv(a + "attention.head_count")),
        "num_key_value_heads": int(kv(a + "attention.head_count_kv")),
        "head_dim": int(kv(a + "attention.key_length")),
        "num_local_experts": int(kv(a + "expert_count")),
        "num_experts_per_tok": int(kv(a + "expert_used_count")),
        "rms_norm_eps": float(kv(a + "attention.layer_norm_rms_epsilon")),
        "sliding_window": int(kv(a + "attention.sliding_window")),
        "max_position_embeddings": int(kv(a + "context_length")),
        "layer_types": ["sliding_attention" if i % 2 < 1 else "full_attention" for i in range(n)],
        "rope_parameters": {"rope_theta": float(kv(a + "rope.freq_base"))},
    }
    if kv(a + "rope.scaling.type") == "yarn":
        factor = float(kv(a + "rope.scaling.factor"))
        cfg["rope_parameters"].update(
            rope_type="yarn", factor=factor, truncate=True,
            original_max_position_embeddings=int(kv(a + "rope.scaling.original_context_length")),
            beta_fast=float(kv(a + "rope.scaling.yarn_beta_fast", 32.0)),
            beta_slow=float(kv(a + "rope.scaling.yarn_beta_slow", 1.0)),
            # llama.cpp: attn_factor (default 1) x (1 + 0.1 ln factor)
            attention_factor=float(kv(a + "rope.scaling.attn_factor", 1.0)) *
            (1.0 + 0.1 * np.log(factor)))
    w, exps = {}, {}
    for name, x in family_oracle.gguf_tensors(r):
        if name in family_oracle.GGUF_TOP_NAMES:
            w[family_oracle.GGUF_TOP_NAMES[name]] = x
        else:
            _, l, rest = name.split(".", 2)
            p = "model.layers.%s." % l
            if rest in _GGUF_NAMES:
                w[p + _GGUF_NAMES[rest]] = x
            elif rest in ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
                          "ffn_gate_exps.bias", "ffn_up_exps.bias"):
                exps[(l, rest)] = x
            else:
                raise ValueError("%s: tensor %s is not in the gpt-oss oracle" % (path, name))
    for l in range(n):
        p, L = "model.layers.%d.mlp.experts." % l, str(l)
        g, u = exps[(L, "ffn_gate_exps.weight")], exps[(L, "ffn_up_exps.weight")]  # [X, F, E]
        X, F, E = g.shape
        gu = np.empty((X, E, 2 * F))
        gu[..., ::2], gu[..., 1::2] = np.swapaxes(g, 1, 2), np.swapaxes(u, 1, 2)
        gb = np.empty((X, 2 * F))
        gb[:, ::2], gb[:, 1::2] = exps[(L, "ffn_gate_exps.bias")], exps[(L, "ffn_up_exps.bias")]
        w[p + "gate_up_proj"], w[p + "gate_up_proj_bias"] = gu, gb
        w[p + "down_proj"] = np.swapaxes(exps[(L, "ffn_down_exps.weight")], 1, 2)
    return Model(cfg, w, **kw)
