"""`plume serve` over the engine's serving API (enable after the engine work is
merged; tests/http/meson.build): per-token logprobs for completions and
chat, streamed logprobs, presence/frequency penalties change greedy output,
"speculative": false and "num_speculative_tokens" are accepted, and after mid-stream disconnects /metrics
shows nothing running and no KV blocks held."""
import json
import socket
import sys

import openai

from serve_util import Server, check

plume, tiny = sys.argv[1:3]
srv = Server(plume, tiny)
try:
    client = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0)
    r = client.completions.create(model="tiny.gguf", prompt="Hello", max_tokens=4, temperature=0,
                                  logprobs=3)
    lp = r.choices[0].logprobs
    check(len(lp.token_logprobs) == 4 and all(x <= 0 for x in lp.token_logprobs), lp)
    # the legacy format keys alternatives by their text, so byte tokens that
    # all render as U+FFFD collapse: at most 3 entries, and under greedy
    # decoding none more likely than the chosen token
    check(all(1 <= len(t) <= 3 and max(t.values()) <= x + 1e-5
              for t, x in zip(lp.top_logprobs, lp.token_logprobs)), lp)
    c = client.chat.completions.create(model="tiny.gguf", max_tokens=4, temperature=0,
                                       messages=[{"role": "user", "content": "hi"}],
                                       logprobs=True, top_logprobs=2)
    check(len(c.choices[0].logprobs.content) == 4, c)
    check(all(len(e.top_logprobs) == 2 for e in c.choices[0].logprobs.content), c)
    chunks = list(client.chat.completions.create(
        model="tiny.gguf", max_tokens=4, temperature=0, stream=True, logprobs=True,
        messages=[{"role": "user", "content": "hi"}]))
    check(sum(len(ch.choices[0].logprobs.content) for ch in chunks
              if ch.choices and ch.choices[0].logprobs) == 4, chunks)
    base = client.completions.create(model="tiny.gguf", prompt="a a a", max_tokens=24,
                                     temperature=0, extra_body={"return_token_ids": True,
                                                                "ignore_eos": True})
    pen = client.completions.create(model="tiny.gguf", prompt="a a a", max_tokens=24,
                                    temperature=0, frequency_penalty=2.0, presence_penalty=2.0,
                                    extra_body={"return_token_ids": True, "ignore_eos": True})
    check(base.choices[0].token_ids != pen.choices[0].token_ids, (base, pen))
    ns = client.completions.create(model="tiny.gguf", prompt="Hello", max_tokens=4,
                                   temperature=0, extra_body={"speculative": False,
                                                              "return_token_ids": True})
    check(ns.usage.completion_tokens == 4, ns)
    capped = client.completions.create(model="tiny.gguf", prompt="Hello", max_tokens=4,
                                       temperature=0, extra_body={"num_speculative_tokens": 0,
                                                                  "return_token_ids": True})
    check(capped.choices[0].token_ids == ns.choices[0].token_ids, (capped, ns))
    body = json.dumps({"prompt": "story", "max_tokens": 200, "ignore_eos": True,
                       "stream": True}).encode()
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        s.recv(4096)
        s.close()
    m = srv.wait_idle()
    check(m["plume:kv_cache_blocks_used"] == 0 and m["plume:kv_cache_usage_perc"] == 0, m)
    check(m["plume:kv_cache_blocks_total"] > 0, m)
    srv.stop()
finally:
    srv.kill()
print("ok")
