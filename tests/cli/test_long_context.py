#!/usr/bin/env python3
"""Greedy SmolLM2 on a long prompt (about 1100 tokens: several split-K chunks
of attention for every decode step, many prefill tiles) gives the same
tokens at 1, 3 and 4 threads and prefill chunks of 512 or 96, with
the f16 and the int8 KV cache: the row-independence property through the
split and unsplit attention paths.  Skips (77) when the model is absent.

usage: test_long_context.py PLUME_BINARY
"""
import json
import os
import subprocess
import sys

ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TEXT = os.path.join(ROOT, "bench", "data", "eval-heldout.txt")


def main():
    plume = sys.argv[1]
    if not os.path.exists(MODEL):
        print(f"SKIP: {MODEL} is absent (scripts/fetch-model)")
        return 77
    with open(TEXT, encoding="utf-8") as f:
        prompt = f.read()[:5000]
    failures = []
    for kv in ["f16", "int8"]:
        seen = {}
        for threads, batched in [(1, 512), (3, 512), (4, 96)]:
            r = subprocess.run([plume, "generate", "--model", MODEL, "--prompt", prompt,
                                "--max-tokens", "6", "--temperature", "0", "--ignore-eos",
                                "--json", "--kv-dtype", kv, "--threads", str(threads),
                                "--max-batched-tokens", str(batched)],
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                failures.append(f"{kv} threads {threads}: exit {r.returncode}: {r.stderr[-300:]}")
                continue
            out = json.loads(r.stdout)
            if out["prompt_tokens"] < 1000:
                failures.append(f"prompt is only {out['prompt_tokens']} tokens")
            seen[(threads, batched)] = out["token_ids"]
            print(f"{kv} threads {threads} max-batched-tokens {batched}: {out['token_ids']}")
        if len(set(tuple(v) for v in seen.values())) > 1:
            failures.append(f"{kv}: greedy tokens differ between runs: {seen}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
