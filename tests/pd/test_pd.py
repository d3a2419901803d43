"""Prefill/decode disaggregation on one machine (tests/pd/): a prefill worker
and a decode worker (`plume serve` with the pd-ipc plugin) behind
`plume router`, driven by the real `openai` client.

    test_pd.py PLUME MODEL [memfd|ucx]

runs it all on the memfd transport (default) or on the ucx transport (KV
read with UCX RMA over TCP on loopback: UCX_TLS=tcp), the
same checks with the transport's addresses (a Unix socket path, or
ucx://127.0.0.1:PORT).

- a prompt's KV is held as the transport says between the two requests:
  ucx reads it from the prefill worker's blocks in place (or, with
  read_in_place: false, from a copy), memfd from a copy;
- greedy token ids through the 1P1D set equal a colocated `plume serve`'s,
  for completions and chat, streamed and not, prompts of 1 to 100+ tokens
  (one block, several, an exact multiple), 8 concurrent clients; with the
  default KV cache (f16, no kv_cache.dtype in the pipelines), and again
  with f32 and with int8 KV caches given in the pipelines (completions);
- no shared-memory segment and no KV block outlives its request: both
  workers' /metrics count 0 live segments, 0 deferred blocks, 0 used
  blocks and 0 requests waiting for KV once idle, and the transfer counts
  match the requests;
- workers that cannot exchange KV (another block_size, another KV dtype)
  make the router's start-up check fail with a message that says so;
- the router's --api-key is required from clients;
- a failed transfer fails the request loudly by default, and is computed
  locally (same ids) with on_failure: recompute;
- KV computed for another prompt (one token different, or shorter) is
  refused, never used;
- killing the decode worker mid-stream (while it waits for KV from a fake
  prefill worker that never answers, so that the kill lands mid-stream every
  time) ends the client's stream with an error event within the router's
  --timeout, the prefill worker serves on,
  an unclaimed segment expires after timeout_s, and the restarted decode
  worker is used again;
- a stopped (hung) prefill worker fails the request within --timeout, the
  decode worker serves on; a killed one fails the transfer at once; a
  restarted one is used again."""
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import openai  # noqa: E402

from serve_util import CheckFailed, Server, check, free_port  # noqa: E402

plume, tiny = sys.argv[1:3]
TRANSPORT = sys.argv[3] if len(sys.argv) > 3 else "memfd"
UCX = TRANSPORT == "ucx"
if UCX:
    os.environ["UCX_TLS"] = "tcp"  # the workers' UCX: TCP on loopback, as in CI
TIMEOUT = 3  # the router's --timeout and the connectors' timeout_s in this test


class Worker(Server):
    """`plume serve --pipeline FILE`; port 0 lets the server pick a free
    one (a port chosen here and bound later can be taken in between: the
    pd-ipc plugin's UCX listener binds an ephemeral port first), a fixed
    port brings a restarted worker back where the router looks."""

    def __init__(self, pipeline, port=0):
        self.start([plume, "serve", "--pipeline", pipeline, "--port", str(port), "--threads", "1"])


class Router(Server):
    def __init__(self, prefill, decode, *extra):
        self.start([plume, "router", "--prefill", prefill.base, "--decode", decode.base,
                    "--port", "0", "--timeout", str(TIMEOUT), "--startup-timeout", "20", *extra])


def pipeline(d, name, role, block_size=16, kv_dtype=None, **kv):
    """A pipeline file for the tiny model with a kv_connector of role, on
    TRANSPORT; kv_dtype None: no kv_cache.dtype (the default, f16)."""
    kv = dict(transport=TRANSPORT, **kv)
    extra = "".join(f", {k}: {v}" for k, v in kv.items())
    dtype = f"dtype: {kv_dtype}, " if kv_dtype else ""
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(f"model: {tiny}\nbackend: cpu\nplugins: [pd-ipc]\n"
                f"kv_cache: {{ block_size: {block_size}, {dtype}max_tokens: 4096 }}\n"
                f"sampling: {{ temperature: 0 }}\n"
                f"kv_connector: {{ method: ipc, role: {role}, timeout_s: {TIMEOUT}{extra} }}\n")
    return path


