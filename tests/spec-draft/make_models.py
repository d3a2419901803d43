#!/usr/bin/env python3
"""Tiny-model fixtures of the draft-model proposer's tests, flat in OUTDIR:

  target.gguf        the tiny Llama of tests/meson.build (seed 5), F32: the target
  draft-q8_0.gguf    the same network in Q8_0: a close draft
  poor.gguf          another seed (11), same tokenizer: a deliberately poor draft
  altvocab.gguf      seed 5 with merges learned from another text: same size and
                     specials, different token texts from id 256 on (vocab check)

    python make_models.py OUTDIR
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import make_tiny_model  # noqa: E402


def main():
    out = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for name, kw in (("a", dict(seed=5)), ("b", dict(seed=11, quant=False)),
                         ("c", dict(seed=5, quant=False, alt_vocab=True))):
            make_tiny_model.make(os.path.join(tmp, name), **kw)
        for src, dst in (("a/tiny.gguf", "target.gguf"), ("a/tiny-q8_0.gguf", "draft-q8_0.gguf"),
                         ("b/tiny.gguf", "poor.gguf"), ("c/tiny.gguf", "altvocab.gguf")):
            shutil.copyfile(os.path.join(tmp, src), os.path.join(out, dst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
