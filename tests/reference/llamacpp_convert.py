#!/usr/bin/env python3
"""Runs llama.cpp's own convert_hf_to_gguf.py, as vendored by the
llama-cpp-python 0.3.36 sdist (scripts/fetch-templates puts it, its
conversion/ package and its gguf-py/ under models/llama-cpp-convert-0.3.36/),
with one thing replaced: the BPE pre-tokenizer lookup.

The converter names a byte-level BPE tokenizer's pre-tokenizer by hashing
its ids for a fixed text and looking the hash up in a table of published
models (TextModel.get_vocab_base_pre); an unknown hash is refused.  The
tests' tiny tokenizer (make_tiny_model.build_tokenizer: 41 merges learned
from a short text) is in no such table, yet its pre-tokenizer is exactly
GPT-2's: tokenizers' ByteLevel(use_regex=True), the regex the table's entry
for openai-community/gpt2 stands for.  So the lookup answers "gpt-2", the
name the converter itself writes for GPT-2's tokenizer, when --pre-tokenizer
is not given.  Everything else (the model classes, tensor names and
layouts, keys, vocabulary, --outtype) is the converter's own code, run
through its own main().

    python llamacpp_convert.py [--pre-tokenizer NAME] HF_DIR --outtype f32 --outfile OUT.gguf

Exits 77 (skip) when the converter is not there (run scripts/fetch-templates).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))
CONVERTER = os.path.join(ROOT, "models", "llama-cpp-convert-0.3.36")
PRE_TOKENIZER = "gpt-2"


def main(argv):
    pre = PRE_TOKENIZER
    if argv[:1] == ["--pre-tokenizer"] and len(argv) >= 2:
        pre, argv = argv[1], argv[2:]
    if not os.path.isfile(os.path.join(CONVERTER, ".complete")):
        print("SKIP: llama.cpp's converter is not in %s; run scripts/fetch-templates" % CONVERTER,
              file=sys.stderr)
        return 77
    sys.path.insert(0, CONVERTER)
    # imports its own gguf-py first (sys.path), then its conversion package
    import convert_hf_to_gguf
    from conversion.base import TextModel

    def get_vocab_base_pre(self, tokenizer):
        return pre
    TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [os.path.join(CONVERTER, "convert_hf_to_gguf.py")] + argv
    convert_hf_to_gguf.main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