def client(srv):
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0, timeout=60)


PROMPTS = ["Hi", "Hello world", "x " * 15, "The quick brown fox " * 4, "a b c d e f g h " * 14,
           "One more prompt with some words in it, longer than one block of sixteen tokens."]


def completion_ids(srv, prompt, max_tokens=8, stream=False):
    c = client(srv)
    if not stream:
        r = c.completions.create(model="tiny.gguf", prompt=prompt, max_tokens=max_tokens, temperature=0,
                                 extra_body={"return_token_ids": True})
        return r.choices[0].token_ids, r.choices[0].text
    text = ""
    for ch in c.completions.create(model="tiny.gguf", prompt=prompt, max_tokens=max_tokens,
                                   temperature=0, stream=True):
        if ch.choices:
            text += ch.choices[0].text
    return None, text


def chat_text(srv, content, stream=False):
    c = client(srv)
    msgs = [{"role": "user", "content": content}]
    if not stream:
        return c.chat.completions.create(model="tiny.gguf", messages=msgs, max_tokens=8,
                                         temperature=0).choices[0].message.content
    return "".join(ch.choices[0].delta.content or "" for ch in
                   c.chat.completions.create(model="tiny.gguf", messages=msgs, max_tokens=8,
                                             temperature=0, stream=True) if ch.choices)


def wait_clean(srv, what, timeout=15):
    """Waits until srv holds no transfer state; returns its metrics."""
    end = time.time() + timeout
    while True:
        m = srv.metrics()
        clean = (m["plume:num_requests_running"] == 0 and m["plume:num_requests_waiting"] == 0
                 and m["plume:kv_transfer_live_segments"] == 0
                 and m["plume:kv_transfer_live_bytes"] == 0
                 and m["plume:kv_transfer_deferred_blocks"] == 0
                 and m["plume:kv_transfer_waiting_requests"] == 0
                 and m["plume:kv_cache_blocks_used"] == 0)
        if clean:
            return m
        check(time.time() < end, (what, "transfer state outlived its requests", m))
        time.sleep(0.1)


def sent(m):
    return m['plume:kv_transfers_total{result="sent"}']


def received(m):
    return m['plume:kv_transfers_total{result="received"}']


def test_identity(colo, pre, dec, rt):
    # models.list and models.retrieve through the router are the decode worker's
    c = client(rt)
    name = c.models.list().data[0].id
    check(name == client(dec).models.list().data[0].id, name)
    check(c.models.retrieve(name).id == name, "models.retrieve through the router")
    try:
        c.models.retrieve("no-such-model")
        check(False, "the router answered models.retrieve('no-such-model')")
    except openai.NotFoundError:
        pass
    n_multi = 0
    for p in PROMPTS:
        want = completion_ids(colo, p)
        got = completion_ids(rt, p)
        check(got == want, ("completion ids through 1P1D differ from colocated", p, got, want))
        check(completion_ids(rt, p, stream=True)[1] == want[1], ("streamed text differs", p))
        n_multi += 1
        check(chat_text(rt, p) == chat_text(colo, p), ("chat differs", p))
        check(chat_text(rt, p, stream=True) == chat_text(colo, p), ("streamed chat differs", p))
    # 8 clients at once, each its own prompt
    prompts = [f"Client {i} asks about item {i * 7} in the list " * (1 + i % 3) for i in range(8)]
    want = [completion_ids(colo, p, 12) for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda p: completion_ids(rt, p, 12), prompts))
    check(got == want, ("concurrent 1P1D ids differ from colocated", got, want))
    mp = wait_clean(pre, "prefill")
    md = wait_clean(dec, "decode")
    # every prompt longer than one token went through shared memory, once
    check(sent(mp) == received(md) and received(md) >= 4 * (len(PROMPTS) - 1) + 8,
          ("transfer counts", mp, md))
    check(md['plume:kv_transfers_total{result="failed"}'] == 0, md)


