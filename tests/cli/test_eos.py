#!/usr/bin/env python3
"""`plume generate` stops at end-of-generation (every other CLI and oracle
test passes --ignore-eos).

    test_eos.py TINY_GGUF [--part tiny|smollm2|all]

tiny:    60 seeded text prompts served together (--prompts-file) once with
         --ignore-eos to find those whose greedy continuation produces an
         end-of-generation token (<|endoftext|> or <|im_end|>) at step n,
         then again without it, in one batch: each of those finishes "stop"
         with token_ids = the first n + 1 tokens (the EOG last) and the text
         of the n tokens before it (from a run cut at --max-tokens n); every
         other prompt continues to max_tokens unchanged.  One of them again
         in streaming mode: stdout is that text, stderr says "finish: stop".
smollm2: `plume generate --chat` on SmolLM2-135M-Instruct Q4_1 stops at
         <|im_end|>: finish_reason "stop" in --json, <|im_end|> (id 2) the
         last token id, fewer tokens than --max-tokens, no "<|im_end|>" in
         the text, the text equal to a run that ends just before it; with
         --ignore-eos the same run goes on past id 2 to --max-tokens; the
         streaming output stops there too.

Exit 0 pass, 1 fail, 77 skip (binary or model missing).
"""

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import _venv  # noqa: E402

_venv.ensure()

import harness  # noqa: E402
from harness import SMOL, check, run  # noqa: E402
import make_tiny_model  # noqa: E402

N_GEN = 40
# the tiny tokenizer's specials are its last ids, in SPECIALS order
TINY_EOG = {make_tiny_model.N_VOCAB_TARGET - len(make_tiny_model.SPECIALS) + i
            for i, s in enumerate(make_tiny_model.SPECIALS) if s in ("<|endoftext|>", "<|im_end|>")}
WORDS = ("the fox dog sun word model token engine test hello world start end quick brown lazy "
         "forest runs sleeps one two 1234 + = . , !").split()


def serve(model, tmp, lines, *extra):
    path = os.path.join(tmp, "prompts.jsonl")
    with open(path, "w") as f:
        for ln in lines:
            f.write(json.dumps(ln) + "\n")
    r = run("generate", "--model", model, "--prompts-file", path, "--temperature", "0",
            "--threads", "2", *extra)
    out = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    check(len(out) == len(lines), "--prompts-file gives %d results for %d prompts" % (len(out), len(lines)))
    return sorted(out, key=lambda o: o["index"])


def test_tiny(tiny, tmp):
    rng = random.Random(7)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(60)]
    full = serve(tiny, tmp, [{"prompt": p} for p in prompts], "--ignore-eos", "--max-tokens", str(N_GEN))
    eog = {}
    for i, o in enumerate(full):
        at = next((t for t, tok in enumerate(o["token_ids"]) if tok in TINY_EOG), None)
        if at is not None and at >= 1:
            eog[i] = at
    print("tiny: %d of %d prompts produce an end-of-generation token, at steps %s"
          % (len(eog), len(prompts), sorted(eog.values())))
    check(len(eog) >= 2, "at least two prompts reach an end-of-generation token")
    if not eog:
        return
    # expected texts: the same prompts cut just before their EOG
    cut = serve(tiny, tmp, [{"prompt": prompts[i], "max_tokens": n} for i, n in eog.items()],
                "--ignore-eos", "--max-tokens", str(N_GEN))
    want_text = {i: c["text"] for i, c in zip(eog, cut)}
    got = serve(tiny, tmp, [{"prompt": p} for p in prompts], "--max-tokens", str(N_GEN))
    for i, (o, g) in enumerate(zip(full, got)):
        if i in eog:
            n = eog[i]
            check(g["finish_reason"] == "stop" and g["token_ids"] == o["token_ids"][:n + 1]
                  and g["generated_tokens"] == n + 1,
                  "tiny prompt %d: stops at its EOG (step %d): finish %s, %d tokens"
                  % (i, n, g["finish_reason"], len(g["token_ids"])))
            check(g["text"] == want_text[i] and "<|" not in g["text"],
                  "tiny prompt %d: text is that of the %d tokens before the EOG (%r vs %r)"
                  % (i, n, g["text"], want_text[i]))
        elif o["token_ids"][0] not in TINY_EOG:
            check(g["finish_reason"] == "length" and g["token_ids"] == o["token_ids"],
                  "tiny prompt %d: continues to max_tokens beside the stopped ones" % i)
    i, n = next(iter(eog.items()))
    r = run("generate", "--model", tiny, "--prompt", prompts[i], "--temperature", "0",
            "--max-tokens", str(N_GEN), "--threads", "2")
    check(r.stdout.rstrip("\n") == want_text[i] and "finish: stop" in r.stderr,
          "tiny prompt %d streamed: stdout %r, stderr %r" % (i, r.stdout, r.stderr.strip()[-120:]))


SMOL_IM_END = 2


def test_smollm2(tmp):
    if not os.path.exists(SMOL):
        print("SKIP: %s not present" % SMOL)
        return False
    base = ["generate", "--model", SMOL, "--chat", "--temperature", "0", "--threads", "2"]
    for prompt in ("Hi!", "Reply with just one word: what color is the sky?"):
        mx = 96
        o = json.loads(run(*base, "--prompt", prompt, "--json", "--max-tokens", str(mx)).stdout)
        ids, n = o["token_ids"], len(o["token_ids"]) - 1
        check(o["finish_reason"] == "stop" and ids and ids[-1] == SMOL_IM_END and n + 1 < mx
              and SMOL_IM_END not in ids[:-1] and o["generated_tokens"] == n + 1,
              "SmolLM2 --chat %r: stops at <|im_end|> (finish %s, %d tokens, last id %s)"
              % (prompt, o["finish_reason"], len(ids), ids[-1:]))
        check("<|im_end|>" not in o["text"] and "<|" not in o["text"],
              "SmolLM2 --chat %r: no special-token text in %r" % (prompt, o["text"]))
        if n < 1:
            continue
        c = json.loads(run(*base, "--prompt", prompt, "--json", "--max-tokens", str(n)).stdout)
        check(c["text"] == o["text"] and c["token_ids"] == ids[:n] and c["finish_reason"] == "length",
              "SmolLM2 --chat %r: text equals the run cut before <|im_end|> (%r)" % (prompt, c["text"]))
        g = json.loads(run(*base, "--prompt", prompt, "--json", "--max-tokens", str(n + 6),
                           "--ignore-eos").stdout)
        check(g["finish_reason"] == "length" and len(g["token_ids"]) == n + 6
              and g["token_ids"][:n + 1] == ids,
              "SmolLM2 --chat %r --ignore-eos: goes on past <|im_end|> to max_tokens" % prompt)
        s = run(*base, "--prompt", prompt, "--max-tokens", str(mx))
        check(s.stdout.rstrip("\n") == o["text"] and "finish: stop" in s.stderr,
              "SmolLM2 --chat %r streamed: stdout is the text, stderr says finish: stop (%r)"
              % (prompt, s.stderr.strip()[-100:]))
    return True


if __name__ == "__main__":
    sys.exit(harness.main("plume-eos-", test_tiny, test_smollm2))
