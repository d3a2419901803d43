"""`plume bench throughput` on the tiny model: --model alone (the built-in
default pipeline) and --pipeline FILE on the same model serve the same
seeded workload to the same token counts and steps (greedy, the engine
settings are the command's own); a missing model is one clear line."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

plume, tiny = sys.argv[1:3]


def bench(*args, rc=0):
    r = subprocess.run([plume, "bench", "throughput", "--num-seqs", "4", "--input-len", "8-24",
                        "--output-len", "4-8", "--threads", "2", "--json", *args],
                       capture_output=True, text=True)
    check(r.returncode == rc, (args, r.returncode, r.stdout, r.stderr))
    return r


by_model = json.loads(bench("--model", tiny).stdout)
with tempfile.TemporaryDirectory() as tmp:
    pipe = os.path.join(tmp, "p.yaml")
    with open(pipe, "w") as f:
        f.write(f"model: {tiny}\nbackend: cpu\nthreads: 1\n")
    by_pipe = json.loads(bench("--pipeline", pipe).stdout)
for k in ("generated_tokens", "prompt_tokens", "steps", "prefill_positions"):
    check(by_model[k] == by_pipe[k], (k, by_model, by_pipe))
check(by_model["generated_tokens"] >= 16 and by_model["throughput_tok_s"] > 0, by_model)
r = bench("--model", "/nonexistent.gguf", rc=1)
check(r.stderr.count("\n") == 1 and "/nonexistent.gguf" in r.stderr, r.stderr)
r = bench(rc=2)
check("give --model PATH or --pipeline FILE" in r.stderr, r.stderr)
print("ok")
