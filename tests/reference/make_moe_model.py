#!/usr/bin/env python3
"""Tiny random mixture-of-experts models (Mixtral, Qwen3-MoE, Qwen2-MoE,
OLMoE) made by transformers itself, and their GGUFs written by llama.cpp's
own converter.

HF form: the family's config class with small dimensions, torch.manual_seed,
XxxForCausalLM(config) on the CPU, its parameters redrawn at a larger scale
(below), then save_pretrained(safe_serialization=True): transformers 5.24
writes the experts back under their checkpoint names (Mixtral's
block_sparse_moe.experts.E.w1/w3/w2, the others' mlp.experts.E.gate_proj/
up_proj/down_proj).  The "-fused" variant saves with
save_original_format=False instead: transformers 5's in-memory layout
(mlp.experts.gate_up_proj [X, 2F, E] with the gate rows first,
mlp.experts.down_proj [X, E, F]).  The tokenizer files are
make_tiny_model's byte-level BPE.

Why redraw: transformers' own init (normal, std 0.02; norms 1) gives
Mixtral logits with a spread of 1.4 whose top two come within 2e-5 of each
other at some of the 80 positions (greedy tokens are then near-ties that a
float32 engine may break either way) and router logits within a few
hundredths (expert choice likewise).  Each weight is drawn instead, from a torch
generator seeded with the variant's seed, as normal * gain / sqrt(fan-in)
(the last dimension of every linear or expert tensor), norms uniform in
[0.5, 1.5], biases normal * 0.5, embeddings normal: a logit spread of ~40
and a spread of router logits, so no near-ties in greedy tokens or expert
choice.

GGUF form: llama.cpp's convert_hf_to_gguf.py (llamacpp_convert.py, which
states the one thing it replaces) on the HF directory with --outtype f32.
Not for qwen3moe-dense1 (the converter's Qwen3MoeModel stops at the dense
layer: "Can not map tensor 'model.layers.1.mlp.down_proj.weight'"; llama.cpp's
qwen3moe graph has no dense layers) nor the fused variant (its OlmoeModel
stops at "Unprocessed experts: [...mlp.experts.down_proj, ...gate_up_proj]").

    python make_moe_model.py OUTDIR VARIANT     (VARIANT in VARIANTS)
"""

import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import llamacpp_convert  # noqa: E402
import make_tiny_model as mtm  # noqa: E402

BASE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=False,
            hidden_act="silu")
ROPE_THETA = 10000.0

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

CLASSES = {"mixtral": ("MixtralConfig", "MixtralForCausalLM"),
           "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM"),
           "olmoe": ("OlmoeConfig", "OlmoeForCausalLM"),
           "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM")}

# gain of a weight by the end of its (in-memory) name; the rest 1.0
GAINS = (("q_proj.weight", 1.5), ("k_proj.weight", 1.5),
         ("mlp.gate.weight", 3.0),         # the router: a spread of router logits, no near-ties
         ("experts.down_proj", 1.5), ("shared_expert_gate.weight", 2.0),
         ("lm_head.weight", 5.0))          # logits spread ~40: f32 error well under 1e-4


def config_of(variant, n_vocab, bos, eos):
    """The family's transformers config object for variant."""
    import transformers
    mt, over, _, _ = VARIANTS[variant]
    kw = dict(BASE)
    kw.update(over)
    theta = kw.pop("rope_theta", ROPE_THETA)
    kw.update(vocab_size=n_vocab, bos_token_id=bos, eos_token_id=eos, pad_token_id=bos,
              rope_parameters=dict(rope_type="default", rope_theta=theta))
    c = getattr(transformers, CLASSES[mt][0])(**kw)
    c.architectures = [CLASSES[mt][1]]
    return c


def n_experts(c):
    return c.get("num_local_experts") or c["num_experts"]


def redraw(model, seed):
    """Every parameter drawn again at the scale the module docstring gives."""
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(torch.rand(p.shape, generator=g, dtype=torch.float64) + 0.5)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.5)
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
            else:
                gain = next((v for k, v in GAINS if name.endswith(k)), 1.0)
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * gain /
                        np.sqrt(p.shape[-1]))


def convert(hf, out):
    """llama.cpp's convert_hf_to_gguf.py on hf, --outtype f32, into out."""
    p = subprocess.run(llamacpp_convert.command(hf, out), capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0 or not os.path.isfile(out):
        raise RuntimeError("llama.cpp's convert_hf_to_gguf.py failed on %s (exit %d): %s"
                           % (hf, p.returncode, p.stderr.strip()[-1500:]))
    return out


def make(outdir, variant, seed=1):
    """Writes OUTDIR/hf (and OUTDIR/model.gguf when the variant has a GGUF
    form); returns {"hf": dir, "gguf": path or None, "config": the saved
    config.json as a dict}."""
    import torch
    import transformers
    transformers.logging.disable_progress_bar()
    tok = mtm.build_tokenizer()
    tokens = tok[0]
    c = config_of(variant, len(tokens), tokens.index("<|endoftext|>"),
                  tokens.index("<|im_end|>"))
    torch.manual_seed(seed)
    model = getattr(transformers, CLASSES[c.model_type][1])(c).to(torch.float32)
    redraw(model, seed)
    hf = os.path.join(outdir, "hf")
    model.save_pretrained(hf, safe_serialization=True,
                          save_original_format=not VARIANTS[variant][3])
    mtm.write_hf_tokenizer(hf, tok, c.max_position_embeddings)
    with open(os.path.join(hf, "config.json")) as f:
        cfg = json.load(f)
    gg = None
    if VARIANTS[variant][2]:
        gg = convert(hf, os.path.join(outdir, "model.gguf"))
    return {"hf": hf, "gguf": gg, "config": cfg}


def transformers_logits(hf, ids):
    """transformers' own logits (float64, eager attention and experts) of
    ids, from the checkpoint in hf: [len(ids), n_vocab]."""
    import torch
    import transformers
    transformers.logging.disable_progress_bar()
    m = transformers.AutoModelForCausalLM.from_pretrained(
        hf, dtype=torch.float64, attn_implementation="eager", experts_implementation="eager")
    m.eval()
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0].numpy()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in VARIANTS:
        sys.exit("usage: make_moe_model.py OUTDIR VARIANT (one of %s)" % ", ".join(VARIANTS))
    r = make(sys.argv[1], sys.argv[2])
    print(json.dumps(r, indent=2))
