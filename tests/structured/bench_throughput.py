"""Batched decoding throughput with every sequence constrained by a JSON
schema vs the same batch unconstrained: N sequences, each made to
generate exactly MAX tokens (--ignore-eos; the schema is an array of at
least 200 objects, so it cannot end sooner), runs alternated R times.
Prints tok/s of each run and the ratio of the medians.  A benchmark:
asserts nothing.
Usage: bench_throughput.py PLUME MODEL [N] [MAX] [R]"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

plume, model = sys.argv[1:3]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 16
max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 128
rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 2
schema = {"type": "array", "minItems": 200, "items": {
    "type": "object", "additionalProperties": False, "required": ["name", "age", "city", "tags"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                   "city": {"enum": ["Paris", "Tokyo", "Lima", "Oslo"]},
                   "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}}}}
prompt = "List people as JSON objects with name, age, city and tags."


def run(constrained):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "l.jsonl")
        with open(path, "w") as f:
            for i in range(n):
                line = {"prompt": prompt, "chat": True, "max_tokens": max_tokens,
                        "temperature": 1.0, "seed": i}
                if constrained:
                    line["json_schema"] = schema
                f.write(json.dumps(line) + "\n")
        p = subprocess.run([plume, "generate", "-m", model, "--prompts-file", path,
                            "--ignore-eos", "--max-num-seqs", str(n)],
                           capture_output=True, text=True)
        if p.returncode:
            sys.exit(p.stderr)
        m = re.search(r"(\d+) generated tokens in ([\d.]+) s: ([\d.]+) tok/s", p.stderr)
        return float(m.group(3))


res = {False: [], True: []}
for r in range(rounds):
    for c in (False, True):
        res[c].append(run(c))
        print(f"round {r} {'constrained  ' if c else 'unconstrained'}: {res[c][-1]:.1f} tok/s",
              flush=True)
u, c = statistics.median(res[False]), statistics.median(res[True])
print(f"{n} sequences x {max_tokens} tokens: unconstrained {u:.1f} tok/s, constrained {c:.1f} "
      f"tok/s, ratio {c / u:.3f}")
