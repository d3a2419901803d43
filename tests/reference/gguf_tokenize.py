#!/usr/bin/env python3
"""Tokenize text with the Hugging Face tokenizer rebuilt from a GGUF's metadata.

Used once to obtain the prompt ids hard-coded in test_against_plume.py, and
handy to regenerate them:  python gguf_tokenize.py MODEL.gguf "some text" ...

transformers' GGUF reader imports torch; we do not have torch, so the module
is replaced by a stand-in built on gguf-py's GGUFReader before importing the
tokenizer mapping.
"""

import json
import sys
import types


def install_reader_stub():
    """Puts a transformers.integrations.gguf.reader built on gguf-py in
    sys.modules, so that transformers' GGUF tokenizer mapping imports
    without torch."""
    from gguf import GGUFReader

    def read_gguf_metadata(path, string_arrays=()):
        r = GGUFReader(path)
        meta = {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}
        return meta, tuple(t.name for t in r.tensors)

    mod = types.ModuleType("transformers.integrations.gguf.reader")
    mod.read_gguf_metadata = read_gguf_metadata
    sys.modules["transformers.integrations.gguf.reader"] = mod


def hf_tokenizer(path):
    """Returns a `tokenizers.Tokenizer` for the GGUF at path."""
    install_reader_stub()
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        convert_gguf_tokenizer, get_gguf_tokenizer)

    arch, td, _cfg = get_gguf_tokenizer(path)
    tok, _ = convert_gguf_tokenizer(arch, td)
    return tok


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    tok = hf_tokenizer(argv[1])
    for text in argv[2:]:
        print(json.dumps({"text": text, "ids": tok.encode(text).ids}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
