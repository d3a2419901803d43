#!/usr/bin/env python3
"""A GGUF of OLMoE-1B-7B's shape with random weights, for decode-speed runs
of mixture-of-experts layers (issue #36): arch olmoe, 16 layers, hidden 2048,
16 heads of 128, 64 experts of 1024 with 8 per token, vocabulary 50304;
every matrix in Q4_0 (random 4-bit values, block scales around 0.01) except
the router (ffn_gate_inp, F32, as llama-quantize keeps it) and the norms.
About 3.9 GB; tensors are streamed to the file one at a time.

    .venv/bin/python bench/make_moe_dummy_gguf.py OUT.gguf [--layers N] [--seed S]

The tokenizer is make_tiny_model's 300-token byte-level BPE, padded with
unused tokens to the vocabulary size so that llama.cpp loads the same file.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "reference"))

import make_tiny_model as mtm  # noqa: E402

SHAPE = dict(n_vocab=50304, n_embd=2048, n_layer=16, n_head=16, head_dim=128, n_ff_exp=1024,
             n_expert=64, n_expert_used=8, n_ctx=4096, rope_theta=10000.0, rms_eps=1e-5)


def q4_0_blocks(rng, rows, cols):
    """rows x cols weights as random Q4_0 blocks: f16 scale, 16 bytes of nibbles."""
    nb = rows * cols // 32
    blk = np.empty((nb, 18), dtype=np.uint8)
    d = (rng.uniform(0.005, 0.015, nb)).astype(np.float16)
    blk[:, :2] = d.view(np.uint8).reshape(nb, 2)
    blk[:, 2:] = rng.integers(0, 256, (nb, 16), dtype=np.uint8)
    return blk.reshape(rows, cols // 32 * 18)


def main():
    import gguf
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=SHAPE["n_layer"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = dict(SHAPE, n_layer=a.layers)
    E, H, D, F, X, V = (s["n_embd"], s["n_head"], s["head_dim"], s["n_ff_exp"], s["n_expert"],
                        s["n_vocab"])
    rng = np.random.default_rng(a.seed)
    tokens, types, merges = mtm.build_tokenizer()
    tokens = list(tokens) + ["<|unused_%d|>" % i for i in range(V - len(tokens))]
    types = list(types) + [int(gguf.TokenType.UNUSED)] * (V - len(types))
    g = gguf.GGUFWriter(a.out, "olmoe")
    g.add_name("plume-dummy-olmoe-1b-7b-q4_0")
    g.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q4_0))
    g.add_vocab_size(V)
    g.add_context_length(s["n_ctx"])
    g.add_embedding_length(E)
    g.add_block_count(s["n_layer"])
    g.add_feed_forward_length(F)
    g.add_head_count(H)
    g.add_head_count_kv(H)
    g.add_key_length(D)
    g.add_value_length(D)
    g.add_layer_norm_rms_eps(s["rms_eps"])
    g.add_rope_freq_base(s["rope_theta"])
    g.add_rope_dimension_count(D)
    g.add_expert_count(X)
    g.add_expert_used_count(s["n_expert_used"])
    g.add_tokenizer_model("gpt2")
    g.add_tokenizer_pre("gpt-2")  # llama.cpp knows GPT-2's regex by this name only
    g.add_token_list(tokens)
    g.add_token_types(types)
    g.add_token_merges(["%s %s" % m for m in merges])
    g.add_bos_token_id(tokens.index("<|endoftext|>"))
    g.add_eos_token_id(tokens.index("<|im_end|>"))
    g.add_add_bos_token(False)
    Q4 = gguf.GGMLQuantizationType.Q4_0

    # (name, numpy shape, kind): kind q4 (random Q4_0), norm (F32 ~1), router (F32)
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
    plan += [("output_norm.weight", (E,), "norm"), ("output.weight", (V, E), "q4")]
    for name, shape, kind in plan:
        if kind == "q4":
            nbytes = int(np.prod(shape)) // 32 * 18
            g.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=Q4)
        else:
            g.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_ti_data_to_file()
    for name, shape, kind in plan:
        if kind == "q4":
            rows = int(np.prod(shape[:-1]))
            t = q4_0_blocks(rng, rows, shape[-1])
        elif kind == "norm":
            t = rng.uniform(0.8, 1.2, shape).astype(np.float32)
        else:
            t = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
        g.write_tensor_data(t)
    g.close()
    print("wrote %s (%.2f GB)" % (a.out, os.path.getsize(a.out) / 1e9))


if __name__ == "__main__":
    main()
