#!/usr/bin/env python3
"""Greedy SmolLM2 on a long prompt (about 1100 tokens: several split-K chunks
of attention for every decode step, many prefill tiles) gives the same
tokens, and the prompt's last logits the same bits, at 1, 3 and 4 threads
and prefill chunks of 512 or 96, with each KV cache: the default (which
must report itself as f16), f32 and int8 given explicitly.  The
row-independence property through the split and unsplit attention paths.
A sanitized build (PLUME_TEST_SANITIZED=1) runs the same checks on the
default cache only: under ASan the nine runs took 952 s in a CI run on a
2-core machine (29 s unsanitized), against a 1350 s limit; the f32 and
int8 caches are checked in the release run.
Skips (77) when the model is absent.

usage: test_long_context.py PLUME_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

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
    with tempfile.TemporaryDirectory(prefix="plume-long-") as tmp:
        kvs = [None, "f32", "int8"]  # None: no --kv-dtype, the default f16
        if os.environ.get("PLUME_TEST_SANITIZED") == "1":
            kvs = [None]
            print("sanitized build: the default cache only (f32 and int8 in the release run)")
        for kv in kvs:
            name = kv or "default"
            seen = {}
            for threads, batched in [(1, 512), (3, 512), (4, 96)]:
                lf = os.path.join(tmp, f"{name}-{threads}-{batched}.bin")
                r = subprocess.run([plume, "generate", "--model", MODEL, "--prompt", prompt,
                                    "--max-tokens", "6", "--temperature", "0", "--ignore-eos",
                                    "--json", "--threads", str(threads), "--logits-out", lf,
                                    "--max-batched-tokens", str(batched)]
                                   + (["--kv-dtype", kv] if kv else []),
                                   capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    failures.append(f"{name} threads {threads}: exit {r.returncode}: {r.stderr[-300:]}")
                    continue
                out = json.loads(r.stdout)
                if out["prompt_tokens"] < 1000:
                    failures.append(f"prompt is only {out['prompt_tokens']} tokens")
                if out["kv_dtype"] != (kv or "f16"):
                    failures.append(f"{name}: the engine reports a {out['kv_dtype']} KV cache")
                with open(lf, "rb") as f:
                    seen[(threads, batched)] = (tuple(out["token_ids"]), f.read())
                print(f"{name} ({out['kv_dtype']}, {out['kv_bytes_per_token']} bytes/token) threads "
                      f"{threads} max-batched-tokens {batched}: {out['token_ids']}")
            if len(set(v[0] for v in seen.values())) > 1:
                failures.append(f"{name}: greedy tokens differ between runs: "
                                f"{ {k: v[0] for k, v in seen.items()} }")
            if len(set(v[1] for v in seen.values())) > 1:
                failures.append(f"{name}: the prompt's last logits differ in bits between runs")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
