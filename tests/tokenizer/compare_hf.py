#!/usr/bin/env python3
"""Compare plume's tokenizer with the HF `tokenizers` one built from the same GGUF.

usage: compare_hf.py TOKENIZE_TOOL [MODEL.gguf]

The HF tokenizer comes from transformers' GGUF integration
(get_gguf_tokenizer + convert_gguf_tokenizer).  transformers' GGUF reader
module imports torch, which is not installed, so it is replaced in
sys.modules by a small one on top of the `gguf` package.

For the pre-tokenizers that split digits first (smollm, starcoder, ...)
transformers' converter keeps GPT-2's plain ByteLevel pre-tokenizer, while
the models' own tokenizer.json (and llama.cpp) use
Sequence[Digits(individual_digits=True), ByteLevel]; the reference is set
to the latter (the converter's version is checked too, and its differences
are only reported).

Compares ids with parse_special on (HF always matches added tokens) for
every string, ids with parse_special off for strings without special-token
text, and the decoded text.  Hostile byte strings (control bytes, invalid
UTF-8) go in as hex (tokenize_tool --hex) and must give HF's ids for the
text decoded with U+FFFD replacement, and never a special token.  Also loads the HF tokenizer's tokenizer.json
into plume and compares again.  Exits 77 (skip) when the model or the
Python packages are missing, 1 on any mismatch.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from gguf_tokenize import install_reader_stub  # noqa: E402

SKIP = 77
LLAMA3_RX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
            r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DIGITS_FIRST = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone"}


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def hf_tokenizer(model_path):
    """(tokenizers.Tokenizer as the model's own tokenizer.json would build it,
    the converter's unmodified tokenizer, pre-tokenizer name)."""
    try:
        import gguf  # noqa: F401
        import tokenizers
        from tokenizers import pre_tokenizers
    except ImportError as e:
        skip(f"python packages missing ({e}); use the project's .venv")
    install_reader_stub()
    try:
        from transformers.integrations.gguf import gguf_tokenizer_mapping as m
    except ImportError as e:
        skip(f"transformers missing ({e})")
    arch, td, _cfg = m.get_gguf_tokenizer(model_path)
    converted, _ = m.convert_gguf_tokenizer(arch, td)
    ref = tokenizers.Tokenizer.from_str(converted.to_str())
    pre = td.get("pre_tokenizer_type")
    if pre in DIGITS_FIRST:
        ref.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
            ]
        )
    return ref, converted, pre


def fixed_strings():
    return [
        "",
        "Hello world",
        "Hello, world! How are you?",
        " leading space",
        "trailing space ",
        "   three leading spaces",
        "trailing spaces   ",
        "  both  ",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\t",
        "tabs\tbetween\twords\t\t",
        "line one\nline two\r\nline three\n\n\nend",
        "indented\n    code\n\tblock",
        "12345",
        "3.14159 and 2.71828",
        "The year 2024 had 366 days; 1,000,000 people.",
        "then  99 bottles",
        "phone: +1 (555) 123-4567",
        "a1b2c3 x86_64 i386 0x1F",
        "!!!???...,,,;;;:::",
        "punctuation: !@#$%^&*()_+-=[]{}|;':\",./<>?`~\\",
        "don't won't can't it's I'm you're we've they'll he'd",
        "DON'T WON'T IT'S",
        "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 ❤️ 🇫🇷",
        "中文字符测试，你好世界！",
        "日本語のテキスト、こんにちは。",
        "한국어 텍스트 안녕하세요",
        "Ελληνικά και русский текст",
        "عربي עברית हिन्दी ไทย",
        "café naïve résumé Ångström Straße",
        "math: ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ π",
        "non\u00a0breaking\u2009thin\u3000ideographic spaces",
        "zero\u200bwidth\u200djoiner",
        "mixed CJK中文and English混合text",
        "def f(x):\n    return x ** 2  # square\n",
        "int main(void) { return 0; }",
        "<html><body>Hi</body></html>",
        "https://example.com/path?query=1&b=2#frag",
        "user@example.com",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "supercalifragilisticexpialidocious antidisestablishmentarianism",
        "\u0085next line\u2028line sep\u2029para sep",
        "tab\t \tmix \t",
        " \n \n ",
    ]


