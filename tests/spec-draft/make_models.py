#!/usr/bin/env python3
"""Tiny-model fixtures of the draft-model proposer's tests, flat in OUTDIR:

  target.gguf        the tiny Llama of tests/meson.build (seed 5), F32: the target
  draft-q8_0.gguf    the same network in Q8_0: a close draft
  poor.gguf          a deliberately poor draft that still overlaps the target: every
                     weight MIX of the way from the target's (seed 5) to another
                     network's (seed 11), same tokenizer, F32, so that sampled drafts
                     are accepted sometimes and rejected often
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

# 0.1: the law test's sampled drafts are accepted about 20% of the time (0.2
# gives under 1%, the seed-11 network alone none: disjoint top-k sets)
MIX = 0.1


def write_mix(path, seed_a, seed_b, mix):
    """A GGUF whose weights are (1 - mix) * seed_a's + mix * seed_b's."""
    tok = make_tiny_model.build_tokenizer()
    n_vocab = len(tok[0])
    wa = make_tiny_model.random_weights("llama", seed_a, False, n_vocab)
    wb = make_tiny_model.random_weights("llama", seed_b, False, n_vocab)
    w = {k: ((1.0 - mix) * wa[k] + mix * wb[k]).astype(wa[k].dtype) for k in wa}
    make_tiny_model.write_gguf(path, "llama", make_tiny_model.hf_to_gguf_tensors("llama", w),
                               tok, "f32")


def main():
    out = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for name, kw in (("a", dict(seed=5)), ("c", dict(seed=5, quant=False, alt_vocab=True))):
            make_tiny_model.make(os.path.join(tmp, name), **kw)
        for src, dst in (("a/tiny.gguf", "target.gguf"), ("a/tiny-q8_0.gguf", "draft-q8_0.gguf"),
                         ("c/tiny.gguf", "altvocab.gguf")):
            shutil.copyfile(os.path.join(tmp, src), os.path.join(out, dst))
    write_mix(os.path.join(out, "poor.gguf"), 5, 11, MIX)
    return 0


if __name__ == "__main__":
    sys.exit(main())
