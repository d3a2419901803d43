#!/usr/bin/env python3
"""Float64 numpy forward of an HF mixture-of-experts model directory:
Mixtral, Qwen3-MoE, Qwen2-MoE and OLMoE.

Written from transformers' modeling files (models/{mixtral,qwen3_moe,olmoe}/
modeling_*.py and their configuration classes), not from plume's C code:
  * router: logits = h @ gate.weightᵀ, softmax over all experts, top-k;
    Mixtral always renormalizes the k probabilities to sum 1 (its
    MixtralTopKRouter), Qwen3-MoE and OLMoE only with norm_topk_prob;
  * each expert: down(silu(gate(h)) * up(h)), weighted by its probability
    and summed (index_add_);
  * Qwen3-MoE: per-head q/k RMSNorm before RoPE, dense MLP layers by
    mlp_only_layers / decoder_sparse_step;
  * OLMoE: q/k RMSNorm over the whole projections (before the head split);
  * Qwen2-MoE: q/k/v bias (qkv_bias), and a shared expert on every token
    whose output is scaled by sigmoid(shared_expert_gate(h)) and added to
    the routed experts' (Qwen2MoeSparseMoeBlock).
The whole sequence runs at once with the causal (Mixtral: and
sliding-window) mask.  RoPE frequencies come from family_oracle.rope_params.

API:  m = load_hf(dir) or load_gguf(path, config);
      m.logits(ids) -> [len(ids), n_vocab] (float64).
"""

import json
import os

import numpy as np

import family_oracle


