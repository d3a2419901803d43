#!/usr/bin/env python3
"""Hostile model files against the `plume` CLI (issue #20 item 3).

Generates malformed variants of the real model files -- SmolLM2's GGUF
(models/) and the tiny HF model the tests build (config.json, tokenizer.json,
model.safetensors) -- truncated at structure boundaries, counts of 2^62, dims
whose product overflows, offsets past the end and wrapping, unknown types,
duplicate names, wrong value types, bad regexes, nesting 100k deep -- and
runs `plume info` and `plume generate --max-tokens 1` (or `plume tokenize`) on
each.  Every run must exit 1 with exactly one line on stderr that names the
file and the field, within the time limit, with no signal and no sanitizer
report.  Outside sanitizer builds each run is limited to 2 GB of address
space (ulimit -v); under ASan, whose shadow memory needs more, ASan's own
allocation limit (max_allocation_size_mb, hard_rss_limit_mb) plays that role.

GGUF variants are sparse copies: the changed header is written and the file
is extended to the original size without writing the 98 MB of tensor data.

usage: test_malformed.py PLUME_BINARY TINY_DIR [--sanitized] [--only SUBSTR]
"""
import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(HERE, "..", "..")))
SMOL = os.path.join(SOURCE_ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

failures = []
results = []


class CheckError(Exception):
    pass


def require(cond, msg):
    if not cond:
        raise CheckError(msg)


# ---------------------------------------------------------------- GGUF model

T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SIZES = {T_U8: 1, T_I8: 1, T_BOOL: 1, T_U16: 2, T_I16: 2, T_U32: 4, T_I32: 4, T_F32: 4,
         T_U64: 8, T_I64: 8, T_F64: 8}
FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i", T_F32: "<f",
       T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}


class Gguf:
    """The parsed header of a GGUF file, with the byte offset of every field."""

    def __init__(self, path):
        self.path = path
        self.size = os.path.getsize(path)
        with open(path, "rb") as f:
            self.head = f.read(min(self.size, 8 << 20))
        b = self.head
        require(b[:4] == b"GGUF", "%s is not a GGUF file" % path)
        self.version, self.n_tensors, self.n_kv = struct.unpack_from("<IQQ", b, 4)
        self.kvs = []  # dicts: key, key_at, type_at, value_at, end, type, value (scalars/strings), elem
        o = 24
        for _ in range(self.n_kv):
            kv = {"key_at": o}
            o, key, _ = self._value(b, o, T_STR)
            kv["key"] = key.decode()
            kv["type_at"] = o
            t = struct.unpack_from("<I", b, o)[0]
            kv["type"] = t
            o += 4
            kv["value_at"] = o
            o, kv["value"], kv["elem"] = self._value(b, o, t)
            kv["end"] = o
            self.kvs.append(kv)
        self.tensors = []
        for _ in range(self.n_tensors):
            ti = {"at": o}
            o, name, _ = self._value(b, o, T_STR)
            ti["name"] = name.decode()
            ti["ndims_at"] = o
            nd = struct.unpack_from("<I", b, o)[0]
            o += 4
            ti["dims_at"] = o
            ti["dims"] = list(struct.unpack_from("<%dQ" % nd, b, o))
            o += 8 * nd
            ti["type_at"] = o
            ti["type"] = struct.unpack_from("<I", b, o)[0]
            ti["offset_at"] = o + 4
            ti["offset"] = struct.unpack_from("<Q", b, o + 4)[0]
            o += 12
            self.tensors.append(ti)
        self.infos_end = o
        align = self.kv("general.alignment")
        self.align = align["value"] if align else 32
        self.data_at = (o + self.align - 1) // self.align * self.align

    def _value(self, b, o, t):
        if t in SIZES:
            return o + SIZES[t], struct.unpack_from(FMT[t], b, o)[0], None
        if t == T_STR:
            n = struct.unpack_from("<Q", b, o)[0]
            return o + 8 + n, b[o + 8:o + 8 + n], None
        if t == T_ARR:
            et, n = struct.unpack_from("<IQ", b, o)
            o += 12
            first = o
            for _ in range(n):
                o, _v, _e = self._value(b, o, et)
            return o, (n, first), et
        raise CheckError("unknown GGUF type %d" % t)

    def kv(self, key):
        return next((k for k in self.kvs if k["key"] == key), None)

    def tensor(self, name):
        return next(t for t in self.tensors if t["name"] == name)

    def write(self, out, patches=(), cut=None, header=None, keep_size=True):
        """Writes a copy: the header (or a replacement `header` bytes for
        [0, data_at)), byte patches [(offset, bytes)], cut at `cut` bytes or
        extended sparsely to the original size."""
        b = bytearray(header if header is not None else self.head[:self.data_at])
        for at, data in patches:
            b[at:at + len(data)] = data
        if cut is not None:
            b = b[:cut]
        with open(out, "wb") as f:
            f.write(b)
            if cut is None and keep_size:
                if header is None:
                    f.truncate(self.size)
                else:
                    f.truncate(len(b) + self.size - self.data_at)
        return out


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v % (1 << 64))


