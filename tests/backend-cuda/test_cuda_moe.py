#!/usr/bin/env python3
"""Mixture-of-experts models on backend cuda (issue 36): makes tiny random
Mixtral, Qwen3-MoE, Qwen2-MoE and OLMoE checkpoints with transformers
(tests/reference/make_moe_model.py; their GGUF forms with llama.cpp's
converter when scripts/fetch-llama-cpp fetched it) and gpt-oss in its HF,
OpenAI-MXFP4 and GGUF-MXFP4 forms (make_gpt_oss_model.py), then runs
test_cuda_moe on them: logits and greedy tokens against the cpu backend,
and the same bits in every prefill chunking on the GPU.

Exits 77 (skipped) with the reason when no usable CUDA device exists
(asked of test_cuda_moe first, before any model is made) or a Python
package is missing.  --models DIR... skips the making and runs the given
checkpoints (the GPU machine, which has no llama.cpp sources)."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))
BUILD_ROOT = os.environ.get("PLUME_BUILD_ROOT", os.path.join(SOURCE_ROOT, "build"))
BIN = os.path.join(BUILD_ROOT, "tests", "backend-cuda", "test_cuda_moe")
sys.path.insert(0, os.path.join(SOURCE_ROOT, "tests", "reference"))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--models":
        return subprocess.run([BIN] + sys.argv[2:]).returncode
    probe = subprocess.run([BIN], capture_output=True, text=True)
    if probe.returncode == 77:  # no usable device: said by the binary
        print(probe.stdout.strip())
        return 77
    import _venv
    _venv.require("numpy", "safetensors", "tokenizers", "torch", "transformers")
    import make_gpt_oss_model
    import make_moe_model
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for v in ("mixtral", "qwen3moe", "qwen2moe", "olmoe"):
            fx = make_moe_model.make(os.path.join(tmp, v), v)
            paths += [fx["hf"]] + ([fx["gguf"]] if fx["gguf"] else [])
        fx = make_gpt_oss_model.make(os.path.join(tmp, "gptoss"))
        paths += [p for p in (fx["hf"], fx["hf_mxfp4"], fx["gguf_mxfp4"]) if p]
        return subprocess.run([BIN] + paths).returncode


if __name__ == "__main__":
    sys.exit(main())
