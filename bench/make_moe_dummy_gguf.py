#!/usr/bin/env python3
"""GGUFs of mixture-of-experts shapes with random weights, for decode-speed
runs of their expert layers (issue #36), loadable by plume and llama.cpp:

  --arch olmoe    (default) OLMoE-1B-7B: 16 layers, hidden 2048, 16 heads of
                  128, 64 experts of 1024 with 8 per token, vocabulary
                  50304; every matrix Q4_0 (random 4-bit values, block scales
                  around 0.01) but the router (F32, as llama-quantize keeps
                  it) and the norms.  About 3.9 GB.
  --arch gpt-oss  gpt-oss-20b: 24 layers, hidden 2880, 64 query heads and 8
                  kv heads of 64, 32 experts of 2880 with 4 per token,
                  vocabulary 201088, sliding window 128 on every other layer,
                  yarn (factor 32 over 4096), attention sinks, biases; the
                  experts MXFP4 (random e2m1 codes, E8M0 scales 2^-10..2^-7),
                  the other matrices Q8_0, as llama-quantize's MXFP4_MOE
                  type writes them; router, biases, sinks and norms F32.
                  About 13 GB at 24 layers: --layers 12 gives about 6.6 GB.

    .venv/bin/python bench/make_moe_dummy_gguf.py OUT.gguf [--arch A] [--layers N] [--seed S]

Tensors are streamed to the file one at a time.  The tokenizer is
make_tiny_model's 300-token byte-level BPE, padded with unused tokens to the
vocabulary size so that llama.cpp loads the same file.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))

import make_tiny_model as mtm  # noqa: E402

SHAPES = {
    "olmoe": dict(n_vocab=50304, n_embd=2048, n_layer=16, n_head=16, n_head_kv=16, head_dim=128,
                  n_ff_exp=1024, n_expert=64, n_expert_used=8, n_ctx=4096, rope_theta=10000.0,
                  rms_eps=1e-5),
    # gpt-oss-20b's config.json
    "gpt-oss": dict(n_vocab=201088, n_embd=2880, n_layer=24, n_head=64, n_head_kv=8, head_dim=64,
                    n_ff_exp=2880, n_expert=32, n_expert_used=4, n_ctx=131072,
                    rope_theta=150000.0, rms_eps=1e-5, sliding_window=128, yarn_factor=32.0,
                    yarn_orig_ctx=4096),
}


def random_blocks(rng, rows, cols, size, head, codes):
    """rows x cols weights as random GGUF blocks of `size` bytes per 32
    values: the scale bytes head(nb) gives for the nb blocks, then the code
    bytes codes(shape) gives (4-bit or 8-bit codes)."""
    nb = rows * cols // 32
    h = head(nb)
    blk = np.empty((nb, size), dtype=np.uint8)
    blk[:, :h.shape[1]] = h
    blk[:, h.shape[1]:] = codes((nb, size - h.shape[1]))
    return blk.reshape(rows, cols // 32 * size)


def f16_scales(rng, lo, hi):
    return lambda nb: rng.uniform(lo, hi, nb).astype(np.float16).view(np.uint8).reshape(nb, 2)


def block_kinds(rng):
    """kind -> (bytes per 32 values, scale bytes, code bytes): Q4_0 (scales
    around 0.01), Q8_0 (around 0.0004), MXFP4 (E8M0 bytes 118..121:
    2^-10..2^-7 after ggml's halving).  The codes are symmetric about zero
    (Q4_0 nibbles 1..15, Q8_0 bytes -127..127, MXFP4 any: its sign is a
    bit): codes 0..255 as raw bytes give Q4_0 a mean of -d/2 and Q8_0 of
    -d/2, whose common component swamped the hidden states and sent every
    token to the same experts (8.4 of 64 active over 16 OLMoE tokens, files
    made before 2026-12-05)."""
    q4 = lambda shape: (rng.integers(1, 16, shape, dtype=np.uint8) |
                        rng.integers(1, 16, shape, dtype=np.uint8) << 4).astype(np.uint8)
    q8 = lambda shape: rng.integers(-127, 128, shape, dtype=np.int16).astype(np.uint8)
    mx = lambda shape: rng.integers(0, 256, shape, dtype=np.uint8)
    return {"q4": (18, f16_scales(rng, 0.005, 0.015), q4),
            "q8": (34, f16_scales(rng, 0.0002, 0.0006), q8),
            "mx": (17, lambda nb: rng.integers(118, 122, (nb, 1), dtype=np.uint8), mx)}


def olmoe_plan(s):
    E, H, D, F, X, V = (s["n_embd"], s["n_head"], s["head_dim"], s["n_ff_exp"], s["n_expert"],
                        s["n_vocab"])
    plan = [("token_embd.weight", (V, E), "q4")]
    for l in range(s["n_layer"]):
        b = "blk.%d." % l
        plan += [(b + "attn_norm.weight", (E,), "norm"), (b + "attn_q.weight", (H * D, E), "q4"),
                 (b + "attn_k.weight", (H * D, E), "q4"), (b + "attn_v.weight", (H * D, E), "q4"),
                 (b + "attn_output.weight", (E, H * D), "q4"),
                 (b + "attn_q_norm.weight", (H * D,), "norm"),
                 (b + "attn_k_norm.weight", (H * D,), "norm"),
                 (b + "ffn_norm.weight", (E,), "norm"),
                 (b + "ffn_gate_inp.weight", (X, E), "router"),
                 (b + "ffn_gate_exps.weight", (X, F, E), "q4"),
                 (b + "ffn_up_exps.weight", (X, F, E), "q4"),
                 (b + "ffn_down_exps.weight", (X, E, F), "q4")]
    return plan + [("output_norm.weight", (E,), "norm"), ("output.weight", (V, E), "q4")]


def gpt_oss_plan(s):
    """The tensors llama.cpp's convert_hf_to_gguf.py writes for gpt-oss (its
    own names: post_attention_norm is the pre-MLP norm)."""
    E, H, K, D, F, X, V = (s["n_embd"], s["n_head"], s["n_head_kv"], s["head_dim"], s["n_ff_exp"],
                           s["n_expert"], s["n_vocab"])
    plan = [("token_embd.weight", (V, E), "q8")]
    for l in range(s["n_layer"]):
        b = "blk.%d." % l
        plan += [(b + "attn_norm.weight", (E,), "norm"),
                 (b + "attn_q.weight", (H * D, E), "q8"), (b + "attn_q.bias", (H * D,), "bias"),
                 (b + "attn_k.weight", (K * D, E), "q8"), (b + "attn_k.bias", (K * D,), "bias"),
                 (b + "attn_v.weight", (K * D, E), "q8"), (b + "attn_v.bias", (K * D,), "bias"),
                 (b + "attn_output.weight", (E, H * D), "q8"),
                 (b + "attn_output.bias", (E,), "bias"),
                 (b + "attn_sinks.weight", (H,), "bias"),
                 (b + "post_attention_norm.weight", (E,), "norm"),
                 (b + "ffn_gate_inp.weight", (X, E), "router"),
                 (b + "ffn_gate_inp.bias", (X,), "bias"),
                 (b + "ffn_gate_exps.weight", (X, F, E), "mx"),
                 (b + "ffn_gate_exps.bias", (X, F), "bias"),
                 (b + "ffn_up_exps.weight", (X, F, E), "mx"),
                 (b + "ffn_up_exps.bias", (X, F), "bias"),
                 (b + "ffn_down_exps.weight", (X, E, F), "mx"),
                 (b + "ffn_down_exps.bias", (X, E), "bias")]
    return plan + [("output_norm.weight", (E,), "norm"), ("output.weight", (V, E), "q8")]


def main():
    import gguf
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", choices=sorted(SHAPES), default="olmoe")
    ap.add_argument("--layers", type=int, help="layers (default: the model's)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = dict(SHAPES[a.arch])
    if a.layers:
        s["n_layer"] = a.layers
    gpt_oss = a.arch == "gpt-oss"
    E, H, D, X, V = s["n_embd"], s["n_head"], s["head_dim"], s["n_expert"], s["n_vocab"]
    rng = np.random.default_rng(a.seed)
    tokens, types, merges = mtm.build_tokenizer()
    tokens = list(tokens) + ["<|unused_%d|>" % i for i in range(V - len(tokens))]
    types = list(types) + [int(gguf.TokenType.UNUSED)] * (V - len(types))
    g = gguf.GGUFWriter(a.out, a.arch)
    g.add_name("plume-dummy-%s-%s" % ("gpt-oss-20b-mxfp4" if gpt_oss else "olmoe-1b-7b-q4_0",
                                      "%dl" % s["n_layer"]))
    g.add_file_type(int(gguf.LlamaFileType.MOSTLY_MXFP4_MOE if gpt_oss
                        else gguf.LlamaFileType.MOSTLY_Q4_0))
    g.add_vocab_size(V)
    g.add_context_length(s["n_ctx"])
    g.add_embedding_length(E)
    g.add_block_count(s["n_layer"])
    g.add_feed_forward_length(s["n_ff_exp"])
    g.add_head_count(H)
    g.add_head_count_kv(s["n_head_kv"])
    g.add_key_length(D)
    g.add_value_length(D)
    g.add_layer_norm_rms_eps(s["rms_eps"])
    g.add_rope_freq_base(s["rope_theta"])
    g.add_expert_count(X)
    g.add_expert_used_count(s["n_expert_used"])
    if gpt_oss:
        g.add_expert_feed_forward_length(s["n_ff_exp"])
        g.add_sliding_window(s["sliding_window"])
        g.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        g.add_rope_scaling_factor(s["yarn_factor"])
        g.add_rope_scaling_orig_ctx_len(s["yarn_orig_ctx"])
        g.add_rope_scaling_yarn_beta_fast(32.0)
        g.add_rope_scaling_yarn_beta_slow(1.0)
    else:
        g.add_rope_dimension_count(D)
    g.add_tokenizer_model("gpt2")
    # llama.cpp knows these regexes by these names only
    g.add_tokenizer_pre("gpt-4o" if gpt_oss else "gpt-2")
    g.add_token_list(tokens)
    g.add_token_types(types)
    g.add_token_merges(["%s %s" % m for m in merges])
    g.add_bos_token_id(tokens.index("<|endoftext|>"))
    g.add_eos_token_id(tokens.index("<|im_end|>"))
    g.add_add_bos_token(False)
    raw = {"q4": gguf.GGMLQuantizationType.Q4_0, "q8": gguf.GGMLQuantizationType.Q8_0,
           "mx": gguf.GGMLQuantizationType.MXFP4}
    # (name, numpy shape, kind): q4/q8/mx (random blocks), norm (F32 ~1),
    # router (F32 ~ N(0, 1/in)), bias (F32, small)
    plan = gpt_oss_plan(s) if gpt_oss else olmoe_plan(s)
    blocks = block_kinds(rng)
    for name, shape, kind in plan:
        if kind in blocks:
            nbytes = int(np.prod(shape)) // 32 * blocks[kind][0]
            g.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=raw[kind])
        else:
            g.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_ti_data_to_file()
    for i, (name, shape, kind) in enumerate(plan):
        if kind in blocks:
            t = random_blocks(rng, int(np.prod(shape[:-1])), shape[-1], *blocks[kind])
        elif kind == "norm":
            t = rng.uniform(0.8, 1.2, shape).astype(np.float32)
        elif kind == "bias":
            t = rng.uniform(-0.05, 0.05, shape).astype(np.float32)
        else:
            t = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
        g.write_tensor_data(t)
        if i % 40 == 39:
            print("  %d of %d tensors written" % (i + 1, len(plan)), flush=True)
    g.close()
    print("wrote %s (%.2f GB)" % (a.out, os.path.getsize(a.out) / 1e9))


if __name__ == "__main__":
    main()
