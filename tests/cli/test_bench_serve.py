"""`plume bench serve` against a tiny deterministic OpenAI-compatible stub
(http.server, one thread per connection) that streams SSE chunks with known
delays: the request count, TTFT/ITL/TPOT/E2E against the stub's delays, the
token counts from usage and from chunks, the chat endpoint and the shipped
chat dataset, --max-concurrency as the stub saw it, Poisson arrivals at the
requested rate, failures (HTTP 500, malformed SSE, a server that is down)
counted with clear messages, and the --json shape."""
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

plume = sys.argv[1]
src = os.environ.get("PLUME_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))

TTFT = 0.20   # seconds from the request to the first chunk
ITL = 0.05    # seconds between chunks
CAP = 6       # at most this many tokens per answer (a stub's early stop)


class Stub:
    mode = "ok"          # ok | usage-less | fail | fail-odd | malformed
    lock = threading.Lock()
    active = 0
    peak = 0
    arrivals = []
    bodies = []
    paths = []
    seen = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def setup(self):
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "stub-model", "object": "model"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        req = json.loads(self.rfile.read(n))
        with Stub.lock:
            Stub.active += 1
            Stub.peak = max(Stub.peak, Stub.active)
            Stub.arrivals.append(time.monotonic())
            Stub.bodies.append(req)
            Stub.paths.append(self.path)
            Stub.seen += 1
            k = Stub.seen
        try:
            self.answer(req, k)
        finally:
            with Stub.lock:
                Stub.active -= 1

    def event(self, obj):
        data = obj if isinstance(obj, str) else json.dumps(obj)
        self.wfile.write(f"data: {data}\n\n".encode())

    def answer(self, req, k):
        mode = Stub.mode
        if mode == "fail" or (mode == "fail-odd" and k % 2):
            time.sleep(0.01)
            body = b'{"error": {"message": "stub failure", "type": "server_error", "param": null, "code": null}}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        chat = self.path.endswith("/chat/completions")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        time.sleep(TTFT)
        if mode == "malformed":
            self.wfile.write(b"data: {\"choices\": [{\"text\": \"a\"\n\n")
            return
        n = min(req["max_tokens"], CAP)
        for i in range(n):
            if i:
                time.sleep(ITL)
            if chat:
                delta = {"content": f"w{i} "}
                if i == 0:
                    delta["role"] = "assistant"
                choice = {"index": 0, "delta": delta, "finish_reason": None}
                obj = "chat.completion.chunk"
            else:
                choice = {"index": 0, "text": f" w{i}", "finish_reason": None}
                obj = "text_completion"
            if i == n - 1:
                choice["finish_reason"] = "length"
            self.event({"id": "x", "object": obj, "model": "stub-model", "choices": [choice]})
        if mode != "usage-less" and req.get("stream_options", {}).get("include_usage"):
            self.event({"id": "x", "choices": [], "usage": {
                "prompt_tokens": 11, "completion_tokens": n, "total_tokens": 11 + n}})
        self.event("[DONE]")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_address[1]}"


def reset(mode):
    Stub.mode = mode
    Stub.active = Stub.peak = Stub.seen = 0
    Stub.arrivals, Stub.bodies, Stub.paths = [], [], []