def special_strings():
    return [
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|endoftext|>",
        "text<|endoftext|>more text",
        " <|im_start|> spaced <|im_end|> ",
        "<|im_start|><|im_end|><|im_start|>",
        "<|im_start|>user\n中文 😀 123<|im_end|>",
        "<|im_start|assistant",
        "<|im_end|>\n\n",
        "<repo_name>plume<file_sep>main.c",
    ]


def random_strings(n, seed=1234):
    pool = (
        list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        + list("0123456789")
        + list(" " * 12 + "\t\n\r")
        + list(".,;:!?'\"-()[]{}<>/\\|@#$%^&*_+=~`")
        + list("éèüßñçøåÆŒ")
        + list("中文字符日本語한국어")
        + ["😀", "👍", "🏽", "\u200d", "❤", "\ufe0f"]
        + ["\u00a0", "\u3000", "\u2009", "\u0085"]
        + ["'s", "'t", "'re", "'ll", " the", " and", "ing", "tion"]
    )
    rng = random.Random(seed)
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 60))) for _ in range(n)]


def hostile_bytes(n_random, seed=4321):
    """Byte strings a vocabulary cannot map directly: control bytes, invalid
    UTF-8 (bytes that never occur in it, overlongs, surrogates, truncated
    and out-of-range sequences) and random bytes.  None holds special-token
    text."""
    fixed = [
        b"\x04", b"a\x04b", b"\xc0", b"\xc0\x80", b"\xc1\xbf", b"\xf5", b"\xff", b"\xfe\xff",
        b"abc\xc3(\xe4\xb8", b"\xe2\x82", b"\xe2\x82 x", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
        b"\xf0\x9f\x98", b"\x80\x80\x80", b"\x00", b"nul\x00inside", b"hi\x7fthere",
        bytes(range(0x00, 0x20)), bytes(range(0x80, 0x100)), b"<|im_start|\xff>", b"12\xff34",
    ]
    fixed += [b"x" + bytes([b]) + b"y" for b in range(256)]
    rng = random.Random(seed)
    pool = list(range(256)) + [0x20] * 40 + list(b"abcdefghij") * 8
    rand = [bytes(rng.choice(pool) for _ in range(rng.randint(1, 40))) for _ in range(n_random)]
    return fixed + rand


