#!/usr/bin/env python3
"""Runs llama.cpp's own convert_hf_to_gguf.py, as vendored by the
llama-cpp-python 0.3.36 sdist (scripts/fetch-llama-cpp downloads it once,
checks its sha256 and unpacks vendor/llama.cpp), with one thing replaced:
the BPE pre-tokenizer lookup.

The converter names a byte-level BPE tokenizer's pre-tokenizer by hashing
its ids for a fixed text and looking the hash up in a table of published
models (TextModel.get_vocab_base_pre); an unknown hash is refused.  The
tests' tiny tokenizers (make_tiny_model.build_tokenizer: 41 merges learned
from a short text) are in no such table, yet their pre-tokenizer is the one
the test states: GPT-2's ByteLevel(use_regex=True) regex by default, the
regex the table's entry for openai-community/gpt2 stands for, so the lookup
answers "gpt-2", the name the converter itself writes for GPT-2's
tokenizer; --pre-tokenizer NAME names another (the gpt-oss test's o200k
regex, "gpt-4o").  Everything else (the model classes, tensor names and
layouts, keys, vocabulary, --outtype) is the converter's own code, run
through its own main().

    python llamacpp_convert.py [--pre-tokenizer NAME] HF_DIR --outtype f32 --outfile OUT.gguf

Exits 77 (skip) when the converter cannot be fetched.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))
PRE_TOKENIZER = "gpt-2"


def converter_dir():
    """The vendored llama.cpp directory (scripts/fetch-llama-cpp), or None
    with the reason printed to stderr.  Found once per test: the answer is
    kept in PLUME_LLAMA_CPP_DIR, which the conversions it starts inherit, so
    the sdist's sha256 is not checked again for each of them."""
    known = os.environ.get("PLUME_LLAMA_CPP_DIR")
    if known and os.path.isfile(os.path.join(known, "convert_hf_to_gguf.py")):
        return known
    p = subprocess.run([os.path.join(ROOT, "scripts", "fetch-llama-cpp")], capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        print("scripts/fetch-llama-cpp failed: %s" % p.stderr.strip()[-300:], file=sys.stderr)
        return None
    os.environ["PLUME_LLAMA_CPP_DIR"] = p.stdout.strip().splitlines()[-1]
    return os.environ["PLUME_LLAMA_CPP_DIR"]


def command(hf, out, pre_tokenizer=PRE_TOKENIZER):
    """The command line that converts HF directory hf into out (F32)."""
    return [sys.executable, os.path.abspath(__file__), "--pre-tokenizer", pre_tokenizer, hf,
            "--outtype", "f32", "--outfile", out]


def main(argv):
    pre = PRE_TOKENIZER
    if argv[:1] == ["--pre-tokenizer"] and len(argv) >= 2:
        pre, argv = argv[1], argv[2:]
    src = converter_dir()
    if not src:
        print("SKIP: llama.cpp's converter could not be fetched (offline?); run "
              "scripts/fetch-llama-cpp", file=sys.stderr)
        return 77
    sys.path.insert(0, src)
    # imports its own gguf-py first (it puts gguf-py on sys.path), then its
    # conversion package
    import convert_hf_to_gguf
    from conversion.base import TextModel

    def get_vocab_base_pre(self, tokenizer):
        return pre
    TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [os.path.join(src, "convert_hf_to_gguf.py")] + argv
    convert_hf_to_gguf.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