class MoeModel:
    def __init__(self, c, w):
        """c: config.json as a dict; w: HF-named weights."""
        self.cfg = c
        self.w = {k: v.astype(np.float64) for k, v in w.items()}
        self.mt = c["model_type"]
        self.E = c["hidden_size"]
        self.H = c["num_attention_heads"]
        self.Hkv = c.get("num_key_value_heads") or self.H
        self.D = c.get("head_dim") or self.E // self.H
        self.eps = c.get("rms_norm_eps", 1e-6)
        # Qwen3-MoE's and OLMoE's config classes alias the two names
        self.X = c["num_local_experts"] if self.mt == "mixtral" else (
            c.get("num_experts") or c["num_local_experts"])
        self.k = c["num_experts_per_tok"]
        self.renorm = True if self.mt == "mixtral" else bool(c.get("norm_topk_prob", False))
        self.window = c.get("sliding_window") if self.mt == "mixtral" else (
            c.get("sliding_window") if c.get("use_sliding_window") else None)
        rp = dict(c.get("rope_scaling") or c.get("rope_parameters") or {})
        rp.setdefault("rope_type", rp.get("type", "default"))
        rp.setdefault("rope_theta", c.get("rope_theta", 10000.0))
        self.inv, self.af = family_oracle.rope_params(dict(c, head_dim=self.D), rp)
        n = c["num_hidden_layers"]
        only, step = c.get("mlp_only_layers") or [], c.get("decoder_sparse_step", 1)
        self.moe = [self.mt not in ("qwen3_moe", "qwen2_moe") or (l not in only and self.X > 0 and (l + 1) % step == 0)
                    for l in range(n)]

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        ang = np.outer(pos, self.inv)
        emb = np.concatenate([ang, ang], axis=-1)
        cos, sin = (np.cos(emb) * self.af)[:, None, :], (np.sin(emb) * self.af)[:, None, :]
        half = x.shape[-1] // 2
        return x * cos + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * sin

    def experts(self, l):
        """(router [X, E], [(gate, up, down)] per expert) of layer l, from
        save_pretrained's per-expert names or the fused in-memory layout."""
        w = self.w
        if self.mt == "mixtral" and "model.layers.%d.block_sparse_moe.gate.weight" % l in w:
            p = "model.layers.%d.block_sparse_moe." % l
            return w[p + "gate.weight"], [
                (w[p + "experts.%d.w1.weight" % e], w[p + "experts.%d.w3.weight" % e],
                 w[p + "experts.%d.w2.weight" % e]) for e in range(self.X)]
        p = "model.layers.%d.mlp." % l
        if p + "experts.gate_up_proj" in w:
            gu, dn = w[p + "experts.gate_up_proj"], w[p + "experts.down_proj"]
            F = gu.shape[1] // 2
            return w[p + "gate.weight"], [(gu[e, :F], gu[e, F:], dn[e]) for e in range(self.X)]
        return w[p + "gate.weight"], [
            (w[p + "experts.%d.gate_proj.weight" % e], w[p + "experts.%d.up_proj.weight" % e],
             w[p + "experts.%d.down_proj.weight" % e]) for e in range(self.X)]

    def moe_block(self, h, l):
        router, ex = self.experts(l)
        logits = h @ router.T
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        top = np.argsort(-p, axis=-1, kind="stable")[:, :self.k]
        tw = np.take_along_axis(p, top, axis=-1)
        if self.renorm:
            tw = tw / tw.sum(axis=-1, keepdims=True)
        out = np.zeros_like(h)
        for e in range(self.X):
            rows, slot = np.nonzero(top == e)
            if len(rows) == 0:
                continue
            g, u, d = ex[e]
            xe = h[rows]
            gt = xe @ g.T
            y = ((gt / (1 + np.exp(-gt))) * (xe @ u.T)) @ d.T
            np.add.at(out, rows, y * tw[rows, slot][:, None])
        q = "model.layers.%d.mlp." % l
        if q + "shared_expert_gate.weight" in self.w:
            w = self.w
            gt = h @ w[q + "shared_expert.gate_proj.weight"].T
            sh = ((gt / (1 + np.exp(-gt))) * (h @ w[q + "shared_expert.up_proj.weight"].T)) @ \
                w[q + "shared_expert.down_proj.weight"].T
            out = out + sh / (1 + np.exp(-(h @ w[q + "shared_expert_gate.weight"].T)))
        return out

    def logits(self, ids):
        c, w, T = self.cfg, self.w, len(ids)
        x = w["model.embed_tokens.weight"][ids]
        pos = np.arange(T, dtype=np.float64)
        qi, ki = np.arange(T)[:, None], np.arange(T)[None, :]
        mask = ki <= qi
        if self.window:
            mask = mask & (ki > qi - self.window)
        for l in range(c["num_hidden_layers"]):
            p = "model.layers.%d." % l
            h = self.norm(x, w[p + "input_layernorm.weight"])
            def proj(n):
                y = h @ w[p + "self_attn.%s_proj.weight" % n].T
                b = w.get(p + "self_attn.%s_proj.bias" % n)
                return y if b is None else y + b
            q, k, v = proj("q"), proj("k"), proj("v").reshape(T, self.Hkv, self.D)
            if self.mt == "olmoe":  # OlmoeAttention: q_norm(q_proj(x)) over the whole projection
                q = self.norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.norm(k, w[p + "self_attn.k_norm.weight"])
            q, k = q.reshape(T, self.H, self.D), k.reshape(T, self.Hkv, self.D)
            if self.mt == "qwen3_moe":  # per head, before RoPE
                q = self.norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.norm(k, w[p + "self_attn.k_norm.weight"])
            q, k = self.rope(q, pos), self.rope(k, pos)
            g = self.H // self.Hkv
            out = np.empty((T, self.H, self.D))
            for hh in range(self.H):
                s = (q[:, hh, :] @ k[:, hh // g, :].T) * self.D ** -0.5
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                out[:, hh, :] = s @ v[:, hh // g, :]
            x = x + out.reshape(T, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = self.norm(x, w[p + "post_attention_layernorm.weight"])
            if self.moe[l]:
                x = x + self.moe_block(h, l)
            else:
                gt = h @ w[p + "mlp.gate_proj.weight"].T
                x = x + ((gt / (1 + np.exp(-gt))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ \
                    w[p + "mlp.down_proj.weight"].T
        x = self.norm(x, w["model.norm.weight"])
        return x @ w["lm_head.weight"].T


def load_hf(d):
    """The model in HF directory d (config.json, model.safetensors)."""
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    from safetensors.numpy import load_file
    return MoeModel(c, load_file(os.path.join(d, "model.safetensors")))


# GGUF tensor name (after blk.N.) -> HF name (after model.layers.N.), as
# llama.cpp's gguf-py tensor_mapping.py maps them for these families
GGUF_NAMES = dict(family_oracle.GGUF_LAYER_NAMES, **{
    "attn_q.bias": "self_attn.q_proj.bias", "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight", "ffn_down_exps.weight": "mlp.experts.down_proj",
    "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
    "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight"})


def gguf_weights(path, c):
    """The weights of the GGUF at path, dequantized by gguf-py, under HF
    names: experts in transformers 5's fused layout (gate_up_proj [X, 2F, E]
    from ffn_gate_exps and ffn_up_exps, down_proj [X, E, F]), and for arch
    llama (Mixtral) the q/k rows that convert_hf_to_gguf.py permuted put
    back.  c: config.json as a dict, for the head counts."""
    import gguf
    r = gguf.GGUFReader(path)
    arch = str(r.fields["general.architecture"].contents())
    g = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(
        [int(x) for x in reversed(t.shape)]) for t in r.tensors}
    w = {"model.embed_tokens.weight": g.pop("token_embd.weight"),
         "model.norm.weight": g.pop("output_norm.weight"),
         "lm_head.weight": g.pop("output.weight")}
    for l in range(c["num_hidden_layers"]):
        p = "blk.%d." % l
        for gn, hn in GGUF_NAMES.items():
            if p + gn in g:
                w["model.layers.%d.%s" % (l, hn)] = g.pop(p + gn)
        if p + "ffn_gate_exps.weight" in g:
            w["model.layers.%d.mlp.experts.gate_up_proj" % l] = np.concatenate(
                [g.pop(p + "ffn_gate_exps.weight"), g.pop(p + "ffn_up_exps.weight")], axis=1)
        if arch == "llama":  # undo LlamaModel.permute: row 2i <- i, 2i+1 <- i + D/2 in each head
            for n, heads in (("q", c["num_attention_heads"]), ("k", c["num_key_value_heads"])):
                k = "model.layers.%d.self_attn.%s_proj.weight" % (l, n)
                a = w[k]
                w[k] = a.reshape(heads, a.shape[0] // heads // 2, 2, -1).swapaxes(1, 2).reshape(
                    a.shape)
    if g:
        raise ValueError("%s: tensors the oracle does not know: %s" % (path, sorted(g)))
    return w


def load_gguf(path, c):
    """The model in the GGUF at path (weights dequantized by gguf-py), with
    the hyperparameters of config.json c."""
    return MoeModel(c, gguf_weights(path, c))
