"""Speculation per request through `plume generate --prompts-file` on the
tiny model with prompt-lookup speculation (spec-ngram): a line's
"speculative": false or "num_speculative_tokens": 0 gets no drafts while
the others speculate in the same batch, a cap of 1 drafts at most one token
a step, every output equals the one without speculation (greedy); bad
values are one clear line; the pipeline's adaptive keys parse and a bad
disable_above_batch names the choices."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

plume, tiny = sys.argv[1:3]


def run(args, rc=0):
    r = subprocess.run([plume, *args], capture_output=True, text=True)
    check(r.returncode == rc, (args, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r


PROMPT = "a b c d e f a b c d e f a b c d e f a b c"

with tempfile.TemporaryDirectory() as tmp:
    def pipeline(extra):
        path = os.path.join(tmp, "p.yaml")
        with open(path, "w") as f:
            f.write("model: %s\nplugins: [spec-ngram]\n"
                    "speculative: { method: ngram, num_speculative_tokens: 4%s }\n" % (tiny, extra))
        return path

    def generate(pipe, lines, rc=0):
        path = os.path.join(tmp, "in.jsonl")
        with open(path, "w") as f:
            for ln in lines:
                f.write(json.dumps(ln) + "\n")
        r = run(["generate", "--pipeline", pipe, "--prompts-file", path, "--temperature", "0",
                 "--threads", "2", "--max-tokens", "24", "--ignore-eos"], rc=rc)
        if rc:
            return r.stderr.strip()
        out = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        check(len(out) == len(lines), r.stdout)
        return sorted(out, key=lambda o: o["index"])

    lines = [{"prompt": PROMPT}, {"prompt": PROMPT, "speculative": False},
             {"prompt": PROMPT, "num_speculative_tokens": 0},
             {"prompt": PROMPT, "num_speculative_tokens": 1},
             {"prompt": PROMPT, "speculative": True, "num_speculative_tokens": -1}]
    for extra in ["", ", adaptive: true, disable_above_batch: 0",
                  ", adaptive: false, disable_above_batch: auto"]:
        out = generate(pipeline(extra), lines)
        ids = [o["token_ids"] for o in out]
        check(all(x == ids[0] for x in ids), ids)  # greedy: speculation changes nothing
        drafted = [o.get("spec", {}).get("drafted", 0) for o in out]
        check(drafted[1] == 0 and drafted[2] == 0, (extra, drafted))
        if "auto" in extra:
            continue  # the measured cost model may turn drafting off
        check(drafted[0] > 0 and drafted[3] > 0 and drafted[4] > 0, (extra, drafted))
        # at most one draft per target forward
        fw = [len(o["token_ids"]) / o["spec"]["tokens_per_forward"] for o in out]
        check(drafted[3] <= round(fw[3]), (drafted, fw))

    pipe = pipeline("")
    for bad, needle in [({"prompt": PROMPT, "speculative": "no"}, '"speculative" must be true or false'),
                        ({"prompt": PROMPT, "num_speculative_tokens": 1.5},
                         '"num_speculative_tokens" must be an integer: -1'),
                        ({"prompt": PROMPT, "num_speculative_tokens": -2},
                         '"num_speculative_tokens" must be an integer: -1'),
                        ({"prompt": PROMPT, "num_speculative_tokens": 5},
                         "num_speculative_tokens must be -1 (the engine's k), 0 (no speculation) "
                         "or 1..4")]:
        err = generate(pipe, [bad], rc=1)
        check(needle in err, (needle, err))

    err = run(["generate", "--pipeline", pipeline(", disable_above_batch: lots"), "--prompt", "a",
               "--max-tokens", "2"], rc=1).stderr.strip()
    check("disable_above_batch" in err and "auto" in err, err)
    err = run(["generate", "--pipeline", pipeline(", adaptive: maybe"), "--prompt", "a",
               "--max-tokens", "2"], rc=1).stderr.strip()
    check("adaptive" in err, err)
print("ok")
