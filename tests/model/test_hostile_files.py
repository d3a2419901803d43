#!/usr/bin/env python3
"""Hostile model files and prompts (issue #20): each must give one clear
error line that names the file and the field, quickly and without
allocating what a hostile count asks for; never a crash, a hang or a silent
fallback.

Writes the tiny model of tests/reference/make_tiny_model.py (GGUF and HF
directory), then variants of it with one field altered, and runs `plume
info` / `plume generate` / `plume tokenize` on them:
  GGUF   llama.block_count 5000000; a 100000-byte general.name (shown
         shortened); a 100000-byte rope.scaling.type (error shortened);
         optional keys of the wrong type (context_length "long", ...);
         special-token ids 4294967295 (optional: absent with one warning;
         EOS, or BOS with add_bos_token: an error)
  HF     num_hidden_layers 5000000; a vocabulary id and an added_tokens id
         near 2^31; a merge ["", ""]; chat_template 42
  JSONL  a line that is an array; "chat": "yes"
  SmolLM2 (when present) a control byte and invalid UTF-8 with --no-special
         give no special token

usage: test_hostile_files.py   (exit 0 pass, 1 fail, 77 skip)
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import _venv  # noqa: E402

_venv.ensure()

import harness  # noqa: E402
from harness import check  # noqa: E402

LIMIT_S = 60
AS_LIMIT = 8 << 30  # without ASan: a hostile count that allocates fails fast


def is_asan(binary):
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def plume(*args, env=None):
    """Runs plume with a time limit (and an address-space limit outside ASan)."""
    limit = None if is_asan(harness.PLUME) else (
        lambda: resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT)))
    try:
        return subprocess.run([harness.PLUME] + list(args), capture_output=True, text=True,
                              errors="replace", timeout=LIMIT_S, preexec_fn=limit, env=env)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, -9, "", "timed out after %d s" % LIMIT_S)


def expect_error(what, r, *needles):
    """r failed (not by a signal) with one stderr line holding every needle."""
    err = r.stderr.strip()
    ok = r.returncode > 0 and "\n" not in err and all(n in err for n in needles)
    check(ok, "%s: one-line error naming %s (exit %d: %s)"
          % (what, ", ".join(needles), r.returncode, err[:400]))


def write_gguf(path, hparams=None, name=None, extra=None, methods=None):
    """The tiny model as GGUF, with hparams overridden, general.name set to
    name, extra(writer) called before the tensors go in, and GGUFWriter
    methods replaced by methods (name -> function)."""
    import gguf
    import make_tiny_model as tm
    tok = tm.build_tokenizer()
    tensors = tm.hf_to_gguf_tensors("llama", tm.random_weights("llama", 0, False, len(tok[0])))
    saved = dict(tm.HPARAMS)
    orig_name, orig_add_tensor = gguf.GGUFWriter.add_name, gguf.GGUFWriter.add_tensor
    state = {"extra_done": False}

    def add_name(self, n):
        orig_name(self, name if name is not None else n)

    def add_tensor(self, *a, **kw):
        if extra and not state["extra_done"]:
            state["extra_done"] = True
            extra(self)
        orig_add_tensor(self, *a, **kw)
    originals = {m: getattr(gguf.GGUFWriter, m) for m in (methods or {})}
    try:
        tm.HPARAMS.update(hparams or {})
        gguf.GGUFWriter.add_name, gguf.GGUFWriter.add_tensor = add_name, add_tensor
        for m, fn in (methods or {}).items():
            setattr(gguf.GGUFWriter, m, fn)
        tm.write_gguf(path, "llama", tensors, tok, "f32")
    finally:
        tm.HPARAMS.clear()
        tm.HPARAMS.update(saved)
        gguf.GGUFWriter.add_name, gguf.GGUFWriter.add_tensor = orig_name, orig_add_tensor
        for m, fn in originals.items():
            setattr(gguf.GGUFWriter, m, fn)


def hf_variant(src, dst, file, edit):
    """A copy of the HF directory src at dst with edit(obj) applied to the
    JSON file `file`."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, file)
    with open(path, encoding="utf-8") as f:
        obj = json.load(f)
    edit(obj)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    return dst


