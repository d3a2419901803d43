"""What the Python tests that drive the `plume` CLI share: the project's
paths, a check() that records failures and the exit status over them,
running plume, reading its logits, a float copy of a quantized checkpoint,
and the usual main (TINY_GGUF [--part tiny|smollm2|all]; exit 0 pass,
1 fail, 77 skip).  Import after _venv.ensure()."""

import argparse
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))
BUILD_ROOT = os.environ.get("PLUME_BUILD_ROOT", os.path.join(SOURCE_ROOT, "build"))
PLUME = os.environ.get("PLUME_BIN", os.path.join(BUILD_ROOT, "core", "src", "cli", "plume"))
SMOL = os.path.join(SOURCE_ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
DATA = os.path.join(SOURCE_ROOT, "bench", "data")

failures = []


def check(cond, msg):
    """Prints ok/FAIL and the message; a failure is remembered for main."""
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond:
        failures.append(msg)


def run(*args, env=None, ok=True):
    """Runs plume with args (env: extra variables); with ok, a non-zero exit
    raises with plume's stderr."""
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([PLUME] + list(args), capture_output=True, text=True, env=e)
    if ok and r.returncode != 0:
        raise RuntimeError("plume %s failed (%d): %s" % (" ".join(args[:3]), r.returncode, r.stderr))
    return r


def plume_logits(model, ids, tmp, env=None):
    """plume's logits of the last of ids (one forward, no sampling), with the
    exact f32 KV cache the oracles are compared with."""
    import numpy as np
    path = os.path.join(tmp, "logits.bin")
    run("generate", "--model", model, "--prompt-ids", ",".join(map(str, ids)), "--max-tokens", "1",
        "--temperature", "0", "--json", "--logits-out", path, "--kv-dtype", "f32", env=env)
    return np.fromfile(path, dtype="<f4")


def main(prefix, test_tiny, test_smollm2):
    """Parses TINY_GGUF [--part], skips (77) without the plume binary, runs
    test_tiny(tiny_gguf, tmp) and/or test_smollm2(tmp) (which returns False
    when it skipped) in a temporary directory, and returns the exit code."""
    ap = argparse.ArgumentParser()
    ap.add_argument("tiny_gguf")
    ap.add_argument("--part", choices=("tiny", "smollm2", "all"), default="all")
    a = ap.parse_args()
    if not os.access(PLUME, os.X_OK):
        print("SKIP: plume binary not built at %s" % PLUME)
        return 77
    ran_smol = True
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        if a.part in ("tiny", "all"):
            test_tiny(a.tiny_gguf, tmp)
        if a.part in ("smollm2", "all"):
            ran_smol = test_smollm2(tmp)
    if not failures and a.part == "smollm2" and not ran_smol:
        return 77
    return outcome()


def outcome():
    """The exit status over check(): 1 when a check failed, else 0, after
    saying so."""
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


def float_copy(qdir, fdir, dequant):
    """Writes to fdir a float HF checkpoint computing what qdir's quantized
    layers compute: each layer's .weight is dequant(tensors, prefix), every
    other tensor (and the biases) as float32, the config without its
    quantization_config, the tokenizer files; returns (qdir's tensors, the
    layer prefixes).  Imports numpy and safetensors only here: the tests
    that do not quantize need neither."""
    import json
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    os.makedirs(fdir, exist_ok=True)
    t = load_file(os.path.join(qdir, "model.safetensors"))
    prefixes = sorted({k[: -len(".qweight")] for k in t if k.endswith(".qweight")})
    out = {p + ".weight": dequant(t, p) for p in prefixes}
    for k, v in t.items():
        if not any(k.startswith(p + ".") for p in prefixes) or k.endswith(".bias"):
            out[k] = v.astype(np.float32)
    save_file(out, os.path.join(fdir, "model.safetensors"))
    cfg = json.load(open(os.path.join(qdir, "config.json")))
    del cfg["quantization_config"]
    json.dump(cfg, open(os.path.join(fdir, "config.json"), "w"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(qdir, f), fdir)
    return t, prefixes
