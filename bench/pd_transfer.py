#!/usr/bin/env python3
"""Times one prompt's KV transfer between a prefill and a decode worker, per
pd-ipc transport (docs/disaggregation.md, "Measured: the transfer").

    bench/pd_transfer.py [--tokens 2048] [--reps 5] [--dtype f16] [memfd] [ucx]

For each transport it starts a prefill and a decode `plume serve` (the
default model, --threads 1, kv_connector.log_transfers: true; ucx with
UCX_TLS=tcp unless UCX_TLS is set), computes one prompt of --tokens token
ids on the prefill worker (max_tokens 1; repeats hit its prefix cache),
then sends it to the decode worker with the transfer parameters, --reps
times.  It prints, per transport, the median of the decode worker's logged
fetch time (connect, handshake, the bytes) and copy into the KV blocks,
and of the decode request's wall time (the transfer plus computing the
last prompt position and one token)."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUME = os.path.join(ROOT, "build", "core", "src", "cli", "plume")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

sys.path.insert(0, os.path.join(ROOT, "tests", "http"))
from serve_util import free_port  # noqa: E402


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                 json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def start(d, name, pipeline, env):
    port = free_port()
    path = os.path.join(d, name + ".yaml")
    with open(path, "w") as f:
        f.write(pipeline)
    err = open(os.path.join(d, name + ".err"), "w")
    p = subprocess.Popen([PLUME, "serve", "--pipeline", path, "--port", str(port), "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    line = p.stdout.readline()
    if "listening" not in line:
        p.kill()
        sys.exit(f"{name} did not start: {line}; see {err.name}")
    return p, port, err.name


def run(transport, n_tokens, reps, dtype):
    env = dict(os.environ)
    if transport == "ucx":
        env.setdefault("UCX_TLS", "tcp")
    base = (f"model: {MODEL}\nbackend: cpu\nplugins: [pd-ipc]\n"
            f"kv_cache: {{ block_size: 16, dtype: {dtype}, max_tokens: {n_tokens + 256} }}\n"
            f"sampling: {{ temperature: 0 }}\n")
    with tempfile.TemporaryDirectory(prefix="plume-pdx-") as d:
        where = (f"address: 127.0.0.1:{free_port()}" if transport == "ucx"
                 else f"socket: {os.path.join(d, 'p.sock')}")
        pre, pport, _ = start(d, "prefill", base + "kv_connector: { method: ipc, role: prefill, "
                              f"transport: {transport}, {where} }}\n", env)
        dec, dport, dlog = start(d, "decode", base + "kv_connector: { method: ipc, role: decode, "
                                 f"transport: {transport}, log_transfers: true }}\n", env)
        try:
            prompt = [(i * 7919) % 40000 + 100 for i in range(n_tokens)]
            walls = []
            for _ in range(reps):
                r = post(pport, {"prompt": prompt, "max_tokens": 1,
                                 "kv_transfer_params": {"do_remote_decode": True}})
                t0 = time.time()
                post(dport, {"prompt": prompt, "max_tokens": 1,
                             "kv_transfer_params": r["kv_transfer_params"]})
                walls.append(time.time() - t0)
        finally:
            for p in (pre, dec):
                p.terminate()
                p.wait()
        logs = re.findall(r"(\d+) bytes: fetched \((\w+)\) in ([\d.]+) ms, copied into the cache "
                          r"in ([\d.]+) ms", open(dlog).read())
    if len(logs) != reps:
        sys.exit(f"{transport}: {len(logs)} transfers logged, {reps} expected")
    mb = int(logs[0][0]) / 1e6
    fetch = statistics.median(float(x[2]) for x in logs)
    copy = statistics.median(float(x[3]) for x in logs)
    print(f"{transport:6} {n_tokens} tokens {dtype}: {mb:.1f} MB  fetch {fetch:.1f} ms  "
          f"copy into blocks {copy:.1f} ms  (together {(fetch + copy):.1f} ms, "
          f"{mb / (fetch + copy):.2f} GB/s)  decode request "
          f"{statistics.median(walls) * 1e3:.0f} ms  (median of {reps})")


def main():
    args = sys.argv[1:]
    n_tokens, reps, dtype, transports = 2048, 5, "f16", []  # the default KV cache
    while args:
        a = args.pop(0)
        if a == "--tokens":
            n_tokens = int(args.pop(0))
        elif a == "--reps":
            reps = int(args.pop(0))
        elif a == "--dtype":
            dtype = args.pop(0)
        else:
            transports.append(a)
    for t in transports or ["memfd", "ucx"]:
        run(t, n_tokens, reps, dtype)


main()
