"""The weight-format and backend slots through `plume generate --pipeline`,
with the fixture plugins (PLUME_FIXTURE_PLUGIN_DIR):
  - a pipeline with `plugins: [st-counting]` on an HF directory holding
    st-counting.marker reads the model through that format (its log shows
    the open and the tensor lookups; `plume check` names it) and generates
    the same tokens as the built-in default pipeline on the same directory;
  - `backend: picky-weights` (refuses F32 weights) fails the load and
    `backend: picky-kv` with `kv_cache: {dtype: f16}` fails the engine, each
    with one line naming the backend and what it cannot run."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

plume, tiny_gguf = sys.argv[1:3]
fixtures = os.environ["PLUME_FIXTURE_PLUGIN_DIR"]
hf = os.path.join(os.path.dirname(os.path.abspath(tiny_gguf)), "hf")


def run(*args, rc=0, env=None):
    r = subprocess.run([plume, *args], capture_output=True, text=True, env=env)
    check(r.returncode == rc, (args, r.returncode, r.stdout, r.stderr))
    return r


GEN = ["--plugin-dir", fixtures, "--prompt", "The quick brown fox", "--max-tokens", "12",
       "--temperature", "0", "--ignore-eos", "--threads", "2", "--json"]

tmp = tempfile.mkdtemp(prefix="plume-slots-cli-")
try:
    model = os.path.join(tmp, "model")
    shutil.copytree(hf, model)
    open(os.path.join(model, "st-counting.marker"), "w").close()
    log = os.path.join(tmp, "st-counting.log")
    env = dict(os.environ, PLUME_ST_COUNTING_LOG=log)

    pipe = os.path.join(tmp, "st.yaml")
    with open(pipe, "w") as f:
        f.write(f"model: {model}\nplugins: [st-counting]\n")

    r = run("check", "--pipeline", pipe, "--plugin-dir", fixtures, env=env)
    check("st-counting" in r.stdout, r.stdout)

    if os.path.exists(log):
        os.unlink(log)
    with_plugin = json.loads(run("generate", "--pipeline", pipe, *GEN, env=env).stdout)
    with open(log) as f:
        lines = f.read().splitlines()
    check(lines.count(f"open {model}") == 1, lines[:5])
    check("find model.embed_tokens.weight" in lines, lines[:5])
    check(sum(l.startswith("find ") for l in lines) >= 20, len(lines))
    check(lines[-1] == "close", lines[-3:])

    os.unlink(log)
    without = json.loads(run("generate", "--model", model, *GEN, env=env).stdout)
    check(not os.path.exists(log), "the default pipeline used st-counting")
    check(with_plugin["token_ids"] == without["token_ids"] and len(without["token_ids"]) == 12,
          (with_plugin["token_ids"], without["token_ids"]))

    # supports() refusals: one line naming the backend and the feature
    def refused(backend, extra, *needles):
        """Runs a pipeline on tiny.gguf with the fixture backend; returns its path."""
        path = os.path.join(tmp, backend + ".yaml")
        with open(path, "w") as f:
            f.write(f"model: {os.path.abspath(tiny_gguf)}\nplugins: [picky-backend]\n"
                    f"backend: {backend}\n{extra}")
        err = run("generate", "--pipeline", path, *GEN, rc=1).stderr.strip()
        check(len(err.splitlines()) == 1, err)
        for n in needles:
            check(n in err, (n, err))
        return path

    refused("picky-weights", "", "backend picky-weights cannot run", "type F32",
            "choose another backend")
    bad = refused("picky-kv", "kv_cache: {dtype: f16}\n",
                  "backend picky-kv cannot store the KV cache as f16", "use kv_cache.dtype f32")
    # no dtype: the default cache is f16, refused the same way, saying how to get f32
    dflt = refused("picky-kv", "", "backend picky-kv cannot store the KV cache as f16",
                   "(--kv-dtype f32)")
    # the same backend runs an f32 cache, given in the pipeline or on the command line
    run("generate", "--pipeline", bad, "--kv-dtype", "f32", *GEN)
    run("generate", "--pipeline", dflt, "--kv-dtype", "f32", *GEN)
    with open(dflt, "a") as f:
        f.write("kv_cache: {dtype: f32}\n")
    run("generate", "--pipeline", dflt, *GEN)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("ok")
