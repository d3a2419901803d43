"""The reference backend (examples/plugins/backend-ref) built out of tree
against an installed SDK, loaded from a pipeline, and computing what the CPU
backend computes.

    test_backend_ref.py PLUME TINY_GGUF EXAMPLE_SRC

1. `meson install --destdir D` of this build; a copy of the example
   configured against D's plume-plugin.pc with nothing but pkg-config,
   built and installed into a temp plugin dir (plume-backend-ref.so).
2. `plume plugins --check` lists `backend ref (interface version 5)`;
   `plume check` resolves `backend: ref` to the plugin.
3. For each model, `plume generate --pipeline` with `backend: ref` and
   with `backend: cpu` under PLUME_CPU_ACTIVATIONS=f32 (the CPU's exact
   path), greedy, several prompts one at a time: identical generated token
   ids and text, and last-prompt-position logits (--logits-out) within
   1e-3.  The same prompts served together (--prompts-file, 4-token
   blocks, 8 positions per step: chunked prefill, mixed prefill/decode
   steps, shared prefix blocks) give the same tokens again on ref.  With
   --kv-dtype f16 both backends again agree (logits within 1e-2: a value
   that lands on a binary16 rounding boundary may round differently).
   Models: the build's tiny F32 llama (adjacent RoPE, GQA), a tiny qwen2
   written here (q/k/v biases: add_bias; rotate-half RoPE) in F32, F16 and
   Q8_0, and SmolLM2-135M-Instruct Q4_1.

Exit 0 pass, 1 fail, 77 skip: only when SmolLM2 is missing
(scripts/fetch-model), after the tiny models have passed.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from out_of_tree import build_example, install_sdk, run

plume, tiny, example_src = sys.argv[1:4]
build_root = os.environ["PLUME_BUILD_ROOT"]
source_root = os.environ["PLUME_SOURCE_ROOT"]
SMOL = os.path.join(source_root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
LOGIT_TOL = 1e-3
LOGIT_TOL_F16_KV = 1e-2


def require(cond, what):
    """Raises with what when cond is false (an assert would vanish under python -O)."""
    if not cond:
        raise RuntimeError("check failed: %s" % (what,))


def read_f32(path):
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack("<%df" % (len(data) // 4), data)


CPU_EXACT = {"PLUME_CPU_ACTIVATIONS": "f32"}


class Compare:
    def __init__(self, tmp, plugins):
        self.tmp, self.plugins = tmp, plugins

    def pipeline(self, model, backend):
        path = os.path.join(self.tmp, "%s-%s.yaml" % (os.path.basename(model), backend))
        with open(path, "w") as f:
            f.write(f"model: {model}\nplugins: [backend-ref]\nbackend: {backend}\nthreads: 2\n"
                    "kv_cache: { block_size: 16, dtype: f32, max_tokens: 1024 }\n"
                    "sampling: { method: standard, temperature: 0 }\n")
        return path

    def generate(self, model, backend, prompt, n, extra=()):
        """(token ids, text, last prompt position's logits) of one greedy run."""
        out = os.path.join(self.tmp, "logits-%s.bin" % backend)
        r = run([plume, "generate", "--plugin-dir", self.plugins,
                 "--pipeline", self.pipeline(model, backend), "--prompt", prompt,
                 "--max-tokens", str(n), "--temperature", "0", "--ignore-eos", "--json",
                 "--logits-out", out, *extra],
                env=CPU_EXACT if backend == "cpu" else None)
        res = json.loads(r.stdout)
        return res["token_ids"], res["text"], read_f32(out)

    def serve(self, model, backend, prompts, n, extra=()):
        """Token ids of every prompt, all served together."""
        path = os.path.join(self.tmp, "prompts.jsonl")
        with open(path, "w") as f:
            for p in prompts:
                f.write(json.dumps({"prompt": p}) + "\n")
        r = run([plume, "generate", "--plugin-dir", self.plugins,
                 "--pipeline", self.pipeline(model, backend), "--prompts-file", path,
                 "--max-tokens", str(n), "--temperature", "0", "--ignore-eos", *extra],
                env=CPU_EXACT if backend == "cpu" else None)
        res = sorted((json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")),
                     key=lambda o: o["index"])
        require(len(res) == len(prompts), "%d results for %d prompts" % (len(res), len(prompts)))
        return [o["token_ids"] for o in res]

    def check_model(self, model, prompts, n):
        name = os.path.join(os.path.basename(os.path.dirname(model)), os.path.basename(model))
        alone = []
        for p in prompts:
            ids_r, text_r, lg_r = self.generate(model, "ref", p, n)
            ids_c, text_c, lg_c = self.generate(model, "cpu", p, n)
            require(ids_r == ids_c, "%s %r: ref tokens %s, cpu %s" % (name, p, ids_r, ids_c))
            require(text_r == text_c, "%s %r: ref text %r, cpu %r" % (name, p, text_r, text_c))
            require(len(lg_r) == len(lg_c) > 0, "%s: %d vs %d logits" % (name, len(lg_r), len(lg_c)))
            d = max(abs(a - b) for a, b in zip(lg_r, lg_c))
            require(d < LOGIT_TOL, "%s %r: max |logit ref - cpu| %.3g >= %g" % (name, p, d, LOGIT_TOL))
            print("ok   %s %r: %d tokens identical, max |logit diff| %.2e" % (name, p, len(ids_r), d))
            alone.append(ids_r)

        small = ("--block-size", "4", "--max-batched-tokens", "8")
        together = self.serve(model, "ref", prompts, n, small)
        require(together == alone, "%s: ref served together %s, alone %s" % (name, together, alone))
        print("ok   %s: %d prompts served together on ref (4-token blocks, 8 positions per "
              "step) give the same tokens" % (name, len(prompts)))

        f16 = ("--kv-dtype", "f16")
        ids_r, _, lg_r = self.generate(model, "ref", prompts[0], n, f16)
        ids_c, _, lg_c = self.generate(model, "cpu", prompts[0], n, f16)
        d = max(abs(a - b) for a, b in zip(lg_r, lg_c))
        require(ids_r == ids_c, "%s f16 KV: ref tokens %s, cpu %s" % (name, ids_r, ids_c))
        require(d < LOGIT_TOL_F16_KV, "%s f16 KV: max |logit diff| %.3g" % (name, d))
        print("ok   %s f16 KV: tokens identical, max |logit diff| %.2e" % (name, d))


def main():
    with tempfile.TemporaryDirectory(prefix="plume-backend-ref-") as tmp:
        _, env = install_sdk(build_root, tmp)
        plugins = build_example(example_src, tmp, env)
        so = os.path.join(plugins, "plume-backend-ref.so")
        require(os.path.exists(so), so)

        r = run([plume, "plugins", "--check", so])
        require("plume plugin 'backend-ref' 0.1.0" in r.stdout, r.stdout)
        require("backend        ref (interface version 5)" in r.stdout, r.stdout)
        cmp = Compare(tmp, plugins)
        r = run([plume, "check", "--plugin-dir", plugins, cmp.pipeline(tiny, "ref")])
        require(any(l.split()[:2] == ["backend:", "ref"] and "backend-ref" in l
                    for l in r.stdout.splitlines()), r.stdout)
        print("ok   plume-backend-ref.so built out of tree, registers backend ref")

        tiny_prompts = ["The quick brown fox", "Hello world! Hello there,",
                        "the model reads these tokens, then"]
        qwen = os.path.join(tmp, "qwen2")
        run([sys.executable, os.path.join(source_root, "tests", "reference", "make_tiny_model.py"),
             qwen, "--arch", "qwen2", "--seed", "11"])
        for model in [tiny] + [os.path.join(qwen, v)
                               for v in ("tiny.gguf", "tiny-f16.gguf", "tiny-q8_0.gguf")]:
            require(os.path.exists(model), "%s exists" % model)
            cmp.check_model(model, tiny_prompts, 16)

        # A linear method whose kernels cannot run on the backend is a load
        # error naming both: quant-gptq computes on the host, ref has no
        # host memory.
        gptq = os.path.join(tmp, "qwen2-gptq")
        os.makedirs(gptq)
        run([plume, "quantize", os.path.join(qwen, "hf"), gptq, "--method", "rtn",
             "--group-size", "32"])
        r = subprocess.run([plume, "generate", "--plugin-dir", plugins, "--pipeline",
                            cmp.pipeline(gptq, "ref"), "--prompt", "hi", "--max-tokens", "2"],
                           capture_output=True, text=True)
        require(r.returncode != 0 and "linear method gptq on backend ref" in r.stderr
                and "host" in r.stderr, "gptq on ref refused by name: %r" % r.stderr)
        print("ok   a gptq checkpoint on backend ref: %s" % r.stderr.strip().splitlines()[-1])

        if not os.access(SMOL, os.R_OK):
            print("SKIP: %s is missing (scripts/fetch-model fetches it); the tiny models passed"
                  % SMOL)
            return 77
        cmp.check_model(SMOL, ["The capital of France is", "def fibonacci(n):",
                               "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
                               "Once upon a time"], 12)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