def test_gguf(tmp):
    bomb = os.path.join(tmp, "layers.gguf")
    write_gguf(bomb, hparams={"n_layer": 5000000})
    expect_error("GGUF block_count 5000000", plume("info", bomb), bomb, "llama.block_count",
                 "5000000")

    named = os.path.join(tmp, "named.gguf")
    write_gguf(named, name="n" * 100000)
    r = plume("info", named)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("name:")]
    check(r.returncode == 0 and len(lines) == 1 and len(lines[0]) < 300,
          "a 100000-byte general.name is shown shortened (%s)"
          % (r.stderr.strip()[:200] or str([len(ln) for ln in lines])))

    rope = os.path.join(tmp, "rope.gguf")
    write_gguf(rope, extra=lambda w: w.add_string("llama.rope.scaling.type", "y" * 100000))
    r = plume("info", rope)
    expect_error("GGUF rope.scaling.type of 100000 bytes", r, rope, "llama.rope.scaling.type")
    check(len(r.stderr) < 1000, "the rope scaling error is shortened (%d bytes)" % len(r.stderr))

    # optional keys of the wrong type are errors, not silent defaults
    for method, key, value in (("add_context_length", "llama.context_length", "long"),
                               ("add_layer_norm_rms_eps", "llama.attention.layer_norm_rms_epsilon",
                                "tiny"),
                               ("add_head_count_kv", "llama.attention.head_count_kv", 1 << 40)):
        def put(self, _v, key=key, value=value):
            if isinstance(value, str):
                self.add_string(key, value)
            else:
                self.add_uint64(key, value)
        bad = os.path.join(tmp, "bad-%s.gguf" % method)
        write_gguf(bad, methods={method: put})
        expect_error("GGUF %s = %r" % (key, value), plume("info", bad), bad, key)


def test_special_ids(tmp):
    """An optional special-token id outside the vocabulary (llama2.c's
    exporter and older converters write 4294967295 for "none") means absent,
    with one warning, as llama.cpp reads it; a required one (EOS, or BOS
    with add_bos_token set) stays an error naming the key."""
    def put_id(key, value):
        return lambda self, _v: self.add_uint32(key, value)

    plain = os.path.join(tmp, "plain.gguf")
    write_gguf(plain)
    pad = os.path.join(tmp, "pad-none.gguf")
    write_gguf(pad, methods={"add_pad_token_id":
                             put_id("tokenizer.ggml.padding_token_id", 4294967295)})
    args = ["--prompt", "Hello world", "--max-tokens", "8", "--temperature", "0",
            "--threads", "1", "--json"]
    want = plume("generate", "--model", plain, *args)
    got = plume("generate", "--model", pad, *args)
    warnings = [ln for ln in got.stderr.splitlines() if "warning" in ln]
    check(want.returncode == 0 and got.returncode == 0,
          "padding_token_id 4294967295: the file loads and generates (exit %d: %s)"
          % (got.returncode, got.stderr.strip()[:300]))
    check(len(warnings) == 1 and "tokenizer.ggml.padding_token_id" in warnings[0]
          and "4294967295" in warnings[0],
          "padding_token_id 4294967295: exactly one warning naming the key (%s)" % warnings)
    if want.returncode == 0 and got.returncode == 0:
        check(json.loads(want.stdout)["token_ids"] == json.loads(got.stdout)["token_ids"],
              "padding_token_id 4294967295: the same greedy tokens as the unaltered file")

    eos = os.path.join(tmp, "eos-none.gguf")
    write_gguf(eos, methods={"add_eos_token_id":
                             put_id("tokenizer.ggml.eos_token_id", 4294967295)})
    expect_error("eos_token_id 4294967295", plume("info", eos), eos,
                 "tokenizer.ggml.eos_token_id", "4294967295")

    # BOS is required only when the tokenizer adds it (the tiny model does not)
    bos = os.path.join(tmp, "bos-none.gguf")
    write_gguf(bos, methods={"add_bos_token_id":
                             put_id("tokenizer.ggml.bos_token_id", 4294967295)})
    r = plume("info", bos)
    check(r.returncode == 0 and r.stderr.count("warning") == 1,
          "bos_token_id 4294967295 without add_bos_token: a warning, not an error (%s)"
          % r.stderr.strip()[:300])
    bos_added = os.path.join(tmp, "bos-none-added.gguf")
    write_gguf(bos_added, methods={
        "add_bos_token_id": put_id("tokenizer.ggml.bos_token_id", 4294967295),
        "add_add_bos_token": lambda self, _v: self.add_bool("tokenizer.ggml.add_bos_token", True)})
    expect_error("bos_token_id 4294967295 with add_bos_token", plume("info", bos_added),
                 bos_added, "tokenizer.ggml.bos_token_id")


