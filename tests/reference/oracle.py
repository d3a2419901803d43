#!/usr/bin/env python3
"""Independent numpy reference ("oracle") for the Llama-family forward pass.

Deliberately small and readable: it shares no code with plume's C engine and
is what the model tests compare plume against.  Supported inputs:

  * a GGUF file (arch "llama" or "qwen2"), read with gguf-py's GGUFReader and
    dequantized tensor by tensor with gguf.quants.dequantize;
  * a Hugging Face directory (config.json + model.safetensors, or sharded
    model-0000N-of-0000M.safetensors + model.safetensors.index.json).

Conventions (see /work/shared/reference/formats.md §3.4, §3.5):
  * GGUF stores shapes in ggml order (ne[0] innermost); GGUFReader's
    tensor.shape is that order, so the numpy shape is reversed(tensor.shape),
    e.g. token_embd.weight -> [n_vocab, n_embd], attn_q.weight -> [n_head*hd, n_embd].
  * convert_hf_to_gguf.py permutes the q/k rows of *llama* so that the HF
    rotate-half pairs (i, i+d/2) become adjacent rows (2i, 2i+1); llama.cpp
    then rotates adjacent pairs (ROPE_TYPE_NORM).  qwen2 GGUFs are not
    permuted and llama.cpp uses NEOX (rotate-half) rope for them.  HF
    checkpoints are never permuted: rotate-half.
  * GQA: query head h uses kv head h // (n_head // n_head_kv) (HF repeat_kv).

API:  m = load(path);  m.logits(ids) -> [len(ids), n_vocab];
      m.greedy(ids, n) -> n generated ids;  s = m.session(); s.feed(ids).
CLI:  python oracle.py MODEL --ids 1,2,3 [--greedy N] [--top K] [--dtype f32]
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

ROPE_ADJACENT = "adjacent"  # rotate (x[2i], x[2i+1])          (llama GGUF)
ROPE_HALF = "half"          # rotate (x[i], x[i + head_dim/2])   (HF, qwen2 GGUF)

# Dequantized weights are cached per process, keyed by (path, dtype).
_CACHE = {}


def require(cond, what):
    """Raises ValueError with what when cond is false (an assert would vanish
    under python -O)."""
    if not cond:
        raise ValueError(what)


class Config:
    def __init__(self, **kw):
        self.arch = kw["arch"]
        self.n_vocab = int(kw["n_vocab"])
        self.n_embd = int(kw["n_embd"])
        self.n_layer = int(kw["n_layer"])
        self.n_head = int(kw["n_head"])
        self.n_head_kv = int(kw["n_head_kv"])
        self.head_dim = int(kw["head_dim"])
        self.n_ff = int(kw["n_ff"])
        self.eps = float(kw["eps"])
        self.theta = float(kw["theta"])
        self.rope = kw["rope"]
        require(self.n_head % self.n_head_kv == 0, "n_head must be a multiple of n_head_kv")
        require(self.head_dim % 2 == 0, 'self.head_dim % 2 == 0')

    def as_dict(self):
        return dict(self.__dict__)


class Layer:
    __slots__ = ("attn_norm", "wq", "wk", "wv", "wo", "bq", "bk", "bv",
                 "ffn_norm", "w_gate", "w_up", "w_down")


# Each Layer field with its tensor's name in a GGUF (after "blk.N.") and in
# an HF checkpoint (after "model.layers.N."); the weights must be there,
# the biases may be absent (None).
LAYER_WEIGHTS = [
    ("attn_norm", "attn_norm", "input_layernorm"),
    ("wq", "attn_q", "self_attn.q_proj"),
    ("wk", "attn_k", "self_attn.k_proj"),
    ("wv", "attn_v", "self_attn.v_proj"),
    ("wo", "attn_output", "self_attn.o_proj"),
    ("ffn_norm", "ffn_norm", "post_attention_layernorm"),
    ("w_gate", "ffn_gate", "mlp.gate_proj"),
    ("w_up", "ffn_up", "mlp.up_proj"),
    ("w_down", "ffn_down", "mlp.down_proj"),
]
LAYER_BIASES = [
    ("bq", "attn_q", "self_attn.q_proj"),
    ("bk", "attn_k", "self_attn.k_proj"),
    ("bv", "attn_v", "self_attn.v_proj"),
]


def _layer(tensors, prefix, hf):
    """The Layer whose tensors are named prefix + the GGUF name (or, with
    hf, the HF name) in tensors."""
    L = Layer()
    for field, gguf_name, hf_name in LAYER_WEIGHTS:
        setattr(L, field, tensors[prefix + (hf_name if hf else gguf_name) + ".weight"])
    for field, gguf_name, hf_name in LAYER_BIASES:
        setattr(L, field, tensors.get(prefix + (hf_name if hf else gguf_name) + ".bias"))
    return L


class Model:
    """Weights in numpy order: linear weights are [out_features, in_features]."""

    def __init__(self, cfg, tok_embd, layers, out_norm, output, tied):
        self.cfg = cfg
        self.tok_embd = tok_embd   # [n_vocab, n_embd]
        self.layers = layers
        self.out_norm = out_norm   # [n_embd]
        self.output = output       # [n_vocab, n_embd] (tok_embd when tied)
        self.tied = tied
        self.dtype = tok_embd.dtype
        # True: every linear layer's input is rounded as plume's CPU int8
        # activation path rounds it (quantize_q8); see q8_activations.  plume
        # does that only for block-quantized weights, so set it only for a
        # model whose linear weights all are (SmolLM2 Q4_1, tiny Q8_0)
        self.act_q8 = False
        d = cfg.head_dim
        # inv_freq[i] = theta^(-2i/d), i = 0 .. d/2-1 (same for both pairings)
        self.inv_freq = cfg.theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)

    # -- public API ---------------------------------------------------------
    def session(self, max_len=4096):
        return Session(self, max_len)

    def logits(self, ids):
        """Logits [len(ids), n_vocab] of a fresh sequence."""
        return self.session(len(ids)).feed(ids)

    def greedy(self, ids, n):
        """Greedy (argmax) continuation of n tokens; prefill then KV-cached decode."""
        s = self.session(len(ids) + n)
        last = s.feed(ids)[-1]
        out = []
        for i in range(n):
            t = int(np.argmax(last))
            out.append(t)
            if i + 1 < n:
                last = s.feed([t])[-1]
        return out

    # -- building blocks ----------------------------------------------------
    def lin(self, x, w):
        """x @ w.T, with x first rounded to int8 blocks when act_q8 is set."""
        return (q8_activations(x) if self.act_q8 else x) @ w.T

    def rms_norm(self, x, w):
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(ms + self.cfg.eps) * w

    def rope(self, x, positions):
        """x: [T, n_heads, head_dim]; positions: [T]."""
        ang = np.outer(positions.astype(np.float64), self.inv_freq)  # [T, d/2]
        cos = np.cos(ang).astype(x.dtype)[:, None, :]
        sin = np.sin(ang).astype(x.dtype)[:, None, :]
        d = x.shape[-1]
        if self.cfg.rope == ROPE_ADJACENT:
            a, b = x[..., 0::2], x[..., 1::2]
        else:
            a, b = x[..., : d // 2], x[..., d // 2:]
        ra = a * cos - b * sin
        rb = a * sin + b * cos
        out = np.empty_like(x)
        if self.cfg.rope == ROPE_ADJACENT:
            out[..., 0::2], out[..., 1::2] = ra, rb
        else:
            out[..., : d // 2], out[..., d // 2:] = ra, rb
        return out


def q8_activations(x):
    """x as plume's CPU backend feeds it to a quantized matmul by default
    (PLUME_CPU_ACTIVATIONS=int8, kernels_scalar.c quantize_q8, llama.cpp's
    Q8_0 activations): in float32, each block of 32 consecutive values along
    the last axis gets d = amax / 127 and is rounded to q = rint(x * (1/d))
    (half to even, as nearbyintf and cvtps_epi32); returns q * d in x's
    dtype.  Each element moves by at most d/2 (d = its block's scale)."""
    shape = x.shape
    xb = np.asarray(x, dtype=np.float32).reshape(shape[:-1] + (shape[-1] // 32, 32))
    d = (np.abs(xb).max(axis=-1, keepdims=True) / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    q = np.rint((xb * inv).astype(np.float32))
    return (q.astype(x.dtype) * d.astype(x.dtype)).reshape(shape)


class Session:
    """One sequence with its KV cache."""

    def __init__(self, model, max_len):
        c = model.cfg
        self.m = model
        self.n = 0
        self.k = [np.zeros((max_len, c.n_head_kv, c.head_dim), model.dtype) for _ in range(c.n_layer)]
        self.v = [np.zeros((max_len, c.n_head_kv, c.head_dim), model.dtype) for _ in range(c.n_layer)]

    def _grow(self, need):
        cap = self.k[0].shape[0]
        if need <= cap:
            return
        cap = max(need, 2 * cap)
        for lst in (self.k, self.v):
            for i, a in enumerate(lst):
                b = np.zeros((cap,) + a.shape[1:], a.dtype)
                b[: self.n] = a[: self.n]
                lst[i] = b

    def feed(self, ids):
        """Appends ids to the sequence; returns their logits [len(ids), n_vocab]."""
        m, c = self.m, self.m.cfg
        ids = np.asarray(ids, dtype=np.int64)
        T = len(ids)
        if T == 0:
            return np.zeros((0, c.n_vocab), m.dtype)
        if ids.min() < 0 or ids.max() >= c.n_vocab:
            raise ValueError("token id out of range [0, %d)" % c.n_vocab)
        start = self.n
        self._grow(start + T)
        pos = np.arange(start, start + T)
        H, Hkv, D = c.n_head, c.n_head_kv, c.head_dim
        g = H // Hkv
        scale = 1.0 / math.sqrt(D)
        S = start + T
        # causal mask: query at absolute position p sees keys 0..p
        mask = np.arange(S)[None, :] > pos[:, None]  # [T, S]

        x = m.tok_embd[ids]  # [T, E]
        for li, L in enumerate(m.layers):
            h = m.rms_norm(x, L.attn_norm)
            q = m.lin(h, L.wq)
            k = m.lin(h, L.wk)
            v = m.lin(h, L.wv)
            if L.bq is not None:
                q = q + L.bq
            if L.bk is not None:
                k = k + L.bk
            if L.bv is not None:
                v = v + L.bv
            q = m.rope(q.reshape(T, H, D), pos)
            k = m.rope(k.reshape(T, Hkv, D), pos)
            self.k[li][start:S] = k
            self.v[li][start:S] = v.reshape(T, Hkv, D)
            K = self.k[li][:S]  # [S, Hkv, D]
            V = self.v[li][:S]
            # group query heads by their kv head: [Hkv, g, T, D]
            qg = q.reshape(T, Hkv, g, D).transpose(1, 2, 0, 3)
            Kt = K.transpose(1, 2, 0)  # [Hkv, D, S]
            sc = (qg @ Kt[:, None]) * scale  # [Hkv, g, T, S]
            sc = np.where(mask, -np.inf, sc)
            sc = sc - sc.max(axis=-1, keepdims=True)
            p = np.exp(sc)
            p /= p.sum(axis=-1, keepdims=True)
            o = p @ V.transpose(1, 0, 2)[:, None]  # [Hkv, g, T, D]
            o = o.transpose(2, 0, 1, 3).reshape(T, H * D)
            x = x + m.lin(o, L.wo)

            h = m.rms_norm(x, L.ffn_norm)
            gate = m.lin(h, L.w_gate)
            up = m.lin(h, L.w_up)
            act = gate / (1.0 + np.exp(-gate)) * up  # silu(gate) * up
            x = x + m.lin(act, L.w_down)

        x = m.rms_norm(x, m.out_norm)
        self.hidden = x  # the lm_head's input, [T, n_embd]
        self.n = S
        return m.lin(x, m.output)


# --------------------------------------------------------------------------
# GGUF
# --------------------------------------------------------------------------

def _gguf_field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def load_gguf(path, dtype=np.float64):
    from gguf import GGUFReader
    from gguf.quants import dequantize

    r = GGUFReader(path)
    arch = _gguf_field(r, "general.architecture")
    if arch not in ("llama", "qwen2"):
        raise ValueError("unsupported GGUF architecture %r" % arch)

    def key(name, default=None):
        v = _gguf_field(r, "%s.%s" % (arch, name), default)
        if v is None:
            raise KeyError("missing GGUF key %s.%s" % (arch, name))
        return v

    tensors = {}
    for t in r.tensors:
        shape = tuple(int(s) for s in reversed(list(t.shape)))  # ggml ne order -> numpy order
        a = dequantize(t.data, t.tensor_type)
        tensors[t.name] = np.ascontiguousarray(np.asarray(a, dtype=dtype).reshape(shape))

    n_embd = int(key("embedding_length"))
    n_head = int(key("attention.head_count"))
    n_head_kv = int(key("attention.head_count_kv", n_head))
    head_dim = int(key("attention.key_length", n_embd // n_head))
    rope_dim = int(key("rope.dimension_count", head_dim))
    if rope_dim != head_dim:
        raise ValueError("partial rotary (rope dim %d != head dim %d) not supported" % (rope_dim, head_dim))
    if _gguf_field(r, "%s.rope.scaling.type" % arch) not in (None, "none"):
        raise ValueError("rope scaling not supported by the oracle")
    tok = tensors["token_embd.weight"]
    n_vocab = int(_gguf_field(r, "%s.vocab_size" % arch, tok.shape[0]))
    n_layer = int(key("block_count"))
    cfg = Config(
        arch=arch, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer,
        n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim,
        n_ff=int(key("feed_forward_length")),
        eps=float(key("attention.layer_norm_rms_epsilon")),
        theta=float(key("rope.freq_base", 10000.0)),
        rope=ROPE_ADJACENT if arch == "llama" else ROPE_HALF,
    )
    layers = [_layer(tensors, "blk.%d." % i, hf=False) for i in range(n_layer)]
    tied = "output.weight" not in tensors
    output = tok if tied else tensors["output.weight"]
    _check_shapes(cfg, tok, layers, output)
    return Model(cfg, tok, layers, tensors["output_norm.weight"], output, tied)


# --------------------------------------------------------------------------
# Hugging Face directory
# --------------------------------------------------------------------------

def _read_safetensors(path, dtype):
    """Minimal safetensors reader (formats.md §4); handles BF16, which numpy lacks."""
    np_types = {"F64": np.float64, "F32": np.float32, "F16": np.float16,
                "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
                "U8": np.uint8, "BF16": np.uint16}
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        buf = f.read()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        dt = np.dtype(np_types[info["dtype"]]).newbyteorder("<")
        a = np.frombuffer(buf, dtype=dt, count=(e - b) // dt.itemsize, offset=b)
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = np.ascontiguousarray(a.reshape(info["shape"]).astype(dtype))
    return out


def load_hf(path, dtype=np.float64):
    with open(os.path.join(path, "config.json")) as f:
        hc = json.load(f)
    mt = hc.get("model_type")
    archs = hc.get("architectures") or []
    if mt in ("llama", "mistral") or any(a in ("LlamaForCausalLM", "MistralForCausalLM") for a in archs):
        arch = "llama"
    elif mt == "qwen2" or "Qwen2ForCausalLM" in archs:
        arch = "qwen2"
    else:
        raise ValueError("unsupported HF architecture %r / %r" % (mt, archs))
    if hc.get("rope_scaling"):
        raise ValueError("rope scaling not supported by the oracle")

    idx = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for fn in files:
        tensors.update(_read_safetensors(os.path.join(path, fn), dtype))

    n_embd = hc["hidden_size"]
    n_head = hc["num_attention_heads"]
    cfg = Config(
        arch=arch, n_vocab=hc["vocab_size"], n_embd=n_embd,
        n_layer=hc["num_hidden_layers"], n_head=n_head,
        n_head_kv=hc.get("num_key_value_heads") or n_head,
        head_dim=hc.get("head_dim") or n_embd // n_head,
        n_ff=hc["intermediate_size"], eps=hc["rms_norm_eps"],
        theta=hc.get("rope_theta", 10000.0), rope=ROPE_HALF,
    )
    layers = [_layer(tensors, "model.layers.%d." % i, hf=True) for i in range(cfg.n_layer)]
    tok = tensors["model.embed_tokens.weight"]
    tied = "lm_head.weight" not in tensors
    output = tok if tied else tensors["lm_head.weight"]
    _check_shapes(cfg, tok, layers, output)
    return Model(cfg, tok, layers, tensors["model.norm.weight"], output, tied)


def _check_shapes(c, tok, layers, output):
    E, V, D = c.n_embd, c.n_vocab, c.head_dim
    require(tok.shape == (V, E), ("token embedding", tok.shape))
    require(output.shape == (V, E), ("output", output.shape))
    for L in layers:
        require(L.wq.shape == (c.n_head * D, E), L.wq.shape)
        require(L.wk.shape == (c.n_head_kv * D, E), L.wk.shape)
        require(L.wv.shape == (c.n_head_kv * D, E), L.wv.shape)
        require(L.wo.shape == (E, c.n_head * D), L.wo.shape)
        require(L.w_gate.shape == (c.n_ff, E) and L.w_up.shape == (c.n_ff, E), L.w_gate.shape)
        require(L.w_down.shape == (E, c.n_ff), L.w_down.shape)


def load(path, dtype=np.float64):
    """Loads a .gguf file or an HF directory (cached per process)."""
    key = (os.path.realpath(path), np.dtype(dtype).str)
    if key not in _CACHE:
        if os.path.isdir(path):
            _CACHE[key] = load_hf(path, dtype)
        else:
            _CACHE[key] = load_gguf(path, dtype)
    return _CACHE[key]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help=".gguf file or HF directory")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--greedy", type=int, default=0, help="generate N tokens greedily")
    ap.add_argument("--top", type=int, default=5, help="report the top-K of the last position")
    ap.add_argument("--dtype", choices=("f64", "f32"), default="f64")
    ap.add_argument("--logits-out", help="write last-position logits as raw LE float32")
    a = ap.parse_args(argv)
    ids = [int(x) for x in a.ids.split(",") if x.strip()]
    t0 = time.time()
    m = load(a.model, np.float64 if a.dtype == "f64" else np.float32)
    t1 = time.time()
    lg = m.logits(ids)[-1]
    t2 = time.time()
    top = np.argsort(-lg)[: a.top]
    res = {
        "config": m.cfg.as_dict(), "tied": m.tied, "prompt_token_ids": ids,
        "argmax": int(top[0]), "top": [[int(i), float(lg[i])] for i in top],
        "load_s": round(t1 - t0, 3), "prefill_s": round(t2 - t1, 3),
    }
    if a.logits_out:
        lg.astype("<f4").tofile(a.logits_out)
    if a.greedy:
        t3 = time.time()
        res["token_ids"] = m.greedy(ids, a.greedy)
        res["greedy_s"] = round(time.time() - t3, 3)
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
