#!/usr/bin/env python3
"""Float64 numpy forward of an HF model directory for the model families
plume runs beyond the Llama baseline: Llama 3.x (RoPE scaling), Mistral
(sliding window), Qwen2/Qwen3 (q/k norms) and Gemma 3 text.

Written from transformers' modeling files (models/{llama,mistral,qwen2,
qwen3,gemma3}/modeling_*.py, modeling_rope_utils.py, masking_utils.py) and
their configuration classes, not from plume's C code.  The whole sequence
runs at once with the causal (and sliding-window) mask, as transformers'
eager attention does without a cache.

One documented divergence from transformers: for rope_type "dynamic",
transformers recomputes the base for seq_len = max(position_ids)+1 on
every forward; this oracle (like plume, and like vLLM) fixes
seq_len = factor * max_position_embeddings, so that a position's rotation
does not depend on how the sequence was batched or cached.

API:  m = load_hf(dir) or load_gemma3_gguf(path);
      m.logits(ids) -> [len(ids), n_vocab] (float64).
"""

import json
import math
import os

import numpy as np


def _read_safetensors(d):
    from safetensors.numpy import load_file
    p = os.path.join(d, "model.safetensors")
    w = load_file(p)
    return {k: v.astype(np.float64) for k, v in w.items()}


# ---- RoPE: modeling_rope_utils.py's _compute_*_parameters --------------------