def test_held_kv(colo, pre, dec, in_place):
    """Between the prefill and the decode request: the prefill worker holds
    the prompt's KV in one segment; on ucx with the cpu backend the segment
    is the request's blocks in the pool (kept, read in place by RMA), on
    memfd or with read_in_place: false a copy (the blocks are freed at
    once).  Then the decode worker's ids equal colocated ones and
    everything is let go."""
    prompt = "The held prompt spans more than two blocks of sixteen tokens, " * 2
    st, r = pre.request("POST", "/v1/completions",
                        {"prompt": prompt, "max_tokens": 1,
                         "kv_transfer_params": {"do_remote_decode": True}})
    check(st == 200, (st, r))
    end = time.time() + 10  # the response may leave before the save point runs
    while (m := pre.metrics())["plume:kv_transfer_live_segments"] != 1:
        check(time.time() < end, ("no segment held after the prefill request", m))
        time.sleep(0.05)
    held = m["plume:kv_transfer_deferred_blocks"]
    check(held >= 3 if in_place else held == 0, ("blocks held by the prefill worker", held))
    st, r2 = dec.request("POST", "/v1/completions",
                         {"prompt": prompt, "max_tokens": 8, "return_token_ids": True,
                          "kv_transfer_params": r["kv_transfer_params"]})
    check(st == 200 and r2["choices"][0]["token_ids"] == completion_ids(colo, prompt)[0], (st, r2))
    wait_clean(pre, "prefill after a held transfer")
    wait_clean(dec, "decode after a held transfer")


def test_ucx_copied(d, colo, dec):
    """read_in_place: false: the prefill worker copies each prompt's KV into
    a registered segment (the path of pools that are not host memory)."""
    w = Worker(pipeline(d, "copy.yaml", "prefill", address=f"127.0.0.1:{free_port()}",
                        read_in_place="false"), 0)
    try:
        test_held_kv(colo, w, dec, in_place=False)
    finally:
        w.kill()


def test_mismatch(d, pre):
    """pre runs the default KV cache (f16, block_size 16)."""
    for name, args, says in (("bad.yaml", {"block_size": 32},
                              ("block_size is 32", "prefill worker's is 16")),
                             ("bad-dtype.yaml", {"kv_dtype": "f32"},
                              ("KV cache is f32 but the prefill worker's is f16",
                               "same kv_cache.dtype"))):
        w = Worker(pipeline(d, name, "decode", **args), 0)
        try:
            r = subprocess.run([plume, "router", "--prefill", pre.base, "--decode", w.base,
                                "--port", "0", "--startup-timeout", "10"],
                               capture_output=True, text=True, timeout=60)
            check(r.returncode == 1, ("router with mismatched workers must fail", name, r))
            check(all(s in r.stderr for s in says), (name, says, r.stderr))
        finally:
            w.kill()


def test_identity_dtypes(d):
    """A 1P1D set whose pipelines give kv_cache.dtype f32, then int8, gives
    the greedy ids of a colocated server with the same cache
    (`plume serve --kv-dtype`): each dtype's blocks travel intact."""
    for dt in ("f32", "int8"):
        if UCX:
            port = free_port()
            pre_yaml = pipeline(d, f"pre-{dt}.yaml", "prefill", kv_dtype=dt,
                                address=f"127.0.0.1:{port}")
        else:
            pre_yaml = pipeline(d, f"pre-{dt}.yaml", "prefill", kv_dtype=dt,
                                socket=os.path.join(d, f"p-{dt}.sock"))
        servers = []
        try:
            servers.append(Server(plume, tiny, "--kv-dtype", dt))
            servers.append(Worker(pre_yaml))
            servers.append(Worker(pipeline(d, f"dec-{dt}.yaml", "decode", kv_dtype=dt)))
            servers.append(Router(servers[1], servers[2]))
            colo, pre, dec, rt = servers
            for p in PROMPTS:
                want, got = completion_ids(colo, p), completion_ids(rt, p)
                check(got == want, (dt, "completion ids through 1P1D differ from colocated", p,
                                    got, want))
            mp, md = wait_clean(pre, f"prefill {dt}"), wait_clean(dec, f"decode {dt}")
            check(sent(mp) == received(md) >= len(PROMPTS) - 1, (dt, "transfer counts", mp, md))
        finally:
            for srv in servers:
                srv.kill()


