"""Draft speculation with a GPTQ int4 draft: the plugins chain (spec-draft
loads the draft through the host's registry, where quant-gptq runs its int4
linear layers), as configs/spec-draft-gptq.yaml does for SmolLM2.  The tiny
model is the target; its draft is the same model converted to HF and
quantized by plume (RTN, 4 bits, groups of 32: a GPTQ checkpoint).  Greedy
output with the draft equals the output without it.

    python test_chained_gptq.py PLUME TINY_GGUF"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

plume, tiny = sys.argv[1:3]


def run(*args):
    r = subprocess.run([plume, *args], capture_output=True, text=True)
    check(r.returncode == 0, (args, r.returncode, r.stdout, r.stderr))
    return r.stdout


with tempfile.TemporaryDirectory() as tmp:
    hf, q = os.path.join(tmp, "hf"), os.path.join(tmp, "draft-gptq")
    run("convert", tiny, "--to", "hf", hf, "--force")
    run("quantize", hf, q, "--method", "rtn", "--bits", "4", "--group-size", "32")
    qc = json.load(open(os.path.join(q, "quantize_config.json")))
    check(qc["quant_method"] == "gptq" and qc["bits"] == 4, qc)
    pipe = os.path.join(tmp, "chain.yaml")
    with open(pipe, "w") as f:
        f.write(f"model: {os.path.abspath(tiny)}\nplugins: [spec-draft, quant-gptq]\n"
                "speculative: {method: draft, model: draft-gptq, num_speculative_tokens: 3}\n")
    prompts = os.path.join(tmp, "prompts.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps({"prompt": "The quick brown fox jumps over the lazy dog. The quick "
                                      "brown fox", "max_tokens": 24}) + "\n")
        f.write(json.dumps({"prompt": "Hello world! Hello there, hello", "max_tokens": 16}) + "\n")
    out = json.loads(run("bench", "spec", "--pipeline", pipe, "--spec", "off", "--spec",
                         "draft:k=3", "--prompts", prompts, "--reps", "1", "--threads", "2",
                         "--json"))
    off, dr = out["variants"]
    check(out["model_loads"] == 1 and dr["proposer_model_loads"] == 1, out)
    check(dr["output_identical"] and dr["drafted"] > 0 and dr["accepted"] > 0, dr)
    # the int4 draft's weights, not the f32 target's again
    check(0 < dr["draft_memory"]["weight_bytes"] < os.path.getsize(tiny) // 2, dr)
    # plume generate runs the chained pipeline too, greedy: the target's text
    gen = ["generate", "--prompt", "Hello world", "--max-tokens", "12", "--temperature", "0"]
    with_draft = run(*gen, "--pipeline", pipe)
    alone = run(*gen, "--model", tiny)
    check(with_draft == alone, (with_draft, alone))
print("ok")
