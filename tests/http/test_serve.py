"""`plume serve` on the tiny model (tests/http/): the real `openai` client
(completions and chat, streamed and not), 32 concurrent clients each getting
exactly the greedy token ids `plume generate` gives for its prompt alone,
mid-stream disconnects that leave nothing running, a battery of malformed
requests (each its status, the server serving on), the API key, SIGTERM.

Token ids are compared, not text: the server returns them with
"return_token_ids": true (a plume extension, named as vLLM's), so a
tokenization or detokenization difference cannot hide behind equal text;
the tiny random model's text is mostly replacement characters anyway."""
import concurrent.futures
import json
import socket
import sys

import openai

from serve_util import Server, check, greedy_ids, read_head

plume, tiny = sys.argv[1:3]
N_CLIENTS = 32
MAX_TOKENS = 12


def openai_client(srv, key="none"):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key=key, max_retries=0, timeout=120)


def test_openai(srv):
    client = openai_client(srv)
    models = client.models.list()
    name = models.data[0].id
    check(name == "tiny.gguf", models)
    # models.retrieve: GET /v1/models/{id}, 404 for another name
    m = client.models.retrieve(name)
    check(m.id == name and m.object == "model", m)
    try:
        client.models.retrieve("gpt-4")
        check(False, "models.retrieve('gpt-4') answered")
    except openai.NotFoundError as e:
        check("tiny.gguf" in str(e), str(e))
    r = client.completions.create(model=name, prompt="Hello world", max_tokens=5, temperature=0,
                                  extra_body={"return_token_ids": True})
    check(r.usage.prompt_tokens > 0 and r.usage.completion_tokens == 5, r)
    check(r.choices[0].finish_reason == "length", r)
    check(r.choices[0].token_ids == greedy_ids(plume, tiny, "Hello world", 5), r)
    # streamed: the same tokens, a final chunk with finish_reason, usage last
    chunks = list(client.completions.create(model=name, prompt="Hello world", max_tokens=5,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    check(text == r.choices[0].text, (text, r.choices[0].text))
    check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5, chunks[-1])
    check([c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length", chunks)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    cr = client.chat.completions.create(model=name, messages=msgs, max_tokens=6, temperature=0)
    check(cr.choices[0].message.role == "assistant" and cr.usage.completion_tokens >= 1, cr)
    stream = list(client.chat.completions.create(model=name, messages=msgs, max_tokens=6,
                                                 temperature=0, stream=True))
    check(stream[0].choices[0].delta.role == "assistant", stream[0])
    content = "".join(c.choices[0].delta.content or "" for c in stream)
    check(content == cr.choices[0].message.content, (content, cr))
    check(stream[-1].choices[0].finish_reason in ("stop", "length"), stream[-1])
    # token-id prompts and /tokenize agree with text prompts
    st, tok = srv.request("POST", "/tokenize", {"prompt": "Hello world"})
    check(st == 200 and tok["count"] == len(tok["tokens"]), tok)
    r2 = client.completions.create(model=name, prompt=tok["tokens"], max_tokens=5,
                                   temperature=0, extra_body={"return_token_ids": True})
    check(r2.choices[0].token_ids == r.choices[0].token_ids, (r2, r))
    st, det = srv.request("POST", "/detokenize", {"tokens": r.choices[0].token_ids})
    check(st == 200 and isinstance(det["prompt"], str), det)
    # seed takes any 64-bit integer, negative ones too (OpenAI's and vLLM's range)
    a, b = (client.completions.create(model=name, prompt="Hello", max_tokens=6, temperature=1,
                                      seed=-5) for _ in range(2))
    check(a.choices[0].text == b.choices[0].text, (a, b))
    # a wrong model name is the client's NotFoundError
    try:
        client.completions.create(model="gpt-4", prompt="x", max_tokens=1)
        check(False, "model gpt-4 accepted")
    except openai.NotFoundError as e:
        check("tiny.gguf" in str(e), str(e))


def test_concurrent(srv):
    prompts = [f"Request {i}: the numbers are {i * 7} and {i * 13}" for i in range(N_CLIENTS)]
    want = [greedy_ids(plume, tiny, p, MAX_TOKENS) for p in prompts]
    client = openai_client(srv)

    def one(i):
        r = client.completions.create(model="tiny.gguf", prompt=prompts[i], max_tokens=MAX_TOKENS,
                                      temperature=0, extra_body={"return_token_ids": True})
        return r.choices[0].token_ids

    with concurrent.futures.ThreadPoolExecutor(N_CLIENTS) as ex:
        got = list(ex.map(one, range(N_CLIENTS)))
    for i in range(N_CLIENTS):
        check(got[i] == want[i], (i, prompts[i], got[i], want[i]))


def test_disconnects(srv):
    body = json.dumps({"prompt": "Tell me a long story", "max_tokens": 200, "ignore_eos": True,
                       "temperature": 0, "stream": True}).encode()
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        check(b"200 OK" in s.recv(4096), "no streamed response")
        s.close()   # mid-stream
    m = srv.wait_idle()
    check(m["plume:num_requests_running"] == 0, m)


def raw(srv, data):
    """Sends raw bytes as one request; returns the status line's code."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
    s.sendall(data)
    resp = read_head(s)
    s.close()
    parts = resp.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 else 0  # 0: closed without a response


def post_raw(srv, path, body):
    return raw(srv, f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
                    f"Connection: close\r\n\r\n".encode() + body)


def test_malformed(srv):
    cases = [
        ("truncated JSON", "/v1/completions", b'{"prompt": "hi", "max_tok', 400),
        ("not an object", "/v1/completions", b'[1, 2]', 400),
        ("wrong type", "/v1/completions", b'{"prompt": "hi", "max_tokens": "5"}', 400),
        ("prompt a number", "/v1/completions", b'{"prompt": 5}', 400),
        ("invalid UTF-8", "/v1/completions", b'{"prompt": "\xff\xfe bad"}', 400),
        ("negative max_tokens", "/v1/completions", b'{"prompt": "hi", "max_tokens": -1}', 400),
        ("zero max_tokens", "/v1/chat/completions",
         b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}', 400),
        ("10k stop strings", "/v1/completions",
         json.dumps({"prompt": "hi", "stop": ["s%d" % i for i in range(10000)]}).encode(), 400),
        ("n = 2", "/v1/completions", b'{"prompt": "hi", "n": 2}', 400),
        ("num_speculative_tokens below -1", "/v1/completions",
         b'{"prompt": "hi", "num_speculative_tokens": -2}', 400),
        ("num_speculative_tokens not an integer", "/v1/completions",
         b'{"prompt": "hi", "num_speculative_tokens": "3"}', 400),
        ("bad role", "/v1/chat/completions",
         b'{"messages": [{"role": "wizard", "content": "hi"}]}', 400),
        ("no messages", "/v1/chat/completions", b'{"messages": []}', 400),
        ("temperature out of range", "/v1/completions", b'{"prompt": "hi", "temperature": -1}',
         400),
        ("token id out of range", "/v1/completions", b'{"prompt": [1, 99999999]}', 400),
        ("prompt longer than the context", "/v1/completions",
         json.dumps({"prompt": [5] * 300}).encode(), 400),
        ("huge body", "/v1/completions", b'{"prompt": "' + b"a" * (5 << 20) + b'"}', 413),
        ("unknown endpoint", "/v1/nothing", b"{}", 404),
        ("empty body", "/v1/completions", b"", 400),
    ]
    for what, path, body, want in cases:
        got = post_raw(srv, path, body)
        check(got == want, (what, got, want))
        st, r = srv.request("GET", "/health")
        check(st == 200, (what, "server down afterwards", st, r))
    # every error is OpenAI's {"error": {"message", "type", "param", "code"}} (code a
    # string or null, never the status: typed clients read it as a string) and names the sizes
    st, r = srv.request("POST", "/v1/completions", {"prompt": [5] * 300})
    check(st == 400 and set(r["error"]) == {"message", "type", "param", "code"}, r)
    check(r["error"]["type"] == "invalid_request_error" and r["error"]["code"] is None and
          r["error"]["param"] is None, r)
    check("300" in r["error"]["message"] and "256" in r["error"]["message"], r)
    st, r = srv.request("POST", "/v1/completions", {"prompt": "hi", "stop": ["x"] * 17})
    check(st == 400 and "at most 16" in r["error"]["message"], r)
    st, r = srv.request("GET", "/v1/completions")
    check(st == 405 and r["error"]["code"] is None and r["error"]["type"] == "invalid_request_error", r)
    st, r = srv.request("DELETE", "/health")
    check(st == 405, r)
    code = raw(srv, b"GARBAGE\r\n\r\n")
    check(code == 0 or code >= 400, ("garbage request line", code))
    st, r = srv.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 3,
                                                    "temperature": 0})
    check(st == 200 and r["usage"]["completion_tokens"] == 3, r)


def test_api_key():
    srv = Server(plume, tiny, "--api-key", "sekret")
    try:
        st, r = srv.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1})
        check(st == 401 and r["error"]["type"] == "authentication_error", r)
        check(srv.request("GET", "/health")[0] == 200, "health needs no key")
        try:
            openai_client(srv, "wrong").models.list()
            check(False, "wrong key accepted")
        except openai.AuthenticationError:
            pass
        r = openai_client(srv, "sekret").completions.create(model="tiny.gguf", prompt="hi",
                                                            max_tokens=2)
        check(r.usage.completion_tokens == 2, r)
        srv.stop()
    finally:
        srv.kill()


srv = Server(plume, tiny, "--max-body", str(1 << 20))
try:
    test_openai(srv)
    test_concurrent(srv)
    test_disconnects(srv)
    test_malformed(srv)
    m = srv.wait_idle()
    check(m["plume:generation_tokens_total"] > 0 and
          m["plume:time_to_first_token_seconds_count"] > 0, m)
    srv.stop()
finally:
    srv.kill()
test_api_key()
print("ok")