def bench(*args, rc=0, mode="ok", json_out=True):
    reset(mode)
    cmd = [plume, "bench", "serve", *args] + (["--json"] if json_out else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check(r.returncode == rc, (args, r.returncode, r.stdout, r.stderr))
    return json.loads(r.stdout) if json_out and r.stdout.strip() else r


def near(x, want, lo_slack, hi_slack, what):
    """x (ms) is want (s) within -lo_slack/+hi_slack ms: the stub's sleeps are
    lower bounds; scheduling on a loaded (or sanitized) machine adds."""
    check(want * 1e3 - lo_slack <= x <= want * 1e3 + hi_slack, (what, x, want))


# --- metrics against the stub's delays: 8 requests, 5 tokens each ---------
res = bench("--url", url, "--dataset", "random", "--input-len", "16-32", "--output-len", "5",
            "--num-prompts", "8", "--max-concurrency", "4", "--seed", "3")
keys = {"url", "endpoint", "model", "dataset", "num_prompts", "request_rate", "burstiness",
        "max_concurrency", "completed", "failed", "duration_s", "total_input_tokens",
        "total_output_tokens", "input_tokens_from", "output_tokens_from", "request_throughput",
        "output_throughput", "total_token_throughput", "peak_concurrency", "ttft_ms", "tpot_ms",
        "itl_ms", "e2el_ms", "errors"}
check(set(res) == keys, sorted(set(res) ^ keys))
for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
    check(set(res[k]) == {"mean", "p50", "p90", "p99", "n"}, res[k])
check(len(Stub.bodies) == 8 and res["completed"] == 8 and res["failed"] == 0, res)
check(res["errors"] == [] and res["model"] == "stub-model", res)   # from /v1/models
check(all(p == "/v1/completions" for p in Stub.paths), Stub.paths)
b0 = Stub.bodies[0]
check(b0["stream"] is True and b0["stream_options"] == {"include_usage": True}, b0)
check(b0["max_tokens"] == 5 and b0["model"] == "stub-model", b0)
check(all(16 <= len(b["prompt"].split()) <= 32 for b in Stub.bodies), Stub.bodies)
check(res["total_output_tokens"] == 40 and res["output_tokens_from"] == "usage", res)
check(res["total_input_tokens"] == 88 and res["input_tokens_from"] == "usage", res)
check(res["ttft_ms"]["n"] == 8 and res["itl_ms"]["n"] == 32 and res["tpot_ms"]["n"] == 8, res)
near(res["ttft_ms"]["mean"], TTFT, 2, 80, "ttft mean")
near(res["ttft_ms"]["p50"], TTFT, 2, 80, "ttft p50")
near(res["itl_ms"]["p50"], ITL, 2, 30, "itl p50")
near(res["itl_ms"]["mean"], ITL, 2, 30, "itl mean")
near(res["tpot_ms"]["mean"], ITL, 2, 30, "tpot mean")       # (4 x ITL) / (5 - 1)
near(res["e2el_ms"]["mean"], TTFT + 4 * ITL, 2, 150, "e2el mean")
check(res["ttft_ms"]["p50"] <= res["ttft_ms"]["p90"] <= res["ttft_ms"]["p99"], res["ttft_ms"])
check(res["peak_concurrency"] == 4 and Stub.peak == 4, (res, Stub.peak))
# two waves of 4 requests of ~0.4 s each
check(0.75 <= res["duration_s"] <= 2.5, res)
near(res["request_throughput"] * 1e3, 8 / res["duration_s"], 1e-6, 1e-6, "req/s")
near(res["output_throughput"] * 1e3, 40 / res["duration_s"], 1e-6, 1e-6, "tok/s")

# --- --max-concurrency 2 is what the server sees; no usage: chunks counted --
res = bench("--url", url, "--model", "m", "--dataset", "random", "--input-len", "4",
            "--output-len", "3", "--num-prompts", "6", "--max-concurrency", "2",
            mode="usage-less")
check(Stub.peak == 2 and res["peak_concurrency"] == 2 and res["completed"] == 6, (res, Stub.peak))
check(res["total_output_tokens"] == 18 and res["output_tokens_from"] == "chunks", res)
check(res["total_input_tokens"] == 24 and res["input_tokens_from"] == "estimate", res)
check(Stub.bodies[0]["model"] == "m", Stub.bodies[0])

# --- Poisson arrivals at 40 req/s: the stub sees the mean gap --------------
res = bench("--url", url, "--model", "m", "--dataset", "random", "--input-len", "4",
            "--output-len", "1", "--num-prompts", "40", "--request-rate", "40", "--seed", "1")
check(res["completed"] == 40 and res["request_rate"] == 40 and res["max_concurrency"] is None, res)
check(res["tpot_ms"]["n"] == 0 and res["tpot_ms"]["mean"] is None and res["itl_ms"]["n"] == 0, res)
arr = sorted(Stub.arrivals)
gap = (arr[-1] - arr[0]) / (len(arr) - 1)
check(0.5 / 40 <= gap <= 1.5 / 40, ("mean gap", gap))
# burstiness 4: the same mean, far more regular gaps
res = bench("--url", url, "--model", "m", "--dataset", "random", "--input-len", "4",
            "--output-len", "1", "--num-prompts", "40", "--request-rate", "40",
            "--burstiness", "4", "--seed", "1")
arr = sorted(Stub.arrivals)
gaps = [b - a for a, b in zip(arr, arr[1:])]
check(0.5 / 40 <= sum(gaps) / len(gaps) <= 1.5 / 40, ("mean gap, burstiness 4", gaps))

# --- the chat endpoint with the shipped conversation dataset --------------
data = os.path.join(src, "bench", "data", "chat-prompts.jsonl")
res = bench("--url", url, "--dataset", data, "--num-prompts", "6", "--output-len", "4",
            "--max-concurrency", "3")
check(res["endpoint"] == "chat" and res["completed"] == 6, res)
check(all(p == "/v1/chat/completions" for p in Stub.paths), Stub.paths)
check(all(isinstance(b["messages"], list) and b["messages"] for b in Stub.bodies), Stub.bodies)
check(all(b["max_tokens"] >= 64 for b in Stub.bodies), Stub.bodies)   # the file's own
n_out = sum(min(b["max_tokens"], CAP) for b in Stub.bodies)
check(res["total_output_tokens"] == n_out, (res, n_out))
near(res["ttft_ms"]["p50"], TTFT, 2, 80, "chat ttft")
near(res["itl_ms"]["p50"], ITL, 2, 30, "chat itl")
with open(data) as f:
    lines = [json.loads(x) for x in f if x.strip()]
check(100 <= len(lines) <= 200, len(lines))
check(all(("prompt" in x) != ("messages" in x) for x in lines), "dataset lines")

# --- failures: every request a 500, every other one, malformed SSE, down ---
res = bench("--url", url, "--model", "m", "--dataset", "random", "--input-len", "4",
            "--output-len", "2", "--num-prompts", "5", "--request-rate", "inf", mode="fail",
            rc=1)
check(res["completed"] == 0 and res["failed"] == 5 and len(Stub.bodies) == 5, res)
check(res["errors"][0]["count"] == 5 and "HTTP 500" in res["errors"][0]["message"] and
      "stub failure" in res["errors"][0]["message"], res["errors"])
check(res["ttft_ms"]["mean"] is None, res)
res = bench("--url", url, "--model", "m", "--dataset", "random", "--input-len", "4",
            "--output-len", "2", "--num-prompts", "6", "--max-concurrency", "1",
            mode="fail-odd")
check(res["completed"] == 3 and res["failed"] == 3 and res["total_output_tokens"] == 6, res)
res = bench("--url", url, "--model", "m", "--dataset", "random", "--input-len", "4",
            "--output-len", "2", "--num-prompts", "3", "--max-concurrency", "3",
            mode="malformed", rc=1)
check(res["failed"] == 3 and "malformed SSE" in res["errors"][0]["message"], res["errors"])
with socket.socket() as s:   # a port nobody listens on
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}"
r = bench("--url", dead, "--model", "m", "--dataset", "random", "--num-prompts", "3",
          "--max-concurrency", "2", rc=1, json_out=False)
