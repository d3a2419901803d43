#!/usr/bin/env python3
"""A tiny random gpt-oss checkpoint made by transformers itself
(GptOssConfig + GptOssForCausalLM under torch.manual_seed, save_pretrained
in float32), in three forms:

  hf        what save_pretrained writes: dense experts
            (mlp.experts.gate_up_proj [X, hidden, 2F] with gate/up in the
            even/odd columns, down_proj [X, F, hidden], their biases),
            router with bias, q/k/v/o biases, self_attn.sinks;
  hf-mxfp4  the same directory with the experts in OpenAI's MXFP4 form
            (gate_up_proj_blocks [X, 2F, hidden/32, 16] U8 + _scales
            [X, 2F, hidden/32], down_proj_blocks/_scales;
            quantization_config.quant_method "mxfp4"), the blocks being
            gguf-py 0.19.0's MXFP4 quantization of the dense experts,
            rearranged into OpenAI's nibble order (element 2k in the low
            nibble of byte k: transformers' integrations/mxfp4.py
            convert_moe_packed_tensors);
  gguf/gguf-mxfp4  llama.cpp's own convert_hf_to_gguf.py (the pinned
            llama-cpp-python 0.3.36 sdist, scripts/fetch-llama-cpp) run on
            hf (F32 experts) and on hf-mxfp4 (its GptOssModel.repack_mxfp4
            writes ggml MXFP4 experts).  The converter recognizes
            tokenizers by a hash of their output; the tiny BPE tokenizer
            here (make_tiny_model's) is not o200k, so its
            get_vocab_base_pre is told "gpt-4o", gpt-oss's pre-tokenizer.

Weights are re-drawn after construction (same seed) at scales where every
gpt-oss feature moves the logits: sinks ~ N(0, 1), biases non-zero, expert
pre-activations of std ~4 so that the SwiGLU clamp at 7 is hit.

    python make_gpt_oss_model.py OUTDIR
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import llamacpp_convert  # noqa: E402
import make_tiny_model as mtm  # noqa: E402

SOURCE_ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))

# Small dims with hidden != F (a transposition would not fit) and both
# multiples of 32 (MXFP4 blocks); 3 layers: sliding, full, sliding.
DIMS = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, num_local_experts=8, num_experts_per_tok=3,
            sliding_window=16, max_position_embeddings=128, rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0,
                             "beta_slow": 1.0, "truncate": False,
                             "original_max_position_embeddings": 32, "rope_theta": 150000.0})

# std of each parameter kind when re-drawn (see the module docstring)
SCALES = [("norm.weight", None), ("layernorm.weight", None), ("sinks", 1.0),
          ("router.weight", 0.25), ("router.bias", 0.5), ("gate_up_proj_bias", 0.5),
          ("gate_up_proj", 0.5), ("down_proj_bias", 0.1), ("down_proj", 0.02),
          ("o_proj.weight", 0.1), ("_proj.weight", 0.25), ("_proj.bias", 0.2),
          ("embed_tokens", 1.0), ("lm_head", 0.3)]


def make_hf(d, seed=0):
    """transformers' own checkpoint in d; returns its config dict."""
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM
    tok = mtm.build_tokenizer()
    torch.manual_seed(seed)
    cfg = GptOssConfig(vocab_size=len(tok[0]), bos_token_id=tok[0].index("<|endoftext|>"),
                       eos_token_id=tok[0].index("<|im_end|>"), **DIMS)
    model = GptOssForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = next(s for k, s in SCALES if k in name)
            if std is None:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(std * torch.randn_like(p))
    model.save_pretrained(d, safe_serialization=True)
    with tempfile.TemporaryDirectory() as t:  # make_tiny_model's tokenizer files
        mtm.write_hf(t, "llama", {}, tok, False)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(t, f), os.path.join(d, f))
    with open(os.path.join(d, "config.json")) as f:
        return json.load(f)


def ggml_to_openai_mxfp4(q):
    """ggml MXFP4 blocks [..., 17] -> (OpenAI blocks [..., 16], scales [...])."""
    e, qs = q[..., 0], q[..., 1:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # ggml: element j, j+16
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)  # OpenAI: 2k, 2k+1
    return blocks, e.astype(np.uint8)


def make_mxfp4(src, d):
    """src's experts as OpenAI MXFP4 in d (the other files copied)."""
    import gguf
    from safetensors.numpy import load_file, save_file
    shutil.copytree(src, d)
    w = load_file(os.path.join(src, "model.safetensors"))
    out = {}
    for k, v in w.items():
        if k.endswith("mlp.experts.gate_up_proj") or k.endswith("mlp.experts.down_proj"):
            rows = np.ascontiguousarray(np.swapaxes(v, 1, 2))  # [X, out, in]: OpenAI's rows
            X, R, C = rows.shape
            q = gguf.quants.quantize(rows.reshape(X * R, C), gguf.GGMLQuantizationType.MXFP4)
            b, s = ggml_to_openai_mxfp4(q.reshape(X, R, C // 32, 17))
            out[k + "_blocks"], out[k + "_scales"] = b, s
        else:
            out[k] = v
    save_file(out, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    c["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
        "lm_head"]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)


def convert(hf, out):
    """llama.cpp's convert_hf_to_gguf.py HF --outfile OUT --outtype f32, its
    pre-tokenizer named "gpt-4o" (the o200k regex this test's tokenizer
    uses); returns an error text or None."""
    p = subprocess.run(llamacpp_convert.command(hf, out, "gpt-4o"), capture_output=True,
                       text=True, timeout=600)
    return None if p.returncode == 0 else p.stderr.strip()[-600:]


def make(outdir, seed=0, gguf_forms=True):
    """Writes the forms; returns their paths (gguf ones None when the
    converter is unavailable) and the config."""
    os.makedirs(outdir, exist_ok=True)
    fx = {"hf": os.path.join(outdir, "hf"), "hf_mxfp4": os.path.join(outdir, "hf-mxfp4"),
          "gguf": None, "gguf_mxfp4": None}
    fx["config"] = make_hf(fx["hf"], seed)
    make_mxfp4(fx["hf"], fx["hf_mxfp4"])
    if gguf_forms and llamacpp_convert.converter_dir():
        for form, src in (("gguf", fx["hf"]), ("gguf_mxfp4", fx["hf_mxfp4"])):
            path = os.path.join(outdir, form.replace("_", "-") + ".gguf")
            e = convert(src, path)
            if e:
                raise RuntimeError("convert_hf_to_gguf.py on %s failed: %s" % (src, e))
            fx[form] = path
    return fx


if __name__ == "__main__":
    print(json.dumps({k: v for k, v in make(sys.argv[1]).items() if k != "config"}, indent=2))
