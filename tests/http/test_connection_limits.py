"""plume serve stays reachable under idle and slow connections, with bounded memory.

    test_connection_limits.py PLUME TINY_MODEL

Loopback only, bounded in count (1,000 idle sockets, 32 slow senders) and
time (about 15 s).  From 127.0.0.1 the test opens 1,000 connections that
send nothing and 32 that send a request line one byte a second; then, while
they are held:
  - GET /health from another address (127.0.0.2, also loopback) answers 200
    within one second, ten times in a row: one address cannot take the
    server (the per-address limit, http_daemon.c http_default_limits);
  - the server keeps at most 256 of 127.0.0.1's connections open (the
    per-address limit) and closes the rest;
  - its resident memory grows by less than 64 MiB, and it serves a real
    completion afterwards.
"""
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import CheckFailed, Server, check, read_head  # noqa: E402

N_IDLE = 1000
N_SLOW = 32
PER_IP = 256  # http_default_limits().max_connections_per_ip


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise CheckFailed(f"no VmRSS for pid {pid}")


def health_from(port, source, timeout=1.0):
    """Seconds /health took from source, or raises when no 200 came within timeout."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                 source_address=(source, 0))
    try:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = read_head(s)
    finally:
        s.close()
    dt = time.monotonic() - t0
    check(data.startswith(b"HTTP/1.1 200"), ("health from", source, data[:200]))
    return dt


def connect(port):
    """A blocking socket to the server from 127.0.0.1, or None when refused."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        return None
    s.settimeout(None)  # blocking: MSG_DONTWAIT peeks then answer at once
    return s


def still_open(s):
    """True while the server has not closed s."""
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def main():
    plume, tiny = sys.argv[1], sys.argv[2]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = N_IDLE + N_SLOW + 64
    if soft < need:
        check(hard == resource.RLIM_INFINITY or hard >= need,
              f"this test needs {need} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    srv = Server(plume, tiny)
    held = []
    try:
        base = rss_kib(srv.proc.pid)
        health_from(srv.port, "127.0.0.2")  # warm
        t0 = time.monotonic()
        held = [s for s in (connect(srv.port) for _ in range(N_IDLE)) if s]
        slow = [s for s in (connect(srv.port) for _ in range(N_SLOW)) if s]
        print(f"{len(held)} idle and {len(slow)} slow connections in "
              f"{time.monotonic() - t0:.1f} s", flush=True)
        line = b"GET /health HTTP/1.1\r\nHost: slow\r\n"
        worst = 0.0
        t_end = time.monotonic() + 10
        i = 0
        while time.monotonic() < t_end:
            for s in slow:  # one byte a second each
                try:
                    s.send(line[i % len(line):i % len(line) + 1])
                except OSError:
                    pass
            i += 1
            for _ in range(2):
                worst = max(worst, health_from(srv.port, "127.0.0.2"))
            time.sleep(1.0)
        check(worst < 1.0, f"/health took {worst:.3f} s under load (must be < 1 s)")
        open_now = sum(still_open(s) for s in held + slow)
        check(open_now <= PER_IP + 8,
              f"{open_now} connections from 127.0.0.1 still open: the per-address limit "
              f"({PER_IP}) is not applied")
        grown = (rss_kib(srv.proc.pid) - base) / 1024
        check(grown < 64, f"the server's RSS grew by {grown:.1f} MiB under {N_IDLE} idle and "
                          f"{N_SLOW} slow connections (must stay under 64 MiB)")
        for s in held + slow:
            s.close()
        held = []
        time.sleep(0.5)
        t0 = time.monotonic()
        st, r = srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2})
        check(st == 200 and r["usage"]["completion_tokens"] == 2, ("after the load", st, r))
        print(f"completion after the load in {time.monotonic() - t0:.1f} s", flush=True)
        print(f"connection_limits: /health worst {worst * 1000:.1f} ms, {open_now} of "
              f"{N_IDLE + N_SLOW} connections kept, RSS +{grown:.1f} MiB")
    finally:
        for s in held:
            s.close()
        srv.stop()


try:
    main()
except CheckFailed as e:
    print(f"FAIL: {e}", file=sys.stderr)
    sys.exit(1)