def run_tool(tool, model, strings, special, extra=()):
    args = [tool, model] + (["--special"] if special else []) + list(extra)
    inp = "".join(json.dumps(s) + "\n" for s in strings)
    p = subprocess.run(args, input=inp, capture_output=True, text=True, encoding="utf-8")
    if p.returncode != 0:
        print(p.stderr)
        raise SystemExit(f"tokenize_tool failed with exit code {p.returncode}")
    lines = p.stdout.splitlines()
    if len(lines) != len(strings):
        raise SystemExit(f"tokenize_tool gave {len(lines)} lines for {len(strings)} strings")
    return [json.loads(line) for line in lines]


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    tool = sys.argv[1]
    root = os.environ.get("PLUME_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
    model = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(model):
        skip(f"model {model} not found")
    ref, converted, pre = hf_tokenizer(model)
    print(f"model {model}, pre-tokenizer {pre!r}")

    plain = fixed_strings() + random_strings(400)
    special = special_strings()
    failures = 0

    def compare(label, strings, got, hf, parse_special):
        nonlocal failures
        for s, g in zip(strings, got):
            want = hf.encode(s, add_special_tokens=False).ids
            if g["ids"] != want:
                failures += 1
                print(f"MISMATCH [{label}] {s!r}\n  plume: {g['ids']}\n  hf:    {want}")
                continue
            text = hf.decode(want, skip_special_tokens=not parse_special)
            if g["text"] != text or (parse_special and text != s):
                failures += 1
                print(f"DECODE MISMATCH [{label}] {s!r}\n  plume: {g['text']!r}\n  hf:    {text!r}")

    got = run_tool(tool, model, plain + special, True)
    compare("gguf, parse_special", plain + special, got, ref, True)
    got = run_tool(tool, model, plain, False)
    compare("gguf, plain", plain, got, ref, False)

    # the same tokenizer loaded from tokenizer.json
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(ref.to_str())
        got = run_tool(tool, path, plain + special, True)
        compare("tokenizer.json, parse_special", plain + special, got, ref, True)

    # the other pre-tokenizer regexes, on the same vocabulary: the HF
    # tokenizer with a Split(regex) + ByteLevel pre-tokenizer as Llama 3 and
    # Qwen2's tokenizer.json have it, loaded into plume from tokenizer.json
    from tokenizers import Regex, Tokenizer, pre_tokenizers
    for name, rx, ignore_merges in (("llama3", LLAMA3_RX, True), ("qwen2", QWEN2_RX, False)):
        spec = json.loads(ref.to_str())
        spec["model"]["ignore_merges"] = ignore_merges
        variant = Tokenizer.from_str(json.dumps(spec))
        variant.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(rx), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "tokenizer.json")
            with open(path, "w", encoding="utf-8") as f:
                f.write(variant.to_str())
            got = run_tool(tool, path, plain + special, True)
            compare(f"{name} regex, tokenizer.json", plain + special, got, variant, True)

    # hostile bytes: text never becomes a special token (with or without
    # special parsing); invalid UTF-8 is read as U+FFFD and a byte with no
    # token is dropped, as HF does with the decoded text
    hostile = hostile_bytes(200)
    special_ids = {i for i, t in ref.get_added_tokens_decoder().items() if t.special}
    n_hostile = 0
    for label, path in (("gguf", model), ("tokenizer.json", None)):
        with tempfile.TemporaryDirectory() as d:
            if path is None:
                path = os.path.join(d, "tokenizer.json")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(ref.to_str())
            for parse_special in (False, True):
                got = run_tool(tool, path, [b.hex() for b in hostile], parse_special, ["--hex"])
                n_hostile += len(hostile)
                for b, g in zip(hostile, got):
                    text = b.decode("utf-8", errors="replace")
                    want = ref.encode(text, add_special_tokens=False).ids
                    bad = special_ids.intersection(g["ids"])
                    if g["ids"] != want or bad:
                        failures += 1
                        print(f"MISMATCH [hostile bytes, {label}, special={parse_special}] {b!r}"
                              f"\n  plume: {g['ids']}\n  hf:    {want}"
                              + (f"\n  special tokens from text: {sorted(bad)}" if bad else ""))
                        continue
                    dec = ref.decode(want, skip_special_tokens=True)
                    # plume_detokenize returns a C string: text after a NUL is not seen
                    if g["text"] != dec and "\x00" not in dec:
                        failures += 1
                        print(f"DECODE MISMATCH [hostile bytes, {label}] {b!r}\n"
                              f"  plume: {g['text']!r}\n  hf:    {dec!r}")

    # informational: transformers' converter as is
    n_conv = sum(
        1 for s, g in zip(plain + special, run_tool(tool, model, plain + special, True))
        if g["ids"] != converted.encode(s, add_special_tokens=False).ids
    )
    print(f"note: {n_conv} of {len(plain) + len(special)} strings differ from transformers' "
          f"unmodified GGUF converter (it omits the digit split of {pre!r})"
          if pre in DIGITS_FIRST else f"note: converter differences: {n_conv}")

    total = 5 * len(plain) + 4 * len(special) + n_hostile
    if failures:
        print(f"FAIL: {failures} mismatches in {total} comparisons")
        return 1
    print(f"OK: {total} comparisons agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