def gstr(s):
    s = s.encode() if isinstance(s, str) else s
    return u64(len(s)) + s


def rebuild(g, replace_kv=None, extra_kvs=b"", n_extra=0, drop=()):
    """A header with kv `key` replaced by raw `type+value` bytes, extra kvs
    appended and keys dropped; tensor infos kept, data offset re-aligned."""
    b = g.head
    out = bytearray(b"GGUF" + u32(g.version) + u64(g.n_tensors) + u64(g.n_kv + n_extra - len(drop)))
    for kv in g.kvs:
        if kv["key"] in drop:
            continue
        if replace_kv and kv["key"] in replace_kv:
            out += b[kv["key_at"]:kv["type_at"]] + replace_kv[kv["key"]]
        else:
            out += b[kv["key_at"]:kv["end"]]
    out += extra_kvs
    out += b[g.kvs[-1]["end"]:g.infos_end]
    out += b"\0" * (-len(out) % g.align)
    return bytes(out)


def gguf_variants(g, d):
    """(name, path, field substrings of which one must appear) for SmolLM2's GGUF."""
    v = []
    p = lambda n: os.path.join(d, n + ".gguf")

    def add(name, fields, **kw):
        v.append((name, g.write(p(name), **kw), fields))

    # truncated at structure boundaries
    cuts = [("magic", 2), ("version", 4), ("tensor_count", 8), ("kv_count", 16), ("first_key", 24)]
    for i in (0, 1, len(g.kvs) // 2, len(g.kvs) - 1):
        kv = g.kvs[i]
        cuts += [("kv%d_key" % i, kv["key_at"] + 3), ("kv%d_type" % i, kv["type_at"]),
                 ("kv%d_value" % i, kv["value_at"]), ("kv%d_value_mid" % i, (kv["value_at"] + kv["end"]) // 2)]
    toks = g.kv("tokenizer.ggml.tokens")
    cuts += [("tokens_elem_count", toks["value_at"] + 4), ("tokens_elem_1000", toks["value"][1] + 1000 * 9)]
    for i in (0, 1, len(g.tensors) // 2, len(g.tensors) - 1):
        t = g.tensors[i]
        cuts += [("ti%d_name" % i, t["at"] + 5), ("ti%d_ndims" % i, t["ndims_at"]),
                 ("ti%d_dims" % i, t["dims_at"] + 4), ("ti%d_type" % i, t["type_at"]),
                 ("ti%d_offset" % i, t["offset_at"] + 2)]
    cuts += [("infos_end", g.infos_end), ("data_start", g.data_at), ("data_1", g.data_at + 1),
             ("last_tensor", g.data_at + g.tensors[-1]["offset"] + 7), ("minus_1", g.size - 1)]
    for name, at in cuts:
        path = p("cut_" + name)
        with open(g.path, "rb") as src, open(path, "wb") as f:
            f.write(src.read(at))
        v.append(("cut_" + name, path, ["header ", "metadata key #", "tensor info #"]))
    # counts of 2^62
    add("tensor_count_2e62", ["tensor_count"], patches=[(8, u64(1 << 62))])
    add("kv_count_2e62", ["metadata_kv_count", "metadata pairs"], patches=[(16, u64(1 << 62))])
    add("tokens_count_2e62", ["tokenizer.ggml.tokens"], patches=[(toks["value_at"] + 4, u64(1 << 62))])
    add("key_len_2e62", ["metadata key #0"], patches=[(24, u64(1 << 62))])
    t0 = g.tensors[0]
    add("tensor_name_len_2e62", ["tensor info #0"], patches=[(t0["at"], u64(1 << 62))])
    # dims
    add("dim_2e62", [t0["name"]], patches=[(t0["dims_at"], u64(1 << 62))])
    add("dims_overflow", [t0["name"]], patches=[(t0["dims_at"], u64((1 << 32) + 32)),
                                                (t0["dims_at"] + 8, u64((1 << 32) + 1))])
    add("n_dims_5", [t0["name"]], patches=[(t0["ndims_at"], u32(5))])
    add("n_dims_huge", [t0["name"]], patches=[(t0["ndims_at"], u32(0xFFFFFFFF))])
    add("dim_zero", [t0["name"], "token_embd"], patches=[(t0["dims_at"], u64(0))])
    # offsets past the end, wrapping, misaligned
    tl = g.tensors[-1]
    add("offset_past_end", [tl["name"]], patches=[(tl["offset_at"], u64(g.size))])
    add("offset_wrap", [tl["name"]], patches=[(tl["offset_at"], u64(-32))])
    add("offset_wrap_small", [t0["name"]], patches=[(t0["offset_at"], u64(-g.data_at))])
    add("offset_misaligned", [t0["name"]], patches=[(t0["offset_at"], u64(t0["offset"] + 1))])
    # unknown types
    add("tensor_type_99", [t0["name"]], patches=[(t0["type_at"], u32(99))])
    add("tensor_type_huge", [t0["name"]], patches=[(t0["type_at"], u32(0xFFFFFFFF))])
    kv0 = g.kvs[0]
    add("kv_type_13", [kv0["key"]], patches=[(kv0["type_at"], u32(13))])
    add("array_elem_type_99", ["tokenizer.ggml.tokens"], patches=[(toks["value_at"], u32(99))])
    add("version_1", ["version"], patches=[(4, u32(1))])
    add("version_big_endian", ["version"], patches=[(4, u32(0x03000000))])
    add("version_99", ["version"], patches=[(4, u32(99))])
    add("magic", ["magic"], patches=[(0, b"GGML")])
    # duplicate names
    q = g.tensor("blk.0.attn_q.weight")
    add("duplicate_tensor", ["blk.0.attn_k.weight", "duplicate"],
        patches=[(q["at"] + 8, b"blk.0.attn_k.weight")])
    # wrong value types and values (rebuilt headers)
    def header_variant(name, fields, **kw):
        add(name, fields, header=rebuild(g, **kw))
    header_variant("block_count_string", ["llama.block_count"],
                   replace_kv={"llama.block_count": u32(T_STR) + gstr("30")})
    header_variant("embedding_length_float", ["llama.embedding_length"],
                   replace_kv={"llama.embedding_length": u32(T_F32) + struct.pack("<f", 576.0)})
    header_variant("architecture_uint", ["general.architecture"],
                   replace_kv={"general.architecture": u32(T_U32) + u32(7)})
    header_variant("tokens_not_array", ["tokenizer.ggml.tokens"],
                   replace_kv={"tokenizer.ggml.tokens": u32(T_STR) + gstr("a")})
    header_variant("merges_int_array", ["tokenizer.ggml.merges"],
                   replace_kv={"tokenizer.ggml.merges": u32(T_ARR) + u32(T_I32) + u64(2) + u32(1) + u32(2)})
    header_variant("block_count_2e32", ["llama.block_count"],
                   replace_kv={"llama.block_count": u32(T_U64) + u64(1 << 32)})
    header_variant("block_count_5e6", ["llama.block_count", "blk.30"],
                   replace_kv={"llama.block_count": u32(T_U32) + u32(5000000)})
    header_variant("head_count_0", ["head_count", "n_head"],
                   replace_kv={"llama.attention.head_count": u32(T_U32) + u32(0)})
    header_variant("embedding_length_2e31", ["embedding_length", "n_embd", "token_embd"],
                   replace_kv={"llama.embedding_length": u32(T_U32) + u32(0x80000000)})
    # EOS must be a real token (an optional id out of range is absent with a
    # warning instead: tests/model/test_hostile_files.py)
    header_variant("eos_id_huge", ["eos"],
                   replace_kv={"tokenizer.ggml.eos_token_id": u32(T_U32) + u32(0x7FFFFFF0)})
    header_variant("pre_unknown", ["tokenizer.ggml.pre", "pre-tokenizer"],
                   replace_kv={"tokenizer.ggml.pre": u32(T_STR) + gstr("no-such-pre")})
    header_variant("alignment_3", ["general.alignment"],
                   extra_kvs=gstr("general.alignment") + u32(T_U32) + u32(3), n_extra=1)
    header_variant("alignment_0", ["general.alignment"],
                   extra_kvs=gstr("general.alignment") + u32(T_U32) + u32(0), n_extra=1)
    bc = g.kv("llama.block_count")
    header_variant("duplicate_key", ["llama.block_count"],
                   extra_kvs=g.head[bc["key_at"]:bc["end"]], n_extra=1)
    header_variant("drop_architecture", ["general.architecture"], drop=("general.architecture",))
    header_variant("drop_tokens", ["tokenizer.ggml.tokens", "tokenizer"], drop=("tokenizer.ggml.tokens",))
    deep = 100000
    nest = b"".join(u32(T_ARR) + u64(1) for _ in range(deep)) + u32(T_U8) + u64(0)
    header_variant("nesting_100k", ["nested", "fuzz.deep"],
                   extra_kvs=gstr("fuzz.deep") + u32(T_ARR) + nest, n_extra=1)
    return v


# ---------------------------------------------------------------- HF model

def hf_variants(tiny, d):
    """(name, directory, fields) for variants of the tiny HF model."""
    src = os.path.join(tiny, "hf")
    files = {n: open(os.path.join(src, n), "rb").read() for n in os.listdir(src)}
    v = []

    def add(name, fields, names_file=True, **changed):
        """A copy of the model with files replaced (None: removed); the error
        must name the changed file unless names_file is False (errors about
        the model as a whole name its directory and the tensor)."""
        out = os.path.join(d, name)
        os.makedirs(out)
        for n, data in files.items():
            key = n.replace(".", "_")
            data = changed.get(key, data)
            if data is None:
                continue
            with open(os.path.join(out, n), "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())
        changed_files = [n for n in files if n.replace(".", "_") in changed]
        must = changed_files[0] if names_file and len(changed_files) == 1 else None
        v.append((name, out, fields, must))

    cfg = json.loads(files["config.json"])

    def cfgv(name, fields, **kv):
        c = dict(cfg)
        c.update(kv)
        add("config_" + name, fields, names_file=name != "hidden_mismatch", config_json=json.dumps(c))

    for at in (1, len(files["config.json"]) // 2, len(files["config.json"]) - 3):
        add("config_cut_%d" % at, ["line"], config_json=files["config.json"][:at])
    cfgv("layers_5e6", ["num_hidden_layers", "n_layer", "layers"], num_hidden_layers=5000000)
    cfgv("layers_2e62", ["num_hidden_layers"], num_hidden_layers=1 << 62)
    cfgv("hidden_neg", ["hidden_size"], hidden_size=-64)
    cfgv("hidden_string", ["hidden_size"], hidden_size="64")
    cfgv("vocab_zero", ["vocab_size"], vocab_size=0)
    cfgv("heads_zero", ["num_attention_heads"], num_attention_heads=0)
    cfgv("kv_heads_3", ["num_key_value_heads"], num_key_value_heads=3)
    cfgv("eps_string", ["rms_norm_eps"], rms_norm_eps="small")
    cfgv("theta_huge", ["rope_theta"], rope_theta=1e300)
    cfgv("model_type_unknown", ["model_type", "architectures"], model_type="gpt-neox",
         architectures=["GPTNeoXForCausalLM"])
    cfgv("model_type_newline", ["model_type", "architectures"], model_type="x\ny",
         architectures=["X\nY"])
    cfgv("hidden_mismatch", ["hidden_size", "model.embed_tokens.weight", "shape"], hidden_size=128)
    add("config_not_object", ["object"], config_json="[1, 2, 3]")
    add("config_duplicate_key", ["duplicate"],
        config_json=files["config.json"].decode().replace('"vocab_size": 300,', '"vocab_size": 300, "vocab_size": 300,'))
    add("config_nesting_100k", ["depth"], config_json='{"x": ' + "[" * 100000 + "]" * 100000 + "}")
    add("config_missing", ["config.json"], config_json=None)

    tok = json.loads(files["tokenizer.json"])

    def tokv(name, fields, fn):
        t = json.loads(files["tokenizer.json"])
        fn(t)
        add("tokenizer_" + name, fields, tokenizer_json=json.dumps(t))

    for at in (1, len(files["tokenizer.json"]) // 2, len(files["tokenizer.json"]) - 3):
        add("tokenizer_cut_%d" % at, ["line"], tokenizer_json=files["tokenizer.json"][:at])
    first = next(iter(tok["model"]["vocab"]))
    tokv("id_2e31", ["vocab", "id"], lambda t: t["model"]["vocab"].__setitem__(first, 2**31 - 2))
    tokv("id_negative", ["vocab", "id"], lambda t: t["model"]["vocab"].__setitem__(first, -5))
    tokv("id_string", ["vocab", "id"], lambda t: t["model"]["vocab"].__setitem__(first, "7"))
    tokv("added_id_huge", ["added_tokens", "id"], lambda t: t["added_tokens"][0].__setitem__("id", 1 << 40))
    tokv("merge_empty", ["merges", "merge"], lambda t: t["model"]["merges"].insert(0, ["", ""]))
    tokv("merges_not_list", ["merges"], lambda t: t["model"].__setitem__("merges", 7))
    tokv("model_type", ["model", "type"], lambda t: t["model"].__setitem__("type", "WordPiece"))
    tokv("vocab_not_object", ["vocab"], lambda t: t["model"].__setitem__("vocab", [1, 2]))
    tokv("bad_regex", ["regex", "pre_tokenizer"], lambda t: t.__setitem__(
        "pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(unclosed[a-"}, "behavior": "Isolated"}))
    tokv("regex_nesting_100k", ["regex", "pre_tokenizer"], lambda t: t.__setitem__(
        "pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(" * 100000 + "a" + ")" * 100000},
                          "behavior": "Isolated"}))
    tokv("bad_regex_newline", ["regex", "pre_tokenizer"], lambda t: t.__setitem__(
        "pre_tokenizer", {"type": "Split", "pattern": {"Regex": "(a\nb"}, "behavior": "Isolated"}))
    tokv("pretok_unknown", ["pre_tokenizer", "pre-tokenizer"],
         lambda t: t.__setitem__("pre_tokenizer", {"type": "Whitespace"}))
    add("tokenizer_nesting_100k", ["depth"],
        tokenizer_json='{"model": ' + "[" * 100000 + "]" * 100000 + "}")
    add("tokenizer_missing", ["tokenizer.json"], tokenizer_json=None)
    add("tokenizer_config_template_int", ["chat_template"],
        tokenizer_config_json=json.dumps(dict(json.loads(files["tokenizer_config.json"]), chat_template=5)))

    st = files["model.safetensors"]
    n = struct.unpack_from("<Q", st)[0]
    hdr = json.loads(st[8:8 + n])
    body = st[8 + n:]

    def stv(name, fields, fn=None, raw=None):
        if raw is None:
            h = json.loads(st[8:8 + n])
            b = fn(h)
            hb = json.dumps(h).encode()
            raw = struct.pack("<Q", len(hb)) + hb + (body if b is None else b)
        add("st_" + name, fields, names_file=name not in ("missing_tensor", "wrong_shape"),
            model_safetensors=raw)

    for name, at in (("size_field", 4), ("header", 8 + n // 2), ("data_start", 8 + n),
                     ("data_mid", 8 + n + len(body) // 2), ("minus_1", len(st) - 1)):
        stv("cut_" + name, ["header size", "data_offsets", "too short"], raw=st[:at])
    names = [k for k in hdr if k != "__metadata__"]
    t0 = min(names, key=lambda k: hdr[k]["data_offsets"][0])
    tl = max(names, key=lambda k: hdr[k]["data_offsets"][1])
    stv("header_size_2e62", ["header size"], raw=struct.pack("<Q", 1 << 62) + st[8:])
    stv("header_size_past_end", ["header size"], raw=struct.pack("<Q", len(st)) + st[8:])
    stv("offsets_past_end", [tl, "data_offsets"],
        lambda h: h[tl].__setitem__("data_offsets", [h[tl]["data_offsets"][0], len(body) + 4096]))
    stv("offsets_2e64", ["header"],
        lambda h: h[t0].__setitem__("data_offsets", [2**64 - 8, h[t0]["data_offsets"][1]]))

    def near_wrap(h):  # the right size, ending at 2^63 - 1
        b, e = h[t0]["data_offsets"]
        h[t0]["data_offsets"] = [2**63 - 1 - (e - b), 2**63 - 1]
    stv("offsets_near_2e63", [t0, "data_offsets"], near_wrap)
    stv("offsets_reversed", [t0, "data_offsets"],
        lambda h: h[t0].__setitem__("data_offsets", [h[t0]["data_offsets"][1], h[t0]["data_offsets"][0]]))
    stv("shape_overflow", [t0, "shape"], lambda h: h[t0].__setitem__("shape", [2**32, 2**32, 16]))
    stv("shape_negative", [t0, "shape"], lambda h: h[t0].__setitem__("shape", [-1, 4]))
    stv("shape_string", [t0, "shape"], lambda h: h[t0].__setitem__("shape", ["a"]))
    stv("dtype_unknown", [t0, "dtype"], lambda h: h[t0].__setitem__("dtype", "F99"))
    stv("dtype_int", [t0, "dtype"], lambda h: h[t0].__setitem__("dtype", 32))
    stv("dtype_unknown_newline_name", ["dtype"], lambda h: h.__setitem__("a\nb", dict(h.pop(t0), dtype="F99")))
    stv("metadata_int", ["__metadata__"], lambda h: h.__setitem__("__metadata__", {"format": 1}))
    hb = st[8:8 + n].decode().rstrip()
    dup = hb[:-1] + ', "%s": %s}' % (t0, json.dumps(hdr[t0]))
    stv("duplicate_name", [t0, "duplicate", "header"],
        raw=struct.pack("<Q", len(dup.encode())) + dup.encode() + body)
    deep = '{"x": ' + "[" * 100000 + "]" * 100000 + "}"
    stv("nesting_100k", ["header"], raw=struct.pack("<Q", len(deep)) + deep.encode() + body)
    emb = "model.embed_tokens.weight"

    def rename(h):
        h["model.embed_tokenz.weight"] = h.pop(emb)
    stv("missing_tensor", [emb], rename)

    def wrong_shape(h):
        s = h[emb]["shape"]
        h[emb]["shape"] = [s[0] * 2, s[1] // 2]
    stv("wrong_shape", [emb, "shape"], wrong_shape)
    return v


# ---------------------------------------------------------------- runner

def run_case(plume, args, path, fields, must_name, limit_s, sanitized):
    env = dict(os.environ)
    if sanitized:
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":max_allocation_size_mb=2048:"
                               "hard_rss_limit_mb=2048:allocator_may_return_null=0:detect_leaks=1").lstrip(":")
        pre = None
    else:
        def pre():
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    t0 = time.monotonic()
    try:
        r = subprocess.run([plume] + args, capture_output=True, text=True, errors="replace",
                           env=env, preexec_fn=pre, timeout=max(30, 10 * limit_s))
    except subprocess.TimeoutExpired:
        return "timed out after %ds" % max(30, 10 * limit_s)
    dt = time.monotonic() - t0
    err = r.stderr
    lines = [ln for ln in err.split("\n") if ln.strip()]
    if r.returncode < 0:
        return "killed by signal %d: %s" % (-r.returncode, err[-300:])
    if "Sanitizer" in err or "runtime error:" in err or "LeakSanitizer" in err:
        return "sanitizer report: %s" % err[:600]
    if r.returncode != 1:
        return "exit %d (expected 1); stderr: %s" % (r.returncode, err[:300])
    if len(lines) != 1:
        return "%d lines on stderr (expected 1): %r" % (len(lines), err[:400])
    if path not in err:
        return "stderr does not name the model %s: %s" % (path, err.strip())
    if must_name and must_name not in err:
        return "stderr does not name the file %s: %s" % (must_name, err.strip())
    if fields and not any(f in err for f in fields):
        return "stderr names none of the fields %s: %s" % (fields, err.strip())
    if dt > limit_s:
        return "took %.2fs (limit %.1fs)" % (dt, limit_s)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plume")
    ap.add_argument("tiny_dir")
    ap.add_argument("--sanitized", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if not os.access(a.plume, os.X_OK):
        print("plume binary not built")
        return 77
    if not os.path.exists(SMOL):
        print("FAIL %s is missing (scripts/test fetches it: scripts/fetch-model)" % SMOL)
        return 1
    limit = 4.0 if a.sanitized else 1.0
    n_fail = 0
    with tempfile.TemporaryDirectory(prefix="plume-malformed-") as d:
        g = Gguf(SMOL)
        os.makedirs(os.path.join(d, "gguf"))
        os.makedirs(os.path.join(d, "hf"))
        cases = [("gguf", *c, None) for c in gguf_variants(g, os.path.join(d, "gguf"))]
        cases += [("hf", *c) for c in hf_variants(a.tiny_dir, os.path.join(d, "hf"))]
        for kind, name, path, fields, must_name in cases:
            if a.only and a.only not in name:
                continue
            runs = [["info", path], ["generate", "--model", path, "--max-tokens", "1", "--prompt", "hi"]]
            if kind == "hf" and name.startswith("tokenizer"):
                runs.append(["tokenize", path, "Hello world"])
            for args in runs:
                what = "%s %s: plume %s" % (kind, name, args[0])
                why = run_case(a.plume, args, path, fields, must_name, limit, a.sanitized)
                if why:
                    print("FAIL %s: %s" % (what, why))
                    n_fail += 1
                else:
                    print("ok   %s" % what)
                if a.verbose and args[0] == "info":
                    r = subprocess.run([a.plume] + args, capture_output=True, text=True, errors="replace")
                    print("     " + r.stderr.strip()[:300])
    if n_fail:
        print("%d run(s) failed" % n_fail)
        return 1
    print("all malformed variants rejected cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