def test_config_errors(d):
    """Transport settings that cannot work are errors at start, saying why."""
    other = "socket: /tmp/x.sock" if UCX else "address: 127.0.0.1:1"
    cases = [(pipeline(d, "e1.yaml", "prefill", **dict([other.split(": ")])),
              "is for transport: " + ("memfd" if UCX else "ucx")),
             (pipeline(d, "e2.yaml", "prefill"),
              "needs kv_connector." + ("address" if UCX else "socket")),
             (pipeline(d, "e3.yaml", "decode", adress="127.0.0.1:1"), "adress")]
    if not UCX:
        cases.append((pipeline(d, "e4.yaml", "decode", read_in_place="false"),
                      "read_in_place is for transport: ucx"))
    for path, says in cases:
        r = subprocess.run([plume, "serve", "--pipeline", path, "--port", "0"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and says in r.stderr, (path, says, r.returncode, r.stderr))


def test_api_key(pre, dec):
    """The router's --api-key: required from clients, sent on to the workers."""
    rk = Router(pre, dec, "--api-key", "k3y")
    try:
        st, r = rk.request("POST", "/v1/completions", {"prompt": "Hello world", "max_tokens": 2})
        check(st == 401 and "API key" in r["error"]["message"], (st, r))
        st, r = rk.request("POST", "/v1/completions", {"prompt": "Hello world", "max_tokens": 2},
                           {"Authorization": "Bearer k3y"})
        check(st == 200 and r["usage"]["completion_tokens"] == 2, (st, r))
    finally:
        rk.kill()


def test_failed_transfer(d, colo, pre, dec, pre_addr):
    # default (on_failure: fail): loud
    body = {"prompt": "Hello world again", "max_tokens": 4,
            "kv_transfer_params": {"do_remote_prefill": True, "transfer_id": "no-such-id",
                                   "remote_addr": pre_addr}}
    st, r = dec.request("POST", "/v1/completions", body)
    check(st == 500 and "holds no KV for transfer no-such-id" in r["error"]["message"]
          and "on_failure" in r["error"]["message"], (st, r))
    # an address nobody listens on
    body["kv_transfer_params"]["remote_addr"] = (f"ucx://127.0.0.1:{free_port()}" if UCX else
                                                 os.path.join(d, "nobody.sock"))
    st, r = dec.request("POST", "/v1/completions", body)
    check(st == 500 and "cannot reach the prefill worker" in r["error"]["message"], (st, r))
    # the other transport's address: says which transport to set
    body["kv_transfer_params"]["remote_addr"] = (os.path.join(d, "p.sock") if UCX else
                                                 "ucx://127.0.0.1:1")
    st, r = dec.request("POST", "/v1/completions", body)
    check(st == 500 and "transport" in r["error"]["message"], (st, r))
    # KV computed for another prompt is refused, never used: one token
    # different (the same length), or a shorter prompt
    ids = list(range(10, 40))
    for other, says in ((ids[:17] + [99] + ids[18:], "holds the KV of another prompt"),
                        (ids + [7, 8, 9], "holds the KV of a 30-token prompt")):
        expired0 = wait_clean(pre, "prefill before a refused transfer")[
            'plume:kv_transfers_total{result="expired"}']
        st, r = pre.request("POST", "/v1/completions",
                            {"prompt": ids, "max_tokens": 1,
                             "kv_transfer_params": {"do_remote_decode": True}})
        check(st == 200, (st, r))
        st, r2 = dec.request("POST", "/v1/completions",
                             {"prompt": other, "max_tokens": 2,
                              "kv_transfer_params": r["kv_transfer_params"]})
        check(st == 500 and says in r2["error"]["message"], (st, r2))
        m = wait_clean(pre, "prefill after a refused transfer")
        if "30-token" in says:
            # refused after the segment was handed over: the decode worker
            # lets it go at once, it does not wait for timeout_s to expire
            check(m['plume:kv_transfers_total{result="expired"}'] == expired0, m)
    # on_failure: recompute: computed here, the same ids
    rec = Worker(pipeline(d, "rec.yaml", "decode", on_failure="recompute"), 0)
    try:
        body["return_token_ids"] = True
        st, r = rec.request("POST", "/v1/completions", body)
        want = completion_ids(colo, "Hello world again", 4)[0]
        check(st == 200 and r["choices"][0]["token_ids"] == want, (st, r, want))
        wait_clean(rec, "recompute decode")
    finally:
        rec.kill()
    # a request naming remote KV on a worker without a connector: refused
    st, r = colo.request("POST", "/v1/completions", body)
    check(st == 400 and "no kv_connector" in r["error"]["message"], (st, r))
    wait_clean(dec, "decode after failed transfers")


class FakePrefill:
    """An HTTP server that answers every POST as a prefill worker would,
    pointing the decode worker at a socket that never answers (a Unix
    socket, or for ucx a TCP port): the decode worker admits the request
    (the stream's headers go out) and waits for KV, so that killing it
    lands mid-stream, deterministically."""

    def __init__(self, d):
        import http.server
        import threading
        if UCX:
            self.hang = socket.socket()
            self.hang.bind(("127.0.0.1", 0))
            addr = f"ucx://127.0.0.1:{self.hang.getsockname()[1]}"
        else:
            self.hang = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self.hang.bind(os.path.join(d, "hang.sock"))
            addr = os.path.join(d, "hang.sock")
        self.hang.listen(8)  # never accepted: connects succeed, answers never come
        params = {"do_remote_prefill": True, "transfer_id": "x", "remote_addr": addr}

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                body = json.dumps({"choices": [{"text": "", "index": 0}],
                                   "kv_transfer_params": params}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.hang.close()


def test_decode_killed(d, pre_yaml, dec_yaml, pre, dec, rt):
    import http.client
    import threading
    fake = FakePrefill(d)
    rt2 = Router(fake, dec, "--no-check")
    try:
        c = http.client.HTTPConnection("127.0.0.1", rt2.port, timeout=60)
        c.request("POST", "/v1/completions",
                  json.dumps({"prompt": "Tell a long story", "max_tokens": 100,
                              "stream": True}), {"Content-Type": "application/json"})
        killer = threading.Timer(1.0, dec.kill)
        t_kill = time.time() + 1.0
        killer.start()
        resp = c.getresponse()
        body = resp.read().decode()
        dt = time.time() - t_kill
        killer.join()
        check(resp.status == 200 and "failed while streaming" in body and "decode worker" in body
              and body.rstrip().endswith("data: [DONE]"), (resp.status, body))
        check(dt < TIMEOUT + 5, ("the stream took too long to fail", dt))
    finally:
        rt2.kill()
        fake.close()
    # the prefill worker serves on
    st, r = pre.request("POST", "/v1/completions", {"prompt": "still there?", "max_tokens": 2})
    check(st == 200, (st, r))
    # a request while decode is down: a clear 502; its segment expires
    st, r = rt.request("POST", "/v1/completions", {"prompt": "nobody decodes this one",
                                                   "max_tokens": 2})
    check(st == 502 and "decode worker" in r["error"]["message"], (st, r))
    m = wait_clean(pre, "prefill after decode died", timeout=TIMEOUT + 10)
    check(m['plume:kv_transfers_total{result="expired"}'] >= 1, m)
    # the restarted decode worker is used again
    dec2 = Worker(dec_yaml, dec.port)
    ids = completion_ids(rt, "Hello world")
    check(ids[0] and len(ids[0]) == 8, ids)
    wait_clean(dec2, "restarted decode")
    return dec2


def test_prefill_failures(d, pre_yaml, pre, dec, rt):
    # hung prefill (SIGSTOP): the request fails within --timeout
    pre.proc.send_signal(signal.SIGSTOP)
    t0 = time.time()
    st, r = rt.request("POST", "/v1/completions", {"prompt": "Hello there", "max_tokens": 2})
    dt = time.time() - t0
    check(st == 502 and "prefill worker" in r["error"]["message"], (st, r))
    check(dt < TIMEOUT + 5, ("a hung prefill held the request too long", dt))
    # the decode worker serves on (a request of its own)
    st, r = dec.request("POST", "/v1/completions", {"prompt": "decode alone", "max_tokens": 2})
    check(st == 200, (st, r))
    pre.proc.send_signal(signal.SIGCONT)
    # prefill answers, then dies before the decode worker fetches: the
    # transfer fails at once with a clear error
    st, r = pre.request("POST", "/v1/completions",
                        {"prompt": "Hello world, killed", "max_tokens": 1,
                         "kv_transfer_params": {"do_remote_decode": True}})
    check(st == 200 and r["kv_transfer_params"]["do_remote_prefill"], r)
    pre.kill()
    t0 = time.time()
    st, r2 = dec.request("POST", "/v1/completions",
                         {"prompt": "Hello world, killed", "max_tokens": 2,
                          "kv_transfer_params": r["kv_transfer_params"]})
    check(st == 500 and "cannot reach the prefill worker" in r2["error"]["message"], (st, r2))
    check(time.time() - t0 < TIMEOUT + 5, "a dead prefill held the transfer too long")
    wait_clean(dec, "decode after prefill died")
    # the restarted prefill worker is used again
    pre2 = Worker(pre_yaml, pre.port)
    ids = completion_ids(rt, "Hello world")
    check(ids[0] and len(ids[0]) == 8, ids)
    wait_clean(pre2, "restarted prefill")
    return pre2


def main():
    with tempfile.TemporaryDirectory(prefix="plume-pd-") as d:
        sock = os.path.join(d, "p.sock")
        if UCX:
            port = free_port()
            pre_addr = f"ucx://127.0.0.1:{port}"
            pre_yaml = pipeline(d, "pre.yaml", "prefill", address=f"127.0.0.1:{port}")
        else:
            pre_addr = sock
            pre_yaml = pipeline(d, "pre.yaml", "prefill", socket=sock)
        dec_yaml = pipeline(d, "dec.yaml", "decode")
        colo = Server(plume, tiny)
        pre = Worker(pre_yaml)
        dec = Worker(dec_yaml)
        rt = None
        try:
            rt = Router(pre, dec)
            test_identity(colo, pre, dec, rt)
            test_held_kv(colo, pre, dec, in_place=UCX)
            if UCX:
                test_ucx_copied(d, colo, dec)
            test_mismatch(d, pre)
            test_identity_dtypes(d)
            test_config_errors(d)
            test_api_key(pre, dec)
            test_failed_transfer(d, colo, pre, dec, pre_addr)
            dec = test_decode_killed(d, pre_yaml, dec_yaml, pre, dec, rt)
            pre = test_prefill_failures(d, pre_yaml, pre, dec, rt)
            pre.stop()
            dec.stop()
            colo.stop()
            check(not os.path.exists(sock), "the prefill worker left its socket behind")
        finally:
            for s in (rt, pre, dec, colo):
                if s:
                    if s.proc.poll() is None:
                        try:
                            s.proc.send_signal(signal.SIGCONT)
                        except ProcessLookupError:
                            pass
                    s.kill()
    print(f"pd ({TRANSPORT}): ok")


main()
