"""Structured outputs end to end: every schema of schema_corpus.json is
asked of SmolLM2 through `plume generate` JSONL lines ("json_schema",
greedy and at temperature 1), and every completion that ends by stop must
parse and validate with Python's jsonschema; completions cut by max_tokens
must say finish_reason "length".  Regex and choice lines must match 100%.
A few lines also run through response_format and guided_* and with
speculative decoding (ngram drafts: drafts outside the grammar are
rejected).  Usage: test_schema_corpus.py PLUME MODEL CORPUS"""
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema

plume, model, corpus_path = sys.argv[1:4]
if not os.path.exists(model):
    print(f"SKIP: {model} is missing (scripts/fetch-model fetches it)")
    sys.exit(77)
corpus = json.load(open(corpus_path))
MAX_TOKENS = 160
# A sanitized build (PLUME_TEST_SANITIZED=1) runs every check on every fourth
# schema: memory safety of the same paths, in a quarter of the time (the whole
# corpus runs in the release build).
if os.environ.get("PLUME_TEST_SANITIZED") == "1":
    corpus = corpus[::4]


def prompt_for(entry):
    return ("Reply with only a JSON value for " + entry["description"] +
            ", matching this JSON schema: " + json.dumps(entry["schema"]))


def run(lines, speculative=False):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lines.jsonl")
        with open(path, "w") as f:
            for l in lines:
                f.write(json.dumps(l) + "\n")
        src = ["-m", model]
        if speculative:
            pipe = os.path.join(tmp, "spec.yaml")
            with open(pipe, "w") as f:
                f.write("model: %s\nplugins: [spec-ngram]\n"
                        "speculative: { method: ngram, num_speculative_tokens: 4 }\n" % model)
            src = ["--pipeline", pipe]
        p = subprocess.run([plume, "generate", *src, "--prompts-file", path,
                            "--max-num-seqs", "32"],
                           capture_output=True, text=True, timeout=1500)
    if p.returncode != 0:
        print("\n".join(failures[:40]))
        sys.exit(f"plume generate failed ({p.returncode}): {p.stderr[-2000:]}")
    out = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    out.sort(key=lambda r: r["index"])
    assert len(out) == len(lines), (len(out), len(lines))
    return out


failures = []
summary = []


def check_schema_results(label, results, schemas):
    n_stop = n_ok = n_len = 0
    for r, (name, schema) in zip(results, schemas):
        if r["finish_reason"] == "length":
            n_len += 1
            continue
        if r["finish_reason"] != "stop":
            failures.append(f"{label} {name}: finish_reason {r['finish_reason']}: {r.get('error')}")
            continue
        n_stop += 1
        try:
            v = json.loads(r["text"])
            jsonschema.validators.validator_for(schema)(schema).validate(v)
            n_ok += 1
        except Exception as e:  # noqa: BLE001 - any parse or validation failure is a failure
            failures.append(f"{label} {name}: {type(e).__name__}: {str(e)[:200]} :: {r['text'][:300]!r}")
    summary.append(f"{label}: {n_ok}/{n_stop} ended by stop validate, {n_len} hit max_tokens "
                   f"(finish_reason length), of {len(results)}")
    print(summary[-1], flush=True)
    return n_stop


# 1. the corpus, greedy and at temperature 1
for temp in (0.0, 1.0):
    lines = [{"prompt": prompt_for(e), "chat": True, "max_tokens": MAX_TOKENS,
              "temperature": temp, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 1000 + i,
              "json_schema": e["schema"]} for i, e in enumerate(corpus)]
    res = run(lines)
    n_stop = check_schema_results(f"corpus temperature {temp}", res,
                                  [(e["name"], e["schema"]) for e in corpus])
    if n_stop < len(corpus) // 2:
        failures.append(f"temperature {temp}: only {n_stop} of {len(corpus)} ended by stop")

# 2. regex and choice
regexes = [r"\d{3}-\d{3}-\d{4}", r"[A-Z][a-z]{2,8} [A-Z][a-z]{2,10}", r"(yes|no|maybe)",
           r"#[0-9a-f]{6}", r"[a-z]+@[a-z]+\.(com|org|net)", r"\d{4}-\d{2}-\d{2}",
           r"(\+|-)?\d+(\.\d{1,2})?", r"[A-Z]{2,3}-\d{1,5}"]
choices = [["yes", "no"], ["red", "green", "blue"], ["positive", "negative", "neutral"],
           ["A", "B", "C", "D"], ["cat", "category", "dog"]]
lines, expect = [], []
for temp in (0.0, 1.0):
    for i, rx in enumerate(regexes):
        lines.append({"prompt": f"Write a string matching the regex {rx}", "chat": True,
                      "max_tokens": 40, "temperature": temp, "seed": 7 + i, "regex": rx})
        expect.append(("regex", rx))
    for i, ch in enumerate(choices):
        lines.append({"prompt": f"Pick one of {', '.join(ch)}.", "chat": True, "max_tokens": 10,
                      "temperature": temp, "seed": 70 + i, "guided_choice": ch})
        expect.append(("choice", ch))
res = run(lines)
n_ok = n_stop = 0
for r, (kind, spec) in zip(res, expect):
    if r["finish_reason"] != "stop":
        if r["finish_reason"] != "length":
            failures.append(f"{kind} {spec}: finish_reason {r['finish_reason']} {r.get('error')}")
        continue
    n_stop += 1
    ok = re.fullmatch(spec, r["text"]) if kind == "regex" else r["text"] in spec
    if ok:
        n_ok += 1
    else:
        failures.append(f"{kind} {spec}: {r['text']!r} does not match")
summary.append(f"regex and choice: {n_ok}/{n_stop} ended by stop match, of {len(res)}")
print(summary[-1], flush=True)

# 3. OpenAI / vLLM shapes, and speculative decoding with ngram drafts
sub = corpus[::6]
shapes = []
for i, e in enumerate(sub):
    line = {"prompt": prompt_for(e), "chat": True, "max_tokens": MAX_TOKENS, "seed": i,
            "temperature": 0.0 if i % 2 else 1.0}
    if i % 3 == 0:
        line["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": e["name"], "schema": e["schema"],
                                                   "strict": True}}
    elif i % 3 == 1:
        line["guided_json"] = e["schema"]
    else:
        line["guided_json"] = json.dumps(e["schema"])
    shapes.append(line)
shapes.append({"prompt": "Describe a cat as JSON.", "chat": True, "max_tokens": MAX_TOKENS,
               "response_format": {"type": "json_object"}})
schemas = [(e["name"], e["schema"]) for e in sub] + [("json_object", {"type": "object"})]
plain = run(shapes)
check_schema_results("response_format/guided_json", plain, schemas)
spec = run(shapes, speculative=True)
check_schema_results("speculative ngram k=4", spec, schemas)
# greedy lines: drafts verified against the masked distribution and rolled
# back give the tokens decoding one at a time gives
for i, (a, b) in enumerate(zip(plain, spec)):
    if shapes[i].get("temperature") == 0.0 and a["token_ids"] != b["token_ids"]:
        failures.append(f"greedy line {i}: speculative tokens differ from plain decoding: "
                        f"{a['text'][:120]!r} vs {b['text'][:120]!r}")
drafted = sum(r.get("spec", {}).get("drafted", 0) for r in spec)
summary.append(f"speculative: {drafted} tokens drafted over {len(spec)} requests")
print(summary[-1], flush=True)

if failures:
    print(f"{len(failures)} failures:")
    print("\n".join(failures[:40]))
    sys.exit(1)