check("Failed requests:                         3" in r.stdout, r.stdout)
check("all 3 requests" in r.stderr and "listening" in r.stderr, r.stderr)

# --- the text report, usage errors ----------------------------------------
r = bench("--url", url + "/v1/", "--dataset", "random", "--input-len", "4", "--output-len", "2",
          "--num-prompts", "2", "--max-concurrency", "2", json_out=False)
for label in ("Successful requests:", "Mean TTFT (ms):", "P99 ITL (ms):", "Median TPOT (ms):",
              "P90 E2EL (ms):", "Output token throughput (tok/s):"):
    check(label in r.stdout, (label, r.stdout))
r = bench("--dataset", "random", "--num-prompts", "2", "--max-concurrency", "1", rc=2,
          json_out=False)
check("give --url URL" in r.stderr, r.stderr)
r = bench("--url", url, "--dataset", "random", "--num-prompts", "2", rc=2, json_out=False)
check("--request-rate R" in r.stderr and "--max-concurrency C" in r.stderr, r.stderr)
r = bench("--url", "127.0.0.1:8000", "--dataset", "random", "--num-prompts", "2",
          "--max-concurrency", "1", rc=2, json_out=False)
check("http://" in r.stderr, r.stderr)
bad = os.path.join(os.environ.get("PLUME_BUILD_ROOT", "/tmp"), "bench_serve_bad.jsonl")
with open(bad, "w") as f:
    f.write('{"prompt": "hi"}\n{"prompt": 3}\n')
r = bench("--url", url, "--dataset", bad, "--num-prompts", "2", "--max-concurrency", "1",
          rc=1, json_out=False)
check(f"{bad}:2:" in r.stderr and '"prompt" must be a string' in r.stderr, r.stderr)
with open(bad, "w") as f:
    f.write('{"messages": [{"role": "user", "content": "hi"}]}\n')
r = bench("--url", url, "--dataset", bad, "--endpoint", "completions", "--num-prompts", "1",
          "--max-concurrency", "1", rc=2, json_out=False)
check("--endpoint chat" in r.stderr, r.stderr)
os.unlink(bad)
server.shutdown()
print("ok")
