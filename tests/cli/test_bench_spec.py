"""`plume bench spec` on the tiny model: variants given with repeatable
--spec METHOD[:KEY=VALUE,...]; k is the engine's, every other key is the
proposer's setting, checked by the provider's own validate before the
model loads."""
import json
import os
import subprocess
import sys
import tempfile

plume, tiny = sys.argv[1:3]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from make_tiny_model import HPARAMS  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402


def approx(x):
    """Equal to x within float32 rounding."""
    class A:
        def __eq__(self, y):
            return abs(y - x) < 1e-6
    return A()


def run(*args, rc=0):
    r = subprocess.run([plume, "bench", "spec", "--model", tiny, *args], capture_output=True,
                       text=True)
    check(r.returncode == rc, (args, r.returncode, r.stdout, r.stderr))
    return r


with tempfile.TemporaryDirectory() as tmp:
    prompts = os.path.join(tmp, "prompts.jsonl")
    with open(prompts, "w") as f:
        f.write(json.dumps({"prompt": "The quick brown fox jumps over the lazy dog. The quick "
                                      "brown fox", "max_tokens": 24}) + "\n")
        f.write(json.dumps({"prompt": "Hello world! Hello there, hello", "max_tokens": 16}) + "\n")
    common = ["--prompts", prompts, "--reps", "1", "--threads", "2", "--json"]

    r = run("--spec", "off", "--spec", "ngram:k=3,prompt_lookup_max=2", "--spec", "ngram",
            *common)
    out = json.loads(r.stdout)
    check(out["model_loads"] == 1, out)
    names = [v["name"] for v in out["variants"]]
    check(names == ["off", "ngram:k=3,prompt_lookup_max=2", "ngram"], names)
    check(all(v["output_identical"] for v in out["variants"]), out)  # greedy: drafts change nothing
    check(out["variants"][0]["drafted"] == 0 and out["variants"][1]["drafted"] > 0, out)
    # swapping proposers reloads nothing; ngram and off load no model of their own
    check(all(v["proposer_model_loads"] == 0 and not v["proposer_loaded_model"]
              for v in out["variants"]), out)

    # the engine's adaptive keys per variant: same greedy output; a bound of 1
    # at batch 2 skips the steps where both decode
    out = json.loads(run("--spec", "off", "--spec", "ngram:k=3,adaptive=true",
                         "--spec", "ngram:k=3,disable_above_batch=1",
                         "--spec", "ngram:k=3,disable_above_batch=auto,adaptive=false",
                         "--batch", "2", *common).stdout)
    check(out["model_loads"] == 1, out)
    check(all(v["output_identical"] for v in out["variants"]), out)
    check(out["variants"][2]["steps_skipped"] > 0 and out["variants"][1]["steps_skipped"] == 0,
          out)

    # a variant of the pipeline's own method inherits its speculative settings:
    # `--spec draft:k=2` uses the pipeline's draft model (the tiny model itself
    # here, given relative to the pipeline file's directory)
    pipe = os.path.join(tmp, "sub", "draft.yaml")
    os.makedirs(os.path.dirname(pipe))
    rel = os.path.relpath(os.path.abspath(tiny), os.path.dirname(pipe))
    with open(pipe, "w") as f:
        f.write(f"model: {os.path.abspath(tiny)}\nplugins: [spec-draft]\n"
                f"speculative: {{method: draft, model: {rel}, num_speculative_tokens: 3}}\n")
    r = subprocess.run([plume, "bench", "spec", "--pipeline", pipe, "--spec", "off", "--spec",
                        "draft:k=2", *common], capture_output=True, text=True)
    check(r.returncode == 0, (r.stdout, r.stderr))
    out = json.loads(r.stdout)
    check(out["model_loads"] == 1 and out["variants"][1]["proposer_model_loads"] == 1, out)
    check(out["variants"][1]["output_identical"] and out["variants"][1]["drafted"] > 0, out)

    # draft time share and memory: off spends nothing; the draft proposer's
    # time is a share of the wall time, its memory its weights + KV + scratch
    def bench_pipe(*args):
        r = subprocess.run([plume, "bench", "spec", "--pipeline", pipe, *args], capture_output=True,
                           text=True)
        check(r.returncode == 0, (args, r.stdout, r.stderr))
        return r.stdout

    out = json.loads(bench_pipe("--spec", "off", "--spec", "draft:k=2,kv_max_tokens=256",
                                *common))
    off, dr = out["variants"]
    check(off["draft_time_share"] == 0 and off["draft_seconds"] == 0, off)
    check(off["draft_memory"] == {"weight_bytes": 0, "kv_bytes": 0, "scratch_bytes": 0,
                                  "total_bytes": 0}, off)
    check(0 < dr["draft_time_share"] < 1 and dr["draft_seconds"] > 0, dr)
    mem = dr["draft_memory"]
    # K and V of every layer for 256 positions (16 blocks of 16), f16 (the
    # draft's default kv_dtype)
    kv = 2 * HPARAMS["n_layer"] * 256 * HPARAMS["n_head_kv"] * HPARAMS["head_dim"] * 2
    check(mem["kv_bytes"] == kv, (mem, kv))
    check(0 < mem["weight_bytes"] < os.path.getsize(tiny) and mem["scratch_bytes"] > 0, mem)
    check(mem["total_bytes"] == mem["weight_bytes"] + mem["kv_bytes"] + mem["scratch_bytes"], mem)
    check(off["engine_spec_bytes"] == 0 and dr["engine_spec_bytes"] > 0, out)
    # kv_dtype=f32: the exact draft cache, twice the bytes
    f32 = json.loads(bench_pipe("--spec", "draft:k=2,kv_max_tokens=256,kv_dtype=f32", *common))
    check(f32["variants"][0]["draft_memory"]["kv_bytes"] == 2 * kv, f32["variants"][0])

    # sampled: every request at the temperature, outputs not compared
    out = json.loads(bench_pipe("--spec", "off", "--spec", "draft:k=2", "--temperature", "0.8",
                                "--top-k", "7", "--seed", "3", *common))
    check(out["sampling"]["temperature"] == approx(0.8) and out["sampling"]["top_k"] == 7 and
          out["sampling"]["seed"] == 3, out["sampling"])
    check(all(v["output_identical"] is None for v in out["variants"]), out)
    dr = out["variants"][1]
    check(dr["drafted"] > 0 and 0 <= dr["accepted"] <= dr["drafted"], dr)
    text = bench_pipe("--spec", "off", "--spec", "draft:k=2", "--temperature", "0.8",
                      *common[:-1])
    rows = [ln.split() for ln in text.splitlines() if ln.startswith("draft:k=2 ") and "memory" not in ln]
    check(len(rows) == 1 and rows[0][5] == "n/a", text)  # the "same" column
    check("sampled at temperature 0.8" in text, text)
    text = bench_pipe("--spec", "off", "--spec", "draft:k=2", *common[:-1])
    rows = [ln.split() for ln in text.splitlines() if ln.startswith("draft:k=2 ") and "memory" not in ln]
    check(len(rows) == 1 and rows[0][5] == "yes", text)

    # the default variants
    names = [v["name"] for v in json.loads(run(*common).stdout)["variants"]]
    check(names == ["off", "ngram:k=3", "ngram:k=5"], names)

    # errors: one line, naming the --spec and what to do, before anything loads
    def fails(spec, rc, *needles):
        err = run("--spec", spec, *common, rc=rc).stderr.strip()
        check(len(err.splitlines()) == 1 and err.startswith("plume bench spec: "), err)
        for n in needles:
            check(n in err, (n, err))

    # the provider's validate (exit 1): a typo lists the accepted keys; a bad
    # value names the range
    fails("ngram:prompt_lookup_maxx=2", 1, "--spec ngram:prompt_lookup_maxx=2",
          "unknown key 'prompt_lookup_maxx'", "accepted:", "prompt_lookup_max")
    fails("ngram:prompt_lookup_min=3,prompt_lookup_max=2", 1, "prompt_lookup_max",
          "must be >= prompt_lookup_min")
    fails("ngram:prompt_lookup_min=0", 1, "prompt_lookup_min")
    # the command's own checks (usage errors, exit 2)
    fails("ngram:k=0", 2, "k must be given once, as an integer in [1, 32]")
    fails("ngram:k", 2, "'k' is not KEY=VALUE")
    fails("ngram:method=x", 2, "the method is the name before the colon")
    fails("ngram:adaptive=yes", 2, "adaptive must be true or false")
    fails("ngram:disable_above_batch=-1", 2, "disable_above_batch must be auto, 0 (never)")
    err = run("--spec", "nosuch", *common, rc=1).stderr
    check("no proposer 'nosuch'" in err and "spec-nosuch" in err and "--plugin-dir" in err, err)
    err = run("--variants", "off,ngram:k=3", rc=2).stderr
    check("replaced by --spec" in err, err)
    err = run("--top-p", "0", *common, rc=2).stderr
    check("top_p" in err, err)
    err = run("--temperature", "-1", *common, rc=2).stderr
    check("--temperature" in err, err)
print("ok")
