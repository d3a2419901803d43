#!/usr/bin/env python3
"""Writes the checked-in seed corpora of tests/fuzz/corpus/ from real files.

  make_seeds.py SMOLLM2_GGUF TINY_DIR

SMOLLM2_GGUF is models/SmolLM2-135M-Instruct.Q4_1.gguf; TINY_DIR is the
directory tests/reference/make_tiny_model.py wrote (build/tests: tiny.gguf
and hf/).  Big arrays and tensors are cut so that the corpora stay small: the
GGUF seeds keep every metadata key and every tensor name and type but only
the first tokens of the vocabulary and tensors of a few elements.  Run it
again only to refresh the seeds; the fuzz tests read the checked-in files.
"""
import json
import os
import struct
import sys

import gguf
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
N_TOKENS = 320  # tokens kept from SmolLM2's 49152

# GGUF value type ids (formats.md §3.1)
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
          T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}


def gstr(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def gval(t, v, et=None):
    if t == T_STR:
        return gstr(v)
    if t == T_ARR:
        return struct.pack("<IQ", et, len(v)) + b"".join(gval(et, x) for x in v)
    return struct.pack(SCALAR[t], v)


def gguf_file(kvs, tensors, align=32):
    """kvs: [(key, type, value, elem_type)]; tensors: [(name, dims, ggml_type, bytes)]."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for k, t, v, et in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v, et)
    off = 0
    offsets = []
    for name, dims, tt, data in tensors:
        offsets.append(off)
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", tt, off)
        off += (len(data) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for (name, dims, tt, data), o in zip(tensors, offsets):
        out += data + b"\0" * (-len(data) % align)
    return bytes(out)


def small_tensor(tt):
    """dims and bytes of a small tensor of ggml type tt: one block row."""
    be, bb = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(tt)]
    ne0 = max(be, 32 // be * be) if be > 1 else 8
    return [ne0, 2], bytes((i * 37) & 0xFF for i in range(ne0 // be * bb * 2))


def read_kvs(path, cut_vocab):
    r = gguf.GGUFReader(path)
    kvs = []
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        t = int(f.types[0])
        et = int(f.types[1]) if t == T_ARR else None
        v = f.contents()
        if cut_vocab and k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            v = v[:N_TOKENS]
        if cut_vocab and k == "tokenizer.ggml.merges":
            toks = set(r.fields["tokenizer.ggml.tokens"].contents()[:N_TOKENS])
            v = [m for m in v if m.split(" ")[0] in toks and m.split(" ")[1] in toks
                 and m.replace(" ", "") in toks]
        if cut_vocab and k == "llama.vocab_size":
            v = N_TOKENS
        kvs.append((k, t, v, et))
    return r, kvs


def write(sub, name, data):
    d = os.path.join(CORPUS, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def gguf_seeds(smol, tiny_dir):
    r, kvs = read_kvs(smol, True)
    tensors = []
    for t in r.tensors[:24]:  # names and types of the first layers, data cut to one row
        dims, data = small_tensor(int(t.tensor_type))
        tensors.append((t.name, dims, int(t.tensor_type), data))
    write("gguf", "smollm2_cut.gguf", gguf_file(kvs, tensors))
    write("gguf", "smollm2_meta_only.gguf", gguf_file(kvs, []))
    with open(smol, "rb") as f:
        write("gguf", "smollm2_first4k.gguf", f.read(4096))
    r2, kvs2 = read_kvs(os.path.join(tiny_dir, "tiny.gguf"), False)
    tensors = []
    for t in r2.tensors:
        dims, data = small_tensor(int(t.tensor_type))
        tensors.append((t.name, dims, int(t.tensor_type), data))
    write("gguf", "tiny_cut.gguf", gguf_file(kvs2, tensors, align=64))
    return r, kvs


def st_file(tensors, meta=None):
    hdr, off, body = {}, 0, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        body += data
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body


def safetensors_seeds(tiny_dir):
    with open(os.path.join(tiny_dir, "hf", "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    tensors = []
    for name, d in hdr.items():  # every name of the tiny model, cut to 2 x 2
        if name == "__metadata__":
            continue
        tensors.append((name, d["dtype"], [2, 2] if len(d["shape"]) == 2 else [2],
                        np.arange(4 if len(d["shape"]) == 2 else 2, dtype=np.float32).tobytes()))
    write("safetensors", "tiny_cut.safetensors", st_file(tensors, {"format": "pt"}))
    mixed = [("a.f16", "F16", [3], np.ones(3, np.float16).tobytes()),
             ("b.bf16", "BF16", [2, 1], b"\x80\x3f\x00\x40"),
             ("c.i32", "I32", [2], np.array([1, -1], np.int32).tobytes()),
             ("d.u8", "U8", [], b"\x07"),
             ("e.empty", "F32", [0, 4], b""),
             ("f.i64", "I64", [1], np.array([5], np.int64).tobytes())]
    write("safetensors", "dtypes.safetensors", st_file(mixed))


def config_seeds(tiny_dir, smol_kvs):
    with open(os.path.join(tiny_dir, "hf", "config.json")) as f:
        write("hf_config", "tiny_config.json", f.read())
    kv = {k: v for k, t, v, et in smol_kvs}
    smol = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152,
            "hidden_size": kv["llama.embedding_length"], "num_hidden_layers": kv["llama.block_count"],
            "num_attention_heads": kv["llama.attention.head_count"],
            "num_key_value_heads": kv["llama.attention.head_count_kv"],
            "intermediate_size": kv["llama.feed_forward_length"],
            "max_position_embeddings": kv["llama.context_length"], "rms_norm_eps": 1e-05,
            "rope_theta": 100000.0, "rope_scaling": None, "tie_word_embeddings": True,
            "hidden_act": "silu", "torch_dtype": "bfloat16"}
    write("hf_config", "smollm2_config.json", json.dumps(smol, indent=2))
    qwen = dict(smol, architectures=["Qwen2ForCausalLM"], model_type="qwen2", head_dim=64,
                rope_scaling={"type": "default"}, sliding_window=4096, use_sliding_window=False)
    write("hf_config", "qwen2_config.json", json.dumps(qwen))


def tokenizer_seeds(tiny_dir, smol_kvs):
    with open(os.path.join(tiny_dir, "hf", "tokenizer.json")) as f:
        write("tokenizer_json", "tiny_tokenizer.json", f.read())
    kv = {k: v for k, t, v, et in smol_kvs}
    toks, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(toks) if types[i] == 3]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Digits", "individual_digits": True},
              {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
          "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                             "use_regex": True},
          "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
          "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                    "vocab": {s: i for i, s in enumerate(toks)},
                    "merges": list(kv["tokenizer.ggml.merges"])}}
    write("tokenizer_json", "smollm2_cut_tokenizer.json", json.dumps(tj, ensure_ascii=False))
    return kv["tokenizer.chat_template"]


TEXTS = ["Hello, world!", "The quick brown fox jumps over the lazy dog 1234567890.",
         "def f(x):\n    return x ** 2  # square\n", "  leading and   multiple   spaces\t\ttabs\n\n",
         "caf\u00e9 na\u00efve \u00fcber \u4f60\u597d\u4e16\u754c \U0001F600\U0001F680",
         "<|im_start|>user\nnot special here<|im_end|>", "I'm you're we'll they've don't",
         "\u0000\u0001 control \u007f bytes", "a" * 200]


def text_seeds(template):
    for i, t in enumerate(TEXTS):
        write("roundtrip", "text%d.txt" % i, t)
    write("roundtrip", "invalid_utf8.bin", b"ok \xff\xfe \xc3 \xe4\xbd end \xed\xa0\x80")
    names = ["default", "gpt2", "smollm", "llama3", "qwen2", "starcoder", "falcon3", "pixtral"]
    for i, t in enumerate(TEXTS[:6]):
        write("pretok", "builtin%d.bin" % i, bytes([i * 3]) + t.encode())
    regexes = [r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
               r"\p{N}{1,3}", r"[\r\n]", r"\s*[\r\n]+|\s+(?!\S)|\s+", r"(?i:'s|'t)|x*"]
    for i, rx in enumerate(regexes):
        write("pretok", "regex%d.bin" % i, b"\x80" + rx.encode() + b"\0" + TEXTS[i].encode())
    del names
    msgs = b"\0system\0Be brief.\0user\0Hello there\0assistant\0Hi!\0user\0  And now?  "
    write("chat_template", "smollm2.bin", template.encode() + msgs)
    others = {"llama3": "{{ '<|start_header_id|>' + m + '<|end_header_id|>' }}",
              "gemma": "{{ '<start_of_turn>' + role }}",
              "mistral": "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}",
              "llama2sys": "[INST] <<SYS>>\n{{ system }}\n<</SYS>>",
              "phi3": "{{'<|user|>' + '<|end|>' + '<|assistant|>'}}",
              "zephyr": "{{'<|user|>\n' + message['content'] + eos_token}}",
              "mistral_v7": "[SYSTEM_PROMPT] [INST]",
              "unknown": "{{ messages }}"}
    for name, tmpl in others.items():
        write("chat_template", name + ".bin", tmpl.encode() + msgs + (b"" if len(name) % 2 else b" "))
    lines = ['{"prompt": "Hello"}',
             '{"prompt": "Tell me a story", "max_tokens": 16, "temperature": 0.7, "top_k": 40, '
             '"top_p": 0.9, "min_p": 0.05, "repeat_penalty": 1.1, "seed": 42, "stop": ["\\n\\n", "END"]}',
             '{"prompt": "hi", "chat": true, "system": "You are terse."}',
             '   \t ', '[1, 2]', '{"prompt": 5}', '{"prompt": "x", "max_tokens": 1e300}']
    for i, line in enumerate(lines):
        write("jsonl", "line%d.json" % i, line + "\n")


def main():
    smol, tiny_dir = sys.argv[1], sys.argv[2]
    r, kvs = gguf_seeds(smol, tiny_dir)
    safetensors_seeds(tiny_dir)
    config_seeds(tiny_dir, kvs)
    template = tokenizer_seeds(tiny_dir, kvs)
    text_seeds(template)


if __name__ == "__main__":
    main()