def test_hf(tmp, hf):
    d = hf_variant(hf, os.path.join(tmp, "hf-layers"), "config.json",
                   lambda c: c.update(num_hidden_layers=5000000))
    expect_error("HF num_hidden_layers 5000000", plume("info", d), d, "num_hidden_layers",
                 "5000000")

    d = hf_variant(hf, os.path.join(tmp, "hf-vocab"), "tokenizer.json",
                   lambda t: t["model"]["vocab"].update({"zz": 2147483000}))
    expect_error("HF vocabulary id near 2^31", plume("info", d), "tokenizer.json", '"zz"',
                 "2147483000")

    def added_bomb(t):
        t["added_tokens"][0]["id"] = 2147483000
    d = hf_variant(hf, os.path.join(tmp, "hf-added"), "tokenizer.json", added_bomb)
    expect_error("HF added_tokens id near 2^31", plume("info", d), "tokenizer.json",
                 "added_tokens[0]", "2147483000")

    d = hf_variant(hf, os.path.join(tmp, "hf-merge"), "tokenizer.json",
                   lambda t: t["model"]["merges"].append(["", ""]))
    expect_error("HF merge [\"\", \"\"]", plume("info", d), "tokenizer.json", "merges[",
                 "empty")

    d = hf_variant(hf, os.path.join(tmp, "hf-template"), "tokenizer_config.json",
                   lambda c: c.update(chat_template=42))
    expect_error("HF chat_template 42", plume("info", d), "tokenizer_config.json",
                 "chat_template")


def test_jsonl(tmp, gguf_path):
    cases = [("[1, 2]", ("prompts.jsonl:1:", "array")),
             ('{"prompt": "hi", "chat": "yes"}', ("prompts.jsonl:1:", '"chat"')),
             ('{"prompt": "hi", "system": 42}', ("prompts.jsonl:1:", '"system"'))]
    for text, needles in cases:
        path = os.path.join(tmp, "prompts.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        r = plume("generate", "--model", gguf_path, "--prompts-file", path, "--max-tokens", "2",
                  "--threads", "1")
        expect_error("JSONL line %s" % text, r, *needles)
        check(":-1" not in r.stderr, "JSONL line %s: no column -1 in the error" % text)


def test_smollm2():
    if not os.path.exists(harness.SMOL):
        print("skip: %s not found" % harness.SMOL)
        return
    for text in ["\x04", "a\x04b"]:
        r = plume("tokenize", harness.SMOL, text, "--no-special", "--no-bos", "--json")
        ids = json.loads(r.stdout)["ids"] if r.returncode == 0 else None
        check(ids is not None and 0 not in ids,
              "SmolLM2: %r with --no-special has no <|endoftext|> (ids %s)" % (text, ids))


def main():
    if not os.access(harness.PLUME, os.X_OK):
        print("SKIP: plume binary not built at %s" % harness.PLUME)
        return 77
    try:
        import make_tiny_model as tm
        import gguf  # noqa: F401
    except ImportError as e:
        print("SKIP: tiny-model writer unavailable (%s)" % e)
        return 77
    with tempfile.TemporaryDirectory(prefix="plume_hostile_") as tmp:
        paths = tm.make(os.path.join(tmp, "tiny"), quant=False)
        test_gguf(tmp)
        test_special_ids(tmp)
        test_hf(tmp, paths["hf"])
        test_jsonl(tmp, paths["gguf"])
    test_smollm2()
    return harness.outcome()


if __name__ == "__main__":
    sys.exit(main())