def rope_params(cfg, rp):
    """(inv_freq [d/2], attention_factor) for one standardized rope-parameter
    dict rp (rope_type, rope_theta, factor, ...)."""
    base = float(rp["rope_theta"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    dim = head_dim
    t = rp.get("rope_type", rp.get("type", "default"))
    ar = np.arange(0, dim, 2, dtype=np.float64)
    if t == "default":
        return 1.0 / base ** (ar / dim), 1.0
    if t == "linear":
        return 1.0 / base ** (ar / dim) / rp["factor"], 1.0
    if t == "dynamic":
        factor = rp["factor"]
        mpe = cfg["max_position_embeddings"]
        seq_len = factor * mpe  # the fixed choice described above
        base = base * ((factor * seq_len / mpe) - (factor - 1)) ** (dim / (dim - 2))
        return 1.0 / base ** (ar / dim), 1.0
    if t == "yarn":
        orig = rp.get("original_max_position_embeddings", cfg["max_position_embeddings"])
        factor = rp.get("factor") or cfg["max_position_embeddings"] / orig
        af = rp.get("attention_factor")

        def get_mscale(scale, m=1):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        if af is None:
            ms, msa = rp.get("mscale"), rp.get("mscale_all_dim")
            af = get_mscale(factor, ms) / get_mscale(factor, msa) if ms and msa else get_mscale(factor)
        beta_fast = rp.get("beta_fast") or 32
        beta_slow = rp.get("beta_slow") or 1

        def corr_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))
        low, high = corr_dim(beta_fast), corr_dim(beta_slow)
        if rp.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        pos_freqs = base ** (ar / dim)
        extra = 1 - ramp
        inv = (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra
        return inv, af
    if t == "llama3":
        inv = 1.0 / base ** (ar / dim)
        factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
        old = rp.get("original_max_position_embeddings", cfg["max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        inv_l = np.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        return np.where(medium, smoothed, inv_l), 1.0
    raise ValueError("rope_type %s not in the oracle" % t)


def _standard_rope(cfg):
    """{layer_type: rope dict} as the config classes standardize it."""
    theta_default = 1e6 if cfg["model_type"] == "gemma3_text" else 10000.0
    rp = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    rp = dict(rp)
    if cfg["model_type"] == "gemma3_text":
        if "full_attention" in rp or "sliding_attention" in rp:
            full = dict(rp.get("full_attention") or {"rope_type": "default"})
            slid = dict(rp.get("sliding_attention") or {"rope_type": "default"})
        else:
            full, slid = rp or {"rope_type": "default"}, {"rope_type": "default"}
        full.setdefault("rope_theta", cfg.get("rope_theta", theta_default))
        slid.setdefault("rope_theta", cfg.get("rope_local_base_freq", 10000.0))
        return {"full_attention": full, "sliding_attention": slid}
    rp.setdefault("rope_type", rp.get("type", "default"))
    rp.setdefault("rope_theta", cfg.get("rope_theta", theta_default))
    if rp["rope_type"] in ("llama3", "yarn"):
        rp.setdefault("original_max_position_embeddings",
                      cfg.get("original_max_position_embeddings", cfg["max_position_embeddings"]))
    return {"full_attention": rp, "sliding_attention": rp}


def _layer_types(cfg):
    """Per layer 'full_attention' / 'sliding_attention' and the window."""
    n = cfg["num_hidden_layers"]
    mt = cfg["model_type"]
    window = None
    if mt == "mistral":
        window = cfg.get("sliding_window")
    elif mt in ("qwen2", "qwen3"):
        window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
    elif mt == "gemma3_text":
        window = cfg.get("sliding_window", 4096)
    if cfg.get("layer_types") and window:
        return list(cfg["layer_types"]), window
    if not window:
        return ["full_attention"] * n, None
    if mt == "mistral":
        return ["sliding_attention"] * n, window
    if mt in ("qwen2", "qwen3"):
        mwl = cfg.get("max_window_layers", 28)
        return ["sliding_attention" if i >= mwl else "full_attention" for i in range(n)], window
    pat = cfg.get("sliding_window_pattern", 6)
    return ["sliding_attention" if (i + 1) % pat else "full_attention" for i in range(n)], window


class Model:
    def __init__(self, cfg, w):
        """cfg: an HF config.json dict; w: HF tensor names -> float64 arrays."""
        self.cfg = c = cfg
        self.w = w
        self.mt = c["model_type"]
        self.gemma = self.mt == "gemma3_text"
        self.E = c["hidden_size"]
        self.H = c["num_attention_heads"]
        self.Hkv = c.get("num_key_value_heads", self.H)
        self.D = c.get("head_dim") or self.E // self.H
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.layer_types, self.window = _layer_types(c)
        # SmolLM3Attention.use_rope = config.no_rope_layers[layer_idx], whose
        # default is 1 except every no_rope_layer_interval-th layer
        every = c.get("no_rope_layer_interval", 4)
        self.use_rope = (c.get("no_rope_layers") or
                         [int((i + 1) % every != 0) for i in range(c["num_hidden_layers"])]
                         if self.mt == "smollm3" else [1] * c["num_hidden_layers"])
        self.ropes = {k: rope_params(c, v) for k, v in _standard_rope(c).items()}
        if self.gemma:
            self.scaling = c.get("query_pre_attn_scalar", 256) ** -0.5
        else:
            self.scaling = self.D ** -0.5
        tied = c.get("tie_word_embeddings", self.gemma or self.mt == "smollm3")
        self.head = self.w["model.embed_tokens.weight"] if tied else self.w["lm_head.weight"]

    def norm(self, x, w):
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return y * (1.0 + w) if self.gemma else y * w  # Gemma3RMSNorm: (1 + weight)

    def rope(self, x, pos, inv, af):
        """apply_rotary_pos_emb: x [T, h, D], rotate_half convention; cos and
        sin carry the attention factor (yarn)."""
        ang = np.outer(pos, inv)
        emb = np.concatenate([ang, ang], axis=-1)
        cos, sin = (np.cos(emb) * af)[:, None, :], (np.sin(emb) * af)[:, None, :]
        half = x.shape[-1] // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rot * sin

    def logits(self, ids, last=False):
        """[len(ids), n_vocab] logits, or [1, n_vocab] of the last position
        only with last (the output head is most of the work at 262k rows)."""
        c, w, T = self.cfg, self.w, len(ids)
        x = w["model.embed_tokens.weight"][ids]
        if self.gemma:  # Gemma3TextScaledWordEmbedding (f32 weights: no rounding)
            x = x * np.float64(np.float32(self.E ** 0.5))
        pos = np.arange(T, dtype=np.float64)
        qi, ki = np.arange(T)[:, None], np.arange(T)[None, :]
        for l in range(c["num_hidden_layers"]):
            p = "model.layers.%d." % l
            lt = self.layer_types[l]
            mask = ki <= qi
            if lt == "sliding_attention":
                mask = mask & (ki > qi - self.window)
            inv, af = self.ropes[lt]
            h = self.norm(x, w[p + "input_layernorm.weight"])

            def proj(name, n_out):
                y = h @ w[p + "self_attn.%s.weight" % name].T
                b = w.get(p + "self_attn.%s.bias" % name)
                return (y + b if b is not None else y).reshape(T, n_out, self.D)
            q, k, v = proj("q_proj", self.H), proj("k_proj", self.Hkv), proj("v_proj", self.Hkv)
            if p + "self_attn.q_norm.weight" in w:  # Qwen3 / Gemma 3: before RoPE
                q = self.norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.norm(k, w[p + "self_attn.k_norm.weight"])
            if self.use_rope[l]:
                q, k = self.rope(q, pos, inv, af), self.rope(k, pos, inv, af)
            g = self.H // self.Hkv
            out = np.empty((T, self.H, self.D))
            for hh in range(self.H):
                s = (q[:, hh, :] @ k[:, hh // g, :].T) * self.scaling
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                out[:, hh, :] = s @ v[:, hh // g, :]
            a = out.reshape(T, -1) @ w[p + "self_attn.o_proj.weight"].T
            if self.gemma:
                a = self.norm(a, w[p + "post_attention_layernorm.weight"])
                x = x + a
                h = self.norm(x, w[p + "pre_feedforward_layernorm.weight"])
            else:
                x = x + a
                h = self.norm(x, w[p + "post_attention_layernorm.weight"])
            gt = h @ w[p + "mlp.gate_proj.weight"].T
            up = h @ w[p + "mlp.up_proj.weight"].T
            if self.gemma:  # gelu_pytorch_tanh
                act = 0.5 * gt * (1 + np.tanh(math.sqrt(2 / math.pi) * (gt + 0.044715 * gt ** 3)))
            else:
                act = gt / (1 + np.exp(-gt))
            m = (act * up) @ w[p + "mlp.down_proj.weight"].T
            if self.gemma:
                m = self.norm(m, w[p + "post_feedforward_layernorm.weight"])
            x = x + m
        x = self.norm(x[-1:] if last else x, w["model.norm.weight"])
        lg = x @ self.head.T
        cap = c.get("final_logit_softcapping")
        if cap:
            lg = np.tanh(lg / cap) * cap
        return lg


def load_hf(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    return Model(cfg, _read_safetensors(d))


# ---- GGUF (llama.cpp's converter undone) ------------------------------------

def gguf_kv(r):
    """kv(key, default=None): the scalar or string metadata value of the
    GGUFReader r at key, or default when it is absent."""
    import gguf

    def kv(key, default=None):
        f = r.fields.get(key)
        if f is None:
            return default
        v = f.parts[f.data[0]]
        return v.tobytes().decode() if f.types[0] == gguf.GGUFValueType.STRING else v.item()
    return kv


# llama.cpp's per-layer tensor names (after blk.N.) -> transformers' (after
# model.layers.N.): attention and a dense MLP, as every family here has them
# (moe_oracle.py adds its own).
GGUF_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
# Gemma 3's four norms per layer
_GEMMA3_GGUF_NAMES = dict(GGUF_LAYER_NAMES, **{
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
})


# The HF names of the GGUF tensors outside the blocks (llama.cpp's
# convert_hf_to_gguf.py names them the same for every family).
GGUF_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def gguf_tensors(r):
    """(name, array) for every tensor of the gguf.GGUFReader r, dequantized
    by gguf-py (gguf.quants.dequantize) to float64 in HF's shape (GGUF lists
    the dimensions fastest first)."""
    import gguf
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        yield t.name, a.reshape(tuple(int(x) for x in reversed(t.shape)))


def load_gemma3_gguf(path):
    """A Gemma 3 text GGUF written by llama.cpp's convert_hf_to_gguf.py, as
    the HF model it came from: every tensor dequantized by gguf-py
    (gguf.quants.dequantize), the converter's "+1" on norm weights taken back
    (Gemma3Model.modify_tensors), names mapped back, and config.json rebuilt
    from the gemma3.* keys.  Gemma's q/k rows are not permuted by the
    converter (NEOX rope), and llama.cpp fixes the sliding-window pattern at
    every 6th layer full (LLM_ARCH_GEMMA3)."""
    import gguf
    r = gguf.GGUFReader(path)
    kv = gguf_kv(r)
    arch = kv("general.architecture")
    if arch != "gemma3":
        raise ValueError("%s: architecture %s, expected gemma3" % (path, arch))
    E = int(kv("gemma3.embedding_length"))
    H = int(kv("gemma3.attention.head_count"))
    D = int(kv("gemma3.attention.key_length", E // H))
    cfg = {
        "model_type": "gemma3_text",
        "hidden_size": E,
        "num_hidden_layers": int(kv("gemma3.block_count")),
        "num_attention_heads": H,
        "num_key_value_heads": int(kv("gemma3.attention.head_count_kv", H)),
        "head_dim": D,
        "intermediate_size": int(kv("gemma3.feed_forward_length")),
        "rms_norm_eps": float(kv("gemma3.attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(kv("gemma3.rope.freq_base", 1e6)),
        "rope_local_base_freq": 10000.0,
        "sliding_window": int(kv("gemma3.attention.sliding_window", 4096)),
        "sliding_window_pattern": 6,
        "query_pre_attn_scalar": D,
        "max_position_embeddings": int(kv("gemma3.context_length", 32768)),
        "tie_word_embeddings": True,
    }
    cap = kv("gemma3.final_logit_softcapping")
    if cap:
        cfg["final_logit_softcapping"] = float(cap)
    w = {}
    for name, a in gguf_tensors(r):
        if name.endswith("norm.weight"):
            a = a - 1.0
        if name in GGUF_TOP_NAMES:
            w[GGUF_TOP_NAMES[name]] = a
        elif name.startswith("blk."):
            _, l, rest = name.split(".", 2)
            if rest not in _GEMMA3_GGUF_NAMES:
                raise ValueError("%s: tensor %s is not in the Gemma 3 oracle" % (path, name))
            w["model.layers.%s.%s" % (l, _GEMMA3_GGUF_NAMES[rest])] = a
        else:
            raise ValueError("%s: tensor %s is not in the Gemma 3 oracle" % (path, name))
    if "lm_head.weight" in w:
        cfg["tie_word_embeddings"] = False
    return Model(cfg, w)
